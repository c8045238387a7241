"""Asynchronous training at scale: how the simulator's cost grows with workers and updates.

An async scenario (``[training] mode = "async"``) gives every device a worker client that loops
read -> forward -> backward -> apply on shared variables; ``[run] steps`` is updates per worker.
Each configuration (workers x updates per worker, numerics off, exponential compute with mean
10 ms) runs in a **fresh Python process**, so its peak RSS (``resource.getrusage``) is its own
and one run's heap cannot slow the next. For each it reports the run's wall time
(``Simulation.wall_seconds``: ``Engine.run`` alone; building the graph is shown apart),
events, events/s, updates/s, microseconds per update, peak RSS and the RSS growth during
``simulate`` per update, and the mean staleness beside the theory for N homogeneous random
workers (N - 1).

The largest workers x largest updates is the headline (1,000 x 1,000 = 1,000,000 updates by
default). One extra row keeps full detail (op and access records) to show what it costs.

Usage::

    python bench/async_scale.py            # full run, about 5 minutes on two cores
    python bench/async_scale.py --quick    # smaller sizes, under half a minute
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import simpy

from simsync.scenario import ClusterConfig, ComputeConfig, Scenario, TrainingConfig
from simsync.simulation import simulate
from simsync.trace import staleness_stats


@dataclass(frozen=True)
class Config:
    """One measured size: workers, updates per worker, and whether full detail is kept."""

    workers: int
    updates: int
    detail: bool = False

    def label(self) -> str:
        return (
            f"{self.workers} x {self.updates} ({self.workers * self.updates:,} updates), "
            f"detail {'on' if self.detail else 'off'}"
        )


@dataclass(frozen=True)
class Result:
    """What the child process reports for one configuration."""

    config: Config
    build_seconds: float  # graph build (simulate's total minus Engine.run)
    run_seconds: float  # Engine.run
    events: int
    updates: int  # ledger entries (applied + dropped)
    dropped: int
    staleness: float  # mean over applied updates
    rss_before: int  # bytes: peak RSS after imports, before simulate
    rss_peak: int  # bytes: peak RSS right after simulate (before any analysis)

    @property
    def us_per_update(self) -> float:
        return 1e6 * self.run_seconds / self.updates

    @property
    def growth_per_update(self) -> float:
        return (self.rss_peak - self.rss_before) / self.updates


# -- one configuration, in a child process ------------------------------------------------------


def maxrss() -> int:
    """The process's peak resident set size in bytes (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def measure(config: Config) -> Result:
    """Run one configuration in this process (called in a fresh child)."""
    scenario = Scenario(
        "async-scale",
        cluster=ClusterConfig(config.workers),
        compute=ComputeConfig("exponential", 0.01),
        training=TrainingConfig(mode="async"),
    ).with_run(config.updates, seed=0)
    before = maxrss()
    started = time.perf_counter()
    sim = simulate(scenario, numerics=False, detail=config.detail)
    total = time.perf_counter() - started
    peak = maxrss()  # before staleness_stats builds its own lists
    ledger = staleness_stats(sim.trace)
    return Result(
        config,
        total - sim.wall_seconds,
        sim.wall_seconds,
        sim.trace.events,
        len(sim.trace.updates),
        ledger["updates_dropped"],
        ledger["mean"],
        before,
        peak,
    )


def run_fresh(config: Config) -> Result:
    """Measure ``config`` in a new interpreter; it prints its Result as JSON."""
    command = [sys.executable, __file__, "--child", json.dumps(asdict(config))]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{config.label()} failed:\n{done.stderr}")
    fields = json.loads(done.stdout.strip().splitlines()[-1])
    return Result(**{**fields, "config": Config(**fields["config"])})


def best_of(config: Config, repeat: int, index: int, count: int) -> Result:
    """The fastest of ``repeat`` fresh runs (noise on a shared machine only adds time), with a
    progress line per run on stderr."""
    results = []
    for attempt in range(repeat):
        print(
            f"[{index}/{count}] {config.label()}, run {attempt + 1}/{repeat} ...",
            end="",
            file=sys.stderr,
            flush=True,
        )
        started = time.perf_counter()
        results.append(run_fresh(config))
        print(f" {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
    return min(results, key=lambda r: r.run_seconds)


# -- tables -------------------------------------------------------------------------------------


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain-text table: first column left-aligned, the rest right-aligned."""
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        parts = [
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(parts).rstrip()

    return "\n".join([line(headers), "  ".join("-" * w for w in widths), *map(line, rows)])


def machine() -> str:
    return (
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, {platform.system()} "
        f"{platform.release()}\npython {platform.python_version()} "
        f"({platform.python_implementation()}), simpy {simpy.__version__}"
    )


def mib(n: float) -> str:
    return f"{n / 2**20:.1f}"


def staleness_cells(r: Result) -> list[str]:
    theory = r.config.workers - 1
    ratio = f"{r.staleness / theory:.3f}" if theory else "-"
    return [f"{r.staleness:.1f}", str(theory), ratio]


HEADERS = (
    "workers x updates",
    "detail",
    "updates",
    "build s",
    "run s",
    "events",
    "events/update",
    "events/s",
    "updates/s",
    "us/update",
    "peak RSS MiB",
    "RSS growth B/update",
    "staleness",
    "N-1",
    "ratio",
)


def row(r: Result) -> list[str]:
    c, per_second = r.config, 1 / r.run_seconds
    return [
        f"{c.workers} x {c.updates}",
        "on" if c.detail else "off",
        f"{r.updates:,}",
        f"{r.build_seconds:.2f}",
        f"{r.run_seconds:.2f}",
        f"{r.events:,}",
        f"{r.events / r.updates:.1f}",
        f"{r.events * per_second:,.0f}",
        f"{r.updates * per_second:,.0f}",
        f"{r.us_per_update:.0f}",
        mib(r.rss_peak),
        f"{r.growth_per_update:,.0f}",
        *staleness_cells(r),
    ]


def report(results: dict[Config, Result], headline: Config, detailed: Config) -> None:
    h = results[headline]
    print(
        f"\nHeadline: {headline.workers:,} workers x {headline.updates:,} updates each "
        f"= {h.updates:,} updates ({h.dropped} dropped), numerics off, detail off"
    )
    print(
        f"  Engine.run {h.run_seconds:.1f} s (graph build {h.build_seconds:.1f} s), "
        f"{h.events:,} events, {h.events / h.run_seconds:,.0f} events/s, "
        f"{h.updates / h.run_seconds:,.0f} updates/s, {h.us_per_update:.0f} us/update"
    )
    print(
        f"  peak RSS {mib(h.rss_peak)} MiB ({mib(h.rss_before)} MiB after imports); "
        f"mean staleness {h.staleness:.1f} vs N-1 = {headline.workers - 1} "
        f"(ratio {staleness_cells(h)[2]})"
    )
    print("\nAll configurations, each in a fresh process (s per M updates = us/update):\n")
    print(table(HEADERS, [row(r) for r in results.values()]))

    plain = [r for r in results.values() if not r.config.detail]
    most = max(c.updates for c in results if not c.detail)
    at_most = sorted((r for r in plain if r.config.updates == most), key=lambda r: r.config.workers)
    if len(at_most) > 1:
        low, high = at_most[0], at_most[-1]
        print(
            f"\nus/update at {high.config.workers} workers / at {low.config.workers} workers "
            f"({most} updates each; 1.00 = cost per update independent of N): "
            f"{high.us_per_update / low.us_per_update:.2f}"
        )
    for workers in sorted({r.config.workers for r in plain}):
        sizes = sorted(
            (r for r in plain if r.config.workers == workers), key=lambda r: r.config.updates
        )
        if len(sizes) > 1 and sizes[-1].updates > sizes[0].updates:
            small, large = sizes[0], sizes[-1]
            grown = (large.rss_peak - large.rss_before) - (small.rss_peak - small.rss_before)
            extra = grown / (large.updates - small.updates)
            print(
                f"marginal peak RSS per update at {workers} workers, detail off "
                f"({small.config.updates} -> {large.config.updates} updates each): "
                f"{extra:,.0f} B"
            )
    twin = results.get(Config(detailed.workers, detailed.updates))
    d = results[detailed]
    if twin is not None:
        print(
            f"detail on vs off at {detailed.workers} x {detailed.updates}: RSS growth "
            f"{d.growth_per_update:,.0f} vs {twin.growth_per_update:,.0f} B/update, "
            f"run {d.run_seconds:.2f} vs {twin.run_seconds:.2f} s"
        )


# -- main ---------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        allow_abbrev=False,
        description="Measure simsync on asynchronous training at scale: wall time, events, "
        "updates/s, peak memory and mean staleness for workers x updates per worker, each "
        "configuration in a fresh process. The largest workers x largest updates is the "
        "headline. Prints plain-text tables; progress goes to stderr.",
        epilog="Results are written up in docs/performance.md. The full run takes about five "
        "minutes on two cores.",
    )
    parser.add_argument(
        "--workers",
        type=int,
        nargs="+",
        metavar="N",
        help="worker counts (default 10 100 1000; with --quick 10 100 1000)",
    )
    parser.add_argument(
        "--updates",
        type=int,
        nargs="+",
        metavar="U",
        help="updates per worker (default 100 1000; with --quick 10 50)",
    )
    parser.add_argument(
        "--detail",
        type=int,
        nargs=2,
        metavar=("N", "U"),
        help="size of the extra detail=True row (default 100 1000; with --quick 100 50)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="small sizes, for a smoke test (well under a minute)"
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="R",
        help="fresh runs per configuration, best time reported (default 1)",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)  # internal: measure one config
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    if args.child:
        result = measure(Config(**json.loads(args.child)))
        print(json.dumps(asdict(result)))
        return
    workers = sorted(set(args.workers or [10, 100, 1000]))
    updates = sorted(set(args.updates or ([10, 50] if args.quick else [100, 1000])))
    detailed = Config(*(args.detail or ([100, 50] if args.quick else [100, 1000])), detail=True)
    configs = [Config(n, u) for u in updates for n in workers] + [detailed]
    headline = Config(workers[-1], updates[-1])
    started = time.perf_counter()
    print(machine())
    results = {c: best_of(c, args.repeat, i, len(configs)) for i, c in enumerate(configs, 1)}
    print(
        f"({time.perf_counter() - started:.0f} s in all; exponential compute, mean 10 ms, "
        f"seed 0; best of {args.repeat} fresh run(s) per configuration)"
    )
    report(results, headline, detailed)


if __name__ == "__main__":
    main()
