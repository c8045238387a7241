"""``simsync calibrate``: measure this machine's costs on TensorFlow, as a profile."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from simsync.cli.options import add_command, run_steps
from simsync.cli.shared import check_tensorflow_steps, console, load
from simsync.errors import UsageError, printable
from simsync.outputs import STDOUT, check_writable, output_path

__all__ = ["add", "calibrate"]


def add(commands: Any) -> None:
    p = add_command(
        commands,
        "calibrate",
        help="measure this machine's costs (cross-checks and lessons predict with them)",
        description="Measure what TensorFlow costs on this machine: each kind of op, the "
        "framework's overhead per sess.run, copies between devices, the cores the "
        "devices share and how much busy cores slow each other. Without FILE, on a small "
        "reference scenario: the result is this machine's profile, kept in the cache folder "
        "($SIMSYNC_CACHE_DIR, else $XDG_CACHE_HOME/simsync, else ~/.cache/simsync) and used "
        "by `crosscheck` and the lessons' TensorFlow steps; running it again measures afresh "
        "(`crosscheck` measures it by itself the first time). With FILE, on a one-tower "
        "version of that scenario, written to -o PROFILE.json for `simulate --costs` and "
        "`crosscheck --costs`.",
    )
    p.add_argument(
        "file",
        type=Path,
        nargs="?",
        help="scenario file (TOML) whose model to measure; default: this machine's reference",
    )
    p.add_argument(
        "-o",
        "--output",
        type=output_path,
        metavar="PROFILE.json",
        help="write the profile there too (required with FILE); - prints it on standard "
        "output instead of the table",
    )
    p.add_argument(
        "--steps",
        type=run_steps,
        help="traced steps, with FILE (default 20, at most 1000; this machine's own profile "
        "always takes 20)",
    )
    p.set_defaults(run=calibrate)


def calibrate(args: argparse.Namespace) -> int:
    if args.file is not None and args.output is None:
        raise UsageError(
            "calibrate FILE needs -o PROFILE.json (without FILE it measures this machine's "
            "own profile, kept in the cache)"
        )
    if args.file is None and args.steps is not None:
        raise UsageError(
            "--steps applies to calibrate FILE; this machine's own profile is always measured "
            "on the same 20 steps of its reference scenario"
        )
    check_tensorflow_steps(args.steps, 0)
    scenario = load(args.file) if args.file is not None else None
    check_writable(args.output, [args.file])
    status = "Calibrating on a one-tower run of TensorFlow..."
    if scenario is None:
        status = "Measuring this machine on TensorFlow (a few seconds)..."
    with console(stderr=True).status(status):
        from simsync.simulation.calibrate import STEPS, calibrate, machine_profile

        if scenario is None:
            profile = machine_profile(refresh=True)
        else:
            profile = calibrate(scenario, steps=args.steps or STEPS)
    if args.output is STDOUT:
        print(json.dumps(profile.to_json(), indent=2))
        return 0
    if args.output is not None:
        from simsync.scenario.profile import save_profile

        save_profile(profile, args.output)
    from simsync.viz import ProfileView

    console().print(ProfileView(profile.to_json()))
    if scenario is None:
        print(f"this machine's profile: {profile.source}")
    if args.output is not None:
        print(f"wrote {printable(str(args.output), one_line=True)}")
    return 0
