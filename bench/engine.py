"""Engine speed: simsync's event rate beside bare SimPy, and how run time grows with towers.

Two measurements, taken in the same run on the same machine:

1. **Event rate vs bare SimPy.** simsync's :class:`~simsync.engine.Engine` runs the tower
   pattern (``simsync.patterns.build_towers``, numerics off) and a hand-written SimPy model
   runs the *same* workload the way a SimPy user would write it (no simsync code). Both count
   events with :class:`~simsync.engine.CountingEnvironment`, so the counting overhead is the
   same on both sides. The design target is ours/bare >= 0.5. A row with numerics on
   (softmax model) shows what real parameter values cost.
2. **Scaling with towers.** towers = 1, 2, 4, ..., 1024 at a fixed number of steps: wall
   seconds, events and seconds per tower-step (constant if the engine grows linearly), and the
   peak memory of the largest run.

Usage::

    python bench/engine.py            # full run, a minute or two on two cores
    python bench/engine.py --quick    # smaller sizes, for a smoke test
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import random
import resource
import time
import tracemalloc
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

import simpy

from simsync.engine import CountingEnvironment, Engine
from simsync.ir import Graph
from simsync.patterns import build_towers, model_spec
from simsync.scenario import ClusterConfig, ComputeConfig, LinkConfig, Scenario

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
    """One timed simulation: events processed, wall seconds, simulated seconds."""

    events: int
    seconds: float
    simulated: float

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


def parameter_bytes(graph: Graph) -> int:
    """Bytes of one gradient transfer in the simsync graph (the bare model sends the same)."""
    return graph.tensor("tower_0/gradients", "average_gradients").nbytes


def run_ours(workload: Workload, numerics: bool = False) -> Measurement:
    """Build the tower graph, then time ``Engine.run`` alone (planning is not counted)."""
    scenario = workload.scenario()
    model = model_spec(scenario) if numerics else None
    engine = Engine(build_towers(scenario), steps=workload.steps, model=model)
    started = time.perf_counter()
    trace = engine.run()
    seconds = time.perf_counter() - started
    return Measurement(trace.events, seconds, trace.steps[-1].end)


def run_bare(workload: Workload, param_bytes: int) -> Measurement:
    """Time the bare SimPy model, setup included (it is a handful of Resources)."""
    started = time.perf_counter()
    env = CountingEnvironment()
    model = BareTowers(env, workload, param_bytes)
    env.process(model.client())
    env.run()
    seconds = time.perf_counter() - started
    return Measurement(env.events, seconds, env.now)


def median_of(runs: int, measure: Callable[[], Measurement]) -> Measurement:
    """Repeat a measurement; keep the run with the median wall time."""
    results = sorted((measure() for _ in range(runs)), key=lambda m: m.seconds)
    return results[len(results) // 2]


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


@dataclass
class RateRow:
    label: str
    measurement: Measurement
    tower_steps: int
    baseline: Measurement | None = field(default=None)

    def cells(self) -> list[str]:
        m = self.measurement
        cells = [
            self.label,
            f"{m.events:,}",
            f"{m.seconds:.3f}",
            f"{m.rate:,.0f}",
            f"{self.tower_steps / m.seconds:,.0f}",
        ]
        if self.baseline is None:
            return [*cells, "-", "-"]
        base = self.baseline
        per_step = base.seconds / m.seconds
        return [*cells, f"{m.rate / base.rate:.2f}", f"{per_step:.2f}"]


RATE_HEADERS = (
    "model",
    "events",
    "wall s",
    "events/s",
    "tower-steps/s",
    "ours/bare events/s",
    "ours/bare tower-steps/s",
)


def rate_rows(workload: Workload, runs: int) -> list[RateRow]:
    """Bare and ours for constant and exponential costs, then ours with numerics on."""
    param_bytes = parameter_bytes(build_towers(workload.scenario()))
    rows: list[RateRow] = []
    n = workload.tower_steps
    for distribution in ("constant", "exponential"):
        w = Workload(workload.towers, workload.steps, distribution=distribution)
        bare = median_of(runs, lambda w=w: run_bare(w, param_bytes))
        ours = median_of(runs, lambda w=w: run_ours(w))
        if distribution == "constant" and abs(ours.simulated - bare.simulated) > 1e-9:
            raise AssertionError(
                f"workloads differ: simulated {ours.simulated} vs {bare.simulated} seconds"
            )
        rows.append(RateRow(f"bare SimPy, {distribution}", bare, n))
        rows.append(RateRow(f"simsync, {distribution}", ours, n, bare))
    numerics = median_of(runs, lambda: run_ours(workload, numerics=True))
    rows.append(RateRow("simsync, exponential, numerics on", numerics, n, rows[2].measurement))
    return rows


def report_rates(workload: Workload, runs: int) -> None:
    print(
        f"\n1. Event rate vs bare SimPy: {workload.towers} towers x {workload.steps} steps, "
        f"median of {runs} runs"
    )
    print(
        "   (both count events with simsync.engine.CountingEnvironment; ours times "
        "Engine.run only)\n"
    )
    rows = rate_rows(workload, runs)
    print(table(RATE_HEADERS, [r.cells() for r in rows]))
    constant = rows[0].measurement.simulated
    print(f"\nsimulated time, constant costs: {constant:.6f} s in both models (checked equal)")
    for row in rows[1:4:2]:
        assert row.baseline is not None
        verdict = "meets" if row.measurement.rate >= 0.5 * row.baseline.rate else "MISSES"
        ratio = row.measurement.rate / row.baseline.rate
        print(f"{row.label}: ours/bare events/s = {ratio:.2f} -> {verdict} the 0.5 target")


# -- 2. scaling with towers ---------------------------------------------------------------------


def scaling_row(towers: int, steps: int) -> tuple[list[str], float]:
    """One size: build and run both models; the cells and ours' seconds per tower-step."""
    workload = Workload(towers, steps)
    started = time.perf_counter()
    graph = build_towers(workload.scenario())
    build = time.perf_counter() - started
    ours = run_ours(workload)
    bare = run_bare(workload, parameter_bytes(graph))
    per = ours.seconds / workload.tower_steps
    cells = [
        str(towers),
        f"{build:.3f}",
        f"{ours.seconds:.3f}",
        f"{ours.events:,}",
        f"{ours.events / workload.tower_steps:.1f}",
        f"{per * 1e6:.1f}",
        f"{ours.rate:,.0f}",
        f"{bare.seconds / workload.tower_steps * 1e6:.1f}",
    ]
    return cells, per


SCALING_HEADERS = (
    "towers",
    "build s",
    "run s",
    "events",
    "events/tower-step",
    "us/tower-step",
    "events/s",
    "bare us/tower-step",
)


def report_scaling(sizes: list[int], steps: int) -> None:
    print(
        f"\n2. Scaling with towers: {steps} steps, numerics off, exponential costs, one run each\n"
    )
    rows, per = [], {}
    for towers in sizes:
        cells, per[towers] = scaling_row(towers, steps)
        rows.append(cells)
    print(table(SCALING_HEADERS, rows))
    small, large = (16 if 16 in per else sizes[0]), sizes[-1]
    print(
        f"\ntime per tower-step at {large} towers / at {small} towers: "
        f"{per[large] / per[small]:.2f} (1.00 = linear growth)"
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


# -- main ---------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Measure simsync's engine: event rate beside a bare SimPy model of the "
        "same tower workload, and how run time grows with the number of towers.",
        epilog="Results are written up in docs/performance.md.",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smaller sizes and fewer repeats (seconds, for a smoke test)",
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=None,
        help="repeats per event-rate measurement, median kept (default 5, or 3 with --quick)",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    runs = args.runs or (3 if args.quick else 5)
    rate_workload = Workload(16, 50) if args.quick else Workload(16, 200)
    largest, steps = (256, 5) if args.quick else (1024, 20)
    sizes = [2**k for k in range(largest.bit_length())]
    print(machine())
    report_rates(rate_workload, runs)
    report_scaling(sizes, steps)
    report_memory(largest, steps)


if __name__ == "__main__":
    main()
