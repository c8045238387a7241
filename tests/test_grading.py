"""Assignments and their grader: the reference gets full marks, the starter does not, a graph
crosses a process as data, and a bad assignment folder is one clear line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simsync.errors import GraphError, UsageError
from simsync.grading import AssignmentError, grade, load_assignments
from simsync.grading.assignment import load_assignment
from simsync.ir import graph_from_dict, graph_to_dict
from simsync.kinds import sync_points
from simsync.patterns import build
from simsync.scenario import load_scenario

ROOT = Path(__file__).resolve().parent.parent
ASSIGNMENTS = load_assignments()


def test_there_are_three_assignments_at_least() -> None:
    assert [a.number for a in ASSIGNMENTS][:3] == [1, 2, 3]


@pytest.mark.parametrize("assignment", ASSIGNMENTS, ids=lambda a: a.slug)
def test_reference_gets_full_marks_and_starter_less(assignment) -> None:
    if all(check.runs_tensorflow for check in assignment.checks):
        pytest.skip("every check imports a TensorFlow program: tests/test_grading_tf.py")
    reference = grade(assignment, assignment.solution, hidden=True, tensorflow=False)
    assert reference.score == reference.max_score > 0, [r.output for r in reference.results]
    starter = grade(assignment, assignment.starter, hidden=True, tensorflow=False)
    assert starter.score < starter.max_score


@pytest.mark.parametrize("example", ["four_towers", "async_workers", "backup_worker"])
def test_a_graph_crosses_as_data_and_simulates_the_same(example: str) -> None:
    from simsync.simulation import simulate

    scenario = load_scenario(ROOT / "examples" / f"{example}.toml").with_run(steps=5)
    graph = build(scenario)
    again = graph_from_dict(graph_to_dict(graph))
    assert sync_points(again) == sync_points(graph)
    one, two = simulate(scenario, graph=graph), simulate(scenario, graph=again)
    assert [s.end for s in one.trace.steps] == [s.end for s in two.trace.steps]
    assert one.trace.steps[-1].loss == two.trace.steps[-1].loss


def test_a_malformed_graph_description_is_a_graph_error() -> None:
    with pytest.raises(GraphError, match="not a graph description"):
        graph_from_dict({"ops": [{"name": "a", "kind": "forward", "device": "/x", "evil": 1}]})


def test_hidden_checks_only_with_hidden() -> None:
    assignment = ASSIGNMENTS[0]
    visible = grade(assignment, assignment.solution, tensorflow=False)
    everything = grade(assignment, assignment.solution, hidden=True, tensorflow=False)
    assert not any(r.check.hidden for r in visible.results)
    assert len(everything.results) > len(visible.results)


def test_only_the_named_checks_run_and_an_unknown_name_is_refused() -> None:
    assignment = ASSIGNMENTS[0]
    first, *rest = [c.name for c in assignment.checks]
    one = grade(assignment, assignment.solution, hidden=True, tensorflow=False, only=[first])
    assert [r.check.name for r in one.results] == [first]
    assert one.not_run["not asked for"] == len(rest) - one.not_run.get("TensorFlow", 0)
    with pytest.raises(UsageError, match="has no check named 'nothing'; its checks: "):
        grade(assignment, assignment.solution, only=["nothing"])
    with pytest.raises(UsageError, match="a list of check names, not the string"):
        grade(assignment, assignment.solution, only=first)


def test_a_partial_submission_gets_the_points_of_its_task(tmp_path: Path) -> None:
    """Task 1.1 done, Task 1.2 left as in the starter: the tower checks pass, the rest not."""
    assignment = ASSIGNMENTS[0]
    text = (assignment.solution / "towers.py").read_text()
    docstring = text.index('"""', text.index("def average_gradients"))
    start = text.index('"""\n', docstring + 3) + 4  # the body of Task 1.2
    end = text.index("# Given: the graph of one training step")
    (tmp_path / "towers.py").write_text(
        text[:start] + '    raise NotImplementedError("Task 1.2")\n\n\n' + text[end:]
    )
    result = grade(assignment, tmp_path, hidden=True, tensorflow=False)
    by_task = {r.check.task: [] for r in result.results}
    for r in result.results:
        by_task[r.check.task].append(r.passed)
    assert all(by_task["1.1"]) and not any(by_task["1.2"])


def test_an_unknown_key_in_an_assignment_is_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "01-broken"
    shutil.copytree(ASSIGNMENTS[0].folder, folder)
    path = folder / "assignment.toml"
    path.write_text(path.read_text().replace('kind = "simulation"', 'kind = "simulaton"', 1))
    with pytest.raises(AssignmentError, match=r"checks\[3\]\.kind: 'simulaton'; allowed: "):
        load_assignment(folder)


def test_a_wrong_prediction_and_a_slow_set_up_lose_their_points(tmp_path: Path) -> None:
    """Assignment 3 with R = N (no backup) and a prediction of 1: too slow, and the prediction
    is wrong for that set-up (only a few gradients drop at the very end)."""
    assignment = ASSIGNMENTS[2]
    shutil.copy(assignment.starter / "training.toml", tmp_path)
    (tmp_path / "answers.toml").write_text("dropped_per_step = 1\n")
    result = grade(assignment, tmp_path, hidden=True, tensorflow=False)
    failed = {r.check.name for r in result.results if not r.passed}
    assert failed == {
        "training keeps up at least 4,000 samples per second",
        "your prediction of the gradients dropped per step",
    }


def test_a_submitted_scenario_sets_only_training(tmp_path: Path) -> None:
    """A [run] table asking for a billion steps is ignored; a bad [training] key is one line."""
    assignment = ASSIGNMENTS[2]
    text = (assignment.solution / "training.toml").read_text()
    (tmp_path / "training.toml").write_text(text + "\n[run]\nsteps = 1000000000\n")
    (tmp_path / "answers.toml").write_text("dropped_per_step = 1\n")
    result = grade(assignment, tmp_path, hidden=True, tensorflow=False)
    assert result.score == result.max_score
    (tmp_path / "training.toml").write_text('[training]\nmode = "sync_replicas"\nreplicas = 3\n')
    result = grade(assignment, tmp_path, hidden=True, tensorflow=False)
    assert result.score == 0
    assert result.results[0].output.startswith("training.toml: [training] unknown key 'replicas'")


@settings(max_examples=25, deadline=None)
@given(
    devices=st.integers(1, 6),
    mode=st.sampled_from(["sync", "async", "sync_replicas"]),
    aggregation=st.sampled_from(["parameter_server", "allreduce"]),
    bandwidth=st.sampled_from([float("inf"), 16.0]),
)
def test_any_pattern_graph_round_trips_as_data(
    devices: int, mode: str, aggregation: str, bandwidth: float
) -> None:
    from simsync.scenario import ClusterConfig, LinkConfig, Scenario, TrainingConfig

    training = TrainingConfig(
        mode=mode, aggregation=aggregation if mode == "sync" else "parameter_server"
    )
    scenario = Scenario(
        "any", cluster=ClusterConfig(devices, link=LinkConfig(bandwidth)), training=training
    )
    graph = build(scenario)
    data = graph_to_dict(graph)
    assert graph_to_dict(graph_from_dict(data)) == data
    assert json.loads(json.dumps(data)) == data  # plain JSON, nothing else


def _averaging(gated: bool):
    """Two towers' gradients of one variable; the apply takes their concat, or (``gated``)
    tower 0's alone, waiting for tower 1's by a control dependency."""
    from simsync.ir import Graph, Op, Variable

    graph = Graph()
    graph.add_variable(Variable("w", "/cpu:0"))
    for i in (0, 1):
        graph.add_op(Op(f"tower_{i}/grad", "generic", f"/gpu:{i}", tower=i))
    graph.add_op(Op("concat", "generic", "/cpu:0"))
    graph.add_op(Op("apply", "generic", "/cpu:0", writes=("w",)))
    if gated:
        graph.connect("tower_0/grad", "apply")
        graph.connect("tower_1/grad", "apply", control=True)
    else:
        graph.connect("tower_0/grad", "concat")
        graph.connect("tower_1/grad", "concat")
        graph.connect("concat", "apply")
    return graph


@pytest.mark.parametrize("gated", [False, True])
def test_an_update_must_compute_with_every_towers_data_not_only_wait(gated: bool) -> None:
    from simsync.grading.assignment import Check
    from simsync.grading.child import structure_of
    from simsync.grading.rubric import structure

    found = structure_of(_averaging(gated), [], [])
    check = Check("averaged", "4.2", "structure", 3.0, False, "train.py",
                  {"updates_take_every_tower": True})  # fmt: skip
    passed, said = structure(check, found)
    assert passed is not gated, said
    if gated:
        assert "'apply' takes no data from tower_1" in said and "only wait" in said


def _weighed(weights: list[float], **shares: float) -> dict[str, Any]:
    """An update's weights as the process that loaded a program's graph measured them."""
    update = {"op": "apply", "weights": weights, "joint": False, "finite": True, "residual": 0.0,
              "permuted": 0.0, "repeated": 0.0,
              **shares}  # fmt: skip
    return {"towers": len(weights) or 4, "updates": [update], "problem": None}


@pytest.mark.parametrize(
    ("averaging", "expected"),
    [
        (_weighed([0.25, 0.25, 0.2501, 0.2499]), None),
        (_weighed([1.0, 0.0, -1e-9, 0.0], permuted=1.4),
         "weighs the towers' gradients 1.00, 0.00, 0.00, 0.00"),
        (_weighed([], finite=False), "no numbers (NaN or infinite)"),
        (_weighed([0.4, 0.2, 0.2, 0.2], permuted=0.5), "the mean weighs each 0.25"),
        (_weighed([0.25] * 4, residual=0.9, permuted=0.3), "no weighted sum"),
        (_weighed([0.25] * 4, permuted=0.5), "changes when the towers swap their batches"),
        # the mean, then a step that depends on its size: symmetric, but no fixed weights
        (_weighed([0.49, 0.50, 0.46, 0.47], permuted=0.0), "tf.clip_by_global_norm"),
        (_weighed([0.25] * 4, residual=0.9, permuted=0.0), "treats the towers alike"),
        (_weighed([0.25] * 4, repeated=0.1), "another value from the same data"),
        (_weighed([]), "the same with any tower's data"),
        ({"towers": 1, "updates": [], "problem": "its training step has no towers to average"},
         "could not be measured: its training step has no towers"),
        (None, "only a TensorFlow program"),
    ],
)  # fmt: skip
def test_an_update_must_weigh_every_towers_gradient_alike(
    averaging: dict[str, Any] | None, expected: str | None
) -> None:
    from simsync.grading.assignment import Check
    from simsync.grading.child import structure_of
    from simsync.grading.rubric import structure

    found = {**structure_of(_averaging(False), [], []), "averaging": averaging}
    check = Check("averaged", "4.2", "structure", 3.0, False, "train.py",
                  {"updates_average_towers": True})  # fmt: skip
    passed, said = structure(check, found)
    assert passed is (expected is None), said
    assert (
        said == "each update weighs the 4 towers' gradients alike" if passed else expected in said
    )


def test_advice_of_no_points_passes_or_fails_and_scores_nothing(tmp_path: Path) -> None:
    """A check of points = 0 (assignment 4's: where the sync points were made) is shown
    failed when it fails, though it scores nothing either way."""
    from simsync.grading.assignment import Check
    from simsync.grading.grader import Result

    check = Check("advice", "4.2", "structure", 0.0, False, "train.py", {})
    failed, passed = Result(check, 0.0, "no", False), Result(check, 0.0, "yes", True)
    assert not failed.passed and passed.passed


@pytest.mark.parametrize(
    ("weights", "noise", "said"),
    [
        ([1.005, 0.946, 1.019, 1.032], 0.077, None),  # the reference, measured
        ([1.2, 0.9, 0.9, 1.0], 0.3, None),  # noisier batches widen what passes
        ([4.27, 0.61, 0.63, 0.62], 0.057, "tower_0's data weighs 7.0 times as much as tower_1's"),
        ([940.0, 0.099, 0.1, 0.106], 0.09, "tower_0's data weighs 9494.9 times"),
        ([1.0, 0.0], 0.05, "tower_0's data weighs over a million times as much as tower_1's"),
        ([0.7, 11.6, 0.17, 0.71], 3.05, "changes from batch to batch by a factor of 21.1"),
        # the eleventh attack: random spikes of the weights widened what a skew could hide in
        ([1.69, 0.84, 0.86, 0.82], 0.75, "changes from batch to batch by a factor of 2.1"),
        ([1.05, 0.98, 1.0, 0.97], 0.5, "changes from batch to batch by a factor of 1.6"),
        ([1.2, 0.83, 1.0, 1.0], 0.26, None),  # a loss weighed by its labels: within the noise
        ([], 0.0, None),  # not measured (an update of nothing): other checks say why
    ],
)
def test_a_towers_data_may_not_weigh_more_than_anothers(weights, noise, said) -> None:
    from simsync.grading.rubric import _averages

    found = {"averaging": {"towers": 4, "updates": [], "problem": None,
                           "data_weights": weights, "data_noise": noise}}  # fmt: skip
    problems = _averages(found)
    assert (problems == []) if said is None else (said in problems[0]), problems


def test_a_race_is_told_from_a_rewriting_by_the_measurings_own_runs() -> None:
    """The 25th attack's read of a variable raced against the step's own write was refused as
    graph rewriting: a rewriting computes otherwise every time, alike from run to run; a race
    differs from one of the measuring's own runs to the next."""
    import numpy as np

    from simsync.tf_backend.program.averaging import RACING, REWRITTEN, _alike_once_raced

    one, two, three = [np.array([1.0])], [np.array([2.0])], [np.array([3.0])]
    tosses = iter([two, one, two, one])
    racing = _alike_once_raced(lambda: next(tosses), lambda: three, one, three)
    assert racing == RACING
    assert _alike_once_raced(lambda: one, lambda: three, one, three) == REWRITTEN
    late = iter([three])  # a pair alike at the second try: a race that tossed alike
    assert _alike_once_raced(lambda: next(late), lambda: three, one, two) is None


def test_a_program_whose_measuring_never_ended_is_told_so() -> None:
    """The 26th attack's program of 176 ms steps ran out of the grader's time and was told
    'only a TensorFlow program ... has its averaging measured', as if it were none."""
    from simsync.grading.rubric import _averages

    (said,) = _averages({"pruned": {}, "averaging": None})
    assert "was not measured" in said and "slow" in said and "only a" not in said


def test_a_graph_measured_again_must_be_the_graph_the_other_checks_read() -> None:
    """A failed check of the step is judged again on a second measuring, which counts only
    when the program built the same graph again, costs aside: one that did less work the
    second time (smaller tensors, another device) is not timed in the first one's place."""
    import dataclasses

    from simsync.grading.graphs import shape
    from simsync.scenario import ClusterConfig, ComputeConfig, Scenario

    scenario = Scenario("two", cluster=ClusterConfig(2), compute=ComputeConfig(mean=0.01))
    graph = build(scenario)
    slower = build(dataclasses.replace(scenario, compute=ComputeConfig(mean=0.02)))
    assert shape(slower) == shape(graph)  # another measuring of one graph
    model = dataclasses.replace(scenario.model, features=scenario.model.features // 2)
    assert shape(build(dataclasses.replace(scenario, model=model))) != shape(graph)
    data = graph_to_dict(graph)
    data["ops"][0]["device"] = "/gpu:1" if data["ops"][0]["device"] != "/gpu:1" else "/gpu:0"
    assert shape(graph_from_dict(data)) != shape(graph)
