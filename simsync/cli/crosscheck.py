"""``simsync crosscheck``: run a scenario on TensorFlow and in the simulator, and compare (a
TensorFlow program: :func:`simsync.cli.user_program.crosscheck_program_command`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from simsync.cli.options import add_command, common, non_negative_int, run_steps
from simsync.cli.shared import (
    check_cost,
    check_tensorflow_steps,
    console,
    load,
    one_on_stdout,
    warn,
    write_trace,
)
from simsync.errors import UsageError, printable
from simsync.outputs import STDOUT, check_writable

__all__ = ["add", "crosscheck"]


def add(commands: Any) -> None:
    p = add_command(
        commands,
        "crosscheck",
        parents=[common("file", ("costs", "scenario-costs"), "seed", "json", "trace", "timeline")],
        help="run a scenario (or your TensorFlow program) on TensorFlow and in the "
        "simulator, and compare",
        description="Run the scenario's graph on TensorFlow (on GPUs, virtual ones when there are "
        "fewer GPUs than towers; without a GPU on logical CPU devices) and in the simulator, "
        "then compare: every happens-before relation "
        "of the graph on the real trace, the parameters and losses (numpy vs TensorFlow), and "
        "the predicted vs measured step and op times. The prediction is for this machine: it "
        "uses this machine's profile, measured once (a few seconds) and cached (see "
        "`simsync calibrate`), unless --costs or --scenario-costs says otherwise. Then what the "
        "real run shows, each with a verdict only when it "
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
        "the time between applies; --steps is the global step to reach. --trace writes the "
        "simulated and the real timeline side by side. Exits 1 if structure "
        "or values disagree. At most 128 towers (docs/tensorflow.md). A TensorFlow program "
        "(PROGRAM.py) is predicted from its imported graph and costs, then run again --runs "
        "times, each a fresh process: the happens-before relations, who arrived last at each "
        "sync point and the step time are compared (docs/importing.md).",
    )
    p.add_argument(
        "--steps",
        type=run_steps,
        default=20,
        help="traced steps (default 20, at most 1000: each is a real TensorFlow step, and a "
        "traced one keeps every op's record), then as many untraced ones whose wall times "
        "are the measured step times",
    )
    p.add_argument(
        "--warmup",
        type=non_negative_int,
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
    from simsync.cli.user_program import add_program_options, add_task_options

    add_program_options(p, crosscheck=True)
    add_task_options(p)
    p.set_defaults(run=crosscheck)


def crosscheck(args: argparse.Namespace) -> int:
    from rich.markup import escape

    from simsync.cli.user_program import crosscheck_program_command, refuse_program_options
    from simsync.simulation.user_program import is_program

    if is_program(args.file):
        return crosscheck_program_command(args)
    refuse_program_options(args)

    from simsync.crosscheck.compare import MACHINE
    from simsync.scenario.budget import MAX_CROSSCHECK_TOWERS
    from simsync.scenario.profile import load_profile

    check_tensorflow_steps(args.steps, args.warmup)
    scenario = load(args.file).with_run(steps=args.steps, seed=args.seed)
    profile: Any = load_profile(args.costs) if args.costs else MACHINE
    if args.scenario_costs:
        profile = None
    check_writable(args.trace, [args.file, args.costs])
    check_writable(args.timeline, [args.file, args.costs])
    one_on_stdout(args.trace, args.json)
    if scenario.towers > MAX_CROSSCHECK_TOWERS:
        raise UsageError(
            f"{args.file}: crosscheck runs at most {MAX_CROSSCHECK_TOWERS} towers on "
            f"TensorFlow (this scenario has {scenario.towers:,}): each tower adds its own "
            "threads, memory and seconds; simulate it instead, or cross-check fewer towers"
        )
    check_cost([scenario])  # the simulated half alone; TensorFlow's takes longer
    _warn_inapplicable(args, scenario)
    with console(stderr=True).status(
        "Starting TensorFlow and running the graph on it..."
    ) as status:
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
    if args.timeline:
        from simsync.viz import write_timeline_picture

        pictured = [("simulated", result.simulation.trace), ("TensorFlow", result.real.trace)]
        write_timeline_picture(args.timeline, pictured, sync_points=result.simulation.sync_points)
    if args.trace:
        traces = [("simulated", result.simulation.trace), ("tensorflow", result.real.trace)]
        write_trace(args.trace, traces)
    if args.json:
        from simsync.crosscheck.report import report_json

        print(json.dumps(report_json(report), indent=2, allow_nan=False))
    elif args.trace is not STDOUT:
        from simsync.viz import CrossCheckView

        console().print(CrossCheckView(report))
        if args.trace:
            print(
                f"Chrome trace written to {printable(str(args.trace), one_line=True)} "
                "(open it in ui.perfetto.dev)"
            )
        if args.timeline:
            print(
                f"Timeline picture written to {printable(str(args.timeline), one_line=True)} "
                "(simulated above TensorFlow)"
            )
    agree = report["structure"]["ok"] and report["values"]["ok"]
    return 0 if agree else 1


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
        warn(f"{flag} has no effect here: {why}")
