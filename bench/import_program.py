"""Import + simulate of a 4-tower TensorFlow program with about 1,000 TensorFlow ops per tower,
100 steps (issue 19's speed target: under 30 s on a 2-core machine, the profiled run
excluded), beside the scenario-built equivalent (4 towers of 4 coarse ops each).

    python bench/import_program.py

The first import profiles the program's graph (traced steps) and caches its costs; the timed
import is the second, from the cache: the sandboxed run of the program up to its loop, the
conversion and the simulation. Prints one JSON object.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from simsync.engine import simulate
from simsync.programs import program_summary, simulate_program
from simsync.scenario import ClusterConfig, Scenario
from simsync.tf_backend.program import import_program

PROGRAM = Path(__file__).parent / "programs" / "deep_towers.py"
STEPS = 100


def main() -> None:
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
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
