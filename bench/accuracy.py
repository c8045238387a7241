"""How well does the simulator predict TensorFlow on this machine, with default settings?

Every scenario here runs on TensorFlow (logical CPU devices sharing the cores, or GPUs) and in
the simulator, exactly as `simsync crosscheck` does by default: the prediction uses this
machine's profile, measured once on its reference scenario (one tower, softmax 32x10) and
cached. None of these scenarios is that one: they are held out.

- **Synchronous** (towers 1, 2, 4, 8; a straggler; random compute; all-reduce; a larger MLP):
  the predicted median step time against the measured one (untraced steps).
- **Asynchronous** (2 and 4 worker threads, locked and lock-free applies, bounded staleness):
  the mean staleness of the real ledger's updates and the updates per second.

Each scenario runs ``--runs`` times (default 3), the scenarios interleaved round by round, so
a slow spell of the machine does not fall on one scenario alone. The table gives, per
scenario, the median over the runs and the spread of the measured value across runs (the
machine's own noise), then each run's error; the summary the median and max over scenarios of
each scenario's median |error|.

    python bench/accuracy.py                   # 3 runs of every scenario (about 6 minutes)
    python bench/accuracy.py --runs 5 --recalibrate
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import statistics
import time
from typing import Any

from simsync.crosscheck import crosscheck
from simsync.scenario import (
    ClusterConfig,
    ComputeConfig,
    LinkConfig,
    ModelConfig,
    Scenario,
    TrainingConfig,
)
from simsync.simulation.calibrate import machine_profile

BASE = Scenario(
    "base",
    cluster=ClusterConfig(1, link=LinkConfig(bandwidth_gbps=16, latency_us=5)),
    compute=ComputeConfig(mean=0.010),
    model=ModelConfig(kind="softmax", features=16, classes=4, batch_size=16),
)


def sync(name: str, speeds: tuple[float, ...], **changes: Any) -> Scenario:
    cluster = dataclasses.replace(BASE.cluster, devices=len(speeds), speeds=speeds)
    return dataclasses.replace(BASE, name=name, cluster=cluster, **changes)


def asynchronous(name: str, workers: int, **training: Any) -> Scenario:
    cluster = dataclasses.replace(BASE.cluster, devices=workers, speeds=(1.0,) * workers)
    return dataclasses.replace(
        BASE,
        name=name,
        cluster=cluster,
        compute=ComputeConfig(distribution="exponential", mean=0.010),
        costs={"read": 2e-4, "apply": 5e-4},
        training=TrainingConfig(mode="async", **training),
    )


SYNC = [
    sync("1 tower, 20 ms", (1.0,), compute=ComputeConfig(mean=0.020)),
    sync("2 towers", (1.0, 1.0)),
    sync("4 towers", (1.0,) * 4),
    sync("8 towers, 5 ms", (1.0,) * 8, compute=ComputeConfig(mean=0.005)),
    sync("4 towers, one at half speed", (1.0, 1.0, 1.0, 0.5)),
    sync("4 towers, exponential", (1.0,) * 4, compute=ComputeConfig("exponential", 0.010)),
    sync("2 towers, all-reduce", (1.0, 1.0), training=TrainingConfig(aggregation="allreduce")),
    sync(
        "2 towers, MLP 64-256-10",
        (1.0, 1.0),
        model=ModelConfig(kind="mlp", features=64, hidden=(256,), classes=10, batch_size=64),
    ),
]
ASYNC = [
    asynchronous("2 workers, locked", 2, apply="locked"),
    asynchronous("4 workers, locked", 4, apply="locked"),
    asynchronous("4 workers, lock-free", 4),
    asynchronous("4 workers, bound 1", 4, apply="locked", staleness_bound=1),
]


def measure(runs: int, steps: int) -> dict[str, list[dict[str, float]]]:
    """Per scenario, per run: predicted and measured values."""
    results: dict[str, list[dict[str, float]]] = {s.name: [] for s in SYNC + ASYNC}
    for run in range(runs):
        for scenario in SYNC + ASYNC:
            report = crosscheck(scenario.with_run(steps=steps, seed=run)).report
            if report["check"] == "racing_clients":
                staleness, throughput = report["staleness"], report["throughput"]
                row = {
                    "predicted": staleness["predicted"]["mean"],
                    "measured": staleness["measured"]["mean"],
                    "predicted_rate": throughput["predicted"],
                    "measured_rate": throughput["measured"],
                }
            else:
                timing = report["timing"]
                row = {
                    "predicted": timing["predicted_median_step_time"],
                    "measured": timing["measured_median_step_time"],
                }
            results[scenario.name].append(row)
        print(f"  run {run + 1}/{runs} done", flush=True)
    return results


def _error(predicted: float, measured: float) -> float:
    return (predicted - measured) / measured if measured else float("nan")


def table(
    title: str, results: dict[str, list[dict[str, float]]], names: list[str], key: str, unit: str
) -> list[float]:
    """One section: per scenario the medians, the spread and each run's error; returns each
    scenario's median |error|."""
    scale = 1e3 if unit == "ms" else 1.0
    header = f"{'scenario':30s} {'measured':>9s} {'spread':>7s} {'predicted':>10s}  errors per run"
    print(f"\n{title} ({unit})\n{header}\n{'-' * (len(header) + 10)}")
    medians = []
    measured_key, predicted_key = ("measured", "predicted") if key == "" else (
        f"measured_{key}", f"predicted_{key}")  # fmt: skip
    for name in names:
        rows = results[name]
        measured = [r[measured_key] for r in rows]
        errors = [_error(r[predicted_key], r[measured_key]) for r in rows]
        middle = statistics.median(measured)
        spread = (max(measured) - min(measured)) / middle if middle else 0.0
        medians.append(abs(statistics.median(errors)))
        print(
            f"{name:30s} {middle * scale:9.2f} {spread * 100:6.0f}% "
            f"{statistics.median(r[predicted_key] for r in rows) * scale:10.2f}  "
            + " ".join(f"{e * 100:+6.1f}%" for e in errors)
        )
    print(
        f"median |error| {statistics.median(medians) * 100:.1f} %, "
        f"max {max(medians) * 100:.1f} % (each scenario's median over its runs)"
    )
    return medians


def main() -> None:
    parser = argparse.ArgumentParser(
        allow_abbrev=False,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--runs", type=int, default=3, help="runs per scenario (default 3)")
    parser.add_argument("--steps", type=int, default=20, help="traced steps per run (default 20)")
    parser.add_argument(
        "--recalibrate", action="store_true", help="measure this machine's profile first"
    )
    args = parser.parse_args()
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, python {platform.python_version()}"
    )
    profile = machine_profile(refresh=args.recalibrate)
    print(
        f"profile: {profile.source} (measured {profile.calibrated_on.get('measured')}): compute "
        f"x{profile.compute_scale:.3f}, sess.run {profile.session_run * 1e6:.0f} us, "
        f"{profile.host_cores} cores at {profile.core_efficiency:.2f} when all busy"
    )
    started = time.perf_counter()
    results = measure(args.runs, args.steps)
    print(f"({time.perf_counter() - started:.0f} s; {args.runs} runs of each scenario)")
    table("Synchronous: median step time", results, [s.name for s in SYNC], "", "ms")
    table("Asynchronous: mean staleness", results, [s.name for s in ASYNC], "", "updates")
    table("Asynchronous: updates per second", results, [s.name for s in ASYNC], "rate", "1/s")
    print("\n'spread': (max - min) / median of the measured value over the runs of a scenario")


if __name__ == "__main__":
    main()
