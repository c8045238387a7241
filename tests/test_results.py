"""The typed results between the layers: the simulation's summary and the cross-check reports
are what their types say, and the cross-check's view and verdicts follow the kind of check a
report declares, never the keys it happens to have.

The reports are real ones: ``fixtures/reports`` holds the ``--json`` output of ``simsync
crosscheck`` on the bundled four_towers, async_workers and backup_worker (3 steps), to which
the tests add the ``check`` that the JSON leaves out."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typed_dicts import problems

from simsync.crosscheck.evidence import verdicts
from simsync.crosscheck.report import AsyncReport, SyncReplicasReport, SyncReport, report_json
from simsync.errors import SimulationError
from simsync.scenario import load_scenario
from simsync.simulation import Summary, simulate, summary
from simsync.viz import CrossCheckView

ROOT = Path(__file__).resolve().parent.parent
REPORTS = Path(__file__).parent / "fixtures" / "reports"
TYPES: dict[str, Any] = {
    "one_client": SyncReport,
    "racing_clients": AsyncReport,
    "cluster": SyncReplicasReport,
}
#: A table only each kind of check shows.
OWN_TABLE = {
    "one_client": "Timing, predicted from",
    "racing_clients": "Staleness of the updates",
    "cluster": "Gradients: predicted and measured",
}


def report(check: str) -> dict[str, Any]:
    """The saved report of ``check``, with its kind declared (first, as the checks put it)."""
    return {"check": check, **json.loads((REPORTS / f"{check}.json").read_text())}


def render(renderable: Any, width: int = 120) -> str:
    out = io.StringIO()
    Console(file=out, width=width, color_system=None).print(renderable)
    return out.getvalue()


# ## the summary ----------------------------------------------------------------------------
#: Every bundled scenario: the examples, the lessons' and the assignments'.
SCENARIOS = sorted(
    path
    for pattern in ("examples/*.toml", "lessons/*/*.toml", "assignments/*/scenario.toml")
    for path in ROOT.glob(pattern)
    if path.name != "lesson.toml"
)


@pytest.mark.parametrize("numerics", [True, False], ids=["numerics", "no-numerics"])
@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_the_summary_is_what_its_type_says(path: Path, numerics: bool) -> None:
    scenario = load_scenario(path).with_run(steps=12)
    try:
        sim = simulate(scenario, numerics=numerics)
    except SimulationError:  # a lesson's deadlock: no summary to check
        pytest.skip("deadlocks by design")
    assert problems(summary(sim), Summary) == []


def test_the_check_of_a_type_finds_what_is_wrong() -> None:
    """The check above is no rubber stamp: a key missing, one too many, one out of order, a
    value of another type, deep inside, are each found."""
    path = ROOT / "examples" / "backup_worker.toml"
    good = summary(simulate(load_scenario(path).with_run(steps=4)))
    assert problems(good, Summary) == []
    missing = {k: v for k, v in good.items() if k != "events"}
    extra = {**good, "surprise": 1}
    moved = {"events": good["events"], **good}
    deep = json.loads(json.dumps(good))
    deep["gradients"]["by_worker"]["worker_0"]["pushed"] = "many"
    nulled = {**good, "sync_points": None}
    assert problems(missing, Summary) == ["Summary: no 'events'"]
    assert problems(extra, Summary) == ["Summary: 'surprise' is not a key of Summary"]
    assert "not in the declared order" in problems(moved, Summary)[0]
    assert problems(deep, Summary) == [
        "Summary.gradients.by_worker['worker_0'].pushed: 'many' is not a int"
    ]
    assert problems(nulled, Summary) == ["Summary.sync_points: NoneType, not a list"]


# ## the reports ----------------------------------------------------------------------------
@pytest.mark.parametrize("check", TYPES)
def test_a_saved_report_is_what_its_type_says(check: str) -> None:
    assert problems(report(check), TYPES[check]) == []
    for other in set(TYPES) - {check}:  # and no other kind's: the kinds differ
        assert problems({**report(check), "check": other}, TYPES[other]) != []


@pytest.mark.parametrize("check", TYPES)
def test_the_json_is_the_report_without_its_kind(check: str) -> None:
    made = report(check)
    printed = report_json(made)
    assert list(printed) == list(made)[1:] and "check" not in printed
    saved = (REPORTS / f"{check}.json").read_text()
    assert json.dumps(printed, indent=2, allow_nan=False) + "\n" == saved


@pytest.mark.parametrize("check", TYPES)
def test_each_kind_of_report_renders_its_own_tables(check: str) -> None:
    text = render(CrossCheckView(report(check)))
    assert text.startswith(f"Cross-check {report(check)['scenario']}: ")
    for kind, table in OWN_TABLE.items():
        assert (table in text) == (kind == check), (kind, table)


def test_the_view_follows_the_declared_kind_not_the_keys() -> None:
    """A one-client report that also carries a race's and a cluster's sections (a newer
    version's, say) is still drawn as the check it says it is."""
    mixed = {**report("one_client"), "staleness": report("racing_clients")["staleness"]}
    mixed["protocol"] = report("cluster")["protocol"]
    text = render(CrossCheckView(mixed))
    assert OWN_TABLE["one_client"] in text
    assert OWN_TABLE["racing_clients"] not in text and OWN_TABLE["cluster"] not in text
    assert "one apply per step" not in verdicts(mixed)


def test_a_report_of_no_known_kind_is_refused() -> None:
    """Nothing falls back to guessing: an unknown kind is an error, not a best guess."""
    with pytest.raises(AssertionError):
        render(CrossCheckView({**report("one_client"), "check": "mystery"}))
    with pytest.raises(KeyError):
        render(CrossCheckView(report_json(report("one_client"))))


def test_verdicts_are_those_of_the_reports_kind() -> None:
    assert list(verdicts(report("one_client"))) == [
        "structure",
        "values",
        "side by side",
        "last at average_gradients",
        "one tower working",
        "no slow tower",
    ]
    assert list(verdicts(report("racing_clients"))) == [
        "structure",
        "values",
        "stale",
        "staleness as predicted",
    ]
    assert list(verdicts(report("cluster"))) == [
        "structure",
        "values",
        "one apply per step",
    ]


def test_a_prediction_outside_the_measured_interval_is_said_to_be() -> None:
    """The saved one-client report predicts a median step 7 % under the measured one, below
    its interval: the learner's screen says so, not that it lies within the noise."""
    timing = report("one_client")["timing"]
    low, _ = timing["measured_interval"]
    assert timing["predicted_median_step_time"] < low
    text = " ".join(render(CrossCheckView(report("one_client"))).split())
    assert "off by -7.3 %: outside the measured interval (45.624–47.329 ms)" in text, text
    assert "within this machine's noise" not in text


@pytest.mark.parametrize("width", range(20, 81, 3))
def test_a_verdicts_rule_never_splits_a_percent_from_its_number(width: int) -> None:
    """At any width a verify table's cell may have, a percent stays on its number's line
    (a learner read "drift between runs (15" and "%) the interval" a line apart)."""
    import re

    from rich.text import Text

    from simsync.viz.crosscheck import ratio_rule

    rule = ratio_rule(
        {
            "interval": [3.49, 4.04],
            "drift": 0.15,
            "hypotheses": {"side by side": 4.24, "one after another": 4.58},
            "verdict": "inconclusive",
            "why": "several inside",
        }  # type: ignore[typeddict-item]
    )
    console = Console(width=width, file=io.StringIO(), color_system=None)
    with console.capture() as captured:
        console.print(Text(rule))
    lines = [line.strip() for line in captured.get().splitlines()]
    assert len(lines) > 1 or width > len(rule)
    assert not any(line.startswith("%") for line in lines), lines
    assert re.search(r"\b15%", " ".join(lines)) and re.search(r"\b8%", " ".join(lines)), lines


@pytest.mark.parametrize(
    ("findings", "rows"),
    [
        (None, ["side by side?", "who arrived last", "one tower working", "no slow tower"]),
        (["side by side", "no slow tower"], ["side by side?", "no slow tower"]),
        ([], []),
    ],
)
def test_a_lesson_shows_the_findings_it_asks_about(findings, rows) -> None:
    """Lesson 7's verify showed who arrived last at apply_gradients, a question it never
    asks: a lesson names the findings it shows; the checks' rows stay."""
    out = io.StringIO()
    Console(file=out, width=400, color_system=None).print(
        CrossCheckView(report("one_client"), findings)
    )
    text = " ".join(out.getvalue().split())
    every = {
        "side by side?": "did the towers run side by side?",
        "who arrived last": "who arrived last at average_gradients?",
        "one tower working": "a step against one tower working alone",
        "no slow tower": "a step against the same step with no slow tower",
    }
    for name, question in every.items():
        assert (question in text) is (name in rows), (name, text)
    assert ("What the real run shows" in text) is bool(rows)
    assert "structure" in text and "values" in text


def test_the_stalest_worker_row_says_its_rule() -> None:
    """A learner read "none stands out" beside per-worker means of 0.62 and 1.86: the row
    says the rule (the stalest worker's mean against the workers' mean), so the rows above it
    check it."""
    from simsync.trace.staleness import STANDS_OUT, stalest_client

    means = {"worker_0": 0.62, "worker_1": 1.2, "worker_2": 1.5, "worker_3": 1.86}
    rows = {w: {"mean": m, "applied": 7, "dropped": 0, "max": 3} for w, m in means.items()}
    assert STANDS_OUT * sum(means.values()) / 4 > 1.86 and stalest_client(rows) == ""
    slow = {**rows, "worker_3": {**rows["worker_3"], "mean": 4.0}}
    r = report("racing_clients")
    staleness = {**r["staleness"], "by_worker": {"predicted": slow, "measured": rows}}
    staleness["stalest"] = {"predicted": stalest_client(slow), "measured": stalest_client(rows)}
    text = " ".join(render(CrossCheckView({**r, "staleness": staleness})).split())
    assert "stalest worker (1.5x the mean) │ worker_3 │ none" in text, text
    assert "stands out" not in text


@pytest.mark.parametrize(
    ("findings", "noted"), [(None, True), (["no slow tower"], True), ([], False)]
)
def test_the_drift_note_comes_only_above_comparisons_it_is_about(findings, noted) -> None:
    """Lesson 7 shows none of the comparisons, and said 'the comparisons below use what this
    session measured again' above nothing: the note is about the comparisons, shown with them."""
    r = report("one_client")
    r["evidence"]["machine"]["drifted"] = True
    text = " ".join(render(CrossCheckView(r, findings)).split())
    assert ("the comparisons below" in text) is noted, text
    assert "In the alternating rounds" in text or not noted


def test_at_80_columns_each_finding_is_a_paragraph() -> None:
    """A learner paged one verdict's evidence over three screens of 80x24: the table's
    evidence column was 25 characters wide. Below 100 columns each finding is its question
    and answer on a line, then its evidence across the screen."""
    out = io.StringIO()
    Console(file=out, width=80, color_system=None).print(CrossCheckView(report("one_client")))
    text = out.getvalue()
    shown = text[text.index("What the real run shows") :].splitlines()
    assert "a step against the same step with no slow tower → waits for the slowest" in shown
    evidence = [line for line in shown[1:] if line.startswith("  ")]
    assert evidence and not any("│" in line for line in shown)
    assert max(len(line.rstrip()) for line in evidence) > 70  # the whole width, not a column


def test_the_timing_title_stays_on_one_line_at_80_columns() -> None:
    """A learner's pager split 'Timing, predicted from this machine's profile (measured
    2026-12-01' from '01:34)': the title was wrapped at the table's width."""
    r = report("one_client")
    r["costs"] = "this machine's profile (measured 2026-12-01 01:34)"
    r["costs_kind"] = "machine"
    lines = render(CrossCheckView(r, []), width=80).splitlines()
    (title,) = [line for line in lines if line.startswith("Timing")]
    assert title.rstrip().endswith("(measured 2026-12-01 01:34)"), title


def test_a_session_run_fitted_at_its_least_says_why() -> None:
    """Learner trial 59's C4: lesson 7's re-measured sess.run read '0.000 ms', the bisection
    at its lower end because the steps with no work ran faster than the stored costs of their
    ops alone: the note says so, with the time those steps took."""
    refit = {
        "session_run": [0.000858, 0.0],
        "compute_scale": [1.0, 1.1],
        "core_efficiency": [0.55, 0.6],
        "cached_predicted_median_step_time": 0.02,
        "cached_error_median": 0.1,
    }
    floored = {**report("one_client"), "refit": {**refit, "session_run_floor": 0.0004}}
    text = " ".join(render(CrossCheckView(floored), width=200).split())
    assert "each sess.run's own time 0.000 ms (0.858) (the least it can be: steps" in text
    assert "with no work took 0.400 ms in this session" in text
    plain = " ".join(render(CrossCheckView({**report("one_client"), "refit": refit})).split())
    assert "0.000 ms (0.858)" in plain and "the least it can be" not in plain
