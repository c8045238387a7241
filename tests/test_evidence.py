"""The evidence of a real run, and its verdicts, on traces made by hand and noise made by a
seeded generator: a verdict must hold what it says, and never name the wrong answer."""

from __future__ import annotations

import numpy as np
import pytest

from simsync.crosscheck.evidence import (
    INCONCLUSIVE,
    arrivals,
    interleaved_ratio,
    median_interval,
    scheduled_last,
    side_by_side,
    staleness,
    step_by_step,
    usually_last,
    verdicts,
    with_prediction,
)
from simsync.patterns import build
from simsync.scenario import ClusterConfig, ComputeConfig, Scenario
from simsync.trace import OpRecord, StepRecord, Trace, Update, staleness_stats

TWO = Scenario("two", cluster=ClusterConfig(2), compute=ComputeConfig(mean=0.01))
#: the same two towers, tower 1 on a device half as fast: the graph expects it last
SLOW_ONE = Scenario(
    "slow one", cluster=ClusterConfig(2, speeds=(1.0, 0.5)), compute=ComputeConfig(mean=0.01)
)


def _op(op: str, step: int, start: float, end: float, kind: str = "forward") -> OpRecord:
    device = "/gpu:" + op.split("/")[0][-1]
    return OpRecord(op, kind, (device,), "main", step, start, start, end)


def _towers(steps: int, offset: float) -> Trace:
    """Each step: both towers compute 10 ms (forward 1/3, backward 2/3); tower 1 starts
    ``offset`` seconds after tower 0; then average_gradients."""
    ops = []
    for step in range(steps):
        base = step * 1.0
        for tower, start in ((0, base), (1, base + offset)):
            ops.append(_op(f"tower_{tower}/loss", step, start, start + 0.0033))
            ops.append(
                _op(f"tower_{tower}/gradients", step, start + 0.0033, start + 0.01, "backward")
            )
        end = base + max(0.01, offset + 0.01)
        average = ("average_gradients", "aggregate", ("/cpu:0",), "main", step)
        ops.append(OpRecord(*average, end, end, end + 0.001))
    return Trace(ops=ops)


def test_towers_that_overlap_ran_side_by_side() -> None:
    found = side_by_side(build(TWO), _towers(10, 0.002))
    assert found is not None
    assert found["verdict"] == "side by side" and found["overlapped_steps"] == 10
    assert found["median_share"] == pytest.approx(0.8)  # 8 of the 10 ms at once


def test_towers_that_never_overlap_ran_one_after_another() -> None:
    found = side_by_side(build(TWO), _towers(10, 0.0105))
    assert found is not None and found["verdict"] == "one after another"


def test_half_overlapping_half_apart_is_inconclusive() -> None:
    trace = _towers(5, 0.002)
    apart = _towers(10, 0.0105)
    trace.ops += [r._replace(step=r.step + 5) for r in apart.ops if r.step < 5]
    found = side_by_side(build(TWO), trace)
    assert found is not None and found["verdict"] == INCONCLUSIVE


def test_a_single_tower_has_no_side_by_side_finding() -> None:
    one = Scenario("one", cluster=ClusterConfig(1), compute=ComputeConfig(mean=0.01))
    assert side_by_side(build(one), Trace(ops=[_op("tower_0/loss", 0, 0.0, 0.003)])) is None


def test_arrivals_name_the_tower_that_is_always_last_when_its_work_is_the_longest() -> None:
    (found,) = arrivals(build(SLOW_ONE), _towers(12, 0.002))
    assert found["sync_point"] == "average_gradients" and found["steps"] == 12
    assert found["last"] == {"tower_0": 0, "tower_1": 12}
    assert found["mean_wait"]["tower_0"] == pytest.approx(0.002)
    assert found["expected"] == "tower_1"  # 20 ms of work at half speed against 10 ms
    assert usually_last(found) == "tower_1"


def test_equal_towers_always_last_in_one_run_name_no_tower() -> None:
    """Towers of equal work on equal devices: which comes last is the scheduler's order,
    which one run (however one-sided: 12 of 12) cannot tell from a straggler. On this 2-core
    machine lesson 7's apply_gradients had tower_0 last in 10 of 10 steps in one run and
    tower_1 in the next."""
    (found,) = arrivals(build(TWO), _towers(12, 0.002))
    assert found["last"] == {"tower_0": 0, "tower_1": 12}
    assert found["expected"] == ""
    assert usually_last(found) is None


def test_a_tower_last_against_the_graphs_expectation_is_shown_but_never_a_verdict() -> None:
    """Tower 0 last every time, though tower 1 has twice its work: with towers sharing
    cores the scheduler's order can outweigh the work (examples/four_towers.toml on this
    2-core machine: tower_2 last in 7 of 10 steps, the slow tower_3 in 7 of 10 of the next
    run), so one run names it only as what it was."""
    trace = _towers(12, 0.0)
    trace.ops = [
        r._replace(start=r.start + 0.025, end=r.end + 0.025) if r.op.startswith("tower_0") else r
        for r in trace.ops
    ]
    (found,) = arrivals(build(SLOW_ONE), trace)
    assert found["expected"] == "tower_1" and usually_last(found) is None
    assert scheduled_last(found) == "tower_0"


def test_arrivals_in_turns_name_no_tower() -> None:
    trace = _towers(12, 0.002)
    # in every other step tower 0 starts later instead: it arrives last
    trace.ops = [
        r._replace(
            start=r.start + (0.004 if r.op.startswith("tower_0") else 0.0),
            end=r.end + (0.004 if r.op.startswith("tower_0") else 0.0),
        )
        if r.step % 2
        else r
        for r in trace.ops
    ]
    (found,) = arrivals(build(TWO), trace)
    assert found["last"] == {"tower_0": 6, "tower_1": 6}
    assert usually_last(found) is None


def test_the_median_interval_covers_the_true_median_95_percent_of_the_time() -> None:
    rng = np.random.default_rng(7)
    true_median = 1.0  # of a lognormal with mu = 0
    covered = 0
    for _ in range(2000):
        _, low, high = median_interval(list(rng.lognormal(0.0, 0.5, size=24)))
        covered += low <= true_median <= high
    assert 0.93 <= covered / 2000 <= 0.99


def test_an_interleaved_ratio_never_names_the_wrong_hypothesis() -> None:
    # A true ratio of 1.9 under heavy multiplicative noise, shared by both halves of a round
    # (a slow spell of the machine) and their own: "serial" (2.0) and "parallel" (1.0).
    rng = np.random.default_rng(11)
    named = {"parallel": 0, "serial": 0, INCONCLUSIVE: 0}
    for _ in range(300):
        spell = rng.lognormal(0.0, 0.4, size=24)
        one = 0.010 * spell * rng.lognormal(0.0, 0.15, size=24)
        two = 0.019 * spell * rng.lognormal(0.0, 0.15, size=24)
        verdict = interleaved_ratio(
            {"scenario": list(two), "one": list(one)}, "one", {"parallel": 1.0, "serial": 2.0}
        )["verdict"]
        named[verdict] += 1
    assert named["parallel"] == 0
    assert named["serial"] > 250  # and the evidence is strong enough, most of the time


def _ledger(stalenesses: list[int]) -> Trace:
    return Trace(
        updates=[
            Update(f"w{version % 4}", version // 4, "apply", version - stale, version, True, 0.0)
            for version, stale in enumerate(stalenesses)
        ]
    )


def test_stale_updates_and_their_prediction() -> None:
    ledger = _ledger([1, 2, 1, 2] * 25)  # mean 1.5
    found = staleness(ledger, predicted=1.5)
    assert found is not None
    assert (found["verdict"], found["prediction"]) == ("yes", "as predicted")
    assert found["mean"] == pytest.approx(1.5) and found["stale_updates"] == 100
    assert staleness(ledger, predicted=3.0)["prediction"] == "not as predicted"  # type: ignore[index]
    # every block alike: a narrow interval, yet a run's scheduling moves it as a whole; a
    # prediction less than half an update beyond it is not called wrong
    assert staleness(ledger, predicted=1.9)["prediction"] == INCONCLUSIVE  # type: ignore[index]
    assert staleness(ledger, predicted=2.1)["prediction"] == "not as predicted"  # type: ignore[index]


def test_the_staleness_verdict_says_the_margin_that_decided_it() -> None:
    """A learner read "predicted 1.52, near the edge of the 95 % interval 1.12–1.50:
    inconclusive" beside a rule that said nothing of an edge: each verdict says where the
    prediction lies and, outside the interval, the margin that decided."""
    from simsync.viz.crosscheck import _stale_predicted

    ledger = _ledger([1, 2, 1, 2] * 25)
    said = {}
    for predicted in (1.5, 1.9, 3.0):
        found = staleness(ledger, predicted=predicted)
        assert found is not None
        _, verdict, detail = _stale_predicted(found, "for this machine")
        said[verdict.plain] = detail
    assert set(said) == {"as predicted", "inconclusive here", "not as predicted"}
    assert "inside the 95 % interval 1.50–1.50" in said["as predicted"]
    assert "but by less than 0.50" in said["inconclusive here"]
    assert "no verdict" in said["inconclusive here"]
    assert "by more than 0.50" in said["not as predicted"]


def test_updates_that_never_went_stale_say_no() -> None:
    found = staleness(_ledger([0] * 40), predicted=0.0)
    assert found is not None and found["verdict"] == "no"
    assert staleness(Trace(), predicted=1.0) is None


def test_the_probes_of_what_drifts():
    """No work, and one tower per core working when the towers share fewer cores."""
    from simsync.crosscheck.refit import NO_WORK, probes
    from simsync.scenario import ClusterConfig, Scenario
    from simsync.scenario.profile import Profile

    profile = Profile({}, 1.0, 0.0, 5e-4, 30.0, 2)
    four = Scenario("four", cluster=ClusterConfig(4))
    assert [p.name for p in probes(four, profile)] == [NO_WORK, "2 towers working"]
    assert probes(four, profile)[1].speeds == {"/gpu:2": 1000.0, "/gpu:3": 1000.0}
    assert [p.name for p in probes(Scenario("two", cluster=ClusterConfig(2)), profile)] == [NO_WORK]


def test_a_prediction_of_who_is_last_is_compared_by_one_rule_on_both_sides() -> None:
    """The run and the simulation each name the tower last in clearly more than half of
    their steps, or none: the same one (or none on both sides) is as predicted, two
    different ones are not, and one side naming a tower the other cannot tell is no
    verdict. Lesson 3's straggler on 2 cores: the slow tower last in 8 of 20 traced steps,
    in 45 % of the simulated ones."""
    (found,) = arrivals(build(SLOW_ONE), _towers(20, 0.002))  # tower_1 last 20 of 20
    assert found["expected"] == "tower_1"

    def simulated(slow: int, other: int) -> dict:
        return {**found, "steps": 400, "last": {"tower_0": other, "tower_1": slow}}

    always = with_prediction(found, simulated(400, 0))  # type: ignore[arg-type]
    assert always["as_predicted"] == "as predicted" and always["predicted_last"] == "tower_1"
    assert always["predicted_share"] == 1.0 and always["predicted_steps"] == 400
    # the simulation has the fast tower usually last: a confident disagreement
    wrong = with_prediction(found, simulated(20, 380))  # type: ignore[arg-type]
    assert wrong["as_predicted"] == "not as predicted"
    # the simulation names none (the slow one last in 45 %): this run's 20 of 20 names one
    mixed = with_prediction(found, simulated(180, 205))  # type: ignore[arg-type]
    assert mixed["predicted_last"] == "" and mixed["as_predicted"] == INCONCLUSIVE
    # 8 of 20 and 45 % of 400 both name none
    shared = {**found, "last": {"tower_0": 12, "tower_1": 8}}
    both = with_prediction(shared, simulated(180, 205))  # type: ignore[arg-type]
    assert both["as_predicted"] == "as predicted" and both["predicted_last"] == ""
    # equal towers: which one is last is the threads' order, nothing to compare
    (equal,) = arrivals(build(TWO), _towers(20, 0.002))
    assert "as_predicted" not in with_prediction(equal, {**equal, "steps": 400})


def test_the_comparison_of_who_is_last_is_a_verdict_and_is_shown() -> None:
    from rich.console import Console

    from simsync.viz.crosscheck import _last

    (found,) = arrivals(build(SLOW_ONE), _towers(20, 0.002))
    shared = {**found, "last": {"tower_0": 12, "tower_1": 8}}
    simulated = {**found, "steps": 400, "last": {"tower_0": 205, "tower_1": 180}}
    compared = with_prediction(shared, simulated)  # type: ignore[arg-type]
    report = {
        "check": "towers",
        "structure": {"ok": True},
        "values": {"ok": True},
        "evidence": {"side_by_side": None, "arrivals": [compared], "ratios": []},
    }
    assert verdicts(report)["last at average_gradients as predicted"] == "as predicted"  # type: ignore[arg-type]
    verdict, why = _last(compared)
    console = Console(record=True, width=200)
    console.print(verdict)
    assert console.export_text().strip() == "no single tower, as predicted"
    assert "the simulation has tower_1 last in 45 % of 400 steps" in why
    assert "no single tower is usually last" in why and "changes from step to step" in why


def test_the_drift_note_says_which_measurement_each_step_time_is() -> None:
    """Lesson 1 showed the table's measured median (50.469 ms) and, below it, 'the scenario's
    own steps 43.904 ms': two measurements of one scenario, unnamed, that read as one
    contradicting the other."""
    from rich.console import Console

    from simsync.viz.crosscheck import _drift

    own = {"variant": "scenario", "predicted": 0.040, "measured": 0.0439,
           "interval": [0.043, 0.045], "error": -0.09}  # fmt: skip
    machine = {"variant": "one tower working", "predicted": 0.020, "measured": 0.026,
               "interval": [0.025, 0.027], "error": -0.23, "drifted": True,
               "scenario": own}  # fmt: skip
    console = Console(width=80, record=True)
    for part in _drift(machine, refitted=True):  # type: ignore[arg-type]
        console.print(part)
    text = " ".join(console.export_text().split())
    assert text.startswith("In the alternating rounds, steps with only one tower working took")
    assert "the scenario's own steps 43.900 ms (the table's median is of the steps timed" in text
    # the table's median near the rounds' own steps: no word of a changed load
    console = Console(width=80, record=True)
    for part in _drift(machine, refitted=True, table=0.0452):  # type: ignore[arg-type]
        console.print(part)
    assert "load changed while the check ran" not in console.export_text()


def test_a_load_that_changed_during_the_check_is_said_beside_the_table() -> None:
    """Lesson 2 in a learner's trial: the table's median 38.608 ms (predicted 17.435, -54.8 %)
    beside "the machine is faster now" from the alternating rounds, whose own steps took
    17.069 ms: the machine's load changed between the two measurings, and the screen said
    nothing of it."""
    from rich.console import Console

    from simsync.viz.crosscheck import _drift

    own = {"variant": "scenario", "predicted": 0.029894, "measured": 0.017069,
           "interval": [0.0165, 0.0176], "error": 0.75}  # fmt: skip
    machine = {"variant": "one tower working", "predicted": 0.01097, "measured": 0.006665,
               "interval": [0.0064, 0.0069], "error": 0.65, "drifted": True,
               "scenario": own}  # fmt: skip
    console = Console(width=80, record=True)
    for part in _drift(machine, refitted=True, table=0.038608):  # type: ignore[arg-type]
        console.print(part)
    text = " ".join(console.export_text().split())
    assert text.startswith("The table's steps, timed apart from the alternating rounds, took")
    assert "38.608 ms against 17.069 ms in the rounds" in text
    assert "load changed while the check ran" in text and "faster now" in text
    # said of the table whether or not the rounds drifted from the stored numbers
    console = Console(width=80, record=True)
    steady = {**machine, "drifted": False}
    for part in _drift(steady, refitted=True, table=0.038608):  # type: ignore[arg-type]
        console.print(part)
    text = " ".join(console.export_text().split())
    assert "load changed while the check ran" in text and "faster now" not in text


def _drawn(durations: list[tuple[float, float]]) -> Trace:
    """Each step: the two towers start together and compute for their step's durations (the
    step's draws), then average_gradients."""
    ops, steps = [], []
    for step, (first, second) in enumerate(durations):
        base = step * 1.0
        for tower, took in ((0, first), (1, second)):
            ops.append(_op(f"tower_{tower}/loss", step, base, base + took / 3))
            ops.append(_op(f"tower_{tower}/gradients", step, base + took / 3, base + took))
        end = base + max(first, second)
        average = ("average_gradients", "aggregate", ("/cpu:0",), "main", step)
        ops.append(OpRecord(*average, end, end, end + 0.001))
        steps.append(StepRecord("main", step, base, end + 0.001, 0.0))
    return Trace(ops=ops, steps=steps)


#: 20 steps of random compute times: tower 0 draws the longest in the even steps, tower 1 in
#: the odd ones, clearly (10 against 20 ms); the last step's draws are too close to call
DRAWN = [(0.02, 0.01) if step % 2 == 0 else (0.01, 0.02) for step in range(20)] + [(0.0200, 0.0199)]


def test_who_came_last_step_by_step_against_the_same_draws_simulated() -> None:
    """Random compute times: the tower that came last changes from step to step, and the
    simulation of the same draws says which one, each step. The real run's last tower is
    compared with it in the steps where the simulation has one clearly last (a lead of
    CLEAR_LEAD), against chance (one tower in two)."""
    graph, simulated = build(TWO), _drawn(DRAWN)
    same = step_by_step(graph, _drawn(DRAWN), simulated, "average_gradients")
    assert same is not None
    assert (same["steps"], same["matched"], same["chance"]) == (20, 20, 0.5)  # not the close one
    assert same["verdict"] == "as predicted" and same["towers_last"] == 2
    swapped = [(b, a) for a, b in DRAWN]  # the other tower last every step
    wrong = step_by_step(graph, _drawn(swapped), simulated, "average_gradients")
    assert wrong is not None and wrong["matched"] == 0 and wrong["verdict"] == "not as predicted"
    # 13 of 20: beyond chance (p = 0.13 is not), and short of two thirds (14): no verdict
    some = [DRAWN[s] if s < 13 else swapped[s] for s in range(20)]
    open_ = step_by_step(graph, _drawn(some), simulated, "average_gradients")
    assert open_ is not None and (open_["matched"], open_["needed"]) == (13, 14)
    assert open_["verdict"] == INCONCLUSIVE
    # 15 of 20: two thirds, and 1 in 48 by chance
    most = [DRAWN[s] if s < 15 else swapped[s] for s in range(20)]
    held = step_by_step(graph, _drawn(most), simulated, "average_gradients")
    assert held is not None and held["verdict"] == "as predicted"


def test_one_tower_last_every_step_has_no_step_by_step_finding() -> None:
    """A slow tower last in every simulated step: who arrived last says it all."""
    always = [(0.02, 0.01)] * 20
    found = step_by_step(build(TWO), _drawn(DRAWN), _drawn(always), "average_gradients")
    assert found is None


def test_the_step_by_step_finding_is_a_verdict_and_is_shown() -> None:
    from rich.console import Console

    from simsync.viz.crosscheck import EvidenceView

    graph = build(TWO)
    (found,) = arrivals(graph, _drawn(DRAWN))
    by_step = step_by_step(graph, _drawn(DRAWN), _drawn(DRAWN), "average_gradients")
    report = {
        "check": "one_client",
        "costs": "scenario",
        "costs_kind": "scenario",
        "structure": {"ok": True},
        "values": {"ok": True},
        "evidence": {
            "side_by_side": None,
            "arrivals": [{**found, "step_by_step": by_step}],
            "ratios": [],
        },
    }
    assert verdicts(report)["last at average_gradients step by step"] == "as predicted"  # type: ignore[arg-type]
    console = Console(record=True, width=80)
    console.print(EvidenceView(report, ["who came last, step by step"]))  # type: ignore[arg-type]
    text = " ".join(console.export_text().split())
    assert "who came last at average_gradients, step by step? → as predicted" in text, text
    assert "in 20 of 20 traced steps the tower that came last" in text
    # the step whose draws were too close to call (21 traced) is said to be left out
    assert "(one of the 21 traced steps is left out" in text, text
    assert "who arrived last at" not in text  # the finding not asked for


def test_the_staleness_mean_is_every_updates_as_the_table_shows() -> None:
    """Learner trial 60's C4: the table's mean staleness 1.24 beside the verdict's 1.22, the
    mean of the blocks, which leave the last updates out (103 updates, blocks of 10)."""
    stalenesses = [1, 2, 1, 2] * 25 + [3, 3, 3]
    found = staleness(_ledger(stalenesses), predicted=1.5)
    assert found is not None and found["blocks"] == 10
    assert found["mean"] == pytest.approx(sum(stalenesses) / len(stalenesses))
    assert found["mean"] == pytest.approx(staleness_stats(_ledger(stalenesses))["mean"])
