"""A race of scenarios on real TensorFlow (lesson 5's "who wins the race?"), beside its
prediction for this machine, in interleaved rounds."""

from __future__ import annotations

import pytest

from simsync.crosscheck.race import AS_PREDICTED, INCONCLUSIVE, NOT_AS_PREDICTED, race_on_tensorflow
from simsync.scenario import load_scenario
from simsync.tutor.content import load_lessons

pytestmark = pytest.mark.tf

STEPS = 30


def _race_paths():
    lesson = next(lesson for lesson in load_lessons() if lesson.number == 5)
    step = next(s for s in lesson.steps if s.kind == "race_verify")
    return lesson.race_paths(step)


def test_lesson_5_races_a_set_up_two_cores_run_side_by_side():
    scenarios = [load_scenario(path) for path in _race_paths()]
    assert [s.name for s in scenarios] == ["sync", "rounds", "bounded", "async"]
    assert {(s.towers, s.cluster.speeds) for s in scenarios} == {(2, (1.0, 0.25))}
    # the same 200 batches of the same model in every run
    assert {s.model.batch_size * s.run.steps * s.towers for s in scenarios} == {12800}


def test_a_race_on_tensorflow_lines_up_each_rounds_traced_runs_to_one_target():
    chosen = [load_scenario(p).with_run(steps=STEPS) for p in _race_paths()]
    scenarios = [s for s in chosen if s.name in ("sync", "async")]
    check = race_on_tensorflow(scenarios)
    assert check.names == ["sync", "async"] and len(check.rounds) == 2
    for race in check.rounds:
        sync, asynchronous = race.entrants
        assert len(sync.curve) == STEPS  # one loss a step
        assert asynchronous.updates == 2 * STEPS  # the warm-up's updates left out
        assert race.target == check.rounds[0].target  # one target for every round
        assert all(entrant.reached is not None for entrant in race.entrants)
        assert max(entrant.final_loss for entrant in race.entrants) == pytest.approx(race.target)
    assert check.predicted.entrants[1].updates == 2 * STEPS
    assert check.verdict in (AS_PREDICTED, NOT_AS_PREDICTED, INCONCLUSIVE)
    firsts = [
        race.entrants[race.clear_winner].name
        for race in check.rounds
        if race.clear_winner is not None
    ]
    if check.verdict != INCONCLUSIVE:
        assert len(firsts) == 2 and len(set(firsts)) == 1 and firsts[0] in check.rule
        assert "ahead of the next by" in check.rule and "between rounds" in check.rule
    else:  # and why, in the rule
        why = ("the rounds disagree", "no run was first alone", "but ahead by only")
        assert any(words in check.rule for words in why), check.rule
