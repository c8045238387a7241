"""The TensorFlow checks: the student's graph runs on TensorFlow, its parameters against the
reference's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from simsync.grading import grade, load_assignments

pytestmark = pytest.mark.tf
ROOT = Path(__file__).resolve().parent.parent


def test_assignments_check_with_tensorflow() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "simsync", "assignments", "check"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "01-the-tower-loop: reference 14/14, starter 0/14" in done.stdout


def test_an_apply_that_skips_a_variable_differs_on_tensorflow(tmp_path: Path) -> None:
    """An apply that writes the bias only: TensorFlow runs it, and its parameters are not the
    reference's (the kernel never moves)."""
    assignment = load_assignments()[0]
    text = (assignment.solution / "towers.py").read_text()
    text = text.replace("Cost(), writes=variables))", "Cost(), writes=variables[1:]))")
    (tmp_path / "towers.py").write_text(text)
    result = grade(assignment, tmp_path, hidden=True)
    on_tensorflow = [r for r in result.results if r.check.kind == "tensorflow"]
    assert len(on_tensorflow) == 1 and not on_tensorflow[0].passed
    assert "your parameters differ by" in on_tensorflow[0].output


def test_a_graph_tensorflow_cannot_run_costs_only_its_check(tmp_path: Path) -> None:
    """A tower that reads the kernel but not the bias: the simulator trains it, TensorFlow's
    lowering cannot; the check fails with the reason, the grader goes on."""
    assignment = load_assignments()[0]
    text = (assignment.solution / "towers.py").read_text()
    (tmp_path / "towers.py").write_text(text.replace("reads=variables)", "reads=variables[:1])"))
    result = grade(assignment, tmp_path, hidden=True)
    on_tensorflow = [r for r in result.results if r.check.kind == "tensorflow"]
    assert not on_tensorflow[0].passed and on_tensorflow[0].output
    assert [r.check.kind for r in result.results] == [c.kind for c in assignment.checks]


def _points(assignment, *names: str) -> float:
    return sum(c.points for c in assignment.checks if c.name in names)


def test_a_tensorflow_program_is_graded_by_its_structure_and_simulation(tmp_path: Path) -> None:
    # assignment 4: the student's own tower loop and average_gradients, in TensorFlow
    (assignment,) = [a for a in load_assignments() if a.number == 4]
    everything = assignment.points()
    reference = grade(assignment, assignment.solution, hidden=True)
    assert reference.score == everything == 9, [r.output for r in reference.results]
    # the starter raises NotImplementedError before its first sess.run: nothing to grade
    starter = grade(assignment, assignment.starter, hidden=True)
    assert starter.score == 0
    assert "NotImplementedError" in starter.results[0].output
    # average_gradients that returns the last tower's gradients: no sync point, and a step
    # runs only what the apply and the fetched loss (the last tower's) need, so towers 0-2 are
    # never run. Its variables are still on the CPU (the reference's _variable_on_cpu), and
    # one tower's step is no slower than four's: those two checks pass, the others fail.
    source = (assignment.solution / "train.py").read_text()
    start = source.index("    average_grads = []\n")
    end = source.index("    return average_grads\n") + len("    return average_grads\n")
    wrong = source[:start] + "    return tower_grads[-1]\n" + source[end:]
    (tmp_path / "train.py").write_text(wrong)
    graded = grade(assignment, tmp_path, hidden=True)
    step_check = next(c.name for c in assignment.checks if c.kind == "simulation")
    expected = _points(assignment, "the variables live on the CPU", step_check)
    assert graded.score == expected == 2, [(r.check.name, r.output) for r in graded.results]
    found = {r.check.name: r.output for r in graded.results}
    averaged = found["one sync point per variable, each averaging every tower's gradient"]
    assert "expected 4 sync points, found 0" in averaged, averaged
    (advice,) = [r for r in graded.results if r.check.points == 0]
    assert not advice.passed and "no sync point" in advice.output
    # the towers are there, TensorFlow just never runs three of them: said, and blamed on the
    # averaging, not on the tower loop the student wrote right
    towers = found["four towers, each on its own GPU"]
    assert "found 0 in a training step; your program builds 4" in towers, towers
    assert "builds 'tower_0/hidden/MatMul', but a training step never runs it" in towers
    assert "average_gradients take every tower's gradients" in towers
    # the step check says what it was held to: the reference's time, and the tolerance
    assert "expected at most" in found[step_check] and "the reference's" in found[step_check]


def test_every_variable_off_the_cpu_is_named_with_the_fix(tmp_path: Path) -> None:
    (assignment,) = [a for a in load_assignments() if a.number == 4]
    source = (assignment.solution / "train.py").read_text()
    (tmp_path / "train.py").write_text(source.replace('    with tf.device("/cpu:0"):', "    if 1:"))
    on_cpu = "the variables live on the CPU"
    (result,) = grade(assignment, tmp_path, hidden=True, only=[on_cpu]).results
    said = result.output
    assert "'hidden/weights' lives on /gpu:0, expected /cpu:0; so do hidden/biases," in said
    assert "softmax_linear/biases" in said and "make it under tf.device('/cpu:0')" in said


def test_a_step_measured_again_is_of_the_graph_the_other_checks_read(tmp_path: Path) -> None:
    """A check of the step that fails is judged again on each side's less slowed of two
    measurings (the twenty-seventh attack's honest program measured 1.63 times the reference
    with one other grading beside it): an honest program's second import builds the same
    graph, costs aside (a graph built otherwise is never timed in the first one's place:
    tests/test_grading.py), and both sides get their facts again."""
    from simsync.grading.graphs import REFERENCE, SUBMISSION, Sides
    from simsync.sandbox.bubblewrap import Limits, find_sandbox

    (assignment,) = [a for a in load_assignments() if a.number == 4]
    step = next(c for c in assignment.checks if c.kind == "simulation")
    folders = {SUBMISSION: tmp_path / "hw", REFERENCE: tmp_path / "ref"}
    for folder in folders.values():
        folder.mkdir()
        (folder / "train.py").write_bytes((assignment.solution / "train.py").read_bytes())
    sides = Sides(assignment, folders, [step], find_sandbox(), Limits())
    first = sides.get(SUBMISSION, "train.py")
    assert first.facts is not None and sides.get(REFERENCE, "train.py").facts is not None
    again = sides.measured_again("train.py")
    assert again is not None
    for built in again:
        assert built.error is None and built.facts is not None, built.error
        assert built.facts["step_time"]["mean"] > 0
    assert sides.measured_again("towers.py:build") is None  # no program: nothing to measure
