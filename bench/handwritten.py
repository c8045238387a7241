"""simsync against the script a SimPy user would write by hand for the same training.

The yardstick of the speed issue: SimPy processes for the devices and the clients, a
``Resource`` per device and a lock, numpy for the model's gradient and the SGD step, nothing
general. Each contender runs the same training end to end, as ``simsync simulate --json``
would (simsync: ``summary(simulate(scenario))``, building and summarising included; the script:
its own setup and loop), interleaved round by round in one process, so a slow spell of this
machine hits both. Reported: each round's seconds, and the work-rate ratio (script seconds /
simsync seconds), median and spread over the rounds.

- **sync**: 256 towers x 200 steps (``--sync T S``), a linear model (32 features, 10
  outputs, 32 examples per tower; ``--tiny``: 4 features, 4 examples), constant 10 ms of
  compute per tower (1/3 forward), free transfers and zero-cost ops around it. The script's
  towers draw the same batches (simsync's data source: data, not model) and compute the
  gradients and the averaged SGD step by hand; it must end at simsync's simulated time and
  with simsync's parameters (to 1e-9), or the benchmark stops: the two did the same work.
- **async**: 500 workers x 100 updates each (``--async W U``), softmax model, exponential
  compute (mean 10 ms), the locked apply: each worker reads the parameters, computes its
  gradient, then applies it under the lock. The draws differ from simsync's (the script has
  its own generator), so the check is the work: the same number of updates, and both mean
  stalenesses within 10 % of N - 1, the steady state of N workers (the script's come out a
  little lower than simsync's: 92.9 against 98.5 for 100 workers x 100 updates).

    python bench/handwritten.py                  # both, 3 interleaved rounds (about 1 minute)
    python bench/handwritten.py --rounds 5
    python bench/handwritten.py --sync 64 50 --async 100 50 --rounds 1   # a quick look
    python bench/handwritten.py --tiny           # 4 features, batches of 4: the engine alone
    python bench/handwritten.py --clock cpu      # CPU time, not wall time: a busy machine

The targets (the speed issue): sync >= 0.75, async >= 0.5 of the script's work rate.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

import numpy as np
import simpy

from simsync.numerics import ModelSpec, batch_source, init_params
from simsync.scenario import (
    ClusterConfig,
    ComputeConfig,
    LinkConfig,
    ModelConfig,
    Scenario,
    TrainingConfig,
)
from simsync.simulation import simulate, summary

SEED = 0
OUTPUTS, RATE = 10, 0.1


@dataclass(frozen=True)
class Size:
    """The model's features and each batch's examples: 32 and 32, or 4 and 4 (``--tiny``),
    where the numerics cost next to nothing and the engine's own cost per event shows."""

    features: int = 32
    batch: int = 32

    def spec(self, kind: str) -> ModelSpec:
        return ModelSpec(kind, self.features, OUTPUTS, batch_size=self.batch)

    def config(self, kind: str) -> ModelConfig:
        return ModelConfig(kind, self.features, OUTPUTS, batch_size=self.batch)


TINY = Size(4, 4)


# -- the model, by hand -------------------------------------------------------------------------


def gradients(kind: str, w: np.ndarray, b: np.ndarray, x: np.ndarray, y: np.ndarray) -> Any:
    """The gradients of the mean loss of one dense layer: squared error / 2 (linear), or
    softmax cross-entropy (y: class indices)."""
    out = x @ w + b
    if kind == "linear":
        grad = (out - y) / len(x)
    else:
        exp = np.exp(out - out.max(axis=1, keepdims=True))
        grad = exp / exp.sum(axis=1, keepdims=True)
        grad[np.arange(len(x)), y] -= 1.0
        grad /= len(x)
    return x.T @ grad, grad.sum(axis=0)


# -- sync: the tower loop -----------------------------------------------------------------------


def sync_scenario(towers: int, steps: int, size: Size) -> Scenario:
    return Scenario(
        "handwritten-sync",
        cluster=ClusterConfig(towers, link=LinkConfig(float("inf"), 0.0)),
        compute=ComputeConfig("constant", 0.01),
        costs={"read": 0.0, "dequeue": 0.0, "aggregate": 0.0, "apply": 0.0},
        model=size.config("linear"),
    ).with_run(steps=steps, seed=SEED)


def hand_sync(towers: int, steps: int, size: Size) -> tuple[dict[str, np.ndarray], float]:
    """The tower loop by hand: one GPU ``Resource`` per tower, a client that starts every
    tower's process each step and waits for all of them, then averages and applies."""
    spec = size.spec("linear")
    first = init_params(spec, SEED)
    w, b = first["layer_0/kernel"].copy(), first["layer_0/bias"].copy()
    batches = batch_source(spec, SEED)
    env = simpy.Environment()
    gpus = [simpy.Resource(env, 1) for _ in range(towers)]
    forward, backward = 0.01 / 3, 0.01 * 2 / 3

    def tower(i: int, batch: Any) -> Generator[simpy.Event, Any, Any]:
        with gpus[i].request() as granted:
            yield granted
            yield env.timeout(forward)
            grads = gradients("linear", w, b, batch.x, batch.y)
            yield env.timeout(backward)
        return grads

    def client() -> Generator[simpy.Event, Any, None]:
        nonlocal w, b
        for step in range(steps):
            drawn = batches(0, step, towers)
            done = yield env.all_of([env.process(tower(i, drawn[i])) for i in range(towers)])
            grads = [done[p] for p in done.events]
            w = w - RATE * np.mean([g[0] for g in grads], axis=0)
            b = b - RATE * np.mean([g[1] for g in grads], axis=0)

    env.process(client())
    env.run()
    return {"layer_0/kernel": w, "layer_0/bias": b}, env.now


def ours_sync(towers: int, steps: int, size: Size) -> tuple[dict[str, np.ndarray], float]:
    sim = simulate(sync_scenario(towers, steps, size))
    summary(sim)  # as simsync simulate --json does
    return dict(sim.trace.params), max(s.end for s in sim.trace.steps)


def same_sync(hand: tuple[Any, float], ours: tuple[Any, float]) -> None:
    (hand_params, hand_end), (our_params, our_end) = hand, ours
    if abs(hand_end - our_end) > 1e-9:
        raise SystemExit(f"sync: the script ended at {hand_end} s, simsync at {our_end} s")
    for name, value in our_params.items():
        diff = float(np.max(np.abs(hand_params[name] - value)))
        if diff > 1e-9:
            raise SystemExit(f"sync: {name} differs by {diff:.3g} from simsync's")


# -- async: workers updating under a lock ------------------------------------------------------


def async_scenario(workers: int, updates: int, size: Size) -> Scenario:
    return Scenario(
        "handwritten-async",
        cluster=ClusterConfig(workers),
        compute=ComputeConfig("exponential", 0.01),
        model=size.config("softmax"),
        training=TrainingConfig(mode="async"),
    ).with_run(steps=updates, seed=SEED)


def hand_async(workers: int, updates: int, size: Size) -> tuple[int, float]:
    """Asynchronous workers by hand: each reads the parameters (their version), computes its
    gradient on its own device for an exponential time, then applies it under the lock.
    Returns the updates applied and their mean staleness."""
    spec = size.spec("softmax")
    first = init_params(spec, SEED)
    params = {"w": first["layer_0/kernel"].copy(), "b": first["layer_0/bias"].copy()}
    batches = batch_source(spec, SEED)
    rng = np.random.default_rng(SEED)
    env = simpy.Environment()
    lock = simpy.Resource(env, 1)
    version, stale = 0, []

    def worker(i: int) -> Generator[simpy.Event, Any, None]:
        nonlocal version
        for step in range(updates):
            with lock.request() as held:  # the locked read
                yield held
                w, b, read = params["w"], params["b"], version
            batch = batches(i, step, 1)[0]
            yield env.timeout(rng.exponential(0.01))
            gw, gb = gradients("softmax", w, b, batch.x, batch.y)
            with lock.request() as held:  # the locked apply
                yield held
                params["w"] = params["w"] - RATE * gw
                params["b"] = params["b"] - RATE * gb
                stale.append(version - read)
                version += 1

    for i in range(workers):
        env.process(worker(i))
    env.run()
    return version, statistics.fmean(stale)


def ours_async(workers: int, updates: int, size: Size) -> tuple[int, float]:
    result = summary(simulate(async_scenario(workers, updates, size), detail=False))
    return result["updates_applied"], result["staleness"]["mean"]


def same_async(hand: tuple[int, float], ours: tuple[int, float], workers: int) -> None:
    if hand[0] != ours[0]:
        raise SystemExit(f"async: the script applied {hand[0]} updates, simsync {ours[0]}")
    for who, stale in (("the script", hand[1]), ("simsync", ours[1])):
        if abs(stale - (workers - 1)) > 0.1 * (workers - 1):
            raise SystemExit(f"async: {who}'s mean staleness {stale:.2f}, not near {workers - 1}")


# -- the rounds ---------------------------------------------------------------------------------


#: what a round is timed with: wall time, or (``--clock cpu``) this process's CPU time, which a
#: machine shared with other jobs inflates less (both contenders run in this one thread)
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
clock = CLOCKS["wall"]


def timed(run: Callable[[], Any]) -> tuple[Any, float]:
    started = clock()
    result = run()
    return result, clock() - started


def contest(
    name: str,
    hand: Callable[[], Any],
    ours: Callable[[], Any],
    same: Callable[[Any, Any], None],
    rounds: int,
    target: float,
) -> None:
    hand_seconds, our_seconds, ratios = [], [], []
    for round_ in range(rounds):  # alternate who goes first: drift hits both alike
        order = [("hand", hand), ("ours", ours)]
        done = dict((who, timed(run)) for who, run in (order if round_ % 2 == 0 else order[::-1]))
        same(done["hand"][0], done["ours"][0])
        hand_seconds.append(done["hand"][1])
        our_seconds.append(done["ours"][1])
        ratios.append(hand_seconds[-1] / our_seconds[-1])
    ratio = statistics.median(ratios)
    verdict = "meets" if min(ratios) >= target else "MISSES" if max(ratios) < target else "around"
    print(
        f"{name}: script {', '.join(f'{s:.2f}' for s in hand_seconds)} s; simsync "
        f"{', '.join(f'{s:.2f}' for s in our_seconds)} s\n"
        f"  work rate simsync/script {ratio:.2f} (median of {rounds}; spread "
        f"{min(ratios):.2f}-{max(ratios):.2f}) -> {verdict} the {target} target"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sync", nargs=2, type=int, default=(256, 200), metavar=("T", "S"))
    parser.add_argument("--async", dest="asynchronous", nargs=2, type=int,
                        default=(500, 100), metavar=("W", "U"))  # fmt: skip
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="a model of 4 features and batches of 4: the numerics cost next to nothing, so "
        "the engine's own cost per event is what is measured",
    )
    parser.add_argument(
        "--clock",
        choices=sorted(CLOCKS),
        default="wall",
        help="time each round by the wall clock, or by this process's CPU time (fairer on a "
        "machine busy with other jobs)",
    )
    args = parser.parse_args()
    global clock
    clock = CLOCKS[args.clock]
    towers, steps = args.sync
    workers, updates = args.asynchronous
    size = TINY if args.tiny else Size()
    model = f"{size.features} features, batches of {size.batch}"
    print(f"simsync from {os.path.dirname(simulate.__code__.co_filename)}; {args.clock} clock")
    print(f"sync: {towers} towers x {steps} steps, linear model ({model}), numerics on")
    contest(
        "sync",
        lambda: hand_sync(towers, steps, size),
        lambda: ours_sync(towers, steps, size),
        same_sync,
        args.rounds,
        0.75,
    )
    print(f"async: {workers} workers x {updates} updates each, softmax model ({model}), "
          "numerics on")  # fmt: skip
    contest(
        "async",
        lambda: hand_async(workers, updates, size),
        lambda: ours_async(workers, updates, size),
        lambda hand, ours: same_async(hand, ours, workers),
        args.rounds,
        0.5,
    )


if __name__ == "__main__":
    main()
