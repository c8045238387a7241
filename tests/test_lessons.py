"""The bundled lessons: they check clean, and each runs end to end, TensorFlow included."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from simsync.tutor.content import load_lessons
from simsync.tutor.lesson_check import check_lesson

ROOT = Path(__file__).resolve().parent.parent
LESSONS = load_lessons()


def test_the_lessons_are_numbered_in_order() -> None:
    assert [lesson.number for lesson in LESSONS] == list(range(1, 8))
    for lesson in LESSONS:
        kinds = [step.kind for step in lesson.steps]
        assert len(lesson.questions) >= 3
        assert {"text", "code", "graph", "timeline", "question", "verify"} <= set(kinds)
        assert all(len(q.get("hints", [])) >= 2 and q.get("explain") for q in lesson.questions)


#: Words of the project's own notes, meaningless to a learner: the questions it started from
#: are its "seeds" ("Seed 002's answer", "the seed's threads").
JARGON = re.compile(r"\bseed 0\d\d\b|\bthe seed's\b|\bseeds?/|\bseed question", re.IGNORECASE)
#: The one place a lesson may name its seed: the ``seed`` key of lesson.toml, never shown.
SEED_KEY = re.compile(r'^seed = "\d{3}"$', re.MULTILINE)


def learner_facing() -> list[Path]:
    """Every file a learner reads: the lessons (their scenarios and code excerpts too, which
    `simsync lessons copy` hands out), the code that prints lessons and reports, the README."""
    return [
        *sorted(p for p in (ROOT / "lessons").rglob("*") if p.suffix in (".md", ".toml", ".py")),
        *sorted((ROOT / "simsync" / "tutor").glob("*.py")),
        *sorted((ROOT / "simsync" / "viz").glob("*.py")),
        ROOT / "README.md",
    ]


def test_no_project_jargon_in_what_learners_read() -> None:
    found = [
        f"{path.relative_to(ROOT)}: {match.group(0)!r}"
        for path in learner_facing()
        for match in JARGON.finditer(SEED_KEY.sub("", path.read_text(encoding="utf-8")))
    ]
    assert found == []
    assert len(learner_facing()) > 60  # the lessons' files were found


def test_the_jargon_check_finds_jargon() -> None:
    for text in ("Seed 002's answer", "the seed's optimizer", "see seeds/001.txt"):
        assert JARGON.search(text), text
    for text in ('seed = "001"', "seed = 0", "--seed 7", "seed 3 draws"):
        assert not JARGON.search(SEED_KEY.sub("", text)), text


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.slug)
def test_commands_in_a_lesson_run_on_its_copy_and_fit_the_terminal(lesson) -> None:
    """The shell blocks of a lesson's Markdown: each starts from ``simsync lessons copy N
    my-lessonN``, names only files that command copies, and fits 80 columns (a code block is
    wrapped at the terminal's width, which would break a command in two)."""
    blocks = [
        block.splitlines()
        for path in sorted(lesson.folder.glob("*.md"))
        for block in re.findall(r"```sh\n(.*?)```", path.read_text(encoding="utf-8"), re.S)
    ]
    copied = {p.name for p in lesson.folder.glob("*.toml") if p.name != "lesson.toml"}
    for lines in blocks:
        assert lines[:2] == [
            f"simsync lessons copy {lesson.number} my-lesson{lesson.number}",
            f"cd my-lesson{lesson.number}",
        ], lines
        for line in lines:
            assert len(line) <= 76 and "lessons/" not in line, line
            assert set(re.findall(r"[\w.-]+\.toml", line)) <= copied, line
    assert blocks, "the lesson suggests no command to try"


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.slug)
def test_lesson_checks_clean(lesson) -> None:
    assert check_lesson(lesson) == []


@pytest.mark.tf
@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.slug)
def test_lesson_runs_end_to_end_with_its_tensorflow_check(lesson, tmp_path: Path) -> None:
    env = {**os.environ, "SIMSYNC_DATA_DIR": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-m", "simsync", "learn", str(lesson.number), "--no-input"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    count = len(lesson.questions)
    assert f"{count}/{count} first try" in out
    assert "Does TensorFlow do what the graph says?" in out
    assert "✗ DISAGREE" not in out and "could not run" not in out


@pytest.mark.parametrize(
    "lesson",
    [lesson for lesson in LESSONS if any(s.kind == "program" for s in lesson.steps)],
    ids=lambda lesson: lesson.slug,
)
def test_a_program_step_runs_the_lesson_s_setup(lesson) -> None:
    """A program step's speeds are the lesson scenario's (one set-up asked about, one shown),
    and it suggests a number of towers other than the program's own."""
    from simsync.scenario import load_scenario

    scenario = load_scenario(lesson.folder / lesson.scenario)
    for step in (s for s in lesson.steps if s.kind == "program"):
        speeds = step.get("speeds")
        if speeds is not None:
            assert tuple(speeds) == scenario.cluster.speeds, lesson.slug
        assert step.try_towers() != scenario.cluster.devices or step.get("towers"), lesson.slug
        assert step.try_towers() > 0 or "--towers" not in step.try_options(), lesson.slug


#: What a program step prints of the graph its program builds, as a question's answer would
#: read it: who came last at its sync points, and how many there are.
PRINTED_BY_A_PROGRAM_STEP = (re.compile(r"\bslowest_tower\b"), re.compile(r"^len\(sync_points\)$"))


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.slug)
def test_no_question_is_answered_by_an_earlier_program_step(lesson) -> None:
    """Lesson 2 printed 'tower_2 came last ... in 38 of 40 steps' and then asked which tower
    comes last: a question about a program whose answer its program step prints comes
    before that step."""
    shown: set[str] = set()
    for number, step in enumerate(lesson.steps, 1):
        if step.kind == "program":
            shown.add(step.get("file"))
        elif step.kind == "question" and step.get("program") in shown:
            answer = str(step.get("answer")).strip()
            printed = [p.pattern for p in PRINTED_BY_A_PROGRAM_STEP if p.search(answer)]
            assert not printed, f"{lesson.slug} step {number}: answered by its program step"


def test_lessons_copy_suggests_the_program_step_s_towers(tmp_path: Path) -> None:
    env = {**os.environ, "SIMSYNC_DATA_DIR": str(tmp_path / "data"), "COLUMNS": "200"}
    copied = subprocess.run(
        [sys.executable, "-m", "simsync", "lessons", "copy", "2", str(tmp_path / "my-lesson2")],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert copied.returncode == 0, copied.stderr
    program = tmp_path / "my-lesson2" / "average_gradients.py"
    assert f"simsync simulate {program} --towers 8 --speeds 1,0.8,0.5,1" in copied.stdout


def test_lessons_copy_writes_into_no_link_and_not_into_simsync(tmp_path: Path) -> None:
    """The thirty-second attack copied a lesson through a link into /etc, the thirty-third
    through a link on the way: a folder reached through a link is refused, as are simsync's
    own folders (its lessons too), and nothing is written in any."""
    env = {**os.environ, "SIMSYNC_DATA_DIR": str(tmp_path / "data")}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "link").symlink_to(elsewhere)
    package = ROOT / "simsync"
    before = sorted(p.name for p in package.iterdir())
    targets = (
        (tmp_path / "link", "through a link"),
        (tmp_path / "link" / "sub", "through a link"),  # a link on the way (the 33rd attack)
        (package, "simsync's own folder"),
        (ROOT / "lessons" / "mine", "simsync's lessons"),
    )
    for target, said in targets:
        copied = subprocess.run(
            [sys.executable, "-m", "simsync", "lessons", "copy", "1", str(target)],
            capture_output=True, text=True, timeout=120, env=env,
        )  # fmt: skip
        assert copied.returncode == 2, copied.stdout + copied.stderr
        assert said in copied.stderr and "Traceback" not in copied.stderr
    assert list(elsewhere.iterdir()) == []
    assert sorted(p.name for p in package.iterdir()) == before
    assert not (ROOT / "lessons" / "mine").exists()


def test_a_suggested_command_at_80_columns_breaks_between_its_words(tmp_path: Path) -> None:
    """A learner's trial: at 80 columns the terminal broke `--speeds 1,0.8,` / `0.5,1`. Each
    line fits, and the lines, pasted into a shell, are the one command."""
    env = {**os.environ, "SIMSYNC_DATA_DIR": str(tmp_path / "data"), "COLUMNS": "80"}
    copied = subprocess.run(
        [sys.executable, "-m", "simsync", "lessons", "copy", "2", "my-lesson2"],
        capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert copied.returncode == 0, copied.stderr
    assert all(len(line) <= 80 for line in copied.stdout.splitlines())
    program = Path("my-lesson2", "average_gradients.py")
    (suggested,) = [
        c for c in copied.stdout.split("Try: ") if c.startswith("simsync simulate my-lesson2/av")
    ]
    assert "\\\n" in suggested  # broken, between words
    pasted = subprocess.run(  # the shell joins the lines: printf shows each word it got
        ["bash", "-c", "printf '%s\\n' " + suggested.strip()],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    words = ["simsync", "simulate", str(program), "--towers", "8", "--speeds", "1,0.8,0.5,1"]
    assert pasted.stdout.split("\n")[:-1] == words
