"""The straggler mark of the sync-point table: only where one tower is really last more often."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from rich.console import Console

from simsync.scenario import load_scenario
from simsync.simulation import simulate, summary
from simsync.trace import straggler
from simsync.viz import SummaryView

ROOT = Path(__file__).resolve().parent.parent


def marked(result: dict[str, Any]) -> list[str]:
    """The towers the sync table marks as the straggler."""
    out = io.StringIO()
    Console(file=out, width=100, color_system=None).print(SummaryView(result).sync_table())
    return [line.split("│")[2].strip() for line in out.getvalue().splitlines() if "◀" in line]


def synthetic(last: dict[str, int], steps: int) -> dict[str, Any]:
    """A summary in which every tower waited a little, and ``last`` says who was last."""
    return {
        "steps": steps,
        "step_time": {"mean": 0.027},
        "wait": {"average_gradients": {tower: 0.01 for tower in last}},
        "waited_for": {"average_gradients": last},
    }


def test_a_half_speed_tower_is_marked() -> None:
    result = summary(simulate(load_scenario(ROOT / "examples" / "four_towers.toml")))
    assert result["waited_for"]["average_gradients"]["tower_3"] == result["steps"]
    assert marked(result) == ["tower_3"]


def test_a_near_tie_is_not_a_straggler() -> None:
    # the new-user trial: the top tower last 259 times against another's 256, of 2,000 steps
    last = {f"tower_{i}": n for i, n in enumerate([259, 256, 250, 248, 247, 247, 246, 247])}
    assert sum(last.values()) == 2000
    assert marked(synthetic(last, 2000)) == [] and straggler(last) == ""


def test_a_tie_is_not_a_straggler() -> None:
    last = {"tower_0": 10, "tower_1": 10, "tower_2": 0}
    assert marked(synthetic(last, 20)) == [] and straggler(last) == ""


def test_a_clear_lead_over_the_next_tower_is_a_straggler() -> None:
    # 3 standard deviations of a sign test: 70 - 30 = 40 > 3 * sqrt(100) = 30; 60 - 40 is not
    assert straggler({"tower_0": 70, "tower_1": 30}) == "tower_0"
    assert straggler({"tower_0": 60, "tower_1": 40}) == ""
    assert marked(synthetic({"tower_0": 30, "tower_1": 70}, 100)) == ["tower_1"]


def test_equal_random_towers_over_many_steps_have_no_straggler() -> None:
    """Eight equal towers with random compute (lesson 3's scenario, 2,000 steps): whoever is
    most often last only drew the longest times a few more times."""
    path = ROOT / "lessons" / "03-as-slow-as-the-slowest-tower" / "random_8.toml"
    result = summary(simulate(load_scenario(path), numerics=False))
    last = result["waited_for"]["average_gradients"]
    assert max(last.values()) > min(last.values())  # some tower was most often last...
    assert marked(result) == []  # ...but not clearly: no mark


def test_equal_towers_one_a_transfer_later_arrive_together() -> None:
    """Lesson 1's two equal towers: tower_1's input leaves the variables' port after
    tower_0's, so it is counted last in every step, by a wait the table rounds to 0.000 ms.
    The table says they arrived together (as lesson 7's equal towers, none ever later) and
    why one is counted last, not a bare 20/20 a learner reads as a straggler."""
    path = ROOT / "lessons" / "01-building-is-not-running" / "two_towers.toml"
    result = summary(simulate(load_scenario(path), numerics=False))
    assert result["waited_for"]["average_gradients"]["tower_1"] == result["steps"]
    out = io.StringIO()
    Console(file=out, width=80, color_system=None).print(SummaryView(result).sync_table())
    rows = [line for line in out.getvalue().splitlines() if "│" in line]
    (first,) = [line for line in rows if "tower_0" in line]
    assert first.split("│")[5].strip() == "together", out.getvalue()
    assert "the one counted last got there only a moment later" in " ".join(out.getvalue().split())
    assert marked(result) == []


def test_workers_that_meet_for_one_apply_have_a_mean_step_not_a_mean_update() -> None:
    """SyncReplicas' workers (lesson 6's three) each wait for the one apply of every step:
    the note under the critical path speaks of a step and its slowest compute, not of the
    asynchronous workers' updates (a review found it did, as for three asynchronous
    workers)."""
    path = ROOT / "lessons" / "06-one-apply-per-step" / "three_workers.toml"
    result = summary(simulate(load_scenario(path), numerics=False))
    assert result["workers"] == 3 and result["updating_clients"] == 1
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(SummaryView(result))
    said = out.getvalue()
    assert "The mean step (" in said and "waits for its slowest compute" in said, said
    assert "The mean update" not in said and "other workers' work" not in said, said


def test_the_simulators_own_rows_say_they_are_its_own() -> None:
    """A learner read 'events' and 'wall time (s)' in the summary as the training's: the
    rows say they are the simulator's own work."""
    path = ROOT / "lessons" / "01-building-is-not-running" / "two_towers.toml"
    result = summary(simulate(load_scenario(path), numerics=False))
    out = io.StringIO()
    Console(file=out, width=80, color_system=None).print(SummaryView(result).numbers_table())
    rows = [line.strip() for line in out.getvalue().splitlines()]
    assert any(row.startswith("simulator: events") for row in rows), rows
    assert any(row.startswith("simulator: its own time (s)") for row in rows), rows
    assert not any(row.startswith(("events", "wall time")) for row in rows), rows
