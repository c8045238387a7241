"""Cross-check an imported TensorFlow program: its imported graph, simulated, against runs of
the program itself on TensorFlow (``simsync crosscheck PROGRAM.py``).

The prediction comes from the imported graph and its costs (cached, or measured in the
import's own run); the measurements from other runs of the program, each a fresh process
(:func:`simsync.tf_backend.program.load.measure_program`): its graph rebuilt, its training
loop found again, each client then run alone, timed untraced steps and traced ones. So the
step time is predicted from one run and measured in others.

1. **Structure.** Every happens-before relation of the imported graph, on every traced step
   of every run (:func:`simsync.crosscheck.compare.structure`), among the ops the profile saw
   run (TensorFlow folds a few before the step: those are not in any trace).
2. **Who arrived last** at each sync point, by the one rule of simulated and real traces
   (:func:`simsync.crosscheck.evidence.arrivals`, :func:`simsync.trace.came_last`), in the
   simulation and in the traced steps; a tower is named only when it was last in more than
   half the steps, beyond chance (:func:`~simsync.crosscheck.evidence.usually_last_of`), and
   in every run alike (:func:`_last_by_run`: a process's steps are not independent), and
   the two are compared by :func:`~simsync.crosscheck.evidence.last_verdict`.
3. **Step time**: the simulated median against the median of the runs' median wall times
   (within :data:`STEP_TOLERANCE`), per client (several looping threads run together in
   the runs, as the program and the simulation run them), and with several threads their
   updates per second in all (within :data:`UPDATES_TOLERANCE`); inconclusive when the
   prediction misses that but lies among the runs' own medians, and they differ from each
   other by more. The imported costs are fitted to the untraced step of the import's own run
   (:mod:`simsync.simulation.fit`), so the prediction for a program as written is
   that run's step, and the runs here say how well one run foretells others; a what-if
   tests the simulator.
4. **Input queues**: for each FIFO queue the loop's steps take elements from, in how many
   steps it held fewer than a step takes as the step began, in the simulation and in the
   runs (:func:`_input_queues`): whether the queue runners keep up, both ways.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from simsync.crosscheck.compare import relative_error, structure
from simsync.crosscheck.evidence import (
    INCONCLUSIVE,
    arrivals,
    last_verdict,
    staleness_of_blocks,
    usually_last_of,
)
from simsync.errors import UsageError
from simsync.ir import Graph
from simsync.ir.resources import ACTIONS
from simsync.simulation import Simulation
from simsync.simulation.importing import import_program
from simsync.simulation.user_program import (
    AS_WRITTEN,
    PREDICTION_STEPS,
    ProgramRun,
    WhatIf,
    simulate_program,
)
from simsync.trace import (
    OpRecord,
    StepRecord,
    Trace,
    step_time_stats,
    together,
    unpaired_staleness,
    variable_staleness,
)

__all__ = ["STEP_TOLERANCE", "crosscheck_program", "program_report", "queue_held", "real_trace"]

#: the measured median step time the prediction must be within, relatively
STEP_TOLERANCE = 0.10
#: the numbers of one run's steps in a real trace: run ``r``'s from ``r * RUN_STEPS``
RUN_STEPS = 1000


def real_trace(
    graph: Graph, runs: Sequence[Mapping[str, Any]], threads: Mapping[str, str]
) -> Trace:
    """The traced steps of ``runs`` (each :func:`measure_loop`'s result) as one trace, the
    steps of run ``r`` numbered from ``r * RUN_STEPS`` (a run's steps past that many, which only
    a forged report holds, are left out: they would be the next run's); ``threads`` maps a
    thread to its client's name. Ops not in ``graph`` (constants, the runtime's own) are left
    out."""
    trace = Trace(source="tensorflow")
    for number, run in enumerate(runs):
        for thread, measured in run["clients"].items():
            client = threads.get(thread)
            if client is None:
                continue
            for index, records in enumerate(measured["steps"][:RUN_STEPS]):
                step = number * RUN_STEPS + index
                kept = [r for r in records if r[0] in graph.nx]
                if not kept:
                    continue
                for name, device, start, end, done in kept:
                    trace.ops.append(
                        OpRecord(
                            name, "generic", (device,), client, step, start, start, end, done=done
                        )
                    )
                first = min(r[2] for r in kept)
                trace.steps.append(StepRecord(client, step, first, max(r[3] for r in kept)))
    return trace


def program_report(
    graph: Graph,
    simulation: Simulation,
    runs: Sequence[Mapping[str, Any]],
    threads: Mapping[str, str],
    timed: set[str],
    profiled: Sequence[float] = (),
    queues: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The report of ``simsync crosscheck PROGRAM.py``: the measured ``runs`` of the
    program whose graph is ``graph`` (checked among the ``timed`` ops: those the profile saw
    run), against ``simulation`` (of ``graph``, or of a what-if of it: then who arrived last
    is compared where the sync points have the same names). See the module's docstring."""
    real = real_trace(graph, runs, threads)
    among = {op.name for op in graph.ops() if op.name in timed}
    found = structure(graph, real, among=among)
    predicted = {a["sync_point"]: a for a in arrivals(simulation.graph, simulation.trace)}
    simulated_step = step_time_stats(simulation.trace)["mean"]
    by_run = _last_by_run(graph, real, len(runs))
    last = []
    for measured in arrivals(graph, real):
        point = measured["sync_point"]
        real_last = usually_last_of(measured["last"], measured["steps"])
        runs_differ = len(set(by_run.get(point, [real_last]))) > 1
        if runs_differ:
            real_last = ""  # each process its own order: no single tower, whatever the sum
        simulated = predicted.get(point)
        arrived_together = simulated is not None and together(
            simulated["mean_wait"], simulated_step
        )
        if simulated is None or not simulated["steps"] or not measured["steps"]:
            sim_last, verdict = None, INCONCLUSIVE
        elif not measured["expected"]:  # the towers' work is equal: which one comes last is
            # the order the threads take them in, which the simulation does not know (its
            # pool's order would name one: no prediction)
            sim_last, verdict = None, INCONCLUSIVE
        elif arrived_together:  # none waits noticeably: the
            # one the simulation counts last comes a moment later, a tie-break, as its table
            # says ("together"), not a straggler it foretells
            sim_last, verdict = None, INCONCLUSIVE
        else:
            sim_last = usually_last_of(simulated["last"], simulated["steps"])
            verdict = last_verdict(sim_last, real_last)
        last.append(
            {
                "sync_point": point,
                "steps": measured["steps"],
                "measured_last": measured["last"],
                "measured": real_last,
                "predicted": sim_last,
                "equal_work": not measured["expected"],
                "together": arrived_together,
                "runs_differ": runs_differ,
                "verdict": verdict,
            }
        )
    return {
        "check": "program",
        "runs": len(runs),
        "traced_steps": len(real.steps),
        "structure": {**found, "among": len(among), "not_timed": len(graph) - len(among)},
        "arrivals": last,
        "step_time": _step_times(simulation, runs, threads, profiled),
        "updates_per_second": _updates_per_second(simulation, runs, threads),
        "input_queues": _input_queues(queues or {}, simulation, runs, threads),
        "staleness": _staleness(graph, simulation, runs, real),
    }


#: the ``_Send`` that TensorFlow adds after a step's updates on a parameter server: the
#: step's control edges to its worker, grouped (research/tf2.md §3)
UPDATES_SENT = "GroupCrossDeviceControlEdges"


def _staleness(
    graph: Graph, simulation: Simulation, runs: Sequence[Mapping[str, Any]], real: Trace
) -> dict[str, Any] | None:
    """A coordinator's workers' mean staleness, simulated (:func:`variable_staleness`)
    against measured in the runs' traced rounds, each a block of
    :func:`~simsync.crosscheck.evidence.staleness_of_blocks`. Per variable the first
    worker's updates write: when each step first read it (the kernel of the read that
    starts first in the traced steps, or where TensorFlow traced it in fewer steps than
    the round's, the ``_Send`` that carries its value to the worker), and when each update
    landed (its kernel, or else the :data:`UPDATES_SENT` ``_Send`` that follows the
    step's updates); the round's mean staleness is then read off unpaired
    (:func:`unpaired_staleness`: the profiler does not say which worker ran a kernel),
    the mean over its variables. None without rounds (no coordinator)."""
    rounds = [found for run in runs for found in run.get("rounds", ())]
    if not rounds or not graph.clients:
        return None
    prefix = f"{graph.clients[0].name}/"
    own = [op for op in graph.ops() if op.name.startswith(prefix)]
    offsets: dict[str, list[float]] = {}
    starts = {(s.client, s.step): s.start for s in real.steps}
    for record in real.ops:
        began = starts.get((record.client, record.step))
        if began is not None:
            offsets.setdefault(record.op, []).append(record.start - began)
    pairs = {}  # variable -> (its first read, its update), as the kernels name them
    for writer in own:
        for variable in writer.writes[:1]:
            readers = [op.name for op in own if variable in op.reads and op.name in offsets]
            if readers and variable not in pairs:
                first = min(readers, key=lambda name: statistics.median(offsets[name]))
                pairs[variable] = (first[len(prefix) :], writer.name[len(prefix) :])
    blocks, updates = [], 0
    for one in rounds:
        steps = one["steps"]
        kernels: dict[str, list[float]] = {}  # each kernel's name: when each one started
        for name, time in one["kernels"]:
            kernels.setdefault(name, []).append(time)
        names = sorted(kernels)
        means = []
        for read, written in pairs.values():
            reads = _instants(
                kernels, [read, *[n for n in names if n.startswith(f"{read}/_")]], steps
            )
            landed = _instants(
                kernels, [written, *[n for n in names if n.startswith(UPDATES_SENT)]], steps
            )
            mean = unpaired_staleness(reads, landed) if reads and landed else None
            if mean is not None:
                means.append(mean)
        if means:
            blocks.append(statistics.fmean(means))
            updates += steps
    predicted = variable_staleness(simulation.graph, simulation.trace, set(pairs))
    said = {"variables": sorted(pairs), "rounds": len(rounds), "read_off": len(blocks)}
    if not blocks or predicted is None:
        return {**said, "evidence": None}
    return {**said, "evidence": staleness_of_blocks(blocks, predicted, updates)}


def _instants(kernels: Mapping[str, list[float]], names: Sequence[str], steps: int) -> list[float]:
    """When the kernels of the first of ``names`` that ran once in each of ``steps`` steps
    started (``kernels``: each name's start times); [] when none did."""
    for name in names:
        times = kernels.get(name, [])
        if len(times) == steps:
            return times
    return []


def _last_by_run(graph: Graph, real: Trace, runs: int) -> dict[str, list[str]]:
    """For each sync point, the tower usually last in each run alone
    (:func:`~simsync.crosscheck.evidence.usually_last_of`, "" for none). A process's steps
    are not independent draws: which replica TensorFlow's threads take first can hold for a
    whole process and differ in the next, so that 3 runs of 20 steps add up to 51 of 60 for
    one tower when two of them had it last in every step and one never."""
    found: dict[str, list[str]] = {}
    for number in range(runs):
        own = Trace(
            source=real.source,
            ops=[r for r in real.ops if r.step // RUN_STEPS == number],
            steps=[r for r in real.steps if r.step // RUN_STEPS == number],
        )
        for measured in arrivals(graph, own):
            named = usually_last_of(measured["last"], measured["steps"])
            found.setdefault(measured["sync_point"], []).append(named)
    return found


def _step_verdict(
    ok: bool,
    predicted: float,
    measured: float,
    medians: Sequence[float],
    profiled: Sequence[float] = (),
) -> str:
    """``within 10 %``; else ``inconclusive`` when this machine cannot tell: the prediction
    lies among the runs' own medians, or the measured median among the predictions the
    profile's processes would each have given (``profiled``: their median steps, the
    prediction scaled by each over their median), and those differ by more than the
    tolerance; else ``not within 10 %``.

    >>> _step_verdict(False, 0.35, 0.40, [0.34, 0.45, 0.40])
    'inconclusive'
    >>> _step_verdict(False, 0.2, 0.35, [0.34, 0.36])
    'not within 10 %'
    >>> _step_verdict(False, 0.375, 0.327, [0.30, 0.33, 0.34], [0.273, 0.375, 0.422])
    'inconclusive'
    >>> _step_verdict(False, 0.2, 0.0, [0.0, 0.0], [0.0, 0.0])  # steps said to take no time
    'not within 10 %'
    """
    if ok:
        return "within 10 %"
    spreads = [(min(medians), max(medians), predicted)]
    middle = statistics.median(profiled) if profiled else 0.0
    if middle > 0:  # steps that took no time (a process's word) scale nothing
        low, high = (predicted * min(profiled) / middle, predicted * max(profiled) / middle)
        spreads.append((low, high, measured))
    for low, high, value in spreads:
        if low <= value <= high and high > low * (1 + STEP_TOLERANCE):
            return INCONCLUSIVE
    return "not within 10 %"


def _step_times(
    simulation: Simulation,
    runs: Sequence[Mapping[str, Any]],
    threads: Mapping[str, str],
    profiled: Sequence[float] = (),
) -> list[dict[str, Any]]:
    """Per client: the simulated median step against the median of the runs' medians. For a
    loop of one client, or of clients the runs measured together, as the simulation runs
    them (every loop of several threads, since the runs measure them all at once)."""
    found: list[dict[str, Any]] = []
    together = all(
        run["clients"].get(thread, {}).get("together") for run in runs for thread in threads
    )
    if len(threads) != 1 and not (runs and together):
        return found
    for thread, client in threads.items():
        simulated = [s.duration for s in simulation.trace.steps if s.client == client]
        medians = [
            statistics.median(run["clients"][thread]["walls"])
            for run in runs
            if run["clients"].get(thread, {}).get("walls")
        ]
        if not simulated or not medians:
            continue
        predicted = statistics.median(simulated)
        measured = statistics.median(medians)
        error = relative_error(predicted, measured)
        ok = error is not None and abs(error) <= STEP_TOLERANCE
        found.append(
            {
                "client": client,
                "predicted": predicted,
                "measured": measured,
                "run_medians": medians,
                "error": error,
                "ok": ok,
                "profiled": list(profiled),
                "verdict": _step_verdict(ok, predicted, measured, medians, profiled),
            }
        )
    return found


#: the measured updates per second of several threads the prediction must be within
UPDATES_TOLERANCE = 0.20


def _updates_per_second(
    simulation: Simulation, runs: Sequence[Mapping[str, Any]], threads: Mapping[str, str]
) -> dict[str, Any] | None:
    """With several looping threads, measured together: their steps per second in all
    (each client's one over its median step, summed), simulated against measured (the median
    over the runs), within :data:`UPDATES_TOLERANCE`; None with one thread.

    >>> from simsync.trace import StepRecord, Trace
    >>> class Run:
    ...     trace = Trace(steps=[StepRecord(c, i, 0.0, 0.01) for c in ("a", "b") for i in (0, 1)])
    >>> runs = [{"clients": {t: {"walls": [0.011] * 3, "together": True} for t in "xy"}}]
    >>> found = _updates_per_second(Run(), runs, {"x": "a", "y": "b"})
    >>> round(found["predicted"]), round(found["measured"]), found["ok"]
    (200, 182, True)
    """
    if len(threads) < 2 or not runs:
        return None
    if not all(run["clients"].get(t, {}).get("together") for run in runs for t in threads):
        return None
    predicted = 0.0
    for client in threads.values():
        steps = [s.duration for s in simulation.trace.steps if s.client == client]
        predicted += 1 / statistics.median(steps) if steps and statistics.median(steps) else 0.0
    measured = statistics.median(
        sum(1 / statistics.median(c["walls"]) for c in run["clients"].values() if c["walls"])
        for run in runs
    )
    error = relative_error(predicted, measured)
    ok = error is not None and abs(error) <= UPDATES_TOLERANCE
    return {"predicted": predicted, "measured": measured, "error": error, "ok": ok}


def queue_held(trace: Trace, queue: str, times: Sequence[float]) -> list[int]:
    """How many elements ``queue`` held at each of ``times`` (in order), by its events in
    ``trace`` (its initial elements, its enqueues, its dequeues) up to that time.

    >>> from simsync.trace import ResourceEvent
    >>> t = Trace(resources=[ResourceEvent("q", "enqueue", "q/initial", "", 0, 0.0, 0, 2),
    ...                      ResourceEvent("q", "dequeue_elements", "d", "main", 0, 1.0, 0, 2),
    ...                      ResourceEvent("q", "enqueue", "e", "r", 0, 1.5, 0, 1)])
    >>> queue_held(t, "q", [0.5, 1.2, 2.0])
    [2, 0, 1]
    """
    events = [e for e in trace.resources if e.resource == queue]
    held, index, found = 0, 0, []
    for time in times:
        while index < len(events) and events[index].time <= time:
            event = events[index]
            held += event.amount if ACTIONS[event.action].puts else -event.amount
            index += 1
        found.append(held)
    return found


def _input_queues(
    queues: Mapping[str, Mapping[str, Any]],
    simulation: Simulation,
    runs: Sequence[Mapping[str, Any]],
    threads: Mapping[str, str],
) -> list[dict[str, Any]]:
    """Per looping client and FIFO queue its steps take from (``queues``: the import's
    report's ``input_queues``, how many elements a step takes from each): the steps that
    began with fewer elements in the queue than a step takes, measured and, where the
    simulation has the queue, simulated (else its dequeues never wait: none); ``keeps_up``
    each way is whether that was so in fewer than half of them."""
    found = []
    for thread, client in threads.items():
        starts = [s.start for s in simulation.trace.steps if s.client == client]
        for queue, about in sorted(queues.items()):
            take = int(about["takes"])
            measured = [
                size
                for run in runs
                for size in run["clients"].get(thread, {}).get("queues", {}).get(queue, [])
            ]
            if not measured:
                continue
            modelled = queue in simulation.graph.resources
            simulated = queue_held(simulation.trace, queue, starts) if modelled else []
            short = {
                "simulated": sum(1 for held in simulated if held < take),
                "measured": sum(1 for held in measured if held < take),
            }
            keeps_up = {
                "simulated": short["simulated"] < max(len(simulated), 1) / 2,
                "measured": short["measured"] < len(measured) / 2,
            }
            found.append(
                {
                    "client": client,
                    "queue": queue,
                    "takes": take,
                    "simulated_as_queue": modelled,
                    "steps": {"simulated": len(simulated), "measured": len(measured)},
                    "short": short,
                    "keeps_up": keeps_up,
                    "agree": keeps_up["simulated"] == keeps_up["measured"],
                }
            )
    return found


def crosscheck_program(
    path: str | os.PathLike[str],
    changes: WhatIf = AS_WRITTEN,
    *,
    runs: int = 3,
    traced: int = 10,
    untraced: int = 30,
    args: Sequence[str] = (),
    real_args: Sequence[str] | None = None,
    costs: str | os.PathLike[str] | None = None,
    refresh: bool = False,
    on_progress: Callable[[str], None] | None = None,
    tasks: Mapping[str, int] | None = None,
    task_flags: bool = True,
    devices: int | None = None,
) -> tuple[ProgramRun, dict[str, Any]]:
    """``simsync crosscheck PROGRAM.py``: predict from the imported graph (changed as
    ``changes`` asks), then run the program ``runs`` more times, each a fresh process
    (``real_args`` its command line there, ``args`` when None), and compare
    (:func:`program_report`). The imported graph and its runs' graphs must be one
    graph: a what-if is checked against the program built that way by ``real_args``. A
    program written for a cluster runs as its cluster of ``tasks`` every time, and with
    ``devices`` on that many logical devices every time."""
    from simsync.tf_backend.program.convert import convert
    from simsync.tf_backend.program.load import measure_program

    if runs < 1:
        raise UsageError(f"crosscheck {path}: runs {runs}: at least one run is compared")
    say = on_progress or (lambda message: None)
    say("Importing the program (its costs: cached, or measured now)...")
    imported = import_program(
        path, args=args, costs=costs, refresh=refresh, tasks=tasks, task_flags=task_flags,
        devices=devices,
    )  # fmt: skip
    run = simulate_program(path, changes, steps=PREDICTION_STEPS, imported=imported, gpus=False)
    measured, keys = [], set()
    first: tuple[Any, tuple[Graph, dict[str, Any]]] | None = None  # with real_args: converted
    for number in range(runs):
        say(f"Running the program on TensorFlow, run {number + 1} of {runs}...")
        key, data, found = measure_program(
            path, args=args if real_args is None else real_args, traced=traced,
            untraced=untraced, tasks=tasks, task_flags=task_flags, devices=devices,
        )  # fmt: skip
        keys.add(key)
        measured.append(found)
        if real_args is not None and first is None:  # refused before the other runs
            first = data, convert(data, None)
            _built_as_asked(path, first[1][0], run.simulation.graph, real_args)
    seen = {r[0] for one in measured for c in one["clients"].values()
            for step in c["steps"] for r in step}  # fmt: skip
    if real_args is None:
        # the graph as imported, among the ops its profile saw run (of a cluster's, those
        # its runs traced: its tasks but the first trace none, as cluster.traces says)
        checked, timed = imported.graph, set(imported.profile.get("ops", {}))
        if tasks is not None:
            timed &= seen
        threads = {c["thread"]: c["name"] for c in imported.data["clients"]}
        queues = imported.report.get("input_queues", {})
    else:
        # the graph the program built with real_args (the first run's: the runs' one graph,
        # as same_graph says), among the ops its runs traced
        assert first is not None  # runs >= 1, checked above
        data, (checked, built) = first
        queues = built.get("input_queues", {})
        timed = seen
        threads = {c["thread"]: c["name"] for c in data["clients"]}
    profiled = [
        wall
        for client in imported.profile.get("clients", {}).values()
        for wall in client.get("process_walls", ())
    ]
    report = program_report(
        checked, run.simulation, measured, threads, timed, profiled, queues=queues
    )
    report["source"] = str(path)
    kept = imported.report.get("costs_file")  # the cost cache's file, or None
    report["costs"] = imported.costs_from + ("" if kept is None else f" ({kept})")
    report["what_if"] = run.changes
    report["args"] = list(args)
    report["real_args"] = list(args if real_args is None else real_args)
    report["tasks"] = dict(tasks) if tasks is not None else None  # a cluster's, each run
    report["same_graph"] = keys == {imported.key} if real_args is None else len(keys) == 1
    return run, report


def _built_as_asked(path: Any, built: Graph, asked: Graph, real_args: Sequence[str]) -> None:
    """Refuse, in one line, a what-if's cross-check whose program, run with ``real_args``,
    built other towers or threads than the what-if predicts for."""
    for what, count in (
        ("towers", lambda g: len(g.towers)),
        ("threads", lambda g: sum(1 for c in g.clients if not c.daemon)),
    ):
        if count(built) != count(asked):
            ran = " ".join(real_args) or "no arguments"
            raise UsageError(
                f"crosscheck {path}: the prediction has {count(asked)} {what}, but the "
                f"program run with {ran} built {count(built)}: after --, give it what makes it "
                f"build {count(asked)}"
            )
