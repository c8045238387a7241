"""``simsync simulate``: run a scenario in the simulator; a summary and a timeline, or JSON."""

from __future__ import annotations

import argparse
import json
from typing import Any

from simsync.cli.options import add_command, common, non_negative_int
from simsync.cli.shared import (
    building,
    check_cost,
    check_outputs,
    console,
    load,
    progress,
    say_written,
    write_outputs,
)

__all__ = ["add", "simulate"]


def add(commands: Any) -> None:
    p = add_command(
        commands,
        "simulate",
        parents=[common("file", "steps", "seed", "json", "trace", "timeline", "costs")],
        help="run a scenario (or your TensorFlow program) in the simulator and report step "
        "time, waits, loss",
        description="Run a scenario in the discrete-event simulator. Prints a summary (step "
        "time, throughput, who waited for whom at each sync point, loss) and a timeline of "
        "the first steps; or one JSON object with --json. With --costs, the costs measured by "
        "`simsync calibrate` replace the file's. Your TensorFlow program (PROGRAM.py) is "
        "run in a sandbox to its training loop, timed on this machine and simulated as "
        "written; the options under 'what if' change it, and --values adds the loss of "
        "every step, computed by your own ops in the simulated order (docs/importing.md).",
    )
    p.add_argument(
        "--timeline-steps",
        type=non_negative_int,
        default=2,
        metavar="K",
        help="steps shown in the terminal timeline and the --timeline picture (0 hides the "
        "terminal one; default 2)",
    )
    p.add_argument(
        "--no-numerics",
        action="store_true",
        help="skip the model's real numbers (faster; no loss is reported)",
    )
    from simsync.cli.user_program import add_program_options, add_task_options

    add_program_options(p)
    add_task_options(p)
    p.set_defaults(run=simulate)


def simulate(args: argparse.Namespace) -> int:
    from simsync.cli.user_program import refuse_program_options, simulate_program_command
    from simsync.simulation.user_program import is_program

    if is_program(args.file):
        return simulate_program_command(args, console())
    refuse_program_options(args)
    from simsync.ir import updating_clients
    from simsync.patterns import build
    from simsync.simulation import expected_updates, simulate, summary

    scenario = load(args.file).with_run(steps=args.steps, seed=args.seed)
    check_outputs(args)
    if args.costs:
        from simsync.scenario.profile import apply_profile, load_profile

        scenario = apply_profile(scenario, load_profile(args.costs))
    check_cost([scenario])
    with building(scenario.towers):
        graph = build(scenario)
    updating = set(updating_clients(graph))
    total = expected_updates(graph, scenario.run.steps)
    with progress(total, max(len(graph) // max(total, 1), 1)) as tick:
        on_step = None if tick is None else lambda r: tick(r) if r.client in updating else None
        sim = simulate(scenario, numerics=not args.no_numerics, on_step=on_step, graph=graph)
    result = summary(sim)
    if write_outputs(args, sim):
        return 0
    if args.json:
        print(json.dumps(result, indent=2, allow_nan=False))
        return 0
    from simsync.viz import SummaryView, Timeline

    terminal = console()
    terminal.print(SummaryView(result))
    if args.timeline_steps:
        terminal.print(Timeline(sim.trace, steps=args.timeline_steps, sync_points=sim.sync_points))
    say_written(args, terminal)
    return 0
