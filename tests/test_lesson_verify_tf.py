"""Every lesson's verify step, run three times on real TensorFlow: no verdict may flip.

A verdict shown to a learner must survive this machine's noise: from one run to the next a
finding may go from an answer to "inconclusive here", never from one answer to another, and
the checks (structure, values, the protocol) must agree every time. Each lesson runs in a
process of its own, as `simsync learn` would.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from simsync.crosscheck.evidence import INCONCLUSIVE, contradictions
from simsync.tutor.content import lessons_root, load_lessons

pytestmark = pytest.mark.tf

RUNS = 3
LESSONS = [lesson for lesson in load_lessons() if any(s.kind == "verify" for s in lesson.steps)]

THREE_RUNS = """
import json, sys
from pathlib import Path
from simsync.crosscheck.evidence import verdicts
from simsync.tutor.runner import verify_report
print(json.dumps([verdicts(verify_report(Path(sys.argv[1]))) for _ in range(int(sys.argv[2]))]))
"""


def _verify_path(number: int) -> Path:
    lesson = next(lesson for lesson in load_lessons() if lesson.number == number)
    step = next(s for s in lesson.steps if s.kind == "verify")
    return lesson.scenario_path(step)


def test_every_lesson_has_its_verify_step_checked() -> None:
    assert lessons_root().is_dir()
    assert [lesson.number for lesson in LESSONS] == list(range(1, 8))


@pytest.mark.parametrize("number", [lesson.number for lesson in LESSONS])
def test_no_verdict_flips_over_three_runs(number: int) -> None:
    ran = subprocess.run(
        [sys.executable, "-c", THREE_RUNS, str(_verify_path(number)), str(RUNS)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    runs = json.loads(ran.stdout.strip().splitlines()[-1])
    assert len(runs) == RUNS
    assert contradictions(runs) == {}, runs
    for run in runs:  # the checks are never left open, and always agree
        checked = ("structure", "values", "one apply per step")
        checks = {k: v for k, v in run.items() if k in checked}
        assert checks and set(checks.values()) == {"agree"}, run
    if number == 1:  # the lesson's claim: the towers ran side by side, every time
        assert {run["side by side"] for run in runs} == {"side by side"}, runs
    if number in (4, 5):  # stale updates, every time
        assert {run["stale"] for run in runs} == {"yes"}, runs
    assert all(answer for run in runs for answer in run.values())
    assert INCONCLUSIVE not in {runs[0].get("structure"), runs[0].get("values")}


def test_a_verify_step_runs_no_more_towers_than_the_machine_has_cores() -> None:
    """Four towers on two cores with no GPU take turns, as four GPUs would not: a lesson's
    check runs two of them, the slow one kept, and says so in one line above its tables."""
    from simsync.crosscheck import crosscheck
    from simsync.scenario import load_scenario
    from simsync.scenario.profile import Profile

    scenario = load_scenario(_verify_path(2)).with_run(steps=3)
    assert scenario.towers == 4 and min(scenario.cluster.speeds) == 0.5
    two_cores = Profile({}, 1.0, 0.0, 5e-4, 30.0, host_cores=2)
    report = crosscheck(scenario, profile=two_cores, warmup=1, fit_cores=True).report
    assert report["check"] == "one_client"
    said = report.get("fewer_towers", "")
    assert said.startswith("This machine has 2 cores and no GPU: 4 towers would take turns")
    assert said.endswith("the towers tower_0 and tower_2 (speeds 1 and 0.5).")
    # who arrived last, in the lesson's names: the slow tower is tower_2 there too (a learner
    # read "tower_1", the run's own name of it, and took it for the 0.8-speed tower)
    (found,) = report["evidence"]["arrivals"]
    assert set(found["last"]) == set(found["mean_wait"]) == {"tower_0", "tower_2"}
    assert found["expected"] == "tower_2"
    assert report["structure"]["violations"] == [] and report["values"]["ok"]
    assert report["devices"].startswith("3 logical devices")  # two towers and the CPU
    whole = crosscheck(scenario, profile=two_cores, warmup=1).report  # as asked, by default
    assert "fewer_towers" not in whole and whole["devices"].startswith("5 logical devices")
