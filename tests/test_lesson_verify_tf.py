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
