"""A scenario followed through `crosscheck` has its graph built once: TensorFlow's side and
the simulator's take the graph the check built, not the scenario again."""

from __future__ import annotations

from pathlib import Path

import pytest

import simsync.patterns as patterns
from simsync.crosscheck.choose import crosscheck
from simsync.scenario import load_scenario

pytestmark = pytest.mark.tf

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("example", ["four_towers.toml", "async_workers.toml"])
def test_crosscheck_builds_each_scenarios_graph_once(monkeypatch, example: str) -> None:
    built: list[object] = []
    for mode, builder in list(patterns._BUILDERS.items()):

        def counted(scenario, builder=builder):
            built.append(scenario)
            return builder(scenario)

        monkeypatch.setitem(patterns._BUILDERS, mode, counted)
    scenario = load_scenario(ROOT / "examples" / example).with_run(steps=3)
    crosscheck(scenario, profile=None, warmup=1)
    assert built, "no graph was built"
    again = [s for i, s in enumerate(built) if s in built[:i]]
    assert again == [], f"{len(again)} of {len(built)} builds were of a scenario built before"
    assert built.count(scenario) == 1
