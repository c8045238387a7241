"""The command line for a user's own TensorFlow program: ``simsync simulate|graph PROGRAM.py``.

:mod:`simsync.cli.simulate` and :mod:`simsync.cli.graph` hand a file whose name ends in
``.py``, ``.meta`` or ``.pbtxt`` here (:func:`simsync.programs.is_program`); everything else
is a scenario. The what-if options
(``--towers``, ``--speeds``, ``--link-bandwidth``, ``--latency``) and ``--refresh-costs`` are
added to ``simulate`` by :func:`add_program_options`; for a scenario they are refused.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from simsync.errors import UsageError

__all__ = ["PROGRAM_OPTIONS", "add_program_options", "graph_program", "simulate_program_command"]

#: the options only a program takes, as argparse stores them, with their flags
PROGRAM_OPTIONS = {
    "towers": "--towers",
    "speeds": "--speeds",
    "link_bandwidth": "--link-bandwidth",
    "latency": "--latency",
    "refresh_costs": "--refresh-costs",
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


def add_program_options(parser: argparse.ArgumentParser) -> None:
    """The what-if options of ``simulate PROGRAM.py``."""
    group = parser.add_argument_group(
        "a TensorFlow program (PROGRAM.py, .meta, .pbtxt): what if",
        "Each changes the imported graph before it is simulated (docs/importing.md).",
    )
    group.add_argument(
        "--towers",
        type=_towers,
        metavar="N",
        help="N towers: tower_0 replicated, its placement kept",
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
    group.add_argument(
        "--refresh-costs",
        action="store_true",
        help="profile the program's graph again rather than use its cached costs",
    )


def refuse_program_options(args: argparse.Namespace) -> None:
    """A scenario takes none of the program's options: one line naming the first given."""
    for name, flag in PROGRAM_OPTIONS.items():
        if getattr(args, name, None) not in (None, False, ()):
            raise UsageError(
                f"{flag} changes an imported TensorFlow program (PROGRAM.py, .meta, .pbtxt); "
                f"{args.file} is a scenario: change its [cluster] instead"
            )


def simulate_program_command(args: argparse.Namespace, console: Any) -> int:
    """``simsync simulate PROGRAM.py``: import, change, simulate, report."""
    from simsync.programs import WhatIf, program_summary, simulate_program

    changes = WhatIf(
        towers=args.towers,
        speeds=args.speeds or (),
        bandwidth_gbps=args.link_bandwidth,
        latency_us=args.latency,
    )
    run = simulate_program(
        args.file,
        changes,
        steps=args.steps or 100,
        seed=args.seed or 0,
        costs=args.costs,
        refresh=args.refresh_costs,
    )
    result = program_summary(run)
    if args.json:
        print(json.dumps(result, indent=2, allow_nan=False))
        return 0
    from simsync.viz import SummaryView, Timeline

    imported = result["imported"]
    console.print(f"[bold]{args.file}[/bold]: imported", highlight=False)
    console.print(
        f"  {imported['tensorflow_ops']} TensorFlow ops; a step runs {imported['ops']} "
        f"(one IR op each); towers by {imported['tower_rule']}",
        markup=False,
    )
    ignored = ", ".join(f"{count} {why}" for why, count in imported["ignored"].items())
    console.print(f"  ignored: {ignored}", markup=False)
    for name, made in result["sync_points_made_in"].items():
        console.print(f"  sync point {name}: made in {made or 'the graph'}", markup=False)
    console.print(f"  costs: {imported['costs']}", markup=False)
    for line in result["what_if"]:
        console.print(f"  what if: {line}", markup=False)
    console.print(SummaryView(result))  # type: ignore[arg-type]
    if args.timeline_steps:
        sim = run.simulation
        console.print(Timeline(sim.trace, steps=args.timeline_steps, sync_points=sim.sync_points))
    return 0


def graph_program(args: argparse.Namespace) -> Any:
    """The imported graph of ``simsync graph PROGRAM.py``."""
    from simsync.tf_backend.program import import_program

    return import_program(args.file).graph
