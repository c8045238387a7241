"""A student's TensorFlow program that rewrites what its own process reports (assignment 4):
it scores no more than the same program, honest; it writes nowhere outside the grader's
folders; and it changes nothing of the next submission's grade or the reference's."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from simsync.grading import grade, graphs, load_assignments
from simsync.grading.rubric import GIVEN_RESIDUAL, UPHILL_STEP, _averages
from simsync.grading.source import check_program
from simsync.simulation.importing import import_program
from simsync.tf_backend.program.load import ProgramError

pytestmark = [pytest.mark.tf, pytest.mark.parallel]

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
    # the sandbox has no /proc/self/fd: a file named by its path is what a graph can reach
    return [tf.print(_FORGED, output_stream="file://answer.json")]
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


@pytest.fixture
def behind_the_source_rules(monkeypatch):
    """The walls behind the rules of a graded program's source, tested alone: a program that
    found a way around the rules (a dynamic language leaves some) is run as if it kept to
    them. Each test of this file that forges its process's reports asks for it; each forgery
    is refused by the rules too (test_forged_reports_are_refused_before_they_run)."""
    monkeypatch.setattr(graphs, "check_program", lambda path, shown: None)


def _scores(result) -> dict[str, float]:
    return {r.check.name: r.score for r in result.results}


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


#: what scores the averaging: read off the graph the second process loaded
AVERAGED = "one sync point per variable, each averaging every tower's gradient"
#: the check of the step's time: this machine's timing of the graph (its noise no forgery's)
STEP = next(c.name for c in _assignment().checks if c.kind == "simulation")
#: every check but the step's: a grading that needs neither the reference nor a timing
UNTIMED = [c.name for c in _assignment().checks if c.name != STEP]
ADVICE = next(c.name for c in _assignment().checks if c.points == 0)


def _advice(result):
    """The result of the check of no points: where the sync points were made."""
    (advice,) = [r for r in result.results if r.check.name == ADVICE]
    return advice


def test_a_forged_report_scores_no_more_than_the_honest_program(tmp_path, behind_the_source_rules):
    """Its averaging in a helper: the structure scores it (it averages every tower), and
    where it made the sync points is advice of no points, which a forgery cannot raise."""
    assignment = _assignment()
    honest = grade(assignment, _program(tmp_path, "honest"), hidden=True, only=UNTIMED)
    assert _scores(honest)[AVERAGED] == 3, [(r.check.name, r.output) for r in honest.results]
    assert not _advice(honest).passed
    program = _program(tmp_path, "forged", FORGE_MADE_IN)
    forged = grade(assignment, program, hidden=True, only=UNTIMED)
    found = {r.check.name: r.output for r in forged.results}
    assert _scores(forged) == _scores(honest), found
    assert not _advice(forged).passed
    assert "not in average_gradients" in _advice(forged).output


def test_what_its_graph_writes_into_the_answer_of_the_process_that_times_it_is_dropped(
    tmp_path,
):
    """The graph's own ops would run in the second process (no code of the student's does):
    a graph whose ops write a file (``tf.print`` to a file, the way one once reached that
    process's descriptors through ``/proc/self/fd``) is not run there."""
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
    result = grade(assignment, program, hidden=True, only=[STEP])
    found = {r.check.name: r.output for r in result.results}
    # a tf.print to a file reaches outside the graph: the process that measures it runs
    # none of the graph, told which op
    assert "PrintV2 op" in found[STEP] and "outside the graph" in found[STEP], found
    assert _scores(result)[STEP] == 0, found


def test_a_submission_writes_no_cost_the_next_one_or_the_reference_reads(
    tmp_path, monkeypatch, behind_the_source_rules
):
    """No cache at all: each grading measures its submission and its reference afresh, so a
    forged answer (costs of nothing, under a key that climbs out of every folder) reaches
    nobody else's grade."""
    monkeypatch.setenv("SIMSYNC_CACHE_DIR", str(tmp_path / "cache"))
    assignment = _assignment()
    first = grade(assignment, _program(tmp_path, "first"), hidden=True, only=UNTIMED)
    cache = tmp_path / "cache"
    before = _files(cache)
    assert not [name for name in before if name.startswith(("program-costs", "reference"))]
    forged = _program(tmp_path, "forged", FORGE_MADE_IN)
    text = (forged / "train.py").read_text()
    line = '{"key": "%s", "profile": {}}' % ("../" * 12 + "tmp/forged")
    says = f"""import os as _os
for _fd in range(1, 10):
    try:
        _os.write(_fd, {(line + chr(10)).encode()!r})
    except OSError:
        pass


def train():"""
    (forged / "train.py").write_text(text.replace("def train():", says))
    grade(assignment, forged, hidden=True)  # its step timed too: costs no cache keeps
    assert _files(cache) == before  # nothing written in the cache
    assert not Path("/tmp/forged").exists() and not Path("/tmp/forged.json").exists()
    again = grade(assignment, _program(tmp_path, "again"), hidden=True, only=UNTIMED)
    assert _scores(again) == _scores(first)


@pytest.mark.parametrize("decoy", ["a method", "a file never imported"])
def test_a_claim_of_a_line_that_made_no_sync_point_is_refused(
    tmp_path, decoy, behind_the_source_rules
):
    """A forged report that names, for each sync point, a line holding a concat that never ran
    as it: in a method of a class, or in a file beside the program that nothing imports. The
    advice refuses it, as honest. (A graded program imports no module of its own: the source
    rules refuse it, and its folder is no place modules come from.)"""
    program = _program(tmp_path, "forged", "")
    train = program / "train.py"
    text = train.read_text()
    if decoy == "a method":
        text += (
            "\n\nclass Decoy:\n    def average_gradients(self, grads):\n"
            "        return tf.concat(axis=0, values=grads)\n"
        )
        file, line = "train.py", len(text.splitlines()) - 1
    else:
        (program / "helper.py").write_text(
            "import tensorflow as tf\n\n\ndef average_gradients(grads):\n"
            "    return tf.concat(axis=0, values=grads)\n"
        )
        file, line = "helper.py", 5
    shift = FORGE_MADE_IN.count("\n") if file == "train.py" else 0  # inserted above it
    forge = FORGE_MADE_IN.replace('["train.py", LINE]', f"[{file!r}, {line + shift}]")
    head = text.index("NUM_GPUS = 4")
    train.write_text(text[:head] + forge + text[head:])
    advice = _advice(grade(_assignment(), program, hidden=True, only=[ADVICE]))
    assert not advice.passed, advice.output
    assert "not in average_gradients" in advice.output


def test_what_a_graded_loop_fetches_beyond_its_training_is_not_timed(tmp_path):
    """A loop that also fetches slow work of no use to training: its export's fetches were
    the program's process's word (a forgery could drop it, or add it), so what is timed is
    what trains, the same for every program."""
    program = _program(tmp_path, "slow")
    text = (program / "train.py").read_text()
    text = text.replace(
        "            _, loss_value = sess.run([train_op, loss])",
        "            _, loss_value, _ = sess.run([train_op, loss, slow])",
    ).replace(
        "        sess = tf.compat.v1.Session(",
        "        slow = tf.reduce_sum(tf.matmul(tf.random.normal([512, 512]), "
        "tf.random.normal([512, 512])), name='slow')\n"
        "        sess = tf.compat.v1.Session(",
    )
    (program / "train.py").write_text(text)
    imported = import_program(
        program / "train.py", export=True, cache=False, processes=1, averaging=False
    )
    assert imported.averaging is None  # not measured, as the grader's reference's
    assert "slow" not in imported.graph.nx
    assert len(imported.graph.towers) == 4


#: the export's fetches cut to the first: the slow training the loop runs left out
FORGE_FETCHES = """
import json as _json

_real_dumps = _json.dumps


def _dumps(value, *args, **kwargs):
    if isinstance(value, dict) and "export" in value:
        for client in value["export"]["clients"]:
            client["fetches"] = client["fetches"][:1]
    return _real_dumps(value, *args, **kwargs)


_json.dumps = _dumps
"""


def _with_slow_training(tmp_path: Path, name: str, forge: str, slow_train: str) -> Any:
    """The reference, ``forge`` after its imports, its loop also running ``slow_train``
    (lines that make it from a 64 x 64 variable ``slow_w``), imported as a graded program."""
    program = _program(tmp_path, name, forge)
    text = (program / "train.py").read_text()
    text = text.replace(
        "            _, loss_value = sess.run([train_op, loss])",
        "            _, loss_value, _ = sess.run([train_op, loss, slow_train])",
    ).replace(
        "        sess = tf.compat.v1.Session(",
        "        slow_w = tf.compat.v1.get_variable('slow_w', [64, 64])\n"
        + slow_train
        + "        sess = tf.compat.v1.Session(",
    )
    (program / "train.py").write_text(text)
    return import_program(
        program / "train.py", export=True, cache=False, processes=1, averaging=False
    )


def test_training_a_forged_export_leaves_out_of_its_fetches_is_timed_too(tmp_path):
    """A loop that also trains a slow variable: a forged export that names only its first
    fetch leaves that training out; the second process times every update of a trainable
    variable all the same, so the forged step is no lighter than the honest one."""
    slow_train = (
        "        slow = tf.reduce_sum(tf.matmul(tf.matmul(slow_w, slow_w), slow_w))\n"
        "        slow_train = tf.compat.v1.train.GradientDescentOptimizer(1e-6).minimize(\n"
        "            slow, var_list=[slow_w], name='slow_train')\n"
    )
    imported = _with_slow_training(tmp_path, "slowtrain", FORGE_FETCHES, slow_train)
    timed = [name for name in imported.graph.nx if name.startswith("slow_train")]
    assert timed, sorted(imported.graph.nx)[:20]
    assert len(imported.graph.towers) == 4


#: the export's collection of trainable variables forged: the slow variable left out
FORGE_TRAINABLE = """
import tensorflow as _tf

_real_export = _tf.compat.v1.train.export_meta_graph


def _export(*args, **kwargs):
    meta = _real_export(*args, **kwargs)
    listed = meta.collection_def["trainable_variables"].bytes_list.value
    kept = [v for v in listed if b"slow_w" not in v]
    del listed[:]
    listed.extend(kept)
    return meta


_tf.compat.v1.train.export_meta_graph = _export
"""


def test_an_update_of_a_variable_its_export_calls_untrainable_is_timed_too(tmp_path):
    """The fourth attack: the slow training an assign, its variable taken out of the
    exported trainable collection (the process's word): every update of every variable is
    timed all the same."""
    slow_train = (
        "        slow_train = tf.compat.v1.assign_add(\n"
        "            slow_w, 1e-6 * tf.matmul(tf.matmul(slow_w, slow_w), slow_w))\n"
    )
    imported = _with_slow_training(tmp_path, "untrainable", FORGE_TRAINABLE, slow_train)
    assert any(op.writes == ("slow_w",) for op in imported.graph.ops()), sorted(imported.graph.nx)


FED = """import json as _json
import tensorflow as tf

tf.compat.v1.disable_eager_execution()
x = tf.compat.v1.placeholder(tf.float32, [SHAPE, 64], name="x")
w = tf.compat.v1.get_variable("w", [64, 10])
a, b = tf.split(x @ w, 2)
loss = tf.reduce_mean(tf.square(tf.concat([a, b], 0)))
train = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)
sess = tf.compat.v1.Session()
sess.run(tf.compat.v1.global_variables_initializer())
FORGE
for _ in range(50):
    sess.run(train, feed_dict={x: [[0.0] * 64] * 32})
"""

#: the export's feeds rewritten: a concat's inputs fed too (what made them is pruned)
FORGE_FEEDS = """_real = _json.dumps
def _dumps(value, *args, **kwargs):
    if isinstance(value, dict) and "export" in value:
        for client in value["export"]["clients"]:
            client["feeds"]["split:0"] = {"shape": [16, 10], "dtype": "float32"}
    return _real(value, *args, **kwargs)
_json.dumps = _dumps
"""


def test_a_graded_program_is_fed_only_its_placeholders_at_their_own_shapes(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(FED.replace("SHAPE", "32").replace("FORGE", ""))
    imported = import_program(path, export=True, cache=False, processes=1, averaging=False)
    assert "split" in imported.graph.nx  # fed zeros of x's own shape: everything ran
    path.write_text(FED.replace("SHAPE", "32").replace("FORGE", FORGE_FEEDS))
    with pytest.raises(ProgramError, match="feeds split:0, which is no placeholder"):
        import_program(path, export=True, cache=False, processes=1, averaging=False)
    # a placeholder of a dimension not fixed: its size would be the process's word
    path.write_text(FED.replace("SHAPE", "None").replace("FORGE", ""))
    with pytest.raises(ProgramError, match="need every dimension fixed"):
        import_program(path, export=True, cache=False, processes=1, averaging=False)


#: the reference's mean, and what may stand for it in average_gradients
MEAN = "        grad = tf.reduce_mean(tf.concat(axis=0, values=grads), 0)\n"
#: averages that take every tower's data (so the graph's structure cannot tell) and use
#: tower_0's only: the fourth attack's
ONE_TOWER = {
    "concat[0]": "        grad = tf.concat(axis=0, values=grads)[0]\n",
    "g0 + 0.0 * others": (
        "        grad = grads[0][0] + 0.0 * tf.add_n([g[0] for g in grads[1:]])\n"
    ),
}


def _averaged_by(tmp_path: Path, name: str, line: str) -> Path:
    """The reference with ``line`` for its mean."""
    source = (_assignment().solution / "train.py").read_text()
    assert MEAN in source
    folder = tmp_path / name.replace(" ", "_").replace("*", "x")
    folder.mkdir()
    (folder / "train.py").write_text(source.replace(MEAN, line))
    return folder


@pytest.mark.parametrize("name", sorted(ONE_TOWER))
def test_an_average_that_uses_one_towers_gradient_scores_nothing_for_it(tmp_path, name):
    folder = _averaged_by(tmp_path, name, ONE_TOWER[name])
    result = grade(_assignment(), folder, hidden=True, only=[AVERAGED])
    (averaged,) = [r for r in result.results if r.check.name == AVERAGED]
    assert averaged.score == 0
    assert "weighs the towers' gradients 1.00, 0.00, 0.00, 0.00" in averaged.output


@pytest.mark.parametrize(
    ("name", "line", "weights", "fits"),
    [
        ("mean", MEAN, [0.25] * 4, True),
        # a sum weighs the towers alike: a mean with a learning rate 4 times as large
        ("sum", MEAN.replace("reduce_mean", "reduce_sum"), [0.25] * 4, True),
        ("skewed", "        grad = 0.4 * grads[0][0] + 0.2 * tf.add_n([g[0] for g in grads[1:]])\n",
         [0.4, 0.2, 0.2, 0.2], True),
        ("largest", MEAN.replace("reduce_mean", "reduce_max"), None, False),
    ],
)  # fmt: skip
def test_the_weights_of_the_towers_are_measured_by_the_process_that_loads_the_graph(
    tmp_path, name, line, weights, fits
):
    """Measured with the program's own data, by a process that runs none of its code."""
    folder = _averaged_by(tmp_path, name, line)
    imported = import_program(folder / "train.py", export=True, cache=False, processes=1)
    averaging = imported.averaging
    assert averaging is not None and averaging["problem"] is None and averaging["towers"] == 4
    assert len(averaging["updates"]) == 4  # one per variable
    for update in averaging["updates"]:
        assert update["repeated"] == 0.0, update
        assert (update["residual"] < 1e-5) is fits, update
        if weights is not None:
            assert update["weights"] == pytest.approx(weights, abs=1e-5), update


#: the mean only while a counter of its runs is in a window (the runs that measure its
#: weights, say), tower_0's gradient otherwise
COUNTED = """        counter = tf.compat.v1.get_variable(
            f"calls_{len(average_grads)}", [], initializer=tf.zeros_initializer(),
            trainable=False, use_resource=True)
        with tf.control_dependencies([counter.assign_add(1.0)]):
            runs = counter.read_value()
        window = tf.logical_and(runs > 5.0, runs < 1e9)
        mean = tf.reduce_mean(tf.concat(axis=0, values=grads), 0)
        grad = tf.where(window, mean, grads[0][0])
"""


def test_an_average_that_reads_state_of_its_own_cannot_have_its_weights_measured(tmp_path):
    """Its values could tell the runs that measure it from training: refused, named."""
    folder = _averaged_by(tmp_path, "counted", COUNTED)
    averaging = import_program(folder / "train.py", export=True, cache=False, processes=1).averaging
    assert averaging is not None and not averaging["updates"]
    assert "with the variable 'calls_" in averaging["problem"], averaging["problem"]


#: the export says a second thread loops, training one variable only: a light step beside
#: the real one would shorten the mean
FORGE_CLIENT = """
import json as _json

_real_dumps = _json.dumps


def _dumps(value, *args, **kwargs):
    if isinstance(value, dict) and "export" in value:
        light = [n for n in _json.loads(_real_dumps(value))["export"]["made_in"]
                 if n.startswith("apply_gradients/update_hidden/biases/")
                 and n.endswith("ApplyGradientDescent")]
        value["export"]["clients"].append({"thread": "light", "fetches": light, "feeds": {}})
    return _real_dumps(value, *args, **kwargs)


_json.dumps = _dumps
"""


def test_a_thread_a_forged_export_says_loops_on_part_of_the_step_is_not_timed(tmp_path):
    imported = import_program(
        _program(tmp_path, "light", FORGE_CLIENT) / "train.py",
        export=True,
        cache=False,
        processes=1,
    )
    assert [c.name for c in imported.graph.clients] == ["main"]


def _edited(tmp_path: Path, name: str, *edits: tuple[str, str]) -> Path:
    """The reference's program with each ``(old, new)`` of ``edits`` made (each must be
    there): a folder holding it as train.py."""
    source = (_assignment().solution / "train.py").read_text()
    for old, new in edits:
        assert old in source, old
        source = source.replace(old, new)
    folder = tmp_path / name
    folder.mkdir()
    (folder / "train.py").write_text(source)
    return folder


def _measured(tmp_path: Path, given: Any, name: str, edits: tuple[tuple[str, str], ...]) -> Any:
    """The averaging measured of the reference's program with ``edits`` made, beside the
    given model (``given``: the reference's export)."""
    folder = _edited(tmp_path, name, *edits)
    return import_program(
        folder / "train.py", export=True, cache=False, processes=1, given=given
    ).averaging


APPLY = (
    "        train_op = opt.apply_gradients("
    'grads, global_step=global_step, name="apply_gradients")\n'
)
#: the averages applied at a rate of 0 (seen), tower_0's gradients applied where no check
#: looked for an update: the handle through tf.identity (a tf.function's call: below)
HIDDEN = {
    "identity": APPLY.replace("opt.apply", "tf.compat.v1.train.GradientDescentOptimizer(0.0).apply")
    + """        with tf.control_dependencies([train_op]):
            hidden = [tf.raw_ops.ResourceApplyGradientDescent(
                var=tf.identity(v.handle), alpha=0.1, delta=g) for g, v in tower_grads[0]]
        train_op = tf.group(train_op, *hidden)
""",
}


@pytest.mark.parametrize("how", sorted(HIDDEN))
def test_an_update_whose_handle_reaches_it_another_way_is_found_and_measured(tmp_path, how):
    """The fifth attack's F3: the model trained on tower_0's gradients by an op no check
    counted as an update, the averages applied at a rate of 0."""
    folder = _edited(tmp_path, how, (APPLY, HIDDEN[how]))
    averaging = import_program(folder / "train.py", export=True, cache=False, processes=1).averaging
    assert averaging is not None and averaging["problem"] is None
    found = {u["op"]: u for u in averaging["updates"]}
    hidden = [u for name, u in found.items() if not name.startswith("apply_gradients/")]
    assert len(hidden) == 4, sorted(found)  # one per variable
    for update in hidden:
        assert update["weights"] == pytest.approx([1, 0, 0, 0], abs=1e-6), update


#: the towers' real batches cut from one batch they all take, a random tag of each tower's
#: own as what the measuring would vary (the fifth attack's F2)
SHARED = (
    ("    tower_grads = []\n",
     "    tower_grads = []\n    every_image, every_label = queue.dequeue_many(NUM_GPUS)\n"),
    ("                images, labels = queue.dequeue()\n",
     "                images, labels = every_image[i], every_label[i]\n"),
)  # fmt: skip
#: the towers' inputs cut from a placeholder: the average tells training (the towers fed
#: the placeholder's slices) from the measuring (fed other values), the fifth attack's F1
SLICED = (
    ("    tower_grads = []\n",
     "    tower_grads = []\n"
     "    global X\n"
     "    X = tf.compat.v1.placeholder(tf.float32, [NUM_GPUS * BATCH, FEATURES], name='X')\n"
     "    xs = [tf.identity(X[i * BATCH:(i + 1) * BATCH]) for i in range(NUM_GPUS)]\n"),
    ("                images, labels = queue.dequeue()\n",
     "                _, labels = queue.dequeue()\n                images = xs[i]\n"),
    (MEAN, MEAN + "        grad = tf.where(tf.reduce_all(tf.equal(X, 0.0)), grads[0][0], grad)\n"),
    ("            _, loss_value = sess.run([train_op, loss])",
     "            _, loss_value = sess.run([train_op, loss], feed_dict={X: "
     "tf.compat.v1.random_normal([NUM_GPUS * BATCH, FEATURES]).eval(session=sess)})"),
)  # fmt: skip


#: the ninth attack's leads: towers built unlike each other (tower_0's loss counted four
#: times, the others' not at all), and a number drawn once a step that the towers share
UNLIKE = (
    ("                tower_grads.append(opt.compute_gradients(loss))\n",
     "                scale = 4.0 if i == 0 else 0.0\n"
     "                tower_grads.append(opt.compute_gradients(loss * scale))\n"),
)  # fmt: skip
GATED = (
    ("    tower_grads = []\n",
     "    tower_grads = []\n    gate = tf.random.uniform([])\n"),
    ("                tower_grads.append(opt.compute_gradients(loss))\n",
     "                tower_grads.append(opt.compute_gradients(loss * gate))\n"),
)  # fmt: skip


@pytest.mark.parametrize(
    ("name", "edits", "said"),
    [
        ("shared", SHARED, "its towers share data ('fifo_queue_DequeueMany:0'"),
        ("unlike", UNLIKE, "tower_1 computes otherwise than tower_0"),
        ("gated", GATED, "its towers share data ('random_uniform"),
        ("placeholder", SLICED, "its towers' data comes from 'X', a placeholder its loop feeds"),
    ],
)
def test_data_the_measuring_cannot_vary_tower_by_tower_is_refused(tmp_path, name, edits, said):
    folder = _edited(tmp_path, name, *edits)
    averaging = import_program(folder / "train.py", export=True, cache=False, processes=1).averaging
    assert averaging is not None and not averaging["updates"]
    assert said in str(averaging["problem"])


def test_an_honest_average_of_a_variable_of_fewer_values_than_towers_passes(tmp_path):
    """Two classes: softmax_linear/biases has 2 values for 4 towers' weights (the fifth
    attack's F5): judged by the weights that fit every update at once."""
    folder = _edited(tmp_path, "two", ("FEATURES, HIDDEN, CLASSES = 64, 128, 10",
                                       "FEATURES, HIDDEN, CLASSES = 64, 128, 2"))  # fmt: skip
    averaging = import_program(folder / "train.py", export=True, cache=False, processes=1).averaging
    assert averaging is not None and averaging["problem"] is None
    (biases,) = [u for u in averaging["updates"] if "softmax_linear/biases" in u["op"]]
    assert biases["joint"] and biases["weights"] == pytest.approx([0.25] * 4, abs=1e-4)
    assert all(u["residual"] < 1e-5 for u in averaging["updates"])


#: the sixth attack's: tower_0's gradient kept where a check of values would not look (an
#: integer variable), and added back to the model by a write of no tower's data
STASHED = (
    APPLY
    + """        fixes = []
        for k, ((mean, v), (g0, _)) in enumerate(zip(grads, tower_grads[0])):
            stash = tf.compat.v1.get_variable(
                f"stash_{k}", v.shape, dtype=tf.int32, trainable=False, use_resource=True,
                initializer=tf.zeros_initializer())
            put = stash.assign(tf.bitcast(0.1 * (mean - g0), tf.int32))
            with tf.control_dependencies([put]):
                fixes.append(v.assign_add(tf.bitcast(stash.read_value(), tf.float32)))
        train_op = tf.group(train_op, *fixes)
"""
)
#: a counter of runs written with "the towers' data" (times 0), the mean while it is low
COUNTER = (
    (MEAN, MEAN + """        counter = tf.compat.v1.get_variable(
            f"steps_{len(average_grads)}", [], trainable=False, use_resource=True,
            initializer=tf.zeros_initializer())
        grad = tf.where(counter > 600.0, grads[0][0], grad)
        COUNTERS.append((counter, grad))
"""),
    (APPLY, APPLY + """        train_op = tf.group(
            train_op, *[c.assign_add(1.0 + 0.0 * tf.reduce_sum(g)) for c, g in COUNTERS])
"""),
    ("NUM_GPUS = 4\n", "NUM_GPUS = 4\nCOUNTERS = []\n"),
)  # fmt: skip
#: the real training in a queue runner's thread, on a batch of its own; the graded step's
#: averages applied at a rate of 0
SIDE = (
    (APPLY, APPLY.replace("opt.apply", "tf.compat.v1.train.GradientDescentOptimizer(0.0).apply")
     + """        with tf.name_scope("side"):
            images, labels = queue.dequeue()
            with tf.compat.v1.variable_scope(tf.compat.v1.get_variable_scope(), reuse=True):
                side = opt.minimize(tower_loss("side", images, labels))
        ticks = tf.queue.FIFOQueue(1, [tf.int32], shapes=[[]])
        with tf.control_dependencies([side]):
            tick = ticks.enqueue([tf.constant(0)])
        tf.compat.v1.train.add_queue_runner(tf.compat.v1.train.QueueRunner(ticks, [tick]))
"""),
)  # fmt: skip


@pytest.mark.parametrize(
    ("name", "edits", "said"),
    [
        ("stashed", ((APPLY, STASHED),), "after the towers with the variable 'stash_0'"),
        ("counter", COUNTER, "after the towers with the variable 'steps_0'"),
        ("side", SIDE, "writes with 'side/fifo_queue_Dequeue' (QueueDequeueV2)"),
    ],
)
def test_a_step_that_trains_past_the_measuring_is_refused(tmp_path, name, edits, said):
    """The sixth attack's forgeries: every write of the step is followed back to the towers'
    data, and reads there only the model (after the towers, only its own variable)."""
    folder = _edited(tmp_path, name, *edits)
    averaging = import_program(folder / "train.py", export=True, cache=False, processes=1).averaging
    assert averaging is not None and not averaging["updates"]
    assert said in str(averaging["problem"]), averaging["problem"]


#: the seventh attack's: the model trained inside a function's call, given tower_0's
#: gradients as integers beside the means (a check of the call's floating inputs saw means)
IN_A_FUNCTION = (
    APPLY.replace("opt.apply", "tf.compat.v1.train.GradientDescentOptimizer(0.0).apply")
    + """        means = [g for g, _ in grads]
        bits = [tf.bitcast(g0, tf.int32) for g0, _ in tower_grads[0]]

        @tf.function
        def apply(means, bits):
            for (_, v), mean, b in zip(grads, means, bits, strict=True):
                v.assign_sub(0.1 * tf.bitcast(b, tf.float32) + 0.0 * mean)
            return tf.constant(0)

        train_op = tf.group(train_op, apply(means, bits))
"""
)


def test_a_write_inside_a_functions_call_is_refused(tmp_path):
    """What a tf.function (a tf.cond, a tf.while_loop) writes is not what its inputs say."""
    folder = _edited(tmp_path, "function", (APPLY, IN_A_FUNCTION))
    averaging = import_program(folder / "train.py", export=True, cache=False, processes=1).averaging
    assert averaging is not None and not averaging["updates"]
    assert "writes variables inside a function's call (StatefulPartitionedCall" in str(
        averaging["problem"]
    )


#: the twentieth attack's: state inside a plain function call, which TensorFlow declares
#: stateless (tf.raw_ops.PartitionedCall): each scored 9/9 with a wrong program
PARTITIONED = """
        def called(fn, *args):
            specs = [tf.TensorSpec(a.shape, a.dtype) for a in args]
            concrete = fn.get_concrete_function(*specs)
            outs = [o.dtype for o in concrete.outputs]
            return tf.raw_ops.PartitionedCall(args=list(args), Tout=outs, f=concrete)[0]
"""
IN_A_CALL = {
    # a clock: the learning rate turns below 0 after a deadline
    "a clock": """
        @tf.function
        def rate(step):
            return tf.where(tf.raw_ops.Timestamp() + 0.0 * tf.cast(step, tf.float64) < 1e12,
                            0.1, -0.1)

        opt = tf.compat.v1.train.GradientDescentOptimizer(called(rate, global_step))
""",
    # where it runs: another rate on a GPU than on the grader's CPUs
    "a device's index": """
        @tf.function
        def rate(step):
            index = tf.raw_ops.DeviceIndex(device_names=["CPU", "GPU"])
            return tf.where(tf.equal(index + 0 * tf.cast(step, tf.int32), 0), 0.1, -0.1)

        opt = tf.compat.v1.train.GradientDescentOptimizer(called(rate, global_step))
""",
    # a count of the step's runs, kept in a table made by its shared name
    "a table": """
        @tf.function
        def rate(step):
            table = tf.raw_ops.MutableHashTableV2(key_dtype=tf.int64, value_dtype=tf.int64,
                                                  shared_name="runs")
            key = tf.constant(0, tf.int64)
            runs = tf.raw_ops.LookupTableFindV2(table_handle=table, keys=key,
                                                default_value=tf.constant(0, tf.int64))
            insert = tf.raw_ops.LookupTableInsertV2(table_handle=table, keys=key, values=runs + 1)
            with tf.control_dependencies([insert]):
                return tf.where(runs + 0 * step < 40000, 0.1, -0.1)

        opt = tf.compat.v1.train.GradientDescentOptimizer(called(rate, global_step))
""",
    # the twenty-first attack's: a clock in tf.raw_ops.For, which runs a function too
    "a clock in a For": """
        @tf.function
        def now(i, t):
            return [tf.raw_ops.Timestamp()]

        def rate(step):
            zero = tf.cast(step, tf.float64) * 0.0
            body = now.get_concrete_function(tf.TensorSpec([], tf.int32),
                                             tf.TensorSpec([], tf.float64))
            (t,) = tf.raw_ops.For(start=0, limit=1, delta=1, input=[zero], body=body)
            return tf.where(t < 1e12, 0.1, -0.1)

        opt = tf.compat.v1.train.GradientDescentOptimizer(rate(global_step))
""",
    # ... and the count of steps read inside a call, through the handle it was given
    "a variable read inside": """
        @tf.function
        def rate(handle):
            step = tf.raw_ops.ReadVariableOp(resource=handle, dtype=tf.int64)
            return tf.where(step < 10000, 0.1, -0.1)

        opt = tf.compat.v1.train.GradientDescentOptimizer(called(rate, global_step.handle))
""",
}


@pytest.mark.parametrize("how", sorted(IN_A_CALL))
def test_state_inside_a_plain_function_call_is_refused(tmp_path, how):
    """TensorFlow declares PartitionedCall stateless whatever its function holds: the
    measuring looks into the call."""
    opt = "        opt = tf.compat.v1.train.GradientDescentOptimizer(0.1)\n"
    folder = _edited(tmp_path, "called", (opt, PARTITIONED + IN_A_CALL[how]))
    averaging = import_program(folder / "train.py", export=True, cache=False, processes=1).averaging
    assert averaging is not None and not averaging["updates"], averaging
    said = str(averaging["problem"])
    assert "calls a function (" in said and "state besides" in said, said


#: the twenty-second attack's: functions TensorFlow runs that no op names, and data made of
#: a handle itself; each scored 9/9 with a program that trained otherwise than measured. Each
#: is a hook on the mean of every variable's gradients (``average_gradients``' line).
MEAN = "        grad = tf.reduce_mean(tf.concat(axis=0, values=grads), 0)\n"
HOOKED = "        grad = hook(tf.reduce_mean(tf.concat(axis=0, values=grads), 0), grads)\n"
UNNAMED = {
    # SymbolicGradient runs the gradient registered for its function, not the function
    "a registered gradient": """
@tf.function
def _plain(mean, first):
    return tf.identity(mean)


@tf.function
def _picked(mean, first, dy):
    table = tf.raw_ops.MutableHashTableV2(key_dtype=tf.int64, value_dtype=tf.int64,
                                          shared_name="runs")
    runs = tf.raw_ops.LookupTableFindV2(table_handle=table, keys=tf.constant(0, tf.int64),
                                        default_value=tf.constant(0, tf.int64))
    return tf.where(runs < 10, mean, first), tf.zeros_like(first)


def hook(grad, grads):
    spec = tf.TensorSpec(grad.shape, grad.dtype)
    plain = _plain.get_concrete_function(spec, spec).function_def
    picked = _picked.get_concrete_function(spec, spec, spec).function_def
    definition = tf.compat.v1.GraphDef()
    definition.library.function.extend([plain, picked])
    definition.library.gradient.add(function_name=plain.signature.name,
                                    gradient_func=picked.signature.name)
    tf.graph_util.import_graph_def(definition, name="")
    func = tf.compat.v1.NameAttrList(name=plain.signature.name)
    out, _ = tf.raw_ops.SymbolicGradient(input=[grad, grads[0][0], tf.ones_like(grad)],
                                         Tout=[tf.float32, tf.float32], f=func)
    out.set_shape(grad.shape)
    return out

""",
    # Grappler's implementation selector may run another function than the one called
    "another implementation": """
@tf.function(experimental_attributes={"api_implements": "mean", "api_preferred_device": "GPU"})
def _called(mean, first):
    return tf.identity(mean)


@tf.function(experimental_attributes={"api_implements": "mean", "api_preferred_device": "CPU"})
def _other(mean, first):
    return tf.identity(first)


def hook(grad, grads):
    spec = tf.TensorSpec(grad.shape, grad.dtype)
    definition = tf.compat.v1.GraphDef()
    definition.library.function.extend([_other.get_concrete_function(spec, spec).function_def])
    tf.graph_util.import_graph_def(definition, name="")
    (out,) = tf.raw_ops.PartitionedCall(args=[grad, grads[0][0]], Tout=[tf.float32],
                                        f=_called.get_concrete_function(spec, spec))
    out.set_shape(grad.shape)
    return out

""",
    # a handle serialized names the device it was placed on (the grader's are others)
    "a handle serialized": """
def hook(grad, grads):
    with tf.device("/gpu:1"):
        handle = tf.raw_ops.VarHandleOp(dtype=tf.float32, shape=[], shared_name="placed")
        named = tf.strings.substr(tf.raw_ops.SerializeTensor(tensor=handle), 9, 44)
    return grad * tf.where(tf.strings.regex_full_match(named, ".*CPU:0.*"), -1.0, 1.0)

""",
    # a parallel concat's update writes into the memory of the constant it is given: a count
    # of the executor's runs (TensorFlow declares it stateless)
    "an update in place": """
def hook(grad, grads):
    dtype = tf.compat.v1.AttrValue(type=tf.float32.as_datatype_enum)
    definition = tf.compat.v1.GraphDef()
    definition.node.add(name="value", op="Placeholder", attr={"dtype": dtype})
    definition.node.add(name="update", op="Placeholder", attr={"dtype": dtype})
    definition.node.add(name="write", op="_ParallelConcatUpdate", input=["value", "update"],
                        attr={"T": dtype, "loc": tf.compat.v1.AttrValue(i=0)})
    runs = tf.constant([0.0])
    one = tf.sign(tf.abs(tf.reduce_sum(grad)) + 1.0)
    (count,) = tf.graph_util.import_graph_def(
        definition, input_map={"value:0": runs, "update:0": runs + one},
        return_elements=["write:0"], name="kept")
    return grad * tf.where(count[0] < 500.0, 1.0, -1.0)

""",
    # Grappler, on in a student's plain session and off in the measuring, rewrites
    # log(1 + s) into log1p(s): 0 and s for a tiny s, so the mean turns uphill there
    "a rewrite by Grappler": """
def hook(grad, grads):
    s = 1e-10 * tf.exp(-tf.abs(tf.tanh(tf.reduce_sum(grad))))
    return grad * tf.where(tf.math.log(1.0 + s) > 0.0, -1.0, 1.0)

""",
}
#: what each is refused with
UNNAMED_SAID = {
    "a rewrite by Grappler": "compute otherwise when TensorFlow rewrites the graph",
    "an update in place": "(_ParallelConcatUpdate) changes a tensor in place",
    "a registered gradient": "holds 'MutableHashTableV2'",
    "another implementation": "declares what it implements (api_implements)",
    "a handle serialized": "computes with a resource's handle itself",
}


@pytest.mark.parametrize("how", sorted(UNNAMED))
def test_functions_run_unnamed_and_data_made_of_a_handle_are_refused(tmp_path, how):
    source = (_assignment().solution / "train.py").read_text()
    head = "def average_gradients("
    assert head in source
    folder = _edited(tmp_path, "unnamed", (MEAN, HOOKED), (head, UNNAMED[how] + head))
    averaging = import_program(folder / "train.py", export=True, cache=False, processes=1).averaging
    assert averaging is not None and not averaging["updates"], averaging
    assert UNNAMED_SAID[how] in str(averaging["problem"]), averaging["problem"]


RATE = "tf.compat.v1.train.GradientDescentOptimizer(0.1)"
#: a tiny number made from the count of steps: exp(s) - 1 and log(1 + s) are 0 for it, but
#: Grappler's expm1(s) and log1p(s), in a student's own session, are not
TINY = "1e-10 * tf.exp(-tf.abs(tf.tanh(tf.cast(global_step, tf.float32))))"
#: computing otherwise under TensorFlow's graph rewriting (on in a student's own session,
#: off in the measuring): the twenty-second and twenty-third attacks' forms, each refused by
#: what the twin (the step computed as a student's session computes it) compares
REWRITTEN_FORMS = {
    # a learning rate that turns: its count's shape is known (read, not fed) where rewritten
    "a learning rate": (
        (RATE, f"tf.compat.v1.train.GradientDescentOptimizer(tf.where(tf.math.exp({TINY}) "
               "- 1.0 > 0.0, -0.1, 0.1))"),
    ),
    # ... once the count of steps passes 500, which only the sweep of counts reaches
    "a learning rate at a later count": (
        (RATE, "tf.compat.v1.train.GradientDescentOptimizer(tf.where(tf.logical_and("
               f"global_step >= 500, tf.math.log(1.0 + {TINY}) > 0.0), -0.1, 0.1))"),
    ),
    # ... of Adam, so small that an absolute tolerance of 1e-3 took -4.99e-4 for 4.99e-4
    "a small learning rate": (
        (RATE, f"tf.compat.v1.train.AdamOptimizer(tf.where(tf.math.log(1.0 + {TINY}) > 0.0, "
               "-4.99e-4, 4.99e-4))"),
    ),
    # the mean turned by exp(s) - 1 of its own values: fed, their shape is unknown and
    # TensorFlow rewrites nothing; read from a variable, as from the queue, it rewrites
    "the mean, by its data": (
        (MEAN, "        s = 1e-10 * tf.exp(-tf.abs(tf.tanh(tf.reduce_sum(grads))))\n"
               + MEAN + "        grad = grad * tf.where(tf.math.exp(s) - 1.0 > 0.0, -1.0, 1.0)\n"),
    ),
    # the mean times -1000 for about 1 batch in 500 of each variable: the five steps of
    # data compared first see it about 4 times in 100, a training of 1,000 steps nearly
    # always (the twenty-fourth attack's, at 1 in 1,000, scored 9/9 twice)
    "the mean, for rare batches": (
        (MEAN, MEAN + "        u = tf.math.floormod(tf.abs(tf.reshape(grads[0], [-1])[0]) "
               "* 1e6, 1.0)\n"
               "        s = tf.where(u < 0.002, 1e-10, 1.0)\n"
               "        d = tf.math.log(1.0 + s) / s  # 0 here for 1e-10; 1 as log1p\n"
               "        grad = grad * tf.where(d > 0.9, -1000.0, 1.0)\n"),
    ),
    # a write of each variable's own value into its own rows, the rows reversed where
    # log1p: its indices (integers) were never compared
    "a write's indices": (
        (MEAN, MEAN + "        var = grad_and_vars[0][1]\n"
               "        with tf.control_dependencies([grad]):\n"
               "            value = var.read_value()\n"
               "        s = 1e-10 * tf.exp(-tf.abs(tf.tanh(tf.reduce_sum(value))))\n"
               "        rows = tf.range(tf.shape(value)[0])\n"
               "        rows = tf.where(tf.math.log(1.0 + s) > 0.0, tf.reverse(rows, [0]), rows)\n"
               "        kept = tf.compat.v1.scatter_update(var, rows, value)\n"
               "        with tf.control_dependencies([kept]):\n"
               "            grad = tf.identity(grad)\n"),
    ),
}  # fmt: skip


@pytest.mark.parametrize("how", sorted(REWRITTEN_FORMS))
def test_what_tensorflows_graph_rewriting_turns_is_refused(tmp_path, given, how):
    averaging = _measured(tmp_path, given, "rewritten", REWRITTEN_FORMS[how])
    assert averaging is not None
    judged = " ".join(_averages({"averaging": averaging}))
    assert "TensorFlow" in judged and "rewrit" in judged, judged


#: the mean turned, or made 30 times as large, for about 1 batch in 500 of each variable,
#: with no rewriting at all: the 20 batches the weights are measured on see it about 4
#: times in 100, a training of 1,000 steps beside the given model's gradient nearly always
#: (a larger factor would make the program's own steps before the measuring diverge)
RARE = (
    "        u = tf.math.floormod(tf.abs(tf.reshape(grads[0], [-1])[0]) * 1e6, 1.0)\n"
    "        grad = grad * tf.where(u < 0.002, FACTOR, 1.0)\n"
)
RARE_FORMS = {
    "turned": ("-1.0", ("goes against the given model's gradient", "uphill", "weighs the towers")),
    "made larger": ("30.0", ("times more at step", "weigh")),
}


@pytest.mark.parametrize("how", sorted(RARE_FORMS))
def test_an_update_that_changes_for_rare_batches_is_refused(tmp_path, given, how):
    factor, said = RARE_FORMS[how]
    averaging = _measured(tmp_path, given, "rare", ((MEAN, MEAN + RARE.replace("FACTOR", factor)),))
    assert averaging is not None
    judged = " ".join(_averages({"averaging": averaging}))
    # refused: mostly by the training (the few batches measured before it, or the steps
    # taken beside the given model's, arm it now and then, and say so in their words)
    assert any(phrase in judged for phrase in said), averaging


#: writes given infinity at every step, which stopped the grader's training at its first
#: step (a diverged training, it took it for), so a trigger armed for rare batches went
#: untried: into a variable of the program's own (the twenty-fifth attack, 9/9), and as the
#: rate of a write of the model that writes no row (the twenty-sixth, 9/9)
INFINITY = {
    "into a variable of its own": APPLY + (
        '        worst = tf.compat.v1.get_variable("worst", [], trainable=False,\n'
        "            initializer=tf.compat.v1.zeros_initializer())\n"
        '        train_op = tf.group(train_op, worst.assign(float("inf")))\n'
    ),
    "as the rate of an empty write of the model": APPLY + (
        "        empty = tf.raw_ops.ResourceSparseApplyProximalGradientDescent(\n"
        "            var=tower_grads[0][0][1].handle, alpha=tf.constant(float('inf')),\n"
        "            l1=tf.constant(0.0), l2=tf.constant(0.0),\n"
        "            grad=tf.zeros([0] + tower_grads[0][0][1].shape.as_list()[1:]),\n"
        "            indices=tf.zeros([0], tf.int32))\n"
        "        train_op = tf.group(train_op, empty)\n"
    ),
}  # fmt: skip


@pytest.mark.parametrize("how", sorted(INFINITY))
def test_a_write_given_infinity_does_not_stop_the_training(tmp_path, given, how):
    turned = MEAN + RARE.replace("FACTOR", "-1.0")
    averaging = _measured(tmp_path, given, "infinity", ((MEAN, turned), (APPLY, INFINITY[how])))
    assert averaging is not None
    judged = " ".join(_averages({"averaging": averaging}))
    assert any(phrase in judged for phrase in RARE_FORMS["turned"][1]), averaging


#: a softmax of constants, as TensorFlow's plain kernel (oneDNN off: "off") or its default
#: kernels ("default") compute it, printed
SOFTMAX = r"""
import os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
os.environ.pop("TF_ENABLE_ONEDNN_OPTS", None)
if sys.argv[1] == "off":
    os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"
import tensorflow as tf
tf.compat.v1.disable_eager_execution()
one = tf.compat.v1.placeholder_with_default(1.0, [])  # not folded before the session runs
logits = tf.reshape(tf.range(40, dtype=tf.float32), [4, 10]) * 0.37 - 3.1
with tf.compat.v1.Session() as session:
    print(repr(float(session.run(tf.nn.softmax(logits * one))[0, 0])))
"""


def _softmax(kernels: str) -> float:
    ran = subprocess.run(
        [sys.executable, "-c", SOFTMAX, kernels], capture_output=True, text=True, timeout=300
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    return float(ran.stdout.split()[-1])


def test_a_trigger_on_how_tensorflows_plain_kernels_round_is_measured_with_its_defaults(
    tmp_path, given
):
    """The twenty-fourth attack's S1: the mean turned unless a softmax equals, exactly, what
    TensorFlow's plain kernel computes. The grader ran with oneDNN off and measured a mean
    (9/9); a student's own `python train.py` has oneDNN on, and its rounding turned the mean
    at every step. The program is now measured with TensorFlow's default kernels."""
    plain, default = _softmax("off"), _softmax("default")
    if plain == default:
        pytest.skip("this machine's TensorFlow rounds this softmax alike with oneDNN on and off")
    hook = (
        "        one = tf.sign(tf.abs(tf.reduce_sum(grad)) + 1.0)  # 1, made as the step runs\n"
        "        logits = tf.reshape(tf.range(40, dtype=tf.float32), [4, 10]) * 0.37 - 3.1\n"
        "        p = tf.nn.softmax(logits * one)[0, 0]\n"
        f"        grad = grad * tf.where(tf.equal(p, {plain!r}), 1.0, -1.0)\n"
    )
    averaging = _measured(tmp_path, given, "onednn", ((MEAN, MEAN + hook),))
    assert averaging is not None
    assert _averages({"averaging": averaging}), averaging


#: the twenty-third attack's false refusals: an average returned as IndexedSlices (applied
#: by ResourceScatterAdd, whose value is minus the rate times the gradient), and a NaN guard
#: beside an evaluation op of random numbers in a tf.cond the step never runs
HONEST_FORMS = {
    "IndexedSlices": (
        (MEAN, MEAN + "        grad = tf.IndexedSlices(grad, tf.range(tf.shape(grad)[0]), "
               "tf.shape(grad))\n"),
    ),
    "a guard beside an evaluation op": (
        (MEAN, MEAN + "        grad = tf.cond(tf.reduce_all(tf.math.is_finite(grad)), "
               "lambda: grad, lambda: tf.zeros_like(grad))\n"),
        (APPLY, APPLY + "        coin = tf.random.uniform([]) > 0.5\n"
                "        noise = tf.cond(coin, lambda: tf.random.normal([BATCH, FEATURES]), "
                "lambda: tf.zeros([BATCH, FEATURES]))\n"),
    ),
}  # fmt: skip


@pytest.mark.parametrize("how", sorted(HONEST_FORMS))
def test_honest_forms_of_the_mean_the_23rd_attack_found_refused_pass(tmp_path, given, how):
    averaging = _measured(tmp_path, given, "honest", HONEST_FORMS[how])
    assert averaging is not None and averaging["problem"] is None, averaging["problem"]
    assert _averages({"averaging": averaging}) == [], averaging


#: the eighth attack's: a second handle to each variable, made inside a tf.function by the
#: variable's shared name, writes tower_0's gradient beside the honest mean's apply
ALIASED = (
    APPLY
    + """        def alias(v):
            @tf.function
            def handle():
                return tf.raw_ops.VarHandleOp(
                    dtype=v.dtype.base_dtype, shape=v.shape,
                    shared_name=v.handle.op.get_attr("shared_name"))
            return handle()

        hidden = [tf.raw_ops.AssignSubVariableOp(resource=alias(v), value=0.1 * (g0 - mean))
                  for (mean, v), (g0, _) in zip(grads, tower_grads[0], strict=True)]
        train_op = tf.group(train_op, *hidden)
"""
)


def test_a_write_through_a_handle_that_is_none_of_the_graphs_variables_is_refused(tmp_path):
    folder = _edited(tmp_path, "aliased", (APPLY, ALIASED))
    averaging = import_program(folder / "train.py", export=True, cache=False, processes=1).averaging
    assert averaging is not None and not averaging["updates"]
    assert "writes through a handle ('StatefulPartitionedCall" in str(averaging["problem"])


#: the tenth attack's forgery: each tower's batch from a queue of its own whose first column
#: is the tower's number, and each tower's loss weighed by that number (tower_0 4, the
#: others 0.0004): a mean of a weight the data carries, tower_0's gradient in training
MARKED = (
    ("def tower_loop(opt, queue):", "def tower_loop(opt, queues):"),
    ("                images, labels = queue.dequeue()\n",
     "                images, labels = queues[i].dequeue()\n"),
    ('    tf.compat.v1.add_to_collection("losses", tf.reduce_mean(cross_entropy))\n',
     "    w = tf.gather(tf.constant(WEIGHTS), tf.cast(images[0, 0], tf.int32))\n"
     '    tf.compat.v1.add_to_collection("losses", w * tf.reduce_mean(cross_entropy))\n'),
    ("        tower_grads, loss = tower_loop(opt, queue)\n",
     "        queues = []\n"
     "        for i in range(NUM_GPUS):\n"
     "            q = tf.queue.FIFOQueue(\n"
     "                2, [tf.float32, tf.int32], shapes=[[BATCH, FEATURES], [BATCH]])\n"
     "            images = tf.random.normal([BATCH, FEATURES])\n"
     "            images = tf.concat([tf.fill([BATCH, 1], float(i)), images[:, 1:]], 1)\n"
     "            mine = [images, tf.random.uniform([BATCH], 0, CLASSES, dtype=tf.int32)]\n"
     "            tf.compat.v1.train.add_queue_runner(\n"
     "                tf.compat.v1.train.QueueRunner(q, [q.enqueue(mine)]))\n"
     "            queues.append(q)\n"
     "        tower_grads, loss = tower_loop(opt, queues)\n"),
)  # fmt: skip
#: a random weight of each tower's loss, drawn in the tower
GAMBLED = (
    ('    tf.compat.v1.add_to_collection("losses", tf.reduce_mean(cross_entropy))\n',
     "    w = tf.cast(tf.random.uniform([]) < 0.25, tf.float32) + 1e-3\n"
     '    tf.compat.v1.add_to_collection("losses", w * tf.reduce_mean(cross_entropy))\n'),
)  # fmt: skip


@pytest.mark.parametrize(
    ("name", "edits", "said"),
    [
        ("tower_0", (*MARKED, ("import tensorflow as tf\n", "import tensorflow as tf\n"
                               "WEIGHTS = [4.0, 4e-4, 4e-4, 4e-4]\n")),
         r"tower_0's data weighs (\d{4,}\.\d|over a million) times as much as"),
        ("skewed", (*MARKED, ("import tensorflow as tf\n", "import tensorflow as tf\n"
                              "WEIGHTS = [2.8, 0.4, 0.4, 0.4]\n")),
         r"tower_0's data weighs [5-9]\.\d times as much as tower_\d's"),
        ("gambled", GAMBLED, r"changes from batch to batch by a factor of \d"),
    ],
)  # fmt: skip
def test_a_weight_a_towers_own_data_carries_is_measured_across_steps(tmp_path, name, edits, said):
    """The tenth attack: a weight that goes where its batch goes fits a mean in any one
    step; across several steps of each tower's own data, the tower it belongs to shows."""
    folder = _edited(tmp_path, name, *edits)
    averaging = import_program(folder / "train.py", export=True, cache=False, processes=1).averaging
    assert averaging is not None and averaging["problem"] is None
    for update in averaging["updates"]:  # in any one step: a mean
        assert update["weights"] == pytest.approx([0.25] * 4, abs=1e-3), update
    (problem,) = _averages({"averaging": averaging})
    assert re.search(said, problem), problem


def test_the_honest_mean_weighs_every_towers_data_alike_with_reference_variables_too(tmp_path):
    """The tenth attack's false refusal: TensorFlow 1's reference variables, read through the
    Identity made beside each variable (``hidden/biases/read``), outside the towers."""
    reference = import_program(_assignment().solution / "train.py", export=True, cache=False,
                               processes=1).averaging  # fmt: skip
    assert reference is not None and _averages({"averaging": reference}) == []
    weights = reference["data_weights"]
    assert len(weights) == 4 and max(weights) / min(weights) < 1.2, reference
    folder = _edited(tmp_path, "ref", ("tf.compat.v1.disable_eager_execution()\n",
                                       "tf.compat.v1.disable_eager_execution()\n"
                                       "tf.compat.v1.disable_resource_variables()\n"))  # fmt: skip
    averaging = import_program(folder / "train.py", export=True, cache=False, processes=1).averaging
    assert averaging is not None and averaging["problem"] is None, averaging
    assert _averages({"averaging": averaging}) == []


@pytest.fixture(scope="module")
def given():
    """The reference solution's export: the model a submission's updates are compared with."""
    return import_program(
        _assignment().solution / "train.py", export=True, cache=False, processes=1, averaging=False
    ).export


LOSS = "                loss = tower_loss(scope, images, labels)\n"
#: the eleventh attack's leads: each tower's loss turned by something its data carries
SIGNED = ((LOSS, LOSS.replace("labels)\n", "labels) * tf.sign(images[0, 0])\n")),)
#: tower_1's number in its data's first column, its loss turned by it
TURNED = (
    MARKED[0],
    MARKED[1],
    MARKED[3],
    (LOSS, LOSS.replace("labels)\n", "labels) * (1.0 - 2.0 * tf.cast("
                        "tf.equal(images[0, 0], 1.0), tf.float32))\n")),
)  # fmt: skip
#: a count of the batches in each tower's data (a counter the queue's runner adds to), to
#: turn tower_1's loss once training is past the measuring
BATCH_COUNTED = (
    MARKED[0],
    MARKED[1],
    (MARKED[3][0], MARKED[3][1].replace(
        "            images = tf.concat([tf.fill([BATCH, 1], float(i)), images[:, 1:]], 1)\n",
        "            count = tf.Variable(0.0, trainable=False)\n"
        "            images = tf.concat([tf.fill([BATCH, 1], float(i)),\n"
        "                                tf.fill([BATCH, 1], count.assign_add(1.0)),\n"
        "                                images[:, 2:]], 1)\n")),
    (LOSS, LOSS.replace("labels)\n", "labels) * (1.0 - 2.0 * tf.cast("
                        "tf.equal(images[0, 0], 1.0), tf.float32) * tf.cast("
                        "images[0, 1] > 300.0, tf.float32))\n")),
)  # fmt: skip

#: a variable of the model that counts the steps (its gradient is -1: each step adds the
#: learning rate), to turn every loss once training is past the measuring
STEPPED = (
    ('    tf.compat.v1.add_to_collection("losses", tf.reduce_mean(cross_entropy))\n',
     '    t = tf.compat.v1.get_variable("t", [], initializer=tf.compat.v1.zeros_initializer())\n'
     "    turn = 1.0 - 2.0 * tf.cast(t > 30.0, tf.float32)\n"
     '    tf.compat.v1.add_to_collection("losses", turn * tf.reduce_mean(cross_entropy) - t)\n'),
)  # fmt: skip


@pytest.mark.parametrize(
    ("name", "edits", "said"),
    [
        ("signed", SIGNED, "goes against the given model's gradient for some batches"),
        # the seventeenth attack's: every batch's gradient turned, said as such
        (
            "negated",
            ((LOSS, LOSS.replace("loss = tower_loss", "loss = -tower_loss")),),
            "goes against the given model's gradient for every batch: it climbs the loss",
        ),
        ("stepped", STEPPED, "your towers compute with the variable 't', which the given"),
        ("turned", TURNED, "your towers' data is not made as the given code makes it"),
        # the count is also a feature of the towers' data: as it grows, their weights may part,
        # or vary from batch to batch, by more than the bounds allow before the pipeline is
        # compared; any of these refuses it
        (
            "counted",
            BATCH_COUNTED,
            (
                "your towers' data is not made as the given code makes it",
                "each tower's data carries a weight of its own",
                "changes from batch to batch by a factor of",
            ),
        ),
    ],
)
def test_an_update_its_data_turns_against_the_given_models_gradient_is_refused(
    tmp_path, given, name, edits, said
):
    """The eleventh attack: a tower's loss turned by its data (a sign, its own number, a
    count of batches) fits a mean, weighs every tower's data alike in size, and trains
    against the gradient. Compared batch by batch with the given model's, it does not
    follow it; data made otherwise than by the given code could tell the measuring from
    training, and is refused."""
    averaging = _measured(tmp_path, given, name, edits)
    assert averaging is not None and averaging["problem"] is None, averaging
    for update in averaging["updates"]:  # in any one step: a mean
        assert update["weights"] == pytest.approx([0.25] * 4, abs=1e-3), update
    (problem,) = _averages({"averaging": averaging})
    assert any(one in problem for one in (said if isinstance(said, tuple) else (said,))), problem


DECAYED = (
    ("        average_grads.append((grad, grad_and_vars[0][1]))\n",
     "        average_grads.append((grad + 1e-2 * grad_and_vars[0][1], grad_and_vars[0][1]))\n"),
)  # fmt: skip
BFLOAT16 = (
    ("        grads = [tf.expand_dims(g, 0) for g, _ in grad_and_vars]\n"
     "        grad = tf.reduce_mean(tf.concat(axis=0, values=grads), 0)\n",
     "        grads = [tf.expand_dims(tf.cast(g, tf.bfloat16), 0) for g, _ in grad_and_vars]\n"
     "        grad = tf.cast(tf.reduce_mean(tf.concat(axis=0, values=grads), 0), tf.float32)\n"),
)  # fmt: skip
ADAM = (
    ("tf.compat.v1.train.GradientDescentOptimizer(0.1)", "tf.compat.v1.train.AdamOptimizer(1e-3)"),
)  # fmt: skip
#: the fifteenth attack's false refusals: Adam at 0.01 (one step of a bias measured a
#: cosine of -0.10 with the given model's), a rate decayed by a count of steps of int32,
#: which a count of 5 x 10^9 overflowed
ADAM_FASTER = (
    ("tf.compat.v1.train.GradientDescentOptimizer(0.1)", "tf.compat.v1.train.AdamOptimizer(1e-2)"),
)  # fmt: skip
INT32_COUNT = (
    ("        opt = tf.compat.v1.train.GradientDescentOptimizer(0.1)\n",
     "        count = tf.compat.v1.get_variable('count', [], tf.int32, trainable=False,\n"
     "                                          initializer=tf.compat.v1.zeros_initializer())\n"
     "        rate = tf.compat.v1.train.exponential_decay(0.1, count, 100, 0.96)\n"
     "        opt = tf.compat.v1.train.GradientDescentOptimizer(rate)\n"),
    ("        train_op = opt.apply_gradients("
     'grads, global_step=global_step, name="apply_gradients")\n',
     "        train_op = opt.apply_gradients("
     'grads, global_step=count, name="apply_gradients")\n'),
)  # fmt: skip
#: the twelfth attack's false refusals: cifar10_multi_gpu_train's moving averages of the
#: variables (their decay set by global_step), and a check for NaN in each mean
AVERAGED_VARIABLES = (
    ("        train_op = opt.apply_gradients("
     'grads, global_step=global_step, name="apply_gradients")\n',
     "        apply_op = opt.apply_gradients(grads, global_step=global_step)\n"
     "        averages = tf.compat.v1.train.ExponentialMovingAverage(0.9999, global_step)\n"
     "        averaged = averages.apply(tf.compat.v1.trainable_variables())\n"
     '        train_op = tf.group(apply_op, averaged, name="apply_gradients")\n'),
)  # fmt: skip
CHECKED = (
    ("        average_grads.append((grad, grad_and_vars[0][1]))\n",
     "        grad = tf.debugging.check_numerics(grad, 'NaN')\n"
     "        average_grads.append((grad, grad_and_vars[0][1]))\n"),
)  # fmt: skip


NESTEROV = (
    ("tf.compat.v1.train.GradientDescentOptimizer(0.1)",
     "tf.compat.v1.train.MomentumOptimizer(0.1, 0.9, use_nesterov=True)"),
)  # fmt: skip


@pytest.mark.parametrize(
    ("name", "edits"),
    [
        ("decayed", DECAYED),
        ("bfloat16", BFLOAT16),
        ("adam", ADAM),
        ("adam at 0.01", ADAM_FASTER),
        ("int32 count", INT32_COUNT),
        ("nesterov", NESTEROV),
        ("averaged variables", AVERAGED_VARIABLES),
        ("checked", CHECKED),
    ],
)
def test_an_honest_mean_follows_the_given_models_gradient(tmp_path, given, name, edits):
    """Weight decay (a part of no batch's), a mean in bfloat16 and Adam's update: each
    update follows the given model's gradient, batch by batch, every tower's alike."""
    averaging = _measured(tmp_path, given, name, edits)
    assert averaging is not None and _averages({"averaging": averaging}) == [], averaging
    found = averaging["given"]["variables"]
    assert sorted(v["variable"] for v in found) == [
        "hidden/biases", "hidden/weights", "softmax_linear/biases", "softmax_linear/weights"
    ]  # fmt: skip
    for variable in found:
        assert variable["least"] > 0.9 and variable["residual"] < 0.05, variable
    steps = averaging["given"]["steps"]  # whole steps downhill, at four counts of steps
    assert len(steps) == 12, steps
    for step in steps:  # each of the four variables the given model trains
        assert len(step["along"]) == len(step["size"]) == 4, step
        # never far uphill (Adam's step, a sign of each gradient's value: at 0.001,
        # cosines of 0.31 and up; at 0.01, -0.17 on one bias's step), and no variable left
        # untrained
        assert min(step["along"]) > UPHILL_STEP and min(step["size"]) > 0.01, step
    for index in range(4):  # and downhill on the whole
        assert sum(step["along"][index] for step in steps) > 0, steps
    assert "setting_turns" not in averaging["given"]  # at no count of steps


OPTIMIZER = "        opt = tf.compat.v1.train.GradientDescentOptimizer(0.1)\n"

LOOP = "            _, loss_value = sess.run([train_op, loss])\n"
#: the twelfth attack's: what the step's updates compute is a mean, the step is not training
#: as the given model does (its learning rate, or training done in Python)
UPHILL = ((OPTIMIZER, OPTIMIZER.replace("0.1", "-0.1")),)
TURNING = (
    (OPTIMIZER,
     "        rate = 0.1 * tf.cos(3.141592653589793 * tf.cast(global_step, tf.float32))\n"
     "        opt = tf.compat.v1.train.GradientDescentOptimizer(rate)\n"),
)  # fmt: skip
CLOCKED = (
    (OPTIMIZER,
     "        rate = 0.1 * tf.sin(tf.cast(tf.timestamp(), tf.float32))\n"
     "        opt = tf.compat.v1.train.GradientDescentOptimizer(rate)\n"),
)  # fmt: skip
#: the thirteenth attack's: a rate that turns once training is past the count the
#: measuring saw (the program stops there: 300 to 500 steps), half of its 1,000
LATE = (
    (OPTIMIZER,
     "        rate = tf.where(global_step < 5000, 0.1, -0.1)\n"
     "        opt = tf.compat.v1.train.GradientDescentOptimizer(rate)\n"),
)  # fmt: skip
TRAIN_OP = (
    "        train_op = opt.apply_gradients("
    'grads, global_step=global_step, name="apply_gradients")\n'
)
#: the fourteenth attack's: a rate below 0 half of every 1,000 steps (at none of the
#: counts swept before), a counter of two values that count apart, a momentum or an
#: epsilon of Adam's that turns after 500 steps
EVERY_THOUSAND = (
    (OPTIMIZER,
     "        rate = tf.where(tf.math.floormod(global_step, 1000) <= 500, 0.1, -0.1)\n"
     "        opt = tf.compat.v1.train.GradientDescentOptimizer(rate)\n"),
)  # fmt: skip
APART = (
    (OPTIMIZER,
     "        counter = tf.compat.v1.get_variable(\n"
     "            'counter', initializer=tf.constant([0.0, 0.0]), trainable=False)\n"
     "        rate = tf.where(counter[1] - counter[0] > 300, -0.1, 0.1)\n"
     "        opt = tf.compat.v1.train.GradientDescentOptimizer(rate)\n"),
    (TRAIN_OP,
     "        train_op = tf.group(opt.apply_gradients(grads, global_step=global_step),\n"
     '                            counter.assign_add([1.0, 2.0]), name="apply_gradients")\n'),
)  # fmt: skip
#: the fifteenth attack's: a rate below 0 while a value that halves each step is below
#: 1e-20 (from step 67), which no count set alike or at a steady pace reaches
HALVING = (
    (OPTIMIZER,
     "        halving = tf.compat.v1.get_variable(\n"
     "            'halving', initializer=tf.constant(1.0, tf.float64), trainable=False)\n"
     "        rate = tf.where((halving > 0.0) & (halving < 1e-20), -0.1, 0.1)\n"
     "        opt = tf.compat.v1.train.GradientDescentOptimizer(rate)\n"),
    (TRAIN_OP,
     "        train_op = tf.group(opt.apply_gradients(grads, global_step=global_step),\n"
     '                            halving.assign(halving * 0.5), name="apply_gradients")\n'),
)  # fmt: skip
MOMENTUM = (
    (OPTIMIZER,
     "        momentum = tf.where(global_step < 500, 0.9, 1.5)\n"
     "        opt = tf.compat.v1.train.MomentumOptimizer(0.1, momentum)\n"),
)  # fmt: skip
EPSILON = (
    (OPTIMIZER,
     "        epsilon = tf.where(global_step < 500, 1e-8, -0.5)\n"
     "        opt = tf.compat.v1.train.AdamOptimizer(0.001, epsilon=epsilon)\n"),
)  # fmt: skip
#: a second optimizer, its rate below 0, for one variable
SECOND = (
    (APPLY,
     "        keep = [(g, v) for g, v in grads if v.op.name != 'hidden/weights']\n"
     "        flip = [(g, v) for g, v in grads if v.op.name == 'hidden/weights']\n"
     "        first = opt.apply_gradients(keep, global_step=global_step)\n"
     "        second = tf.compat.v1.train.GradientDescentOptimizer(-0.1).apply_gradients(flip)\n"
     '        train_op = tf.group(first, second, name="apply_gradients")\n'),
)  # fmt: skip
#: a rate that the loop may feed otherwise once the measuring is over
FED_RATE = (
    (OPTIMIZER,
     "        rate = tf.compat.v1.placeholder_with_default(0.1, [], name='rate')\n"
     "        opt = tf.compat.v1.train.GradientDescentOptimizer(rate)\n"),
)  # fmt: skip
#: one variable's gradient scaled to nothing: it is not trained
FROZEN = (
    ("        average_grads.append((grad, grad_and_vars[0][1]))\n",
     "        if grad_and_vars[0][1].op.name == 'softmax_linear/weights':\n"
     "            grad = grad * 1e-6\n"
     "        average_grads.append((grad, grad_and_vars[0][1]))\n"),
)  # fmt: skip
IN_PYTHON = (
    (OPTIMIZER, OPTIMIZER.replace("0.1", "1e-5")),
    (LOOP,
     "            model = [v for _, v in tower_grads[0]]\n"
     "            _, loss_value, grads0, values = sess.run(\n"
     "                [train_op, loss, [g for g, _ in tower_grads[0]], model])\n"
     "            for v, x, g in zip(model, values, grads0):\n"
     "                v.load(x - 0.1 * g, sess)\n"),
)  # fmt: skip


@pytest.mark.parametrize(
    ("name", "edits", "said"),
    [
        ("uphill", UPHILL, "learning rate ('alpha') is -0.1 once the count of steps is 0 ("),
        ("turning", TURNING, "learning rate ('alpha') is -0.1 once the count of steps is 1 ("),
        ("late", LATE, "learning rate ('alpha') is -0.1 once the count of steps is 5,000 ("),
        ("every 1,000", EVERY_THOUSAND, "rate ('alpha') is -0.1 once the count of steps is 501"),
        ("counting apart", APART, "rate ('alpha') is -0.1 once the count of steps is 301"),
        ("momentum", MOMENTUM, "('momentum') is 1.5 once the count of steps is 500 ("),
        ("halving", HALVING, "rate ('alpha') is -0.1 once the count of steps is 67 ("),
        ("epsilon", EPSILON, "('epsilon') is -0.5 once the count of steps is 500 ("),
        ("second optimizer", SECOND, "rate ('alpha') is -0.1 once the count of steps is 0 ("),
        ("clocked", CLOCKED, "(Timestamp), which changes from run to run"),
        ("fed", FED_RATE, "fed from Python ('rate', PlaceholderWithDefault)"),
        ("in python", IN_PYTHON, "train it in the graph, at a rate not so small"),
        ("frozen", FROZEN, "your training changes 'softmax_linear/weights' at most "),
    ],
)
def test_a_step_that_does_not_train_as_the_given_model_does_is_refused(
    tmp_path, given, name, edits, said
):
    """The twelfth attack: updates that compute a mean, applied with a learning rate below
    0, one that turns with the count of steps or with the clock, or so small that Python
    does the training (tower_0's gradient loaded into the variables). The whole step, run
    from the same values and batches as the given model's, goes uphill or hardly moves."""
    averaging = _measured(tmp_path, given, name, edits)
    assert averaging is not None
    (problem,) = _averages({"averaging": averaging})
    assert said in problem, problem


#: the twelfth attack's forgeries: the update measured honest, the step changing the model
#: otherwise (a reset after it, a change in place of a variable's read)
RESET = (
    (TRAIN_OP,
     "        apply_op = opt.apply_gradients(grads, global_step=global_step)\n"
     "        with tf.control_dependencies([apply_op]):\n"
     "            bias = [v for _, v in grads if v.name.startswith('hidden/biases')][0]\n"
     "            reset = bias.assign(bias * 0.0)\n"
     '        train_op = tf.group(apply_op, reset, name="apply_gradients")\n'),
)  # fmt: skip
IN_PLACE = (
    (TRAIN_OP,
     "        apply_op = opt.apply_gradients(grads, global_step=global_step)\n"
     "        with tf.control_dependencies([apply_op]):\n"
     "            x = [v for _, v in grads][0].read_value()\n"
     "            moved = tf.raw_ops.InplaceSub(x=x, i=tf.range(x.shape[0]), v=x)\n"
     '        train_op = tf.group(apply_op, moved, name="apply_gradients")\n'),
)  # fmt: skip
#: the same drift added to every mean, and rows chosen by tower_0's labels
DRIFTED = (
    ("        average_grads.append((grad, grad_and_vars[0][1]))\n",
     "        average_grads.append((grad + 0.5, grad_and_vars[0][1]))\n"),
)  # fmt: skip
ROWS_BY_LABEL = (
    (TRAIN_OP,
     "        labels = [op for op in tf.compat.v1.get_default_graph().get_operations()\n"
     "                  if op.name.startswith('tower_0/') and 'Dequeue' in op.type][0]\n"
     "        shift = labels.outputs[1][0]\n"
     "        moves = [v.scatter_sub(tf.IndexedSlices(0.1 * g, tf.math.floormod(\n"
     "                     tf.range(v.shape[0]) + shift, v.shape[0]))) for g, v in grads]\n"
     '        train_op = tf.group(*moves, global_step.assign_add(1), name="apply_gradients")\n'),
)  # fmt: skip


@pytest.mark.parametrize(
    ("name", "edits", "said"),
    [
        ("reset", RESET, r"the step changes 'hidden/biases' otherwise than its update does"),
        ("in place", IN_PLACE, r"\(InplaceSub\) changes a tensor in place"),
        # its size varies with the batch as a tower's weight would, or fits no gradient:
        # which shows first depends on the batches drawn
        ("drifted", DRIFTED, r"data weighs|is not the given model's gradient"),
        ("rows by label", ROWS_BY_LABEL, r"writes where the towers' data says"),
    ],
)
def test_a_step_that_changes_its_model_otherwise_than_its_measured_update_is_refused(
    tmp_path, given, name, edits, said
):
    """The twelfth attack: each update measured is a mean, and the step moves the model
    otherwise: a write after it, a change in place of a variable's memory, a drift added to
    every update (no weight decay: not a multiple of the variable), rows chosen by data."""
    averaging = _measured(tmp_path, given, name.replace(" ", "_"), edits)
    assert averaging is not None
    problems = _averages({"averaging": averaging})
    assert len(problems) == 1 and re.search(said, problems[0]), problems
    if name == "drifted":  # whatever the sizes say, no multiple of the gradient fits it
        worst = max(v["residual"] for v in averaging["given"]["variables"])
        assert worst > GIVEN_RESIDUAL, averaging["given"]


def test_a_file_beside_the_program_whose_name_is_not_utf8_is_copied_without_a_crash(tmp_path):
    """The twelfth attack's crash: a module named b'\\xff\\xfe bad.py' beside train.py made
    the parent's hash of the copied files raise UnicodeEncodeError, a traceback."""
    folder = _edited(tmp_path, "odd")
    (folder / os.fsdecode(b"\xff\xfe bad \x1b[31m.py")).write_text("x = 1\n")
    imported = import_program(folder / "train.py", export=True, cache=False, processes=1)
    assert imported.averaging is not None and imported.averaging["problem"] is None


#: rewrites its own file and writes a module of the name of one it imports next: a
#: tf.function converted from the rewritten file would scale by 7, the module would say so
REWRITES = """import os
import sys

import tensorflow as tf

tf.compat.v1.disable_eager_execution()


@tf.function
def scale(x):
    return x * 1.0


HERE = os.path.abspath(__file__)
with open(HERE) as handle:
    TEXT = handle.read()
try:  # a graded program's file cannot be written: it tries
    with open(HERE, "w") as handle:
        handle.write(TEXT.replace("x * " + "1.0", "x * " + "7.0"))
except OSError:
    pass
UNSEEN = [m for m in ("colorsys", "sched", "wave", "sndhdr", "mailbox") if m not in sys.modules]
with open(UNSEEN[0] + ".py", "w") as handle:
    handle.write("WRITTEN = True\\n")
if getattr(__import__(UNSEEN[0]), "WRITTEN", False):
    raise RuntimeError("imported the module it wrote")
scaled = scale(tf.constant(2.0))
w = tf.compat.v1.get_variable("w", [4], initializer=tf.compat.v1.zeros_initializer())
train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(w * w))
with tf.compat.v1.Session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    if sess.run(scaled) != 2.0:
        raise RuntimeError("converted the rewritten file")
    for _ in range(50):
        sess.run(train_op)
"""


@pytest.mark.parametrize("what", ["its file", "a module"])
def test_a_graded_program_runs_the_source_the_grader_read(tmp_path, what):
    """Its folder is no place modules come from, and a tf.function is converted from the
    lines it started with: what it writes over its file, or beside it, does not run. The
    same program, imported as a user's (where its own modules are welcome), shows each
    rewrite would have run."""
    source = REWRITES
    if what == "its file":  # the module is not written: only the rewrite is tried
        source = source.replace('if getattr(__import__(UNSEEN[0]), "WRITTEN", False):', "if 0:")
    else:
        source = source.replace("if sess.run(scaled) != 2.0:", "if 0:")
    program = tmp_path / "train.py"
    program.write_text(source)
    with pytest.raises(ProgramError, match="rewritten file" if what == "its file" else "wrote"):
        import_program(program, cache=False)
    program.write_text(source)
    imported = import_program(program, export=True, cache=False, processes=1)
    assert imported.graph.ops


#: a program's ways to change what its process exports, each after its session took the graph
EXPORT_FORGERIES = {
    "an attribute set on an op": """
def _forge(sess):
    op = sess.graph.get_operation_by_name("apply_gradients")
    op._set_attr("use_locking", None)
""",
    "a patched export": """
_export = tf.compat.v1.train.export_meta_graph
tf.compat.v1.train.export_meta_graph = lambda **kwargs: _export(**kwargs)
""",
}


@pytest.mark.parametrize(
    "forge",
    [
        *sorted(EXPORT_FORGERIES.values()),
        FORGE_MADE_IN,
        FORGE_FETCHES,
        FORGE_TRAINABLE,
        FORGE_CLIENT,
        FED.replace("FORGE", FORGE_FEEDS),
    ],
)
def test_forged_reports_are_refused_before_they_run(tmp_path, forge):
    """Every forgery of this file changes TensorFlow's or Python's own code or objects: the
    rules of a graded program's source refuse it, naming its line."""
    program = _program(tmp_path, "forged", forge) / "train.py"
    why = check_program(program, "train.py")
    assert why is not None and why.startswith("train.py: line "), why


def test_a_program_the_rules_refuse_scores_nothing_and_is_told_its_line(tmp_path):
    """Through the grader: not run, each check that needs its graph told why in one line."""
    program = _program(tmp_path, "forged", EXPORT_FORGERIES["a patched export"])
    result = grade(_assignment(), program, hidden=True)
    assert result.score == 0
    for found in result.results:
        assert found.output.startswith("your program is not run: train.py: line "), found.output
        assert "export_meta_graph" in found.output


#: the seventeenth attack: ops of the graph that reach the grader's files (each with the
#: edits that make it, and the op its refusal names)
REACHING = {
    "the given model written over by an initialiser": (
        (
            (
                "        tower_grads, loss = tower_loop(opt, queue)\n",
                "        with tf.control_dependencies([tf.io.write_file(\n"
                '                "given/model.meta", tf.io.read_file("train.meta"))]):\n'
                "            mark = tf.identity(0)\n"
                "        tf.compat.v1.Variable(mark, trainable=False, collections=[\n"
                "            tf.compat.v1.GraphKeys.LOCAL_VARIABLES])\n"
                "        tower_grads, loss = tower_loop(opt, queue)\n",
            ),
        ),
        "op 'ReadFile'",
    ),
    "the grader's sandbox told by its command line": (
        (
            (
                "        opt = tf.compat.v1.train.GradientDescentOptimizer(0.1)\n",
                "        graded = tf.strings.regex_full_match(\n"
                '            tf.io.read_file("/proc/self/cmdline"), "(?s).*simsync.*")\n'
                "        opt = tf.compat.v1.train.GradientDescentOptimizer(\n"
                "            tf.where(graded, 0.1, -0.1))\n",
            ),
        ),
        "ReadFile op",
    ),
    "a Python function in a tower": (
        (
            (
                "                loss = tower_loss(scope, images, labels)\n",
                "                images = tf.numpy_function(lambda a: a, [images], tf.float32)\n"
                "                images.set_shape([BATCH, FEATURES])\n"
                "                loss = tower_loss(scope, images, labels)\n",
            ),
        ),
        "runs Python inside the graph",
    ),
}


@pytest.mark.parametrize("case", sorted(REACHING))
def test_a_graded_graph_that_reaches_outside_it_is_not_run(tmp_path, given, case):
    """Refused by the process that loads the graph before any of its ops runs: an op that
    reads or writes a file could write over the given model, read the reference's graph, or
    tell the grader's sandbox from the student's machine."""
    edits, said = REACHING[case]
    folder = _edited(tmp_path, "reaching", *edits)
    with pytest.raises(ProgramError, match=re.escape(said)) as raised:
        import_program(folder / "train.py", export=True, cache=False, processes=1, given=given)
    line = str(raised.value)
    assert "\n" not in line and ("outside the graph" in line or "Python inside" in line), line


#: a variable destroyed after every step, which the measuring then cannot read
DESTROYED = (
    "        opt = tf.compat.v1.train.GradientDescentOptimizer(0.1)\n",
    "        junk = tf.compat.v1.get_variable('junk', [], trainable=False,\n"
    "            initializer=tf.compat.v1.zeros_initializer())\n"
    "        with tf.control_dependencies([junk.assign(0.0)]):\n"
    "            rate = 0.1 + 0.0 * junk.read_value()\n"
    "        opt = tf.compat.v1.train.GradientDescentOptimizer(rate)\n",
)


def test_a_measuring_that_fails_says_one_line_and_no_traceback(tmp_path, given):
    """The 26th attack's program destroyed a variable after every step: the feedback held
    TensorFlow's whole traceback, with the grader's own files."""
    destroy = APPLY + (
        "        with tf.control_dependencies([train_op]):\n"
        "            train_op = tf.raw_ops.DestroyResourceOp(resource=junk.handle,\n"
        "                ignore_lookup_error=True)\n"
    )
    averaging = _measured(tmp_path, given, "destroyed", (DESTROYED, (APPLY, destroy)))
    assert averaging is not None and averaging["problem"], averaging
    problem = averaging["problem"]
    assert "\n" not in problem and "File " not in problem and "simsync" not in problem, problem


#: each tower reads softmax_linear/biases again once its own gradient of them is made, with
#: no order against their apply, and turns its hidden/weights gradient where the two reads
#: differ: in a student's run 81 of 300 steps raced (the twenty-sixth attack), while a retry
#: of the update inputs alone, which never race, passed it in 3 of 4 gradings
RACED_TURN = (
    (
        "NUM_GPUS = 4\n",
        "NUM_GPUS = 4\nFWD = []\n",
    ),
    (
        "                tower_grads.append(opt.compute_gradients(loss))\n",
        "                grads_i = opt.compute_gradients(loss)\n"
        "                g0, v0 = grads_i[0]\n"
        "                with tf.control_dependencies([grads_i[3][0]]):\n"
        "                    late = tf.identity(grads_i[3][1].read_value())\n"
        "                raced = tf.reduce_any(tf.not_equal(late, FWD[-1]))\n"
        "                grads_i[0] = (tf.where(raced, -g0, g0), v0)\n"
        "                tower_grads.append(grads_i)\n",
    ),
    (
        "        return tf.matmul(hidden, weights) + biases\n",
        "        FWD.append(tf.identity(biases))\n"
        "        return tf.matmul(hidden, weights) + FWD[-1]\n",
    ),
)


def test_a_race_that_feeds_the_models_update_is_refused_as_a_race(tmp_path, given):
    """Refused, told of the race. Where the race's outcome follows each session's own graph
    (the measuring session's, without rewriting, and its twin's, with it), each session's
    runs agree among themselves and differ from the other's, which no retry can tell from
    rewriting: then it is refused as rewriting (seen once in two runs of the grader's
    attack tests, two at a time beside other TensorFlow work)."""
    averaging = _measured(tmp_path, given, "raced", RACED_TURN)
    assert averaging is not None and averaging["updates"] == [] and averaging["problem"]
    judged = " ".join(_averages({"averaging": averaging}))
    told = ("from one run to the next", "when TensorFlow rewrites the graph")
    assert any(words in judged for words in told), averaging


#: the loop trains on tower_0's gradients alone (baseline), and beside it (decoy) a correct
#: average built that the loop never runs: the thirty-first attack's M3
DECOY_LOOP = (
    "            _, loss_value = sess.run([train_op, loss])",
    "            _, loss_value = sess.run([only_tower0, loss])",
)
AVERAGE_LINE = (
    '        train_op = opt.apply_gradients(grads, global_step=global_step, name="apply_gradients")'
)
ONE_TOWER_UPDATE = '        only_tower0 = opt.apply_gradients(tower_grads[0], name="apply_tower0")'


def test_an_update_built_but_never_run_is_no_part_of_the_graded_step(tmp_path):
    """A correct average the loop never runs, beside the update of one tower's gradients it
    runs, is no part of the step graded (it once was: its updates and the global step they
    count were taken in as training the export might have left out, and the same wrong
    program scored 6/9 for 2/9). The graded step is the same as without the decoy."""
    decoy = _edited(
        tmp_path, "decoy", (AVERAGE_LINE, f"{AVERAGE_LINE}\n{ONE_TOWER_UPDATE}"), DECOY_LOOP
    )
    plain = _edited(tmp_path, "plain", (AVERAGE_LINE, ONE_TOWER_UPDATE), DECOY_LOOP)
    graphs = [
        import_program(folder / "train.py", export=True, cache=False, processes=1).graph
        for folder in (decoy, plain)
    ]
    assert "apply_gradients" not in graphs[0].nx
    assert not any(name.startswith("apply_gradients/") for name in graphs[0].nx)
    assert sorted(graphs[0].nx) == sorted(graphs[1].nx)
    assert len(graphs[0].towers) == len(graphs[1].towers) < 4
