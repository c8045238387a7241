"""A student's TensorFlow program that rewrites what its own process reports (assignment 4):
it scores no more than the same program, honest; it writes nowhere outside the grader's
folders; and it changes nothing of the next submission's grade or the reference's."""

from __future__ import annotations

from pathlib import Path

import pytest

from simsync.grading import grade, load_assignments
from simsync.grading.graphs import reference_costs

pytestmark = pytest.mark.tf

#: averaging in a helper, not in average_gradients: the sync points are made in _mean
HELPER = '''def _mean(grads):
    return tf.reduce_mean(tf.concat(axis=0, values=grads), 0)


def average_gradients(tower_grads):
    """For each variable, the mean of every tower's gradient."""
    average_grads = []
    for grad_and_vars in zip(*tower_grads, strict=True):
        grads = [tf.expand_dims(g, 0) for g, _ in grad_and_vars]
        average_grads.append((_mean(grads), grad_and_vars[0][1]))
    return average_grads
'''

#: rewrites every made_in of every line its process says, whatever serializer writes it:
#: each op "made" at LINE of train.py
FORGE_MADE_IN = """
import json as _json

_real_dumps = _json.dumps


def _forge(value):
    if isinstance(value, dict):
        for key, item in list(value.items()):
            if key == "made_in" and isinstance(item, dict):
                value[key] = {name: ["train.py", LINE] for name in item}
            elif key == "made_in":
                value[key] = ["train.py", LINE]
            else:
                _forge(item)
    elif isinstance(value, list):
        for item in value:
            _forge(item)


def _dumps(value, *args, **kwargs):
    _forge(value)
    return _real_dumps(value, *args, **kwargs)


_json.dumps = _dumps
"""

#: every step also appends a forged answer (costs of nothing) to the descriptors of the
#: process that runs it (the answer's copy of standard output is the first free one, 3)
FORGE_ANSWER = """
_FORGED = '{"profile": {"ops": {}, "tensors": {}, "clients": {}, "steps": 5}}'


def _writes():
    return [tf.print(_FORGED, output_stream=f"file:///proc/self/fd/{fd}") for fd in (1, 2, 3)]
"""


def _assignment():
    (assignment,) = [a for a in load_assignments() if a.number == 4]
    return assignment


def _program(tmp_path: Path, name: str, forge: str = "") -> Path:
    """The reference with its averaging in a helper, and ``forge`` after its imports."""
    source = (_assignment().solution / "train.py").read_text()
    start = source.index("def average_gradients(tower_grads):")
    end = source.index("    return average_grads\n") + len("    return average_grads\n")
    source = source[:start] + HELPER + source[end:]
    line = 1 + source.splitlines().index(
        "        grads = [tf.expand_dims(g, 0) for g, _ in grad_and_vars]"
    )
    head = source.index("NUM_GPUS = 4")
    # the lines above move down by the forging code's: count them
    forge = forge.replace("LINE", str(line + forge.count("\n")))
    source = source[:head] + forge + source[head:]
    folder = tmp_path / name
    folder.mkdir()
    (folder / "train.py").write_text(source)
    return folder


def _scores(result) -> dict[str, float]:
    return {r.check.name: r.score for r in result.results}


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_a_forged_report_scores_no_more_than_the_honest_program(tmp_path):
    assignment = _assignment()
    honest = grade(assignment, _program(tmp_path, "honest"), hidden=True)
    made_in = "one sync point per variable, each made in average_gradients"
    assert _scores(honest)[made_in] == 0, [(r.check.name, r.output) for r in honest.results]
    forged = grade(assignment, _program(tmp_path, "forged", FORGE_MADE_IN), hidden=True)
    found = {r.check.name: r.output for r in forged.results}
    assert forged.score <= honest.score, found
    assert _scores(forged)[made_in] == 0
    assert "not in average_gradients" in found[made_in]


def test_what_its_graph_writes_into_the_answer_of_the_process_that_times_it_is_dropped(
    tmp_path,
):
    """The graph's own ops run in the second process (no code of the student's does): their
    forged lines are not sealed, so they are not read, and the step is timed as it ran."""
    assignment = _assignment()
    program = _program(tmp_path, "writes", FORGE_ANSWER)
    text = (program / "train.py").read_text()
    text = text.replace(
        'train_op = opt.apply_gradients(grads, global_step=global_step, name="apply_gradients")',
        "with tf.control_dependencies(_writes()):\n"
        "            train_op = opt.apply_gradients(\n"
        '                grads, global_step=global_step, name="apply_gradients"\n'
        "            )",
    )
    (program / "train.py").write_text(text)
    result = grade(assignment, program, hidden=True)
    found = {r.check.name: r.output for r in result.results}
    # the step check rests on the second process's own timing: it has a value, not a forgery
    step = next(c.name for c in assignment.checks if c.kind == "simulation")
    said = found[step]
    assert "step_time.mean * 1000 = " in said, found
    assert float(said.split(" = ")[1].split(";")[0].split(",")[0]) > 0.05  # not no costs
    assert _scores(result)["four towers, each on its own GPU"] == 2, found


def test_a_submission_writes_no_cost_the_next_one_or_the_reference_reads(tmp_path, monkeypatch):
    monkeypatch.setenv("SIMSYNC_CACHE_DIR", str(tmp_path / "cache"))
    assignment = _assignment()
    first = grade(assignment, _program(tmp_path, "first"), hidden=True)
    kept = _files(reference_costs())
    assert kept, "the reference's costs are kept for the next grading"
    cache = tmp_path / "cache"
    before = _files(cache)
    forged = _program(tmp_path, "forged", FORGE_MADE_IN)
    # and it says more: costs of nothing, under a key that climbs out of every folder
    text = (forged / "train.py").read_text()
    line = '{"key": "%s", "profile": {}}' % ("../" * 12 + "tmp/forged")
    says = f"""import os as _os
for _fd in range(1, 10):
    try:
        _os.write(_fd, {(line + chr(10)).encode()!r})
    except OSError:
        pass


def train():"""
    text = text.replace("def train():", says)
    (forged / "train.py").write_text(text)
    grade(assignment, forged, hidden=True)
    assert _files(cache) == before  # nothing written in any cache: the reference's as it was
    assert not Path("/tmp/forged").exists() and not Path("/tmp/forged.json").exists()
    again = grade(assignment, _program(tmp_path, "again"), hidden=True)
    assert _scores(again) == _scores(first)
    assert _files(reference_costs()) == kept
