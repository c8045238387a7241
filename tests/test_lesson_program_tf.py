"""A lesson's program step imports the lesson's own TensorFlow program: the graph it shows is
the one that code builds, so editing the program changes what the lesson shows."""

from __future__ import annotations

import io
import json
import re
import shutil
import tempfile
from pathlib import Path

import pytest
from rich.console import Console

from simsync.tutor.content import lessons_root, load_lesson
from simsync.tutor.lesson_check import check_lesson
from simsync.tutor.progress import Progress
from simsync.tutor.questions import expected_answer
from simsync.tutor.runner import LessonRunner

pytestmark = pytest.mark.tf

LESSON_1 = lessons_root() / "01-building-is-not-running"
LESSON_7 = lessons_root() / "07-batch-norm-across-towers"
PROGRAM_7 = "update_ops_program.py"  # its TF1 program (the TF2 one: synchronized_bn.py)


def program_step(folder: Path, kind: str = "program", file: str | None = None) -> str:
    """What the lesson's program step shows (``kind``: or its step of that kind about the
    program; ``file``: the one of that program, where there are several), for the lesson in
    ``folder``: the lesson as it is, cut down to that one step (the rest needs no TensorFlow
    and is tested elsewhere)."""
    lesson = load_lesson(folder)
    (step,) = [
        s
        for s in lesson.steps
        if s.kind == kind and s.needs_tensorflow and file in (None, s.get("file"))
    ]
    scratch = Path(tempfile.mkdtemp(prefix="simsync-lesson-"))  # never beside the lesson
    try:
        only = scratch / folder.name
        shutil.copytree(folder, only)
        keys = "".join(
            f"{key} = {json.dumps(step.get(key))}\n"
            for key in ("file", "program", "towers", "speeds", "try_towers")
            if step.get(key) is not None
        )  # the step as the lesson has it, its text aside (TOML takes these as JSON writes them)
        (only / "lesson.toml").write_text(
            f'title = "{lesson.title}"\n[[steps]]\nkind = "{kind}"\n{keys}'
        )
        out = io.StringIO()
        console = Console(file=out, width=120, color_system=None)
        LessonRunner(load_lesson(only), Progress.scratch(), console, no_input=True).run()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return " ".join(out.getvalue().split())


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    folder = tmp_path / LESSON_1.name
    shutil.copytree(LESSON_1, folder)
    return folder


def line_of(path: Path, code: str) -> int:
    """The number of the line of ``path`` that holds ``code``."""
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if code in line)


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new))


def test_the_lesson_shows_the_graph_its_program_builds(copy: Path) -> None:
    shown = program_step(copy)
    assert "tower_loop.py: imported" in shown
    assert "towers found by name scope tower_<i>" in shown
    assert "simulated: 2 towers" in shown
    # one sync point per variable, each a concat of every tower's gradients
    concat = line_of(copy / "tower_loop.py", "tf.reduce_mean(tf.concat(grads, 0), 0)")
    assert f"4 sync points made in average_gradients (tower_loop.py:{concat})" in shown
    assert "simsync simulate tower_loop.py --towers 4" in shown


def test_lesson_7_shows_the_gate_making_every_op_under_it_a_sync_point(tmp_path: Path) -> None:
    """The answer computes the average under control_dependencies(update_ops): the applies
    and the averaging ops all wait for every tower's updates."""
    folder = tmp_path / LESSON_7.name
    shutil.copytree(LESSON_7, folder)
    shown = program_step(folder, file=PROGRAM_7)
    assert "towers found by name scope tower_<i>" in shown and "simulated: 2 towers" in shown
    apply = line_of(folder / "update_ops_program.py", "train_op = opt.apply_gradients(")
    assert f"sync points made in train (update_ops_program.py:{apply})" in shown
    assert "sync points made in average_gradients (update_ops_program.py:" in shown
    # without the gate, only the averaging waits for both towers: no sync point in train
    drawn = program_step(folder, "graph")  # one box per scope: all four under the gate wait
    for box in ("ExpandDims (12 ops)", "concat (6 ops)", "Mean (6 ops)", "GradientDescent"):
        assert f"◆ {box}" in drawn, box
    # the learner's own code's race, named: every tower's updates write both moving averages
    assert "UPDATE_OPS: the training loop runs every tower's (4 of 4): they race on 2" in (
        " ".join(shown.split())
    )
    edit(folder / "update_ops_program.py", "update_ops.extend(", "update_ops.extend([] if i else ")
    assert "runs 2 of 4, tower_0's only" in " ".join(program_step(folder, file=PROGRAM_7).split())
    edit(folder / "update_ops_program.py", "with tf.control_dependencies(update_ops):", "if 1:")
    shown = program_step(folder, file=PROGRAM_7)
    assert "made in train" not in shown and "made in average_gradients" in shown
    assert "4 ops, none run by the training loop" in " ".join(shown.split())
    drawn = program_step(folder, "graph")
    assert "◆ GradientDescent" not in drawn and "◆ ExpandDims" not in drawn


def test_editing_the_program_changes_what_the_lesson_shows(copy: Path) -> None:
    program = copy / "tower_loop.py"
    edit(program, "'--num_gpus', type=int, default=2", "'--num_gpus', type=int, default=3")
    assert "simulated: 3 towers" in program_step(copy)
    # averaging only tower 0's gradients: no op waits for every tower any more, and a step
    # no longer runs tower 1's backward pass at all (TensorFlow runs what the fetches need:
    # tower 0's gradients, and the last tower's loss)
    edit(
        program,
        "grads = [tf.expand_dims(g, 0) for g, _ in grad_and_vars]",
        "grads = [tf.expand_dims(grad_and_vars[0][0], 0)]",
    )
    shown = program_step(copy)
    assert "sync point" not in shown and "simulated: 2 towers" in shown


def test_a_question_about_the_program_is_answered_from_the_graph_it_builds(copy: Path) -> None:
    """Lesson 1 asks how many sync points average_gradients would make with one more layer:
    the answer is counted in the graph the program builds, so a layer added to it first makes
    two more (and the lesson's claim of four today says it no longer holds)."""
    from simsync.tutor.claims import StepFacts, broken_claims

    lesson = load_lesson(copy)
    (question,) = [s for s in lesson.questions if s.get("program")]
    # four sync points today (two layers' weights and biases): one more layer makes 6
    assert question.needs_tensorflow and expected_answer(lesson, question) == 6
    assert check_lesson(lesson, tensorflow=True) == []
    edit(
        copy / "tower_loop.py",
        "    return _dense(hidden, CLASSES, 'softmax_linear', None)",
        "    hidden = _dense(hidden, 128, 'hidden_2', tf.nn.relu)\n"
        "    return _dense(hidden, CLASSES, 'softmax_linear', None)",
    )
    edited = load_lesson(copy)
    (question,) = [s for s in edited.questions if s.get("program")]
    assert expected_answer(edited, question) == 8
    assert broken_claims(question, StepFacts(edited, question)) == ["len(sync_points) == 4"]


def test_lesson_2_asks_which_tower_of_its_program_comes_last() -> None:
    lesson = load_lesson(lessons_root() / "02-the-synchronization-point")
    assert check_lesson(lesson, tensorflow=True) == []
    (question,) = [s for s in lesson.questions if s.get("program")]
    assert expected_answer(lesson, question) == "tower_2"


LESSON_4 = lessons_root() / "04-asynchronous-updates-and-stale-gradients"


def test_lesson_4_shows_one_worker_per_thread_and_no_sync_point(tmp_path: Path) -> None:
    """Threads that each loop on their own train op: one worker each, meeting nowhere."""
    folder = tmp_path / LESSON_4.name
    shutil.copytree(LESSON_4, folder)
    shown = program_step(folder)
    assert "towers found by device /gpu:<i>" in shown
    assert "simulated: 4 workers (one per looping thread)" in shown
    assert "sync point" not in shown and "async_threads.py --towers 8" in shown
    edit(
        folder / "async_threads.py",
        '"--num_gpus", type=int, default=4',
        '"--num_gpus", type=int, default=2',
    )
    assert "simulated: 2 workers (one per looping thread)" in program_step(folder)


def test_threads_are_named_in_the_order_their_train_ops_were_made() -> None:
    """Which thread reaches its loop first is a race; the clients' names, and so the graph's
    key and its cached costs, must not depend on it."""
    from simsync.simulation.importing import import_program

    program = LESSON_4 / "async_threads.py"
    first, again = import_program(program), import_program(program)
    assert first.key == again.key
    clients = [(c.name, c.fetches) for c in first.graph.clients]
    assert clients == [(c.name, c.fetches) for c in again.graph.clients]
    assert clients == [
        ("thread_0", ("GradientDescent",)),
        ("thread_1", ("GradientDescent_1",)),
        ("thread_2", ("GradientDescent_2",)),
        ("thread_3", ("GradientDescent_3",)),
    ]


LESSON_2 = lessons_root() / "02-the-synchronization-point"


def test_lesson_2_shows_one_sync_point_per_variable_and_who_is_waited_for(tmp_path: Path) -> None:
    """The real graph meets in one concat per variable; at the lesson's speeds (tower_2 at
    half speed) every one of them waits for tower_2."""
    folder = tmp_path / LESSON_2.name
    shutil.copytree(LESSON_2, folder)
    shown = program_step(folder, file="average_gradients.py")
    concat = line_of(folder / "average_gradients.py", "grad = tf.concat(grads, 0)")
    assert f"4 sync points made in average_gradients (average_gradients.py:{concat})" in shown
    assert "simulated: 4 towers" in shown
    # the slow tower is waited for at every sync point, in most steps: which thread TensorFlow's
    # pool gives a step's first ops is drawn at random, and now and then the slow tower's
    # starts first and another one comes last
    found = re.search(r"tower_2 came last at all 4 sync points, in (\d+)(?: to \d+)? of 40", shown)
    assert found and int(found[1]) > 20, shown
    assert "simsync simulate average_gradients.py --towers 8 --speeds 1,0.8,0.5,1" in shown


def test_lesson_2_shows_the_tensorflow_2_form_meeting_at_its_all_reduces(tmp_path: Path) -> None:
    """The same question in TensorFlow 2: MirroredStrategy's replicas meet at the all-reduce
    each replica's optimizer makes inside strategy.run, and the half-speed replica is the one
    waited for there; the step suggests no --towers, which such a program cannot take."""
    folder = tmp_path / LESSON_2.name
    shutil.copytree(LESSON_2, folder)
    shown = program_step(folder, file="mirrored.py")
    run = line_of(folder / "mirrored.py", "strategy.run(train_step")
    made = re.search(rf"(\d+) sync points made in distributed_train_step \(mirrored.py:{run}\): "
                     r"sgd_1/CollectiveReduceV2", " ".join(shown.split()))  # fmt: skip
    assert made and int(made[1]) >= 4, shown  # one all-reduce per replica at least
    # the lesson's text names them: 4 all-reduces, 3 writes of the count ("and 4 more")
    said = re.search(rf"\(mirrored.py:{run}\): [^()]*, and 4 more", " ".join(shown.split()))
    assert made[1] == "7" and said, shown
    assert "towers found by device /cpu:<i>" in shown or "/gpu:<i>" in shown
    assert "what if: tower devices at speeds 1, 0.8, 0.5, 1" in shown
    # at most of the sync points where the others waited (replica 0, which does the replicas'
    # shared work, may come last where the updated variables are read)
    flat = " ".join(shown.split())
    last = r"(tower_\d+) came last at (?:all |the )?(\d+) of (?:the )?(\d+) sync points[^,]*"
    found = re.search(last + r", in (\d+)", flat)
    if "on GPUs each tower has a device of its own" in shown:
        # 4 replicas share this machine's 2 cores and take turns on them, which the lesson
        # says: its claim is the GPU lines', where each replica has a device of its own;
        # here, under load, no replica may be last at most sync points, but none but the
        # slow one may be named
        there = re.search(r"last at a sync point there: (tower_\d+) (\d+) %", flat)
        assert there and there[1] == "tower_2" and int(there[2]) > 50, shown
        assert not found or found[1] == "tower_2", shown
    else:  # each replica a device of its own here: last at most sync points, in most steps
        assert found and found[1] == "tower_2", shown
        assert 2 * int(found[2]) > int(found[3]) and int(found[4]) > 20, shown
    assert "simsync simulate mirrored.py --speeds 1,0.8,0.5,1" in shown
    assert "--towers" not in shown


def test_lesson_7_shows_where_a_synchronized_batch_norm_waits_in_tensorflow_2(
    tmp_path: Path,
) -> None:
    """Keras' BatchNormalization(synchronized=True) under MirroredStrategy: the 11 sync points
    its step says are the replicas' all-reduces of the statistics, of their gradients and of
    the optimizer's gradients, and the count of steps (the import failed on a cycle before)."""
    folder = tmp_path / LESSON_7.name
    shutil.copytree(LESSON_7, folder)
    shown = " ".join(program_step(folder, file="synchronized_bn.py").split())
    run = line_of(folder / "synchronized_bn.py", "strategy.run(train_step")
    made = re.search(
        rf"11 sync points made in distributed_train_step \(synchronized_bn.py:{run}\): "
        r"([^:]+?), and 8 more",
        shown,
    )
    assert made, shown
    assert "CollectiveReduceV2" in made[1]  # the longest waits: all-reduces
    assert "simulated: 2 towers" in shown and "--towers" not in shown


def test_a_program_that_cannot_be_imported_skips_its_steps_and_question(copy: Path) -> None:
    """The learner broke their program: the program step, the graph and the question about
    it each say so in a line, the question is not asked (nor counted), and the lesson goes
    on to its end."""
    (copy / "tower_loop.py").write_text("def train(:\n")
    lesson = load_lesson(copy)
    keep = [s for s in lesson.steps if s.needs_tensorflow and s.kind != "verify"]
    assert [s.kind for s in keep] == ["program", "graph", "question"]
    lines = [f'title = "{lesson.title}"']
    for step in keep:
        lines.append(f'[[steps]]\nkind = "{step.kind}"')
        lines += [f"{key} = {json.dumps(value)}" for key, value in step.data.items()]
    (copy / "lesson.toml").write_text("\n".join(lines) + "\n")
    out = io.StringIO()
    console = Console(file=out, width=120, color_system=None)
    outcome = LessonRunner(load_lesson(copy), Progress.scratch(), console, no_input=True).run()
    shown = out.getvalue()
    assert outcome.finished and outcome.asked == 0
    assert shown.count("could not be imported") == 3 and "not asked" in shown
    # the line names the learner's copy (a temporary folder of any length): unwrapped
    assert "tower_loop.py:1: SyntaxError" in " ".join(shown.split())


def test_lesson_4_draws_the_graph_its_program_builds(tmp_path: Path) -> None:
    """Each thread's train op in a lane of its own, the variables' reads shared, no sync
    point: what the lesson's text says of it."""
    folder = tmp_path / LESSON_4.name
    shutil.copytree(LESSON_4, folder)
    shown = program_step(folder, "graph")
    for box in ("images [tower_0]", "model [tower_0]", "gradients [tower_0]",
                "GradientDescent [tower_0]", "shared"):  # fmt: skip
        assert box in shown
    assert "4 towers" in shown and "◆" not in shown
