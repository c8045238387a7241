"""The command line for a user's own TensorFlow program: ``simsync simulate|graph PROGRAM.py``.

:mod:`simsync.cli.simulate` and :mod:`simsync.cli.graph` hand a file whose name ends in
``.py``, ``.meta`` or ``.pbtxt`` here (:func:`simsync.simulation.user_program.is_program`);
everything else is a scenario. The what-if options
(``--towers``, ``--speeds``, ``--link-bandwidth``, ``--latency``) and ``--refresh-costs`` are
added to ``simulate`` by :func:`add_program_options`; for a scenario they are refused.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from typing import Any

from simsync.errors import UsageError

__all__ = [
    "PROGRAM_OPTIONS",
    "add_program_options",
    "add_task_options",
    "crosscheck_program_command",
    "graph_program",
    "simulate_program_command",
]

#: the options only a program takes, as argparse stores them, with their flags
PROGRAM_OPTIONS = {
    "towers": "--towers",
    "batch": "--batch",
    "mode": "--mode",
    "replicas": "--replicas",
    "speeds": "--speeds",
    "link_bandwidth": "--link-bandwidth",
    "latency": "--latency",
    "refresh_costs": "--refresh-costs",
    "program_args": "-- ARGS",
    "tasks": "--tasks",
    "no_task_flags": "--no-task-flags",
    "devices": "--devices",
    "runs": "--runs",
    "values": "--values",
    "verbose": "--verbose",
}


def _speeds(text: str) -> tuple[float, ...]:
    try:
        speeds = tuple(float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: speeds are numbers separated by commas, e.g. 1,1,0.5"
        ) from None
    if not all(0.001 <= s <= 1000 for s in speeds):
        raise argparse.ArgumentTypeError(f"{text!r}: each speed must be from 0.001 to 1000")
    return speeds


def _number(above_zero: bool) -> Any:
    """A parser of a finite number above zero, or from zero."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = -1.0
        low_ok = value > 0 if above_zero else value >= 0
        if not (low_ok and value < float("inf")):
            what = "a positive number" if above_zero else "a number from 0"
            raise argparse.ArgumentTypeError(f"{text!r}: must be {what}")
        return value

    return parse


def _towers(text: str) -> int:
    from simsync.tf_backend.program.whatif import MAX_TOWERS

    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_TOWERS:
        raise argparse.ArgumentTypeError(f"{text!r}: must be a whole number from 1 to {MAX_TOWERS}")
    return value


def _runs(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 20:
        raise argparse.ArgumentTypeError(f"{text!r}: must be a whole number from 1 to 20")
    return value


def _batch(text: str) -> int:
    from simsync.tf_backend.program.whatif import MAX_BATCH

    value = int(text) if text.isascii() and text.isdigit() else 0  # not " 4", "٤", "4e2"
    if not 1 <= value <= MAX_BATCH:
        raise argparse.ArgumentTypeError(
            f"{text!r}: must be a whole number of examples from 1 to {MAX_BATCH:,}"
        )
    return value


def add_task_options(parser: argparse.ArgumentParser) -> None:
    """How TensorFlow runs the program: ``--devices``; ``--tasks`` and ``--no-task-flags`` for
    a program written for a cluster, run as one."""
    parser.add_argument_group(
        "a TensorFlow program: the devices it runs on",
        "By default your program gets this machine's devices, as it would when run itself.",
    ).add_argument(
        "--devices",
        type=_devices,
        metavar="N",
        help="give TensorFlow N devices before the program runs: N logical CPUs on a "
        "machine without GPUs (stand-ins for N GPUs), else N of its GPUs (split into "
        "virtual ones where it has fewer); a tf.distribute strategy that takes every "
        "device, such as MirroredStrategy(), then has N replicas",
    )
    group = parser.add_argument_group(
        "a TensorFlow program written for a cluster (one process per task)",
        "Every task runs the program in a sandbox of its own, all of them in one private "
        "network that nothing outside reaches (docs/importing.md). Each task is told who it "
        "is by TF_CONFIG and by the TF1 flags after the program's own command line: "
        "--job_name, --task_index and --<job>_hosts for every job (--ps_hosts, "
        "--worker_hosts).",
    )
    group.add_argument(
        "--tasks",
        type=_tasks,
        metavar="JOB=N,...",
        help="the cluster's jobs and their tasks, such as ps=1,worker=2 (the ps tasks only "
        "serve; every other task trains), or worker=2 for a MultiWorkerMirroredStrategy",
    )
    group.add_argument(
        "--no-task-flags",
        action="store_true",
        help="tell each task who it is by TF_CONFIG alone (a program whose command line "
        "takes no --job_name)",
    )


def _devices(text: str) -> int:
    from simsync.tf_backend.program.load import MOST_DEVICES

    value = int(text) if text.isascii() and text.isdigit() else 0
    if not 1 <= value <= MOST_DEVICES:
        raise argparse.ArgumentTypeError(
            f"{text!r}: must be a whole number from 1 to {MOST_DEVICES}"
        )
    return value


def _tasks(text: str) -> dict[str, int]:
    from simsync.tf_backend.program.cluster import parse_tasks

    try:
        return parse_tasks(text)
    except UsageError as error:
        raise argparse.ArgumentTypeError(str(error).partition(": ")[2]) from None


def add_program_options(parser: argparse.ArgumentParser, *, crosscheck: bool = False) -> None:
    """The what-if options of ``simulate|crosscheck PROGRAM.py``, its command line after
    ``--``, and (``crosscheck``) how many runs measure it."""
    parser.set_defaults(program_args=[])
    group = parser.add_argument_group(
        "a TensorFlow program (PROGRAM.py, .meta, .pbtxt): what if",
        "Each changes the imported graph before it is simulated (docs/importing.md). "
        "After --, the program's own command line (its sys.argv[1:])"
        + (
            "; with --towers or --batch, only the runs on TensorFlow get it (the prediction "
            "changes the graph the program builds without it): give the program what makes "
            "it build that many towers, or take that batch."
            if crosscheck
            else "."
        ),
    )
    group.add_argument(
        "--towers",
        type=_towers,
        metavar="N",
        help="N towers: tower_0 replicated, its placement kept (a program with no towers "
        "whose threads all run one train op, Hogwild: N such threads)",
    )
    group.add_argument(
        "--batch",
        type=_batch,
        metavar="N",
        help="N examples a step where the program's inputs bring its own batch (per tower): "
        "the work that grows with the batch, and the tensors that carry it, scaled",
    )
    if not crosscheck:  # TensorFlow would run the program as written: nothing to compare
        group.add_argument(  # checked where the mode changes are (--help imports nothing)
            "--mode",
            metavar="MODE",
            help="async: the tower loop as one thread per tower, each applying its own "
            "gradients (the averaging left out); sync_replicas: wrapped in "
            "SyncReplicasOptimizer, one thread per tower pushing its gradients and a chief "
            "applying each step once",
        )
        group.add_argument(
            "--replicas",
            type=_towers,  # as many as towers can be
            metavar="R",
            help="with --mode sync_replicas: the gradients each step applies "
            "(replicas_to_aggregate; default: one per tower); a gradient pushed after the "
            "step's R have arrived is dropped",
        )
    group.add_argument(
        "--speeds", type=_speeds, metavar="S,S,...", help="the towers' device speeds, repeated"
    )
    group.add_argument(
        "--link-bandwidth",
        type=_number(above_zero=True),
        metavar="GBPS",
        help="every device port, Gb/s",
    )
    group.add_argument(
        "--latency", type=_number(above_zero=False), metavar="US", help="per transfer, µs"
    )
    if not crosscheck:
        group.add_argument(
            "--verbose",
            action="store_true",
            help="every sync point and every tower in the table of who waited for whom, and "
            "every sync point's name where the import says where they were made (without: "
            "the first 3 sync points and 4 towers, whoever came last, 3 names a line)",
        )
        group.add_argument(
            "--values",
            action="store_true",
            help="also compute the loss of every step: the program's own ops replayed by "
            "TensorFlow in the simulated order (one more run of the program, in the sandbox)",
        )
    group.add_argument(
        "--refresh-costs",
        action="store_true",
        help="profile the program's graph again rather than use its cached costs",
    )
    if crosscheck:
        group.add_argument(
            "--runs",
            type=_runs,
            metavar="N",
            help="runs of the program on TensorFlow, each a fresh process after the one "
            "that measured the costs (default 3: the measured step time is their median)",
        )


def _no_tower(found: dict[str, Any]) -> str:
    """What the prediction of who comes last says when it names no tower: why, where the
    towers' work is equal (then which comes last is the order the threads take them in) or
    they arrive together (no one waits 1 % of a step)."""
    if found.get("equal_work"):
        return "no single tower (the towers bring equal work to their sync points)"
    if found.get("together"):
        return "no single tower (they arrive together: none waits 1 % of a step)"
    return "no single tower"


#: where a scenario says what a program's option changes (the rest is its [cluster])
_SCENARIO_KEYS = {
    "mode": "[training] mode",
    "replicas": "[training] replicas_to_aggregate",
    "batch": "[model] batch_size",
}


def refuse_program_options(
    args: argparse.Namespace, names: Iterable[str] = tuple(PROGRAM_OPTIONS)
) -> None:
    """A scenario takes none of the program's options (``names``, of
    :data:`PROGRAM_OPTIONS`): one line naming the first given."""
    for name in names:
        flag = PROGRAM_OPTIONS[name]
        if getattr(args, name, None) not in (None, False, (), []):
            if name == "values":
                raise UsageError(
                    f"--values replays an imported TensorFlow program's own ops; {args.file} "
                    "is a scenario: its values are computed (unless --no-numerics)"
                )
            raise UsageError(
                f"{flag} changes an imported TensorFlow program (PROGRAM.py, .meta, .pbtxt); "
                f"{args.file} is a scenario: change its "
                f"{_SCENARIO_KEYS.get(name, '[cluster]')} instead"
            )


def _running(args: argparse.Namespace) -> str:
    """What a terminal shows while the program runs until its loop is known."""
    from rich.markup import escape

    tasks = getattr(args, "tasks", None)
    if tasks:
        return escape(
            f"Running {args.file}'s cluster ({sum(tasks.values())} tasks, each in a "
            "sandbox) until its workers loop..."
        )
    return escape(f"Running {args.file} in a sandbox until its training loop is known...")


def simulate_program_command(args: argparse.Namespace, console: Any) -> int:
    """``simsync simulate PROGRAM.py``: import, change, simulate, report."""
    from simsync.simulation.user_program import WhatIf, program_summary, simulate_program

    changes = WhatIf(
        towers=args.towers,
        mode=args.mode,
        replicas=args.replicas,
        speeds=args.speeds or (),
        bandwidth_gbps=args.link_bandwidth,
        latency_us=args.latency,
        batch=args.batch,
    )
    from simsync.cli.shared import check_outputs, say_written, write_outputs
    from simsync.cli.shared import console as make_console

    check_outputs(args)
    with make_console(stderr=True).status(_running(args)):
        run = simulate_program(
            args.file,
            changes,
            steps=args.steps or 100,
            seed=args.seed or 0,
            costs=args.costs,
            refresh=args.refresh_costs,
            args=args.program_args,
            values=args.values,
            tasks=args.tasks,
            task_flags=not args.no_task_flags,
            devices=args.devices,
        )
    result = program_summary(run)
    sim = run.simulation
    if write_outputs(args, sim):
        return 0
    if args.json:
        print(json.dumps(result, indent=2, allow_nan=False))
        return 0
    from simsync.viz import ProgramView, Timeline

    console.print(ProgramView(result, verbose=args.verbose))
    if args.timeline_steps:
        console.print(Timeline(sim.trace, steps=args.timeline_steps, sync_points=sim.sync_points))
    say_written(args, console)
    return 0


def crosscheck_program_command(args: argparse.Namespace) -> int:
    """``simsync crosscheck PROGRAM.py``: predict, run the program again, compare."""
    from rich.markup import escape

    from simsync.cli.shared import console
    from simsync.crosscheck.user_program import crosscheck_program
    from simsync.simulation.user_program import WhatIf

    changes = WhatIf(
        towers=args.towers,
        speeds=args.speeds or (),
        bandwidth_gbps=args.link_bandwidth,
        latency_us=args.latency,
        batch=args.batch,
    )
    if changes.speeds or changes.bandwidth_gbps is not None or changes.latency_us is not None:
        raise UsageError(
            "crosscheck PROGRAM.py: --speeds, --link-bandwidth and --latency cannot be run on "
            "TensorFlow here (no device or link of this machine can be slowed); simulate them"
        )
    scenario_only = {
        "--seed": args.seed is not None,  # a program draws its own batches
        "--trace": args.trace,
        "--timeline": args.timeline,
        "--scenario-costs": args.scenario_costs,
        "--open-ports": args.open_ports,
        "--cluster": args.cluster,
        "--warmup": args.warmup != 2,
    }
    for flag, given in scenario_only.items():
        if given:
            raise UsageError(
                f"crosscheck {args.file}: {flag} is for a scenario; a program's cross-check "
                "takes --runs, --steps, --costs, --refresh-costs, --towers, --batch, --json and -- "
                "ARGS"
            )
    what_if = changes.towers is not None or changes.batch is not None
    with console(stderr=True).status("Starting TensorFlow...") as status:
        _, report = crosscheck_program(
            args.file,
            changes,
            runs=args.runs or 3,
            traced=args.steps or 10,
            untraced=args.steps or 10,
            args=() if what_if else args.program_args,
            real_args=args.program_args if what_if else None,
            costs=args.costs,
            refresh=args.refresh_costs,
            on_progress=lambda message: status.update(escape(message)),
            tasks=args.tasks,
            task_flags=not args.no_task_flags,
            devices=args.devices,
        )
    if args.json:
        print(json.dumps(report, indent=2, allow_nan=False))
    else:
        _print_crosscheck(report, console())
    return 0 if report["structure"]["ok"] else 1


def _print_crosscheck(report: dict[str, Any], out: Any) -> None:
    structure = report["structure"]
    out.print(f"[bold]{report['source']}[/bold]: cross-checked on TensorFlow", highlight=False)
    for line in report["what_if"]:
        out.print(f"  what if: {line} (run as: {' '.join(report['real_args'])})", markup=False)
    out.print(f"  costs: {report['costs']}", markup=False)
    tasks = report.get("tasks")
    fresh = f"cluster of {sum(tasks.values())} processes" if tasks else "process"
    out.print(
        f"  {report['runs']} runs, each a fresh {fresh}; {report['traced_steps']} traced steps",
        markup=False,
    )
    verdict = "agree" if structure["ok"] else f"{len(structure['violations'])} violated"
    out.print(
        f"  structure: {structure['checked']:,} happens-before relations checked, {verdict}",
        markup=False,
    )
    for violation in structure["violations"][:5]:
        out.print(f"    {violation}", markup=False)
    for found in report["arrivals"]:
        counts = ", ".join(f"{t} {n}" for t, n in found["measured_last"].items())
        differ = ", each run its own" if found.get("runs_differ") else ""
        out.print(
            f"  last at {found['sync_point']}: measured {found['measured'] or 'no single tower'}"
            f" (last in {counts} of {found['steps']} steps{differ}), predicted "
            f"{found['predicted'] or _no_tower(found)}: "
            f"{found['verdict']}",
            markup=False,
        )
    for step in report["step_time"]:
        error = step["error"]
        shown = "n/a" if error is None else f"{error:+.1%}"
        medians = step["run_medians"]
        verdict = {
            "within 10 %": "within 10 %",
            "inconclusive": "inconclusive here: this machine's processes differ by more",
        }.get(step["verdict"], "NOT within 10 %")
        profiled = step.get("profiled") or []
        fitted = (
            f" (fitted to {len(profiled)} processes' steps, {min(profiled) * 1e3:.3f} to "
            f"{max(profiled) * 1e3:.3f} ms)"
            if profiled
            else ""
        )
        out.print(
            f"  step time ({step['client']}): predicted {step['predicted'] * 1e3:.3f} ms"
            f"{fitted}, "
            f"measured {step['measured'] * 1e3:.3f} ms (median of {len(medians)} runs' "
            f"medians, {min(medians) * 1e3:.3f} to {max(medians) * 1e3:.3f}): {shown}, "
            f"{verdict}",
            markup=False,
        )
    if not report["step_time"]:
        out.print("  step time: not compared (no run measured the loop's steps)", markup=False)
    updates = report.get("updates_per_second")
    if updates:
        error = updates["error"]
        shown = "n/a" if error is None else f"{error:+.1%}"
        out.print(
            f"  updates per second, every thread together: predicted {updates['predicted']:,.0f}"
            f", measured {updates['measured']:,.0f}: {shown}, "
            + ("within 20 %" if updates["ok"] else "NOT within 20 %"),
            markup=False,
        )
    _print_staleness(report.get("staleness"), out)
    for queue in report.get("input_queues", ()):
        short, steps = queue["short"], queue["steps"]
        keeps = {True: "keeps up", False: "runs short"}
        simulated = (
            f"{short['simulated']} of {steps['simulated']} simulated "
            f"({keeps[queue['keeps_up']['simulated']]})"
            if queue["simulated_as_queue"]
            else "simulated never (its queue runners are taken to keep up)"
        )
        out.print(
            f"  input queue {queue['queue']} ({queue['client']}): held fewer than the "
            f"{queue['takes']} elements a step takes as {short['measured']} of "
            f"{steps['measured']} measured steps began ({keeps[queue['keeps_up']['measured']]}),"
            f" {simulated}: {'agree' if queue['agree'] else 'DISAGREE'}",
            markup=False,
        )


def _print_staleness(stale: dict[str, Any] | None, out: Any) -> None:
    """The line of a coordinator's workers' staleness (``crosscheck``'s report)."""
    if stale is None:
        return
    evidence = stale["evidence"]
    if evidence is None:
        out.print(
            f"  staleness: not measured (TensorFlow's profiler traced no round's reads and "
            f"updates whole, of {stale['rounds']})",
            markup=False,
        )
        return
    from simsync.viz.crosscheck import stale_where

    low, high = evidence["interval"]
    verdict = {"as predicted": "as predicted", "not as predicted": "NOT as predicted"}
    said = f"{stale_where(evidence, 'that interval')}: "
    said += verdict.get(evidence["prediction"], "inconclusive here")
    out.print(
        f"  staleness (of an update: the other updates that landed between its step's read of "
        f"a variable and its own): measured {evidence['mean']:.2f} on average over "
        f"{evidence['updates']:,} updates in {evidence['blocks']} rounds of the workers "
        f"together (95 % interval of the rounds' median: {low:.2f} to {high:.2f}), predicted "
        f"{evidence['predicted']:.2f}, {said}",
        markup=False,
    )


def graph_program(args: argparse.Namespace) -> Any:
    """The imported graph of ``simsync graph PROGRAM.py``, folded by name scope unless
    ``--every-op``."""
    from simsync.cli.shared import console
    from simsync.simulation.importing import import_program
    from simsync.viz import folded_by_scope

    with console(stderr=True).status(_running(args)):
        graph = import_program(
            args.file,
            args=getattr(args, "program_args", ()),
            tasks=getattr(args, "tasks", None),
            task_flags=not getattr(args, "no_task_flags", False),
            devices=getattr(args, "devices", None),
        ).graph
    return graph if getattr(args, "every_op", False) else folded_by_scope(graph)
