"""The ``simsync`` command line.

Heavy modules (numpy, networkx, SimPy, rich, matplotlib) are imported inside the commands, so
``simsync --help`` answers at once. TensorFlow is never imported by these commands.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from simsync.errors import SimsyncError, UsageError, printable
from simsync.outputs import (
    STDOUT,
    check_writable,
    output_path,
    refuse_stdout,
    write_or_print,
)
from simsync.terminal import ascii_fallback

__all__ = ["main"]

DESCRIPTION = """\
Simulate TensorFlow's data-parallel execution model: ops placed on devices, tensors between
them, and client loops running sess.run. Sync points, waiting and stragglers follow from the
graph; small models carry real numbers.
"""

EPILOG = """\
examples:
  simsync simulate examples/four_towers.toml             summary and timeline
  simsync simulate examples/four_towers.toml --json      one JSON object
  simsync simulate examples/four_towers.toml --trace out.json   open in ui.perfetto.dev
  simsync simulate examples/async_workers.toml           async workers: staleness ledger
  simsync compare examples/sync_workers.toml examples/async_workers.toml --png race.png
  simsync graph examples/four_towers.toml                towers as lanes, sync points marked
  simsync graph examples/four_towers.toml --format png -o graph.png
  simsync crosscheck examples/four_towers.toml           run it on TensorFlow too, compare
  simsync calibrate                                      measure this machine again
  simsync calibrate examples/four_towers.toml -o here.json   ... on that scenario's model
  simsync crosscheck examples/four_towers.toml --costs here.json
  simsync learn                                          interactive lessons: continue
  simsync lessons list                                   the lessons and your progress
  simsync lessons copy 1 my-lesson1                      lesson 1's scenarios, to change
  simsync assignments start 1 hw1 && simsync grade hw1 --assignment 1   course assignments

Scenario files are TOML; every key is documented in docs/scenarios.md.
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="simsync",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"simsync {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_simulate(commands)
    _add_compare(commands)
    _add_graph(commands)
    _add_crosscheck(commands)
    _add_calibrate(commands)
    _add_learn(commands)
    _add_lessons(commands)
    _add_course(commands)
    return parser


def _add_learn(commands: Any) -> None:
    p = commands.add_parser(
        "learn",
        help="interactive lessons: predict, simulate, verify on TensorFlow",
        description="Interactive lessons in the terminal. Without N: the menu, continuing where "
        "you stopped. Progress is saved after every step (q or Ctrl-C loses nothing).",
    )
    p.add_argument("lesson", nargs="?", type=_positive_int, metavar="N", help="lesson number")
    answers = p.add_mutually_exclusive_group()
    answers.add_argument(
        "--answers",
        type=Path,
        metavar="FILE",
        help="answer from a TOML file ([answers] question-id = value); no keyboard needed",
    )
    answers.add_argument(
        "--no-input",
        action="store_true",
        help="run end to end, showing and using the expected answers",
    )
    p.set_defaults(run=_learn)


def _add_lessons(commands: Any) -> None:
    p = commands.add_parser(
        "lessons",
        help="list, reset, check or copy the lessons",
        description="List the lessons with your progress, reset progress, copy a lesson's "
        "scenario files to run and change them anywhere, or check every lesson (for "
        "instructors: docs/authoring.md).",
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    actions.add_parser("list", help="the lessons and your progress")
    reset = actions.add_parser("reset", help="forget the progress of lesson N, or --all")
    reset.add_argument("lesson", nargs="?", type=_positive_int, metavar="N")
    reset.add_argument("--all", action="store_true", help="every lesson")
    reset.add_argument("--yes", action="store_true", help="do not ask to confirm")
    actions.add_parser("check", help="check every lesson: files, scenarios, answers")
    copy = actions.add_parser(
        "copy",
        help="copy lesson N's scenario and code files into DIR",
        description="Copy lesson N's scenario files (*.toml) and code excerpts (*.py) into\n"
        "DIR, creating it, to change them and run them from any folder:\n\n"
        "  simsync lessons copy 1 my-lesson1\n"
        "  simsync simulate my-lesson1/two_towers.toml\n\n"
        "Files already in DIR are not overwritten without --force.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    copy.add_argument("lesson", type=_positive_int, metavar="N", help="lesson number")
    copy.add_argument("folder", type=Path, metavar="DIR", help="where to copy the files")
    copy.add_argument("--force", action="store_true", help="overwrite files already in DIR")
    p.set_defaults(run=_lessons)


def _add_course(commands: Any) -> None:
    """Course assignments (docs/assignments.md): ``simsync assignments ...`` and ``grade``."""
    p = commands.add_parser(
        "assignments",
        help="course assignments: list, start, check, pack",
        description="Course assignments: students write the graph, simsync grades it by "
        "structure, simulation and TensorFlow (docs/assignments.md).",
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    actions.add_parser("list", help="the assignments, their tasks and points")
    start = actions.add_parser("start", help="copy assignment N's starter files into DIR")
    start.add_argument("number", type=_at_least(1), metavar="N")
    start.add_argument("folder", type=Path, metavar="DIR", help="a new or empty folder")
    start.add_argument(
        "--solution", action="store_true", help="copy the reference solution (instructors)"
    )
    check = actions.add_parser(
        "check", help="prove every assignment: the reference gets full marks, the starter not"
    )
    check.add_argument(
        "--no-tensorflow", action="store_true", help="skip the checks that run TensorFlow"
    )
    _add_unsafe(check)
    pack = actions.add_parser("pack", help="build a Gradescope autograder zip for assignment N")
    pack.add_argument("number", type=_at_least(1), metavar="N")
    pack.add_argument("-o", "--output", type=output_path, required=True, help="the zip to write")
    p.set_defaults(run=_assignments)

    g = commands.add_parser(
        "grade",
        help="grade a submission folder",
        description="Grade the submission in DIR against assignment N: one line per check, "
        "with what it found. Hidden checks run only with --hidden. The submission's code, "
        "its graph and its files are read only inside a sandbox made by bubblewrap (no "
        "network, no other processes, writes only to a copy, CPU, memory and time limits); "
        "where it cannot start, grade refuses and says why.",
    )
    g.add_argument("folder", type=Path, metavar="DIR")
    g.add_argument("--assignment", type=_at_least(1), required=True, metavar="N")
    g.add_argument("--hidden", action="store_true", help="run the hidden checks too")
    g.add_argument(
        "--no-tensorflow", action="store_true", help="skip the checks that run TensorFlow"
    )
    g.add_argument(
        "--gradescope",
        type=Path,
        metavar="OUT",
        help="also write Gradescope's results.json to OUT, outside the submission "
        "(-: to standard output, the report then to standard error)",
    )
    _add_unsafe(g)
    g.set_defaults(run=_grade)


def _add_unsafe(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--unsafe-no-sandbox",
        action="store_true",
        help="run the code graded without the sandbox (bubblewrap), with its limits only: "
        "for trusted code on a machine where the sandbox cannot start",
    )


def _assignments(args: argparse.Namespace) -> int:
    from simsync.grading import commands

    if args.action == "list":
        return commands.assignments_list()
    if args.action == "start":
        return commands.assignments_start(args.number, args.folder, solution=args.solution)
    if args.action == "check":
        return commands.assignments_check(
            tensorflow=not args.no_tensorflow, unsafe=args.unsafe_no_sandbox
        )
    from simsync.grading.pack import pack

    refuse_stdout(args.output, "-o", "a zip")
    return pack(args.number, args.output)


def _grade(args: argparse.Namespace) -> int:
    from simsync.grading.commands import grade_command

    return grade_command(
        args.folder,
        args.assignment,
        hidden=args.hidden,
        tensorflow=not args.no_tensorflow,
        gradescope=args.gradescope,
        unsafe=args.unsafe_no_sandbox,
    )


def _version() -> str:
    from simsync import __version__

    return __version__


def _add_simulate(commands: Any) -> None:
    p = commands.add_parser(
        "simulate",
        help="run a scenario in the simulator and report step time, waits, loss",
        description="Run a scenario in the discrete-event simulator. Prints a summary (step "
        "time, throughput, who waited for whom at each sync point, loss) and a timeline of "
        "the first steps; or one JSON object with --json.",
    )
    p.add_argument("file", type=Path, help="scenario file (TOML)")
    p.add_argument("--steps", type=_steps, help="override [run] steps (at most 1000000)")
    p.add_argument("--seed", type=_non_negative_int, help="override [run] seed")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    p.add_argument(
        "--trace",
        type=output_path,
        metavar="OUT.json",
        help="write a Chrome trace (open it in https://ui.perfetto.dev); - prints it on "
        "standard output instead of the summary",
    )
    p.add_argument(
        "--timeline-steps",
        type=_non_negative_int,
        default=2,
        metavar="K",
        help="steps shown in the terminal timeline (0 hides it; default 2)",
    )
    p.add_argument(
        "--no-numerics",
        action="store_true",
        help="skip the model's real numbers (faster; no loss is reported)",
    )
    p.add_argument(
        "--costs",
        type=Path,
        metavar="PROFILE.json",
        help="use the costs measured by `simsync calibrate` instead of the file's",
    )
    p.set_defaults(run=_simulate)


def _add_compare(commands: Any) -> None:
    p = commands.add_parser(
        "compare",
        help="race scenarios: training loss against wall-clock time",
        description="Simulate two or more scenarios (say sync, async and bounded staleness "
        "with a straggler) with their real numbers, and plot the training loss against "
        "wall-clock time in the terminal (and as a PNG with --png). The table says when each "
        "reached the target loss, the worst of the final losses, so every run reaches it. "
        "Losses are averaged over as many batches as one synchronous step trains.",
    )
    p.add_argument(
        "files", type=Path, nargs="+", metavar="FILE", help="two or more scenario files (TOML)"
    )
    p.add_argument(
        "--steps",
        type=_steps,
        help="override [run] steps of every scenario (async: steps x workers "
        "updates in all, from a shared pool)",
    )
    p.add_argument("--seed", type=_non_negative_int, help="override [run] seed of every one")
    p.add_argument(
        "--png", type=output_path, metavar="OUT.png", help="also write the plot as a PNG file"
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object (target, and per run: final loss, time to "
        "target, updates, staleness) instead of the plot",
    )
    p.set_defaults(run=_compare)


def _add_crosscheck(commands: Any) -> None:
    p = commands.add_parser(
        "crosscheck",
        help="run a scenario on TensorFlow and in the simulator, and compare",
        description="Run the scenario's graph on TensorFlow (real GPUs if there are enough, else "
        "logical CPU devices) and in the simulator, then compare: every happens-before relation "
        "of the graph on the real trace, the parameters and losses (numpy vs TensorFlow), and "
        "the predicted vs measured step and op times. The prediction is for this machine: it "
        "uses this machine's profile, measured once (a few seconds) and cached (see "
        "`simsync calibrate`). Then what the real run shows, each with a verdict only when it "
        "is stronger than the machine's noise: whether the towers ran side by side (their ops' "
        "intervals overlap), which tower arrived last at each sync point, and what one tower "
        "alone, or no slow tower, changes in the step time, measured in alternating rounds in "
        "the same session. Async scenarios run one thread per "
        "worker on one session; the check replays TensorFlow's own ledger of updates through "
        "numpy (it must give TensorFlow's parameters when the apply is locked) and compares "
        "the staleness and updates per second with the prediction; --steps and --warmup are "
        "then per worker. SyncReplicasOptimizer scenarios (mode sync_replicas) run the real "
        "optimizer on a parameter server and worker processes of this machine, inside a "
        "private network that only they can reach; the check replays the real ledger (which "
        "gradients each step averaged) through numpy and compares the gradients dropped and "
        "the time between applies; --steps is the global step to reach. Exits 1 if structure "
        "or values disagree. At most 128 towers (docs/tensorflow.md).",
    )
    p.add_argument("file", type=Path, help="scenario file (TOML)")
    costs = p.add_mutually_exclusive_group()
    costs.add_argument(
        "--costs",
        type=Path,
        metavar="PROFILE.json",
        help="predict with this calibration profile (`simsync calibrate FILE -o ...`) "
        "instead of this machine's own, which is the default",
    )
    costs.add_argument(
        "--scenario-costs",
        action="store_true",
        help="predict with the scenario's own costs (only the host's cores added), "
        "not this machine's measured ones",
    )
    p.add_argument(
        "--steps",
        type=_steps,
        default=20,
        help="traced steps (default 20, at most 1000: each is a real TensorFlow step, and a "
        "traced one keeps every op's record), then as many untraced ones whose wall times "
        "are the measured step times",
    )
    p.add_argument(
        "--warmup",
        type=_non_negative_int,
        default=2,
        help="untraced steps first (default 2, at most 1000); both engines run them",
    )
    p.add_argument(
        "--open-ports",
        action="store_true",
        help="sync_replicas only: where no private network can be made here, run the "
        "TensorFlow servers anyway; their ports (no authentication) are then open on every "
        "interface of this machine",
    )
    p.add_argument(
        "--cluster",
        type=Path,
        metavar="CLUSTER.json",
        help="sync_replicas only: run on these hosts, a ClusterSpec as JSON "
        '({"ps": ["host:port"], "worker": [...]}) or a TF_CONFIG; start each task there with '
        "`python -m simsync.tf_backend.cluster.task` (see docs/tensorflow.md)",
    )
    p.add_argument("--seed", type=_non_negative_int, help="override [run] seed")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--trace",
        type=output_path,
        metavar="OUT.json",
        help="write the simulated and the real timeline side by side (Perfetto); - prints "
        "it on standard output instead of the report",
    )
    p.set_defaults(run=_crosscheck)


def _add_calibrate(commands: Any) -> None:
    p = commands.add_parser(
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
        type=_steps,
        help="traced steps, with FILE (default 20, at most 1000; this machine's own profile "
        "always takes 20)",
    )
    p.set_defaults(run=_calibrate)


def _add_graph(commands: Any) -> None:
    p = commands.add_parser(
        "graph",
        help="show the dataflow graph a scenario builds",
        description="Show the dataflow graph a scenario builds: in the terminal with towers as "
        "lanes and sync points marked, as Graphviz DOT, or as a PNG (matplotlib; no system "
        "binaries needed).",
    )
    p.add_argument("file", type=Path, help="scenario file (TOML)")
    p.add_argument(
        "--format",
        choices=("text", "dot", "png"),
        default="text",
        help="text (default), dot or png",
    )
    p.add_argument(
        "-o",
        "--output",
        type=output_path,
        metavar="OUT",
        help="write to OUT (required for png; text and dot print on standard output without "
        "it, or with -)",
    )
    p.add_argument(
        "--towers",
        type=_positive_int,
        default=4,
        metavar="K",
        help="lanes shown before eliding the rest (text, png; default 4)",
    )
    p.set_defaults(run=_graph)


def _at_least(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer no smaller than ``minimum`` (and no larger than
    ``maximum``)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"must be at most {maximum}, got {value}")
        return value

    return parse


_positive_int, _non_negative_int = _at_least(1), _at_least(0)
_steps = _at_least(1, 1_000_000)  # as [run] steps in a scenario file


# -- commands ---------------------------------------------------------------------------
def _simulate(args: argparse.Namespace) -> int:
    from simsync.engine import expected_updates, simulate, summary
    from simsync.ir import updating_clients
    from simsync.patterns import build

    scenario = _load(args.file).with_run(steps=args.steps, seed=args.seed)
    check_writable(args.trace, [args.file, args.costs])
    _one_on_stdout(args.trace, args.json)
    if args.costs:
        from simsync.scenario.profile import apply_profile, load_profile

        scenario = apply_profile(scenario, load_profile(args.costs))
    _check_cost([scenario])
    with _building(scenario.towers):
        graph = build(scenario)
    updating = set(updating_clients(graph))
    total = expected_updates(graph, scenario.run.steps)
    with _progress(total, max(len(graph) // max(total, 1), 1)) as tick:
        on_step = None if tick is None else lambda r: tick(r) if r.client in updating else None
        sim = simulate(scenario, numerics=not args.no_numerics, on_step=on_step, graph=graph)
    result = summary(sim)
    if args.trace:
        _write_trace(args.trace, [("simulated", sim.trace)])
        if args.trace is STDOUT:
            return 0
    if args.json:
        print(json.dumps(result, indent=2, allow_nan=False))
        return 0
    from simsync.viz import SummaryView, Timeline

    console = _console()
    console.print(SummaryView(result))
    if args.timeline_steps:
        console.print(Timeline(sim.trace, steps=args.timeline_steps, sync_points=sim.sync_points))
    if args.trace:
        console.print(
            f"Chrome trace written to {args.trace} (open it in ui.perfetto.dev)", markup=False
        )
    return 0


def _compare(args: argparse.Namespace) -> int:
    from simsync.engine import contest

    if not 2 <= len(args.files) <= 6:
        raise UsageError(f"compare takes 2 to 6 scenario files, got {len(args.files)}")
    scenarios = [_load(f).with_run(steps=args.steps, seed=args.seed) for f in args.files]
    refuse_stdout(args.png, "--png", "a PNG")
    check_writable(args.png, args.files)
    _check_cost(scenarios)
    if len({(dataclasses.replace(s.model, learning_rate=0.0), s.run.seed) for s in scenarios}) > 1:
        _warn(
            "the scenarios train different models or data ([model] other than "
            "learning_rate, or [run] seed, differ); their losses are not comparable"
        )
    with _console(stderr=True).status("Simulating the runs..."):
        result = contest(scenarios)
    if args.png:
        from simsync.viz import write_loss_png

        write_loss_png(args.png, result)
    if args.json:
        print(json.dumps(result.to_json(), indent=2, allow_nan=False))
        return 0
    from simsync.viz import LossCurves

    _console().print(LossCurves(result))
    if args.png:
        print(f"wrote {args.png}")
    return 0


def _crosscheck(args: argparse.Namespace) -> int:
    from rich.markup import escape

    from simsync.crosscheck.compare import MACHINE
    from simsync.scenario.budget import MAX_CROSSCHECK_TOWERS
    from simsync.scenario.profile import load_profile

    _check_tensorflow_steps(args.steps, args.warmup)
    scenario = _load(args.file).with_run(steps=args.steps, seed=args.seed)
    profile: Any = load_profile(args.costs) if args.costs else MACHINE
    if args.scenario_costs:
        profile = None
    check_writable(args.trace, [args.file, args.costs])
    _one_on_stdout(args.trace, args.json)
    if scenario.towers > MAX_CROSSCHECK_TOWERS:
        raise UsageError(
            f"{args.file}: crosscheck runs at most {MAX_CROSSCHECK_TOWERS} towers on "
            f"TensorFlow (this scenario has {scenario.towers:,}): each tower adds its own "
            "threads, memory and seconds; simulate it instead, or cross-check fewer towers"
        )
    _check_cost([scenario])  # the simulated half alone; TensorFlow's takes longer
    _warn_inapplicable(args, scenario)
    console = _console(stderr=True)
    with console.status("Starting TensorFlow and running the graph on it...") as status:
        from simsync.crosscheck import crosscheck

        result = crosscheck(
            scenario,
            profile=profile,
            warmup=args.warmup,
            open_ports=args.open_ports,
            cluster_file=str(args.cluster) if args.cluster else None,
            on_progress=lambda message: status.update(escape(message)),
        )
    report = result.report
    if args.trace:
        traces = [("simulated", result.simulation.trace), ("tensorflow", result.real.trace)]
        _write_trace(args.trace, traces)
    if args.json:
        from simsync.crosscheck.report import report_json

        print(json.dumps(report_json(report), indent=2, allow_nan=False))
    elif args.trace is not STDOUT:
        from simsync.viz import CrossCheckView

        _console().print(CrossCheckView(report))
        if args.trace:
            print(f"Chrome trace written to {args.trace} (open it in ui.perfetto.dev)")
    agree = report["structure"]["ok"] and report["values"]["ok"]
    return 0 if agree else 1


def _calibrate(args: argparse.Namespace) -> int:
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
    _check_tensorflow_steps(args.steps, 0)
    scenario = _load(args.file) if args.file is not None else None
    check_writable(args.output, [args.file])
    status = "Calibrating on a one-tower run of TensorFlow..."
    if scenario is None:
        status = "Measuring this machine on TensorFlow (a few seconds)..."
    with _console(stderr=True).status(status):
        from simsync.tf_backend.profile.calibrate import STEPS, calibrate
        from simsync.tf_backend.profile.machine import machine_profile

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

    _console().print(ProfileView(profile.to_json()))
    if scenario is None:
        print(f"this machine's profile: {profile.source}")
    if args.output is not None:
        print(f"wrote {args.output}")
    return 0


def _learn(args: argparse.Namespace) -> int:
    from simsync.tutor.commands import learn

    return learn(args.lesson, answers_file=args.answers, no_input=args.no_input)


def _lessons(args: argparse.Namespace) -> int:
    from simsync.tutor.commands import copy_lesson, lessons

    if args.action == "copy":
        return copy_lesson(args.lesson, args.folder, force=args.force)

    return lessons(
        args.action,
        getattr(args, "lesson", None),
        every=getattr(args, "all", False),
        yes=getattr(args, "yes", False),
    )


def _graph(args: argparse.Namespace) -> int:
    from simsync.patterns import build

    graph = build(_load(args.file))
    check_writable(args.output, [args.file])
    if args.format == "png":
        if args.output is None:
            raise UsageError("--format png needs -o OUT.png")
        refuse_stdout(args.output, "-o", "a PNG")
        if args.output.suffix.lower() != ".png":
            raise UsageError(
                f"--format png writes PNG files: name the output *.png, not {args.output.name}"
            )
        from simsync.viz import write_png

        write_png(graph, args.output)
        print(f"wrote {args.output}")
    elif args.format == "dot":
        from simsync.viz import to_dot

        text = to_dot(graph)
        write_or_print(text, args.output)
    else:
        from simsync.viz import GraphView

        view = GraphView(graph, max_towers=args.towers)
        if args.output is None or args.output is STDOUT:
            _console().print(view)
            return 0
        from simsync.files import atomic_writer

        with atomic_writer(args.output) as out:
            _console(file=out, width=120).print(view)
        print(f"wrote {args.output}")
    return 0


def _warn_inapplicable(args: argparse.Namespace, scenario: Any) -> None:
    """Say which crosscheck options this scenario's check does not use."""
    from simsync.crosscheck.sync_replicas import needs_cluster
    from simsync.patterns import build

    on_cluster = needs_cluster(build(scenario))
    if on_cluster:
        flags = {
            "--costs": args.costs,
            "--scenario-costs": args.scenario_costs,
            "--warmup": args.warmup != 2,
        }
    else:
        flags = {"--open-ports": args.open_ports, "--cluster": args.cluster}
    unused = [flag for flag, given in flags.items() if given]
    why = (
        "the real SyncReplicasOptimizer runs on a cluster, predicted with the scenario's own costs"
        if on_cluster
        else "only SyncReplicasOptimizer scenarios run on a cluster"
    )
    for flag in unused:
        _warn(f"{flag} has no effect here: {why}")


def _check_tensorflow_steps(steps: int | None, warmup: int) -> None:
    """Refuse more steps than a run on TensorFlow takes in a sensible time and memory."""
    from simsync.scenario.budget import MAX_TENSORFLOW_STEPS, MAX_TENSORFLOW_WARMUP

    if steps is not None and steps > MAX_TENSORFLOW_STEPS:
        raise UsageError(
            f"--steps {steps:,}: at most {MAX_TENSORFLOW_STEPS:,} on TensorFlow, where each "
            "step takes milliseconds to seconds and a traced one keeps every op's record in "
            "memory (the comparison settles within a few dozen steps); `simsync simulate "
            "--steps` runs up to 1,000,000 in the simulator"
        )
    if warmup > MAX_TENSORFLOW_WARMUP:
        raise UsageError(
            f"--warmup {warmup:,}: at most {MAX_TENSORFLOW_WARMUP:,} (TensorFlow is warm after "
            "a few steps, and each one is a real step of milliseconds to seconds)"
        )


def _console(**options: Any) -> Any:
    """A rich console from the one place they are made (rich imported only now)."""
    from simsync.terminal import make_console

    return make_console(**options)


def _one_on_stdout(trace: Any, json_wanted: bool) -> None:
    """``--trace -`` and ``--json`` cannot share standard output."""
    if trace is STDOUT and json_wanted:
        raise UsageError("--trace - and --json both print on standard output: choose one")


def _write_trace(output: Any, traces: list[tuple[str, Any]]) -> None:
    """A Chrome trace of ``traces``, to its file or (``-``) on standard output."""
    from simsync.viz import chrome_trace, write_chrome_trace

    if output is STDOUT:
        print(json.dumps(chrome_trace(traces), allow_nan=False))
    else:
        write_chrome_trace(output, traces)


def _warn(message: str) -> None:
    """One line on stderr, whatever the paths in ``message`` hold."""
    print(f"simsync: warning: {printable(message, one_line=True)}", file=sys.stderr)


def _load(path: Path) -> Any:
    """Load a scenario; say on stderr which of its settings cannot take effect."""
    from simsync.scenario import load_scenario

    scenario = load_scenario(path)
    for note in scenario.notes:
        _warn(note)
    return scenario


#: Runs expected to take longer than this get a warning first.
LONG_RUN_SECONDS = 600


def _check_cost(scenarios: list[Any]) -> None:
    """Refuse a run that cannot fit in this machine's memory; warn before one that takes long."""
    from simsync.scenario.budget import cost_of, physical_memory

    cost, memory = cost_of(scenarios), physical_memory()
    what = f"{cost.ops:,} op executions to simulate: {cost}"
    if memory is not None and cost.bytes > memory:
        raise UsageError(
            f"{what}, more than this machine's {memory / 1e9:.1f} GB; simulate fewer steps "
            "(--steps) or fewer devices"
        )
    if cost.seconds > LONG_RUN_SECONDS:
        _warn(f"{what}; --steps runs fewer, Ctrl-C stops")


def _building(towers: int) -> Any:
    """A spinner on stderr while a large graph is built (nothing for small ones, or when
    stderr is not a terminal)."""
    if towers < 1024 or not sys.stderr.isatty():
        return contextlib.nullcontext()
    return _console(stderr=True).status(f"Building the graph of {towers:,} towers...")


class _progress:
    """A progress bar on stderr (so also with --json) for long simulations: many steps, or
    many tower-steps; nothing when stderr is not a terminal."""

    def __init__(self, steps: int, towers: int) -> None:
        self.total, self.towers = steps, towers
        self.bar: Any = None

    def __enter__(self) -> Callable[[Any], None] | None:
        long_run = self.total >= 200 or self.total * self.towers >= 5_000
        if not long_run or not sys.stderr.isatty():
            return None
        from rich.progress import Progress

        self.bar = Progress(console=_console(stderr=True), transient=True)
        self.bar.start()
        task = self.bar.add_task("simulating", total=self.total)
        return lambda _record: self.bar.advance(task)

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()


# -- entry point ------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status (2 for a user error)."""
    ascii_fallback(sys.stdout)  # an ASCII or latin-1 terminal: stand-ins, not a traceback
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    previous = _exit_on_terminate()
    try:
        status: int = args.run(args)
    except BrokenPipeError:  # `simsync ... | head`: the reader has gone; stop quietly
        _drop_stdout()
        return 128 + getattr(signal, "SIGPIPE", 13)
    except (SimsyncError, OSError) as error:
        print(f"simsync: error: {printable(str(error), one_line=True)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("simsync: interrupted", file=sys.stderr)
        return 130
    except _Terminated:
        print("simsync: terminated", file=sys.stderr)
        return 128 + signal.SIGTERM
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return status


def _drop_stdout() -> None:
    """Point standard output at the null device, so that Python's last flush into a pipe
    whose reader has gone does not complain."""
    with contextlib.suppress(AttributeError, OSError, ValueError):  # not a system file
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


class _Terminated(BaseException):
    """SIGTERM (``kill``) arrived: unwind, so that half-written files are removed."""


def _exit_on_terminate() -> Any:
    """Turn SIGTERM into :class:`_Terminated`; the previous handler, to restore (None when
    this is not the main thread, where Python allows no handler)."""

    def terminate(signum: int, frame: Any) -> None:
        raise _Terminated

    try:
        return signal.signal(signal.SIGTERM, terminate)
    except ValueError:
        return None
