"""The lesson runtime: content, answers, progress (save, resume, reset, corrupt), runner, CLI."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from simsync.tutor.content import STEP_KINDS, LessonError, load_lesson, load_lessons
from simsync.tutor.progress import Progress
from simsync.tutor.questions import expected_answer
from simsync.tutor.runner import LessonRunner, Quit
from simsync.tutor.views import LessonsView

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "lessons"


def console() -> Console:
    return Console(file=io.StringIO(), width=80, color_system=None)


def text_of(c: Console) -> str:
    assert isinstance(c.file, io.StringIO)
    return c.file.getvalue()


@pytest.fixture
def tiny():
    return load_lessons(FIXTURES)[0]


@pytest.fixture
def progress(tmp_path: Path) -> Progress:
    return Progress(tmp_path / "progress.json")


def flat(text: str) -> str:
    """``text`` with every run of spaces and line breaks as one space: what a message says,
    however a console wrapped it."""
    return " ".join(text.split())


def scripted(*replies: str):
    answers = iter(replies)
    return lambda prompt: next(answers)


def test_answers_come_from_the_simulation(tiny) -> None:
    by_id = {q.get("id"): expected_answer(tiny, q) for q in tiny.questions}
    assert by_id["step-time"] == pytest.approx(20.0, rel=1e-6)  # 10 ms at speed 0.5
    assert by_id["who"] == "tower_1" and by_id["which-op"] == "average_gradients"


def test_bad_lessons_name_the_file_and_key(tmp_path: Path) -> None:
    folder = tmp_path / "01-bad"
    folder.mkdir()
    (folder / "lesson.toml").write_text('title = "x"\n[[steps]]\nkind = "quiz"\n')
    with pytest.raises(LessonError, match=r"lesson.toml: step 1: kind 'quiz' is not one of"):
        load_lesson(folder)
    (folder / "lesson.toml").write_text('title = "x"\n[[steps]]\nkind = "text"\nfiel = "a"\n')
    with pytest.raises(LessonError, match=r"step 1 \(text\): 'file' is required"):
        load_lesson(folder)
    program = 'title = "x"\n[[steps]]\nkind = "program"\nfile = "p.py"\n'
    (folder / "lesson.toml").write_text(program + "try_towers = 65\n")
    (folder / "p.py").write_text("print('a program')\n")
    from simsync.tutor.lesson_check import check_lesson

    assert check_lesson(load_lesson(folder)) == [
        "01-bad step 1 (program): try_towers 65: simulate's --towers takes at most 64"
    ]
    (folder / "lesson.toml").write_text(program + "speeds = [1, 0]\n")
    with pytest.raises(LessonError, match=r"speeds.*a list of numbers > 0"):
        load_lesson(folder)


def test_non_interactive_answers_are_judged_and_saved(tiny, progress) -> None:
    c = console()
    outcome = LessonRunner(
        tiny, progress, c, answers={"step-time": 20, "who": "1", "which-op": "average_gradients"}
    ).run()
    assert (outcome.asked, outcome.right, outcome.finished) == (3, 2, True)
    saved = json.loads(progress.path.read_text())["lessons"]["01-tiny"]
    assert saved["done"] and saved["step"] == len(tiny.steps)
    assert saved["answers"]["who"] == {"given": "1", "correct": False, "tries": 1}
    assert "The answer is tower_1." in text_of(c)


def test_hints_retries_and_reveal(tiny, progress) -> None:
    c = console()
    runner = LessonRunner(
        tiny,
        progress,
        c,
        ask=scripted(
            "",
            "",
            "",  # continue after text, code, graph
            "?",
            "",
            "ten",
            "5",
            "20 ms",  # hint; blank and unreadable (no try used); wrong; right
            "",  # continue after reading the explanation
            "x",
            "a",
            "tower_0",
            "A",  # not a choice (no try used); three wrong: revealed
            "",
            "[/red]",
            "AVERAGE_GRADIENTS",
            "",
        ),
    )  # a wrong op (markup is text), then right
    outcome = runner.run()
    out = text_of(c)
    # a hint asked for with ? and one after a wrong answer: both labelled
    assert "Hint: The slow tower sets the pace." in out and "Hint: 10 ms at half speed." in out
    assert "No more hints." not in out
    assert "The answer is tower_1." in out and outcome.right == 2
    # right on a second try is right, but not at the first: the score says which
    assert outcome.first_try == 0 and outcome.score == "0/3 first try, 2 on a retry"
    assert "Please type a number (in ms)" in out and "✗ Not quite ([/red])." in out
    assert "Please type the letter of a choice" in out


def test_quitting_keeps_the_step_and_resuming_continues(tiny, progress) -> None:
    runner = LessonRunner(tiny, progress, console(), ask=scripted("", "q"))
    with pytest.raises(Quit):
        runner.run()
    again = Progress(progress.path)
    assert again.step("01-tiny") == 2 and not again.done("01-tiny")
    c = console()
    LessonRunner(tiny, again, c, no_input=True).run(start=again.step("01-tiny"))
    assert "step 3/7" in text_of(c) and "step 2/7" not in text_of(c)
    assert again.done("01-tiny")


def test_resuming_at_a_question_shows_its_step_again_and_keeps_the_tries(tiny, progress) -> None:
    # text, code, graph; then at the first question: a hint, a wrong answer, quit
    with pytest.raises(Quit):
        LessonRunner(tiny, progress, console(), ask=scripted("", "", "", "?", "5", "q")).run()
    again = Progress(progress.path)
    assert again.step("01-tiny") == 3  # the question (step 4) is not finished
    c = console()
    # Enter after the reminder; two more wrong answers use up the 3 tries
    runner = LessonRunner(tiny, again, c, ask=scripted("", "6", "7", "q"))
    with pytest.raises(Quit):
        runner.run(start=again.step("01-tiny"))
    out = text_of(c)
    # the graph the question is about, shown again first, then the question
    assert "step 3/7 · again" in out
    assert out.index("Graph 'tiny'") < out.index("How long is one step?")
    assert "You have used 1 try of 3." in out
    # both hints were shown before the quit (by ? and after the wrong answer): shown again
    assert out.count("Hint: The slow tower sets the pace.") == 1
    assert out.count("Hint: 10 ms at half speed.") == 1
    assert "The answer is 20 ms." in out  # revealed after 1 + 2 tries, not 3 more
    saved = json.loads(progress.path.read_text())["lessons"]["01-tiny"]
    assert saved["answers"]["step-time"] == {"given": "7", "correct": False, "tries": 3}
    assert "pending" not in saved  # a finished question leaves no tries behind


def test_resuming_at_a_question_after_a_question_shows_the_step_before_both(tiny, progress) -> None:
    progress.reached("01-tiny", 4)  # the first question done, the second (step 5) next
    c = console()
    with pytest.raises(Quit):
        LessonRunner(tiny, progress, c, ask=scripted("", "q")).run(start=4)
    out = text_of(c)
    assert "step 3/7 · again" in out and "Graph 'tiny'" in out and "Who is waited for?" in out
    assert "You have used" not in out  # no tries used on this one yet


def test_commands_shown_in_a_lesson_work_anywhere_and_break_between_words(tiny, progress) -> None:
    """Each command fits 80 columns, broken between its words with a `\\` the shell joins
    (a terminal wrapping it would break a word), so that it can be pasted."""
    c = console()  # 80 columns
    runner = LessonRunner(tiny, progress, c, no_input=True)
    runner.run()
    runner._try_it(
        "Race them yourself", ["compare", *(f"scenario_{i}_long_name.toml" for i in range(5))]
    )
    shown = text_of(c)
    assert all(len(line.rstrip()) <= 80 for line in shown.splitlines())
    lines = re.sub(r" \\\n\s+", " ", shown).splitlines()  # as the shell reads them
    for command in (
        "simsync lessons copy 1 my-lesson1",
        "cd my-lesson1",
        "simsync graph tiny.toml",
        "simsync simulate tiny.toml",
        "simsync compare " + " ".join(f"scenario_{i}_long_name.toml" for i in range(5)),
    ):
        assert f"  {command}" in [line.rstrip() for line in lines], command
    assert str(FIXTURES) not in text_of(c) and "fixtures" not in text_of(c)


def test_lessons_copy_copies_the_scenarios_and_refuses_to_overwrite(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "my-lesson1"
    copied = cli("lessons", "copy", "1", str(target), data=tmp_path)
    assert copied.returncode == 0, copied.stderr
    assert sorted(p.name for p in target.iterdir()) == ["loop.py", "tiny.toml"]
    source = FIXTURES / "01-tiny" / "tiny.toml"
    assert (target / "tiny.toml").read_bytes() == source.read_bytes()
    # the copy runs from another folder
    elsewhere = subprocess.run(
        [sys.executable, "-m", "simsync", "simulate", "my-lesson1/tiny.toml", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path / "deep",
    )
    assert elsewhere.returncode == 0 and json.loads(elsewhere.stdout)["towers"] == 2
    (target / "tiny.toml").write_text("# mine\n")
    again = cli("lessons", "copy", "1", str(target), data=tmp_path)
    assert again.returncode == 2 and again.stderr.count("\n") == 1
    assert f"{target / 'loop.py'} already exists; add --force" in again.stderr
    assert (target / "tiny.toml").read_text() == "# mine\n"  # nothing was written
    forced = cli("lessons", "copy", "1", str(target), "--force", data=tmp_path)
    assert forced.returncode == 0 and (target / "tiny.toml").read_bytes() == source.read_bytes()
    onto_a_file = cli("lessons", "copy", "1", str(target / "tiny.toml"), data=tmp_path)
    assert onto_a_file.returncode == 2 and "is a file, not a folder" in onto_a_file.stderr
    onto_itself = cli("lessons", "copy", "1", str(FIXTURES / "01-tiny"), "--force", data=tmp_path)
    assert onto_itself.returncode == 2 and "refusing to overwrite" in onto_itself.stderr


def test_reset_forgets(tiny, progress) -> None:
    progress.reached("01-tiny", 3)
    progress.reset("01-tiny")
    assert Progress(progress.path).step("01-tiny") == 0


def test_a_corrupt_progress_file_is_set_aside(tmp_path: Path) -> None:
    path = tmp_path / "progress.json"
    path.write_text("{not json")
    progress = Progress(path)
    assert progress.lessons == {} and "could not be read" in (progress.warning or "")
    left = [p.name for p in tmp_path.iterdir() if p.name != "progress.json.lock"]
    assert [name.startswith("progress.json.corrupt-") for name in left] == [True]
    progress.reached("01-tiny", 1)
    assert Progress(path).step("01-tiny") == 1


def test_menu_shows_progress(tiny, progress) -> None:
    progress.reached("01-tiny", 2)
    c = Console(file=io.StringIO(), width=100, color_system=None)
    c.print(LessonsView([tiny], progress))
    out = text_of(c)
    assert "simsync lessons: 0/1 done" in out
    assert "step 3/7" in out and "◀ continue here" in out


def cli(*args: str, data: Path, lessons: Path = FIXTURES) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SIMSYNC_DATA_DIR": str(data), "SIMSYNC_LESSONS": str(lessons)}
    return subprocess.run(
        [sys.executable, "-m", "simsync", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
    )


def test_cli_learn_no_input_list_reset_check(tmp_path: Path) -> None:
    ran = cli("learn", "1", "--no-input", data=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert "expected answer: 20 ms" in ran.stdout and "3/3 first try" in ran.stdout
    # a run without a keyboard never touches the learner's own progress
    assert "0/1 done" in cli("lessons", "list", data=tmp_path).stdout
    Progress(tmp_path / "progress.json").reached("01-tiny", 7, done=True)
    assert "1/1 done" in cli("lessons", "list", data=tmp_path).stdout
    kept = subprocess.run(  # asked, and Enter keeps the progress, as the prompt says
        [sys.executable, "-m", "simsync", "lessons", "reset", "--all"],
        input="\n",
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "SIMSYNC_DATA_DIR": str(tmp_path), "SIMSYNC_LESSONS": str(FIXTURES)},
        cwd=ROOT,
    )
    assert "Forget your progress in all lessons? [y/N]" in kept.stdout, kept.stdout
    assert "Nothing changed." in kept.stdout
    assert "1/1 done" in cli("lessons", "list", data=tmp_path).stdout
    reset = cli("lessons", "reset", "--all", "--yes", data=tmp_path)
    assert "0/1 done" in reset.stdout
    checked = cli("lessons", "check", data=tmp_path)
    assert checked.returncode == 0 and "1 lesson, 3 questions: all good" in checked.stdout


def test_cli_answers_file_grades(tmp_path: Path) -> None:
    answers = tmp_path / "answers.toml"
    answers.write_text('[answers]\nstep-time = 19.5\nwho = "tower_1"\nwhich-op = "loss"\n')
    ran = cli("learn", "1", "--answers", str(answers), data=tmp_path)
    assert ran.returncode == 1 and "2/3 first try" in ran.stdout


def test_the_menu_does_not_start_the_simulator(tmp_path: Path) -> None:
    code = (
        "import sys; from simsync.cli import main; main(['lessons', 'list']); "
        "heavy = {'tensorflow', 'simpy', 'numpy', 'networkx'} & set(sys.modules); "
        "assert not heavy, heavy"
    )
    env = {**os.environ, "SIMSYNC_DATA_DIR": str(tmp_path), "SIMSYNC_LESSONS": str(FIXTURES)}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env
    )
    assert result.returncode == 0, result.stderr


def test_a_closed_input_quits_cleanly(tmp_path: Path) -> None:
    env = {**os.environ, "SIMSYNC_DATA_DIR": str(tmp_path), "SIMSYNC_LESSONS": str(FIXTURES)}
    for args in (["learn"], ["learn", "1"], ["lessons", "reset", "1"]):
        result = subprocess.run(
            [sys.executable, "-m", "simsync", *args],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
        )
        assert result.returncode == 0, result.stderr
        assert "Traceback" not in result.stderr


def test_a_progress_file_of_the_wrong_shape_is_set_aside(tmp_path: Path) -> None:
    (tmp_path / "progress.json").write_text('{"version": 1, "lessons": {"01-tiny": 5}}')
    listed = cli("lessons", "list", data=tmp_path)
    # the warning is wrapped to the terminal's width, and holds the (long) temporary path
    assert listed.returncode == 0 and "could not be read" in flat(listed.stdout)
    assert "0/1 done" in listed.stdout


def test_a_step_taller_than_the_screen_is_shown_a_screenful_at_a_time(tiny, progress) -> None:
    c = Console(file=io.StringIO(), width=80, height=8, force_terminal=True, color_system=None)
    prompts: list[str] = []

    def ask(prompt: str) -> str:
        prompts.append(prompt)
        return "q" if len(prompts) == 4 else ""  # stop at the second page of step 3 (graph)

    with pytest.raises(Quit):
        LessonRunner(tiny, progress, c, ask=ask).run()
    # steps 1 and 2 fit; step 3 (the graph) does not: it stops at its second "more"
    assert [p.startswith("[dim]-- more") for p in prompts] == [False, False, True, True]
    # nothing of the step was lost before the stop: its first lines were written
    assert "step 3/7" in text_of(c)
    assert Progress(progress.path).step("01-tiny") == 2  # step 3 was not finished


def test_the_pager_clears_between_pages_and_keeps_a_timeline_whole(tiny, progress) -> None:
    """A learner at 80x24 saw the previous page left on screen, and a timeline cut in two
    across pages."""
    c = Console(file=io.StringIO(), width=80, height=14, force_terminal=True, color_system=None)
    asked: list[str] = []
    runner = LessonRunner(tiny, progress, c, ask=lambda prompt: asked.append(prompt) or "")
    timeline = ["Timeline: steps 0–1", "step   ├step 0", "/cpu:0 r····aa", "/gpu:0 FFFFBBB",
                "/gpu:1 FFFFBBB", "       ┬──────", "ms     0"]  # fmt: skip
    runner._page("\n".join([f"paragraph line {i}" for i in range(9)] + timeline + ["after"]))
    out = text_of(c)
    first, _, rest = out.partition("\x1b[2J")  # the screen cleared once the learner went on
    assert len(asked) == 1 and rest
    assert "paragraph line 8" in first and "Timeline" not in first
    assert all(line in rest for line in timeline)


def test_the_last_page_fills_the_screen_with_the_lines_before_it(tiny, progress) -> None:
    """A learner saw a long step's last 3 lines alone at the top of a cleared screen: the
    last page ends where the text does and fills the screen with the lines before it, but
    never begins inside a table."""
    c = Console(file=io.StringIO(), width=80, height=12, force_terminal=True, color_system=None)
    runner = LessonRunner(tiny, progress, c, ask=lambda prompt: "")
    table = ["Waits", "┏━━━┓", "┃ a ┃", "┃ b ┃", "┗━━━┛"]
    runner._page("\n".join([f"line {i}" for i in range(23)] + ["end 1", "end 2"]))
    last = text_of(c).split("\x1b[2J")[-1].replace("\x1b[H", "").strip("\n").split("\n")
    assert last[-1] == "end 2" and len(last) == 10, last  # a screen of 12, less 2
    assert last[0] == "line 15"  # pages of 10, 10, then 5 lines and 5 seen again
    runner._page("\n".join([f"line {i}" for i in range(4)] + table * 2 + ["end"]))
    last = text_of(c).split("\x1b[2J")[-1].replace("\x1b[H", "").strip("\n").split("\n")
    assert last[0] in ("Waits", "line 3"), last  # not a table's middle


def test_every_kind_of_step_is_shown_one_way_and_says_when_it_needs_tensorflow() -> None:
    """One home for a step's kind: its keys and its TensorFlow in the content's registry, how
    it is shown in the runner's; each kind in both, and none in one only."""
    assert set(LessonRunner.SHOWN) == set(STEP_KINDS)
    tensorflow = {k for k, kind in STEP_KINDS.items() if kind.tensorflow}
    assert tensorflow == {"verify", "race_verify", "program"}
    for name, kind in STEP_KINDS.items():
        assert kind.skipped.startswith("(") and "TensorFlow" in kind.skipped, name


def test_progress_on_tensorflow_names_tensorflow_once(tiny, progress, monkeypatch) -> None:
    """A learner saw 'Running the same graph on TensorFlow: TensorFlow: step 74 of 164': the
    session's own progress lines begin with 'TensorFlow: ', and the spinner said it again."""
    import rich.status

    shown: list[str] = []
    update = rich.status.Status.update

    def seen(self, status=None, **kwargs):  # rich's own spinner, what it is given kept
        shown.append(str(status))
        return update(self, status, **kwargs)

    monkeypatch.setattr(rich.status.Status, "update", seen)

    def work(report):
        report("TensorFlow: step 74 of 164, about 1 seconds left")
        report("round 1 of 3")

    LessonRunner(tiny, progress, console())._on_tensorflow("Running the same graph", work)
    assert shown == [
        "Running the same graph on TensorFlow: step 74 of 164, about 1 seconds left",
        "Running the same graph on TensorFlow: round 1 of 3",
    ]
