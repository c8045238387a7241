"""``simsync compare``: race scenarios, the training loss against wall-clock time."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any

from simsync.cli.options import add_command, common
from simsync.cli.shared import check_cost, console, load, warn
from simsync.errors import UsageError, printable
from simsync.outputs import check_writable, output_path, refuse_stdout

__all__ = ["add", "compare"]


def add(commands: Any) -> None:
    p = add_command(
        commands,
        "compare",
        parents=[common("steps", "seed", "json")],
        help="race scenarios: training loss against wall-clock time",
        description="Simulate two or more scenarios (say sync, async and bounded staleness "
        "with a straggler) with their real numbers, and plot the training loss against "
        "wall-clock time in the terminal (and as a PNG with --png). The table says when each "
        "reached the target loss, the worst of the final losses, so every run reaches it. "
        "Losses are averaged over as many batches as one synchronous step trains. --steps and "
        "--seed apply to every scenario; --json prints the target and, per run, the final "
        "loss, the time to the target, the updates and the staleness.",
    )
    p.add_argument(
        "files", type=Path, nargs="+", metavar="FILE", help="two or more scenario files (TOML)"
    )
    p.add_argument(
        "--png", type=output_path, metavar="OUT.png", help="also write the plot as a PNG file"
    )
    p.set_defaults(run=compare)


def compare(args: argparse.Namespace) -> int:
    from simsync.simulation import contest

    if not 2 <= len(args.files) <= 6:
        raise UsageError(f"compare takes 2 to 6 scenario files, got {len(args.files)}")
    scenarios = [load(f).with_run(steps=args.steps, seed=args.seed) for f in args.files]
    refuse_stdout(args.png, "--png", "a PNG")
    check_writable(args.png, args.files)
    check_cost(scenarios)
    if len({(dataclasses.replace(s.model, learning_rate=0.0), s.run.seed) for s in scenarios}) > 1:
        warn(
            "the scenarios train different models or data ([model] other than "
            "learning_rate, or [run] seed, differ); their losses are not comparable"
        )
    with console(stderr=True).status("Simulating the runs..."):
        result = contest(scenarios)
    if args.png:
        from simsync.viz import write_loss_png

        write_loss_png(args.png, result)
    if args.json:
        print(json.dumps(result.to_json(), indent=2, allow_nan=False))
        return 0
    from simsync.viz import LossCurves

    console().print(LossCurves(result))
    if args.png:
        print(f"wrote {printable(str(args.png), one_line=True)}")
    return 0
