"""Simulate a user's own TensorFlow program, as written or changed ("what if").

The program is imported (:func:`simsync.tf_backend.program.import_program`: run in the
sandbox until its training loop is known, costs from a few traced steps, cached), changed as
asked (:mod:`simsync.tf_backend.program.whatif`), and simulated by the engine as any graph is.
:func:`program_summary` is the JSON of ``simsync simulate PROGRAM.py --json``: the engine's
summary (towers, sync points, step time, who waited for whom) and ``ops``, ``source``, where
the shared ops were made, what was grouped and ignored, and each what-if's line.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simsync.engine import Simulation, simulate, summary
from simsync.ir import Graph
from simsync.scenario import ClusterConfig, Scenario
from simsync.tf_backend.program import Imported, import_program
from simsync.tf_backend.program.load import PROGRAM_SUFFIXES
from simsync.tf_backend.program.whatif import with_link, with_speeds, with_towers

__all__ = ["WhatIf", "is_program", "program_summary", "simulate_program", "what_if"]


@dataclass(frozen=True)
class WhatIf:
    """Changes to an imported graph; None (or empty) leaves it as the program built it."""

    towers: int | None = None
    speeds: tuple[float, ...] = ()
    bandwidth_gbps: float | None = None
    latency_us: float | None = None


@dataclass
class ProgramRun:
    """An imported program, the graph simulated (changed as asked) and the simulation."""

    imported: Imported
    graph: Graph
    simulation: Simulation
    changes: list[str] = field(default_factory=list)


def is_program(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` names a TensorFlow program (or a MetaGraphDef), not a scenario.

    >>> is_program("train.py"), is_program("model.meta"), is_program("two_towers.toml")
    (True, True, False)
    """
    return Path(path).suffix in PROGRAM_SUFFIXES


def what_if(graph: Graph, changes: WhatIf) -> tuple[Graph, list[str]]:
    """``graph`` changed as ``changes`` asks, and one line per change for the report."""
    lines = []
    if changes.towers is not None:
        graph, line = with_towers(graph, changes.towers)
        lines.append(line)
    if changes.speeds:
        graph, line = with_speeds(graph, list(changes.speeds))
        lines.append(line)
    if changes.bandwidth_gbps is not None or changes.latency_us is not None:
        graph, line = with_link(graph, changes.bandwidth_gbps, changes.latency_us)
        lines.append(line)
    return graph, lines


def simulate_program(
    path: str | os.PathLike[str],
    changes: WhatIf = WhatIf(),
    *,
    steps: int = 100,
    seed: int = 0,
    costs: str | os.PathLike[str] | None = None,
    refresh: bool = False,
    imported: Imported | None = None,
) -> ProgramRun:
    """Import the program at ``path`` (unless ``imported`` is given), change it, and simulate
    ``steps`` steps (timing only: values through the program's own ops are not computed)."""
    imported = imported or import_program(path, costs=costs, refresh=refresh)
    graph, lines = what_if(imported.graph, changes)
    towers = max(len(graph.towers), 1)
    scenario = Scenario(
        Path(path).stem, source=str(path), cluster=ClusterConfig(devices=towers)
    ).with_run(steps=steps, seed=seed)
    sim = simulate(scenario, numerics=False, graph=graph)
    return ProgramRun(imported, graph, sim, lines)


def program_summary(run: ProgramRun) -> dict[str, Any]:
    """The JSON of ``simsync simulate PROGRAM.py --json``."""
    result: dict[str, Any] = dict(summary(run.simulation))
    report = run.imported.report
    result["source"] = report["source"]
    result["ops"] = len(run.graph)
    result["imported"] = {
        "tensorflow_ops": report["tensorflow_ops"],
        "ops": report["ops"],
        "grouped": report["grouped"],
        "ignored": report["ignored"],
        "not_run_by_type": report["not_run_by_type"],
        "folded_by_tensorflow": report["folded_by_tensorflow"],
        "tower_rule": report["tower_rule"],
        "towers_in_program": report["towers"],
        "clients": report["clients"],
        "queue_runners": report["queue_runners"],
        "collections": report["collections"],
        "costs": report["costs"],
        "values": "not computed: the program's ops are simulated for timing only",
    }
    result["sync_points_made_in"] = {
        name: report["made_in"].get(name) for name in result["sync_points"]
    }
    result["what_if"] = run.changes
    return result
