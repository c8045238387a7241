"""Import + simulate of a 4-tower TensorFlow program with about 1,000 TensorFlow ops per tower,
100 steps (issue 19's speed target: under 30 s on a 2-core machine, the profiled run
excluded), beside the scenario-built equivalent (4 towers of 4 coarse ops each).

    python bench/import_program.py [--rounds 3]

The first import profiles the program's graph (traced steps) and caches its costs; the timed
import is the second, from the cache: the sandboxed run of the program up to its loop, the
conversion and the simulation.

Then the engine's rate on the imported graph against a scenario-built graph with the same
number of ops (the tower pattern with as many towers as make that count; issue 21's target:
op executions per second within 2x), both simulated ``--rounds`` times, interleaved, timing
only (as ``simulate PROGRAM.py`` runs an imported graph). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from simsync.ir import Graph
from simsync.scenario import ClusterConfig, Scenario
from simsync.simulation import Simulation, simulate
from simsync.simulation.importing import import_program
from simsync.simulation.user_program import program_summary, simulate_program

PROGRAM = Path(__file__).parent / "programs" / "deep_towers.py"
STEPS = 100


def rate(run: Simulation) -> float:
    """Op executions per second of wall time, the engine's run (and nothing else) timed."""
    return len(run.trace.ops) / run.wall_seconds


def rates(imported: Graph, towers: int, rounds: int) -> dict[str, object]:
    """The engine's rate on the imported graph and on a scenario-built one with ``towers``
    towers (about as many ops), interleaved round by round (who goes first alternates)."""
    as_imported = Scenario("imported", cluster=ClusterConfig(len(imported.towers)))
    scenario = Scenario("same-size", cluster=ClusterConfig(towers)).with_run(steps=STEPS)
    contenders = {
        "imported": lambda: simulate(as_imported.with_run(steps=STEPS), numerics=False,
                                     graph=imported),
        "scenario": lambda: simulate(scenario, numerics=False),
    }  # fmt: skip
    found: dict[str, list[float]] = {"imported": [], "scenario": []}
    sizes: dict[str, int] = {}
    for round_ in range(rounds):
        names = list(contenders) if round_ % 2 == 0 else list(contenders)[::-1]
        for name in names:
            run = contenders[name]()
            found[name].append(rate(run))
            sizes[name] = len(run.graph)
    ratios = [s / i for s, i in zip(found["scenario"], found["imported"], strict=True)]
    return {
        "scenario_towers": towers,
        "ops_per_step": sizes,
        "imported_ops_per_second": [round(r) for r in found["imported"]],
        "scenario_ops_per_second": [round(r) for r in found["scenario"]],
        "scenario_over_imported": round(statistics.median(ratios), 2),
        "spread": [round(min(ratios), 2), round(max(ratios), 2)],
        "target": "within 2x",
        "verdict": "meets" if max(ratios) <= 2 else "MISSES" if min(ratios) > 2 else "around",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the rate")
    args = parser.parse_args()
    import_program(PROGRAM)  # profiled once, cached
    started = time.perf_counter()
    imported = import_program(PROGRAM)
    imported_at = time.perf_counter()
    run = simulate_program(PROGRAM, steps=STEPS, imported=imported)
    done = time.perf_counter()
    summary = program_summary(run)
    per_tower = imported.report["tensorflow_ops"] / max(len(run.graph.towers), 1)
    scenario = Scenario("four", cluster=ClusterConfig(4)).with_run(steps=STEPS)
    scenario_started = time.perf_counter()
    built = simulate(scenario, numerics=False)
    scenario_seconds = time.perf_counter() - scenario_started
    # the tower pattern builds 4 ops per tower and 2 besides (the average and the apply)
    same_size = max(1, round((len(run.graph) - 2) / 4))
    print(
        json.dumps(
            {
                "program": str(PROGRAM.name),
                "tensorflow_ops": imported.report["tensorflow_ops"],
                "tensorflow_ops_per_tower": round(per_tower),
                "ir_ops": len(run.graph),
                "towers": summary["towers"],
                "steps": STEPS,
                "import_seconds": round(imported_at - started, 2),
                "simulate_seconds": round(done - imported_at, 2),
                "total_seconds": round(done - started, 2),
                "target_seconds": 30,
                "scenario_equivalent": {
                    "ir_ops": len(built.graph),
                    "simulate_seconds": round(scenario_seconds, 3),
                },
                "engine_rate": rates(run.graph, same_size, args.rounds),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
