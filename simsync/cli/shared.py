"""What several commands do while they run: load a scenario and say its notes, warn, make a
console, check what a run will cost, write a trace.

Every heavy module (rich, numpy, the simulator) is imported inside the function that needs it.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from simsync.errors import UsageError, printable
from simsync.outputs import STDOUT, check_writable

__all__ = [
    "LONG_RUN_SECONDS",
    "building",
    "check_cost",
    "check_outputs",
    "check_tensorflow_steps",
    "console",
    "load",
    "one_on_stdout",
    "progress",
    "say_written",
    "warn",
    "write_outputs",
    "write_trace",
]

#: Runs expected to take longer than this get a warning first.
LONG_RUN_SECONDS = 600


def console(**options: Any) -> Any:
    """A rich console from the one place they are made (rich imported only now)."""
    from simsync.terminal import make_console

    return make_console(**options)


def warn(message: str) -> None:
    """One line on stderr, whatever the paths in ``message`` hold."""
    print(f"simsync: warning: {printable(message, one_line=True)}", file=sys.stderr)


def load(path: Path) -> Any:
    """Load a scenario; say on stderr which of its settings cannot take effect."""
    from simsync.scenario import load_scenario

    scenario = load_scenario(path)
    for note in scenario.notes:
        warn(note)
    return scenario


def one_on_stdout(trace: Any, json_wanted: bool) -> None:
    """``--trace -`` and ``--json`` cannot share standard output."""
    if trace is STDOUT and json_wanted:
        raise UsageError("--trace - and --json both print on standard output: choose one")


def write_trace(output: Any, traces: list[tuple[str, Any]]) -> None:
    """A Chrome trace of ``traces``, to its file or (``-``) on standard output."""
    from simsync.viz import chrome_trace, write_chrome_trace

    if output is STDOUT:
        print(json.dumps(chrome_trace(traces), allow_nan=False))
    else:
        write_chrome_trace(output, traces)


def check_cost(scenarios: list[Any]) -> None:
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
        warn(f"{what}; --steps runs fewer, Ctrl-C stops")


def check_tensorflow_steps(steps: int | None, warmup: int) -> None:
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


def building(towers: int) -> Any:
    """A spinner on stderr while a large graph is built (nothing for small ones, or when
    stderr is not a terminal)."""
    if towers < 1024 or not sys.stderr.isatty():
        return contextlib.nullcontext()
    return console(stderr=True).status(f"Building the graph of {towers:,} towers...")


class progress:
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

        self.bar = Progress(console=console(stderr=True), transient=True)
        self.bar.start()
        task = self.bar.add_task("simulating", total=self.total)
        return lambda _record: self.bar.advance(task)

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()


def check_outputs(args: Any) -> None:
    """Refuse, before any work, a ``--trace`` or ``--timeline`` file that would be written
    over an input, and two outputs on standard output."""
    check_writable(args.trace, [args.file, args.costs])
    check_writable(args.timeline, [args.file, args.costs])
    one_on_stdout(args.trace, args.json)


def write_outputs(args: Any, sim: Any) -> bool:
    """Write the simulation's ``--timeline`` picture and ``--trace``; True when the trace
    went to standard output (then nothing else is printed)."""
    if args.timeline:
        from simsync.viz import write_timeline_picture

        traces = [("simulated", sim.trace)]
        write_timeline_picture(
            args.timeline, traces, steps=args.timeline_steps or 2, sync_points=sim.sync_points
        )
    if args.trace:
        write_trace(args.trace, [("simulated", sim.trace)])
    return args.trace is STDOUT


def say_written(args: Any, terminal: Any) -> None:
    """Where :func:`write_outputs` wrote its files."""
    if args.trace:
        terminal.print(
            f"Chrome trace written to {printable(str(args.trace), one_line=True)} "
            "(open it in ui.perfetto.dev)",
            markup=False,
        )
    if args.timeline:
        print(f"Timeline picture written to {printable(str(args.timeline), one_line=True)}")
