"""Engine speed: simsync's event rate beside bare SimPy, and how run time grows with towers.

Measurements taken in the same run on the same machine (sections 3 to 6, the end-to-end
ones, are described in ``docs/performance.md`` and in their functions' docstrings):

1. **Event rate vs bare SimPy.** simsync's :class:`~simsync.engine.Engine` runs the tower
   pattern (``simsync.patterns.build_towers``, numerics off) and a hand-written SimPy model
   runs the *same* workload the way a SimPy user would write it (no simsync code). Both count
   events the same way (bare SimPy on :class:`~simsync.engine.CountingEnvironment`, the engine
   on its subclass ``EngineEnvironment``, which processes the same events in SimPy's order). The
   design target is ours/bare >= 0.5. A row with numerics on
   (softmax model) shows what real parameter values cost.
2. **Scaling with towers.** towers = 1, 2, 4, ..., 1024 at a fixed number of steps: wall
   seconds, events and seconds per tower-step (constant if the engine grows linearly), and the
   peak memory of the largest run.

Usage::

    python bench/engine.py            # full run, a minute or two on two cores
    python bench/engine.py --quick    # smaller sizes, for a smoke test
    python bench/engine.py --numerics-only --runs 5   # section 4 only
    python bench/engine.py --async-run 1000 1000      # one async run end to end (section 5)
    python bench/engine.py --breakdown --runs 3       # where an async update's time goes (6)
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import gc
import os
import platform
import random
import resource
import statistics
import time
import tracemalloc
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

import simpy

from simsync.engine import CountingEnvironment, Engine
from simsync.engine.collection import with_collector_paused
from simsync.ir import Graph
from simsync.kinds import KINDS, check_graph, sgd_step
from simsync.kinds.forward import Forward
from simsync.numerics import ModelSpec, backward_many, batch_source, forward_many, init_params
from simsync.patterns import build, build_towers
from simsync.replay import add_values, replay
from simsync.scenario import ClusterConfig, ComputeConfig, LinkConfig, Scenario, TrainingConfig
from simsync.simulation import Simulation, simulate, summary
from simsync.trace import Trace

# -- the workload -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """One synchronous tower workload, in plain numbers both models can read."""

    towers: int
    steps: int
    distribution: str = "exponential"  # of each tower's compute time per step
    compute: float = 0.01  # mean seconds of forward + backward
    forward_fraction: float = 1 / 3
    read: float = 1e-4  # reading the variables on /cpu:0
    dequeue: float = 5e-4  # dequeuing a batch on the tower's GPU
    aggregate: float = 1e-3  # average_gradients on /cpu:0
    apply: float = 1e-3  # apply_gradients on /cpu:0
    bandwidth_gbps: float = 10.0
    latency_us: float = 5.0

    @property
    def tower_steps(self) -> int:
        return self.towers * self.steps

    def scenario(self) -> Scenario:
        """The same workload as a simsync scenario (parameter-server aggregation)."""
        cluster = ClusterConfig(
            devices=self.towers,
            speeds=(1.0,) * self.towers,
            link=LinkConfig(self.bandwidth_gbps, self.latency_us),
        )
        compute = ComputeConfig(
            distribution=self.distribution,
            mean=self.compute,
            forward_fraction=self.forward_fraction,
        )
        costs = {
            "read": self.read,
            "dequeue": self.dequeue,
            "aggregate": self.aggregate,
            "apply": self.apply,
        }
        return Scenario(name="bench", cluster=cluster, compute=compute, costs=costs).with_run(
            steps=self.steps
        )


@dataclass(frozen=True)
class Measurement:
    """One timed simulation: events processed, wall seconds (of which in the garbage
    collector) and the simulated seconds it reached."""

    events: int
    seconds: float
    simulated: float
    gc_seconds: float = 0.0

    @property
    def rate(self) -> float:
        return self.events / self.seconds


# -- bare SimPy: the same workload, written directly --------------------------------------------


@dataclass
class BareDevice:
    """A device: one op at a time, and one transfer at a time in and out."""

    compute: simpy.Resource
    out_port: simpy.Resource
    in_port: simpy.Resource


class BareTowers:
    """Synchronous towers as a SimPy user would write them: one process per tower per step."""

    def __init__(self, env: simpy.Environment, workload: Workload, param_bytes: int) -> None:
        self.env, self.workload, self.param_bytes = env, workload, param_bytes
        self.rng = random.Random(0)
        self.cpu = self.device()
        self.gpus = [self.device() for _ in range(workload.towers)]
        self.step_times: list[float] = []

    def device(self) -> BareDevice:
        env = self.env
        return BareDevice(simpy.Resource(env), simpy.Resource(env), simpy.Resource(env))

    def compute_time(self) -> float:
        mean = self.workload.compute
        if self.workload.distribution == "constant":
            return mean
        return self.rng.expovariate(1 / mean)

    def transfer(self, src: BareDevice, dst: BareDevice) -> Generator[simpy.Event, Any, None]:
        with src.out_port.request() as out_port:
            yield out_port
            with dst.in_port.request() as in_port:
                yield in_port
                yield self.env.timeout(self.param_bytes / (self.workload.bandwidth_gbps * 1e9 / 8))
        yield self.env.timeout(self.workload.latency_us * 1e-6)

    def send_variables(self, gpu: BareDevice) -> Generator[simpy.Event, Any, None]:
        with self.cpu.compute.request() as cpu:
            yield cpu
            yield self.env.timeout(self.workload.read)
        yield from self.transfer(self.cpu, gpu)

    def tower(self, gpu: BareDevice) -> Generator[simpy.Event, Any, None]:
        env, compute = self.env, self.compute_time()
        forward = compute * self.workload.forward_fraction
        variables = env.process(self.send_variables(gpu))
        with gpu.compute.request() as device:
            yield device
            yield env.timeout(self.workload.dequeue)
            yield variables
            yield env.timeout(forward)
            yield env.timeout(compute - forward)
        yield from self.transfer(gpu, self.cpu)

    def client(self) -> Generator[simpy.Event, Any, None]:
        env = self.env
        for _ in range(self.workload.steps):
            start = env.now
            yield env.all_of([env.process(self.tower(gpu)) for gpu in self.gpus])
            for seconds in (self.workload.aggregate, self.workload.apply):
                with self.cpu.compute.request() as cpu:
                    yield cpu
                    yield env.timeout(seconds)
            self.step_times.append(env.now - start)


# -- running both -------------------------------------------------------------------------------


class GcTimer:
    """Seconds spent in the cyclic garbage collector while the timer is active."""

    def __init__(self) -> None:
        self.seconds, self._started = 0.0, 0.0

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started

    def __enter__(self) -> GcTimer:
        gc.collect()  # start every measurement from the same, clean heap
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)


def parameter_bytes(graph: Graph) -> int:
    """Bytes of one gradient transfer in the simsync graph (the bare model sends the same)."""
    return graph.tensor("tower_0/gradients", "average_gradients").nbytes


def run_ours(workload: Workload, numerics: bool = False) -> Measurement:
    """Build the tower graph, then time ``Engine.run`` (and, with numerics, the replay of its
    trace, as :func:`simulate` runs them: one pause of the collector); planning and checking
    are not counted."""
    scenario = workload.scenario()
    graph = build_towers(scenario)
    model = scenario.model if numerics else None
    if model is not None:
        check_graph(graph, model)
    engine = Engine(graph, steps=workload.steps)

    def stages(_: None) -> Trace:
        trace = engine.run()
        if model is not None:
            add_values(graph, trace, model, engine.seed)
        return trace

    with GcTimer() as collector:
        started = time.perf_counter()
        trace = with_collector_paused(stages, None)
        seconds = time.perf_counter() - started
    return Measurement(trace.events, seconds, trace.steps[-1].end, collector.seconds)


def run_bare(workload: Workload, param_bytes: int, counted: bool = True) -> Measurement:
    """Time the bare SimPy model, setup included (a handful of Resources).

    ``counted=False`` runs it on a plain :class:`simpy.Environment` (events reported as 0), to
    show what counting costs."""
    with GcTimer() as collector:
        started = time.perf_counter()
        env = CountingEnvironment() if counted else simpy.Environment()
        model = BareTowers(env, workload, param_bytes)
        env.process(model.client())
        env.run()
        seconds = time.perf_counter() - started
    events = env.events if isinstance(env, CountingEnvironment) else 0
    return Measurement(events, seconds, env.now, collector.seconds)


def interleaved(
    runs: int, measures: Sequence[Callable[[], Measurement]]
) -> list[list[Measurement]]:
    """``runs`` rounds of every measure, one after the other, so that a slow spell of a shared
    machine hits all of them alike. One list of results per measure."""
    results: list[list[Measurement]] = [[] for _ in measures]
    for _ in range(runs):
        for column, measure in zip(results, measures, strict=True):
            column.append(measure())
    return results


def best(results: Sequence[Measurement]) -> Measurement:
    """The fastest run: noise on a shared machine only ever adds time."""
    return min(results, key=lambda m: m.seconds)


def paired_ratio(ours: Sequence[Measurement], bare: Sequence[Measurement]) -> float:
    """Median over rounds of ours' event rate / bare's event rate, measured side by side."""
    return statistics.median(o.rate / b.rate for o, b in zip(ours, bare, strict=True))


def paired_speed(ours: Sequence[Measurement], bare: Sequence[Measurement]) -> float:
    """Median over rounds of bare's wall time / ours' for the same workload (work rate ratio)."""
    return statistics.median(b.seconds / o.seconds for o, b in zip(ours, bare, strict=True))


# -- tables -------------------------------------------------------------------------------------


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain-text table: first column left-aligned, the rest right-aligned."""
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        parts = [
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(r) for r in rows)])


def machine() -> str:
    """The machine and versions the numbers belong to."""
    return (
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, {platform.system()} "
        f"{platform.release()}\npython {platform.python_version()} "
        f"({platform.python_implementation()}), simpy {simpy.__version__}"
    )


# -- 1. event rate vs bare SimPy ----------------------------------------------------------------

RATE_HEADERS = (
    "model",
    "events",
    "events/tower-step",
    "best wall s",
    "events/s",
    "tower-steps/s",
    "ours/bare events/s",
    "ours/bare tower-steps/s",
)


def rate_cells(
    label: str, ours: Sequence[Measurement], bare: Sequence[Measurement] | None, n: int
) -> list[str]:
    """One row: best-of figures, and the paired ratios against ``bare`` if given."""
    m = best(ours)
    cells = [label, f"{m.events:,}", f"{m.events / n:.1f}", f"{m.seconds:.3f}"]
    cells += [f"{m.rate:,.0f}", f"{n / m.seconds:,.0f}"]
    if bare is None:
        return [*cells, "-", "-"]
    return [*cells, f"{paired_ratio(ours, bare):.2f}", f"{paired_speed(ours, bare):.2f}"]


def rate_group(
    workload: Workload, runs: int, param_bytes: int, numerics: bool
) -> tuple[list[list[str]], float, float]:
    """Rows for one cost distribution; the paired ratio and the counting overhead."""
    measures: list[Callable[[], Measurement]] = [
        lambda: run_bare(workload, param_bytes),
        lambda: run_bare(workload, param_bytes, counted=False),
        lambda: run_ours(workload),
    ]
    if numerics:
        measures.append(lambda: run_ours(workload, numerics=True))
    bare, uncounted, ours, *rest = interleaved(runs, measures)
    if workload.distribution == "constant":
        check_same_workload(best(ours), best(bare))
    n, kind = workload.tower_steps, workload.distribution
    rows = [rate_cells(f"bare SimPy, {kind}", bare, None, n)]
    rows.append(rate_cells(f"simsync, {kind}", ours, bare, n))
    for numeric in rest:
        rows.append(rate_cells(f"simsync, {kind}, numerics on", numeric, bare, n))
    overhead = statistics.median(
        c.seconds / u.seconds for c, u in zip(bare, uncounted, strict=True)
    )
    return rows, paired_ratio(ours, bare), overhead


def check_same_workload(ours: Measurement, bare: Measurement) -> None:
    """With constant costs both models must end at the same simulated time."""
    if abs(ours.simulated - bare.simulated) > 1e-9:
        raise AssertionError(
            f"workloads differ: simulated {ours.simulated} vs {bare.simulated} seconds"
        )


def report_rates(workload: Workload, runs: int) -> None:
    print(
        f"\n1. Event rate vs bare SimPy: {workload.towers} towers x {workload.steps} steps, "
        f"{runs} interleaved rounds; best wall time, ratios are medians over rounds"
    )
    print(
        "   (bare SimPy counts events with simsync.engine.CountingEnvironment, ours with its "
        "subclass EngineEnvironment: the same count; ours times Engine.run)\n"
    )
    param_bytes = parameter_bytes(build_towers(workload.scenario()))
    rows, verdicts, overheads = [], [], []
    for distribution, numerics in (("constant", False), ("exponential", True)):
        w = dataclasses.replace(workload, distribution=distribution)
        group, ratio, overhead = rate_group(w, runs, param_bytes, numerics)
        rows += group
        overheads.append(overhead)
        verdict = "meets" if ratio >= 0.5 else "MISSES"
        verdicts.append(f"{distribution}: ours/bare events/s = {ratio:.2f} -> {verdict} the 0.5")
    print(table(RATE_HEADERS, rows))
    print("\nconstant costs: both models end at the same simulated time (checked)")
    print("\n".join(f"{v} target" for v in verdicts))
    print(
        f"counting overhead: CountingEnvironment makes bare SimPy "
        f"{statistics.median(overheads):.2f}x slower than simpy.Environment (paid by both)"
    )


# -- 2. scaling with towers ---------------------------------------------------------------------

SCALING_HEADERS = (
    "towers",
    "build s",
    "run s",
    "events",
    "events/tower-step",
    "us/tower-step",
    "events/s",
    "gc %",
    "bare us/tower-step",
    "ours/bare time",
)


@dataclass(frozen=True)
class ScalingPoint:
    """One size of the scaling run: ours and bare (best of the rounds) and the build time."""

    towers: int
    steps: int
    build: float
    ours: Measurement
    bare: Measurement

    def per_tower_step(self, m: Measurement, without_gc: bool = False) -> float:
        return (m.seconds - (m.gc_seconds if without_gc else 0.0)) / (self.towers * self.steps)

    def cells(self) -> list[str]:
        ours, n = self.ours, self.towers * self.steps
        return [
            str(self.towers),
            f"{self.build:.3f}",
            f"{ours.seconds:.3f}",
            f"{ours.events:,}",
            f"{ours.events / n:.1f}",
            f"{self.per_tower_step(ours) * 1e6:.1f}",
            f"{ours.rate:,.0f}",
            f"{100 * ours.gc_seconds / ours.seconds:.0f}",
            f"{self.per_tower_step(self.bare) * 1e6:.1f}",
            f"{ours.seconds / self.bare.seconds:.2f}",
        ]


def scaling_point(towers: int, steps: int, rounds: int) -> ScalingPoint:
    """Build once (timed), then run ours and bare ``rounds`` times, interleaved."""
    workload = Workload(towers, steps)
    started = time.perf_counter()
    graph = build_towers(workload.scenario())
    build = time.perf_counter() - started
    param_bytes = parameter_bytes(graph)
    ours, bare = interleaved(
        rounds, [lambda: run_ours(workload), lambda: run_bare(workload, param_bytes)]
    )
    return ScalingPoint(towers, steps, build, best(ours), best(bare))


def report_scaling(sizes: list[int], steps: int, rounds: int) -> None:
    print(
        f"\n2. Scaling with towers: {steps} steps, numerics off, exponential costs, "
        f"best of {rounds} interleaved rounds\n"
    )
    points = {towers: scaling_point(towers, steps, rounds) for towers in sizes}
    print(table(SCALING_HEADERS, [p.cells() for p in points.values()]))
    small, large = points[16 if 16 in points else sizes[0]], points[sizes[-1]]

    def growth(m: Callable[[ScalingPoint], float]) -> str:
        return f"{m(large) / m(small):.2f}"

    print(
        f"\ntime per tower-step at {large.towers} towers / at {small.towers} towers "
        f"(1.00 = linear growth): simsync {growth(lambda p: p.per_tower_step(p.ours))}, "
        f"bare SimPy {growth(lambda p: p.per_tower_step(p.bare))}; without GC time: "
        f"simsync {growth(lambda p: p.per_tower_step(p.ours, True))}, "
        f"bare SimPy {growth(lambda p: p.per_tower_step(p.bare, True))}"
    )


def report_memory(towers: int, steps: int) -> None:
    """Peak Python memory of the largest run (tracemalloc, untimed) and the process peak."""
    gc.collect()
    tracemalloc.start()
    workload = Workload(towers, steps)
    engine = Engine(build_towers(workload.scenario()), steps=steps)
    engine.run()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(
        f"peak memory, {towers} towers x {steps} steps: {peak / 2**20:.1f} MiB traced by "
        f"tracemalloc (build + run); process max RSS {maxrss:.1f} MiB"
    )


def report_end_to_end(sizes: list[int], steps: int) -> None:
    """Whole simulations as ``simsync simulate`` runs them (build, plan, run, summary), for
    both aggregations: a step that grows faster than the graph shows here."""
    print(f"\n3. End to end (build + plan + run + summary), {steps} steps, numerics off\n")
    rows, per_tower = [], {}
    for towers in sizes:
        cells = [str(towers)]
        for aggregation in ("parameter_server", "allreduce"):
            scenario = dataclasses.replace(
                Workload(towers, steps).scenario(), training=TrainingConfig(aggregation=aggregation)
            )
            started = time.perf_counter()
            summary(simulate(scenario, numerics=False))
            seconds = time.perf_counter() - started
            per_tower[aggregation, towers] = seconds / towers
            cells.append(f"{seconds:.2f}")
        rows.append(cells)
    print(table(["towers", "parameter server s", "all-reduce s"], rows))
    low, high = sizes[0], sizes[-1]
    for aggregation in ("parameter_server", "allreduce"):
        growth = per_tower[aggregation, high] / per_tower[aggregation, low]
        print(f"{aggregation}: seconds per tower at {high} / at {low} towers = {growth:.2f}")


# -- 4. end to end with numerics, beside bare SimPy ---------------------------------------------


def timed(run: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    result = run()
    return result, time.perf_counter() - started


def async_scenario(workers: int, updates: int) -> Scenario:
    return Scenario(
        "async-bench",
        cluster=ClusterConfig(workers),
        compute=ComputeConfig("exponential", 0.01),
        training=TrainingConfig(mode="async"),
    ).with_run(steps=updates)


def report_numerics(towers: int, steps: int, workers: int, updates: int, runs: int) -> None:
    """``summary(simulate(...))`` with numerics on, as ``simsync simulate --json`` runs it,
    interleaved with the bare SimPy model of the same synchronous workload, whose event rate is
    the yardstick. Sync: the bare model's events for the same workload over our wall time, as a
    fraction of bare SimPy's own events/s (the same as bare seconds / our seconds; our engine
    processes fewer events for the same work, so its own count would flatter bare SimPy).
    Async: updates per second over bare SimPy's events per second."""
    workload = Workload(towers, steps)
    param_bytes = parameter_bytes(build_towers(workload.scenario()))
    sync, asynchronous = workload.scenario(), async_scenario(workers, updates)
    rows, sync_ratios, async_ratios = [], [], []
    for _ in range(runs):
        bare = run_bare(workload, param_bytes)
        result, sync_seconds = timed(lambda: summary(simulate(sync)))
        ledger, async_seconds = timed(lambda: summary(simulate(asynchronous, detail=False)))
        bare_rate = bare.events / bare.seconds
        sync_ratios.append(bare.seconds / sync_seconds)
        async_ratios.append(ledger["updates_applied"] / async_seconds / bare_rate)
        rows.append([
            f"{bare_rate:,.0f}", f"{bare.seconds:.2f}", f"{sync_seconds:.2f}",
            f"{result['events']:,}", f"{sync_ratios[-1]:.2f}", f"{async_seconds:.2f}",
            f"{ledger['updates_applied'] / async_seconds:,.0f}", f"{async_ratios[-1]:.3f}",
        ])  # fmt: skip
    print(
        f"\n4. End to end with numerics on: sync {towers} towers x {steps} steps, async "
        f"{workers} workers x {updates} updates each, {runs} interleaved rounds\n"
    )
    headers = [
        "bare events/s", "bare s", "sync s", "sync events", "sync ratio", "async s",
        "updates/s", "updates/bare event",
    ]  # fmt: skip
    print(table(headers, rows))
    sync_ratio, async_ratio = statistics.median(sync_ratios), statistics.median(async_ratios)
    print(
        f"sync: {sync_ratio:.2f} of bare SimPy's event rate (median; spread "
        f"{min(sync_ratios):.2f}-{max(sync_ratios):.2f}) -> "
        f"{'meets' if sync_ratio >= 0.5 else 'MISSES'} the 0.5 target"
    )
    print(
        f"async: {async_ratio:.3f} updates per bare SimPy event (median; spread "
        f"{min(async_ratios):.3f}-{max(async_ratios):.3f}) -> "
        f"{'meets' if async_ratio >= 0.05 else 'MISSES'} the 0.05 target"
    )


def report_async_run(workers: int, updates: int) -> None:
    """One asynchronous simulation end to end with numerics on, as ``simsync simulate --json``
    runs it (``summary(simulate(...))``, ``detail=False``): wall seconds, updates per second,
    events, mean staleness and the process's peak RSS. Run it in a fresh process: the peak RSS
    is the process's own."""
    scenario = async_scenario(workers, updates)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    result, seconds = timed(lambda: summary(simulate(scenario, detail=False)))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    applied = result["updates_applied"]
    print(
        f"\n5. Asynchronous training end to end with numerics on: {workers:,} workers x "
        f"{updates:,} updates each, detail off\n"
        f"{seconds:.1f} s, {applied:,} updates applied ({result['updates_dropped']:,} dropped), "
        f"{applied / seconds:,.0f} updates/s, {result['events']:,} events; mean staleness "
        f"{result['staleness']['mean']:.1f} (N - 1 = {workers - 1}); peak RSS {peak:.0f} MiB "
        f"({before:.0f} MiB before the run)"
    )


def _rules_timed(spent: dict[str, float], calls: dict[str, int]) -> dict[str, Any]:
    """Replace every kind in the registry by a copy whose numpy rules add their time to
    ``spent`` and their calls to ``calls`` (by kind); return the originals, to put back."""
    saved = dict(KINDS)

    def timed(name: str, rule: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any) -> Any:
            started = time.perf_counter()
            try:
                return rule(*args)
            finally:
                spent[name] = spent.get(name, 0.0) + time.perf_counter() - started
                calls[name] = calls.get(name, 0) + 1

        return run

    for name, kind in saved.items():
        KINDS[name] = dataclasses.replace(
            kind,
            numpy=None if kind.numpy is None else timed(name, kind.numpy),
            numpy_batch=None if kind.numpy_batch is None else timed(name, kind.numpy_batch),
            numpy_chain=None if kind.numpy_chain is None else timed(name, kind.numpy_chain),
        )
    return saved


def arithmetic_alone(spec: ModelSpec, updates: int, batch: int) -> float:
    """Seconds of the numpy arithmetic that ``updates`` asynchronous updates need, with nothing
    around it: a batch drawn per run, the batched forward and backward passes in batches of
    ``batch`` runs (each run at its own parameter version, as asynchronous workers read them),
    and one SGD step per parameter per update."""
    first = init_params(spec, 0)
    versions = [{k: v + 1e-3 * i for k, v in first.items()} for i in range(batch)]
    source, rate = batch_source(spec, 0), spec.learning_rate
    started = time.perf_counter()
    for start in range(0, updates, batch):
        runs = range(start, min(start + batch, updates))
        drawn = [source(run % 500, run // 500, 1)[0] for run in runs]
        params = versions[: len(drawn)]
        losses, handles = forward_many(spec, params, drawn)
        forwards = [Forward(*args) for args in zip(losses, params, drawn, handles, strict=True)]
        for grads in backward_many(spec, forwards):
            for name, value in first.items():
                sgd_step(value, grads[name], rate)
    return time.perf_counter() - started


def report_breakdown(workers: int, updates: int, runs: int) -> None:
    """Where the time of ``summary(simulate(...))`` goes for asynchronous training, numerics
    on, detail off, in microseconds per update and in bare SimPy events (its time per event
    measured in the same rounds): the engine alone (numerics off), the replay of its trace
    (collector paused, as the engine runs it), the part of the replay spent inside the kinds'
    numpy rules (the arithmetic and its per-op Python; a second replay, with the rules
    wrapped), and the summary. Interleaved rounds; median and spread."""
    scenario = async_scenario(workers, updates)
    bare_load = Workload(256, 200)  # section 4's yardstick
    param_bytes = parameter_bytes(build_towers(bare_load.scenario()))
    parts: dict[str, list[float]] = {}

    def note(part: str, seconds: float) -> None:
        parts.setdefault(part, []).append(seconds)

    for _ in range(runs):
        bare = run_bare(bare_load, param_bytes)
        note("bare", bare.seconds / bare.events)
        graph = build(scenario)
        engine = Engine(graph, steps=updates, seed=scenario.run.seed, detail=False)
        trace, seconds = timed(engine.run)
        note("engine", seconds)
        # the replay as the engine runs it: with the collector paused
        values = functools.partial(replay, graph, trace, scenario.model, scenario.run.seed)
        _, seconds = with_collector_paused(timed, values)
        note("replay", seconds)
        spent: dict[str, float] = {}
        calls: dict[str, int] = {}
        saved = _rules_timed(spent, calls)
        try:
            with_collector_paused(timed, values)
        finally:
            KINDS.clear()
            KINDS.update(saved)
        note("rules", sum(spent.values()))
        batch = round(workers * updates / calls["forward"])
        note("arithmetic", arithmetic_alone(scenario.model, workers * updates, batch))
        sim = Simulation(scenario, graph, trace, 0.0)
        _, seconds = timed(functools.partial(summary, sim))
        note("summary", seconds)
        _, seconds = timed(lambda: summary(simulate(scenario, detail=False)))
        note("end to end", seconds)
    count = workers * updates
    bare_us = statistics.median(parts["bare"]) * 1e6
    parts["bookkeeping"] = [r - k for r, k in zip(parts["replay"], parts["rules"], strict=True)]
    rows = []
    labels = {
        "engine": "engine (Engine.run, numerics off)",
        "replay": "replay of the trace (values, losses)",
        "rules": "  inside the kinds' numpy rules",
        "bookkeeping": "  the replay's own bookkeeping",
        "arithmetic": "  the arithmetic alone, without the replay",
        "summary": "summary",
        "end to end": "end to end: summary(simulate(...))",
    }
    for part, label in labels.items():
        per_update = [seconds / count * 1e6 for seconds in parts[part]]
        middle = statistics.median(per_update)
        rows.append([
            label, f"{middle:.1f}", f"{min(per_update):.1f}-{max(per_update):.1f}",
            f"{middle / bare_us:.1f}",
        ])  # fmt: skip
    print(
        f"\n6. Where an asynchronous update's time goes: {workers} workers x {updates} updates, "
        f"numerics on, detail off, {runs} interleaved rounds; bare SimPy "
        f"{bare_us:.2f} us per event (median)\n"
    )
    print(table(["part", "us per update", "spread", "bare SimPy events"], rows))
    print(
        "the 0.05 target allows 20 bare SimPy events per update, end to end; the rules' "
        "time includes their per-op Python"
    )


# -- main ---------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        allow_abbrev=False,
        description="Measure simsync's engine: its event rate beside a bare SimPy model of the "
        "same tower workload (design target: ours/bare >= 0.5), and how run time grows with "
        "the number of towers (1 to 1024). Prints plain-text tables.",
        epilog="Results are written up in docs/performance.md. The full run takes a few "
        "minutes on two cores.",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smaller sizes and fewer rounds (about ten seconds, for a smoke test)",
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=None,
        metavar="N",
        help="interleaved rounds per event-rate measurement (default 7, or 3 with --quick)",
    )
    parser.add_argument(
        "--numerics-only",
        action="store_true",
        help="run only section 4 (end to end with numerics on, beside bare SimPy)",
    )
    parser.add_argument(
        "--breakdown",
        action="store_true",
        help="run only section 6: where an asynchronous update's time goes (engine, replay, "
        "the kinds' numpy rules, summary), 500 workers x 100 updates",
    )
    parser.add_argument(
        "--async-run",
        type=int,
        nargs=2,
        metavar=("WORKERS", "UPDATES"),
        help="run only one asynchronous simulation end to end with numerics on (section 5), "
        "e.g. 1000 1000",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    runs = args.runs or (3 if args.quick else 7)
    rate_workload = Workload(16, 40) if args.quick else Workload(16, 100)
    largest, steps, rounds = (256, 5, 1) if args.quick else (1024, 20, 3)
    sizes = [2**k for k in range(largest.bit_length())]
    print(machine())
    if args.async_run:
        report_async_run(*args.async_run)
        return
    if args.numerics_only:
        report_numerics(256, 200, 500, 100, args.runs or 3)
        return
    if args.breakdown:
        report_breakdown(500, 100, args.runs or 3)
        return
    report_rates(rate_workload, runs)
    report_scaling(sizes, steps, rounds)
    report_memory(largest, steps)
    report_end_to_end([16, 64, 256] if args.quick else [16, 64, 256, 1024], steps)
    if args.quick:
        report_numerics(64, 20, 100, 20, runs)
    else:
        report_numerics(256, 200, 500, 100, 3)


if __name__ == "__main__":
    main()
