"""Lessons and answers under attack: broken lesson folders, binary or odd answer files, odd
menu input. The validator (`lessons check`) catches what the runtime would trip on, and the
runtime says one clear line instead of a traceback."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "lessons"


def simsync(
    *args: str, lessons: Path = FIXTURES, data: Path, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SIMSYNC_DATA_DIR": str(data), "SIMSYNC_LESSONS": str(lessons)}
    return subprocess.run(
        [sys.executable, "-m", "simsync", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
    )


def flat(text: str) -> str:
    """Whatever width a console wrapped ``text`` to: one space between words."""
    return " ".join(text.split())


def broken_lesson(tmp_path: Path, edit) -> Path:
    """A copy of the fixture lesson whose lesson.toml went through ``edit`` (text -> text or
    bytes); returns the lessons root, deep in a long path (messages must hold it whole)."""
    root = tmp_path / ("a-long-folder-name-" * 8) / "lessons"
    shutil.copytree(FIXTURES / "01-tiny", root / "01-tiny")
    source = root / "01-tiny" / "lesson.toml"
    changed = edit(source.read_text())
    if isinstance(changed, bytes):
        source.write_bytes(changed)
    else:
        source.write_text(changed)
    return root


BROKEN = {
    "not UTF-8": (
        lambda t: t.encode("utf-8").replace(b"Tiny", b"T\xffny"),
        "lesson.toml: not a UTF-8 text file (at byte",
    ),
    "steps = 5": (lambda t: "steps = 5\n" + t.split("[[steps]]")[0], "'steps' must be a list"),
    "title = 5": (lambda t: t.replace('title = "Tiny"', "title = 5"), "'title' must be a string"),
    "tolerance lots": (
        lambda t: t.replace('unit = "ms"', 'unit = "ms"\ntolerance = "lots"'),
        "'tolerance' must be a number > 0",
    ),
    "kind a list": (lambda t: t.replace('kind = "graph"', "kind = [1]"), "kind [1] is not one"),
    "hints numbers": (
        lambda t: t.replace('hints = ["The slow', 'hints = [1, "The slow'),
        "'hints' must be a list of strings",
    ),
    "timeline steps a string": (
        lambda t: t.replace('kind = "timeline"\nsteps = 1', 'kind = "timeline"\nsteps = "2"'),
        "'steps' must be an integer from 1 to 1000",
    ),
    "choices missing": (
        lambda t: t.replace('choices = ["tower_0", "tower_1"]\n', ""),
        "a choice question needs 'choices'",
    ),
    "nested": (lambda t: t + "x = " + "[" * 200_000, "lesson.toml: TOML nested too deeply"),
    "findings unknown": (
        lambda t: t + '\n[[steps]]\nkind = "verify"\nfindings = ["side by side", "speed"]\n',
        "'findings' must be a list of the findings to show, of: 'side by side'",
    ),
}


def test_the_findings_a_lesson_may_show_are_named_as_the_view_names_them() -> None:
    from simsync.findings import FINDINGS
    from simsync.tutor.content import FINDINGS_ALLOWED, _findings

    assert FINDINGS_ALLOWED.endswith(", ".join(repr(f) for f in FINDINGS))
    assert _findings(list(FINDINGS)) and _findings([]) and not _findings(["speed"])


@pytest.mark.parametrize("case", BROKEN, ids=list(BROKEN))
def test_a_broken_lesson_is_one_line_everywhere(tmp_path: Path, case: str) -> None:
    edit, message = BROKEN[case]
    lessons = broken_lesson(tmp_path, edit)
    for args in (["lessons", "list"], ["learn", "1", "--no-input"], ["learn", "1"]):
        ran = simsync(*args, lessons=lessons, data=tmp_path / "data")
        assert ran.returncode == 2 and "Traceback" not in ran.stderr, (args, ran.stderr)
        lines = ran.stderr.strip().splitlines()
        assert len(lines) == 1 and "lesson.toml" in lines[0] and message in lines[0], lines
    checked = simsync("lessons", "check", lessons=lessons, data=tmp_path / "data")
    assert checked.returncode == 1 and "Traceback" not in checked.stderr, checked.stderr
    assert message in flat(checked.stdout) and checked.stdout.rstrip().endswith(": 1 problem")


def test_check_reports_an_answer_that_cannot_be_computed(tmp_path: Path) -> None:
    lessons = broken_lesson(
        tmp_path, lambda t: t.replace('answer = "step_time.mean * 1000"', 'answer = "1 / 0"')
    )
    checked = simsync("lessons", "check", lessons=lessons, data=tmp_path)
    assert checked.returncode == 1 and "Traceback" not in checked.stderr
    assert "cannot compute 1 / 0 (division by zero)" in flat(checked.stdout)


def test_a_step_file_that_is_not_text_is_one_line(tmp_path: Path) -> None:
    lessons = broken_lesson(tmp_path, lambda t: t)
    (lessons / "01-tiny" / "intro.md").write_bytes(b"\xff\xfe\x00 not text")
    ran = simsync("learn", "1", "--no-input", lessons=lessons, data=tmp_path)
    assert ran.returncode == 2 and "Traceback" not in ran.stderr
    assert "intro.md: not a UTF-8 text file (at byte 1)" in ran.stderr
    checked = simsync("lessons", "check", lessons=lessons, data=tmp_path)
    assert checked.returncode == 1 and "intro.md: not a UTF-8 text file" in flat(checked.stdout)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\x89PNG\r\n\x1a\n\x00\xff binary", "not a UTF-8 text file"),
        (b"a = " + b"[" * 200_000, "nested too deeply"),
        (b"# padding\n" * 120_000, "larger than 1,000,000 bytes"),
        (b"answers = 5", "expected an [answers] table"),
    ],
    ids=["binary", "nested", "huge", "not-a-table"],
)
def test_a_bad_answers_file_is_one_line(tmp_path: Path, content: bytes, message: str) -> None:
    answers = tmp_path / "answers.toml"
    answers.write_bytes(content)
    ran = simsync("learn", "1", "--answers", str(answers), data=tmp_path)
    assert ran.returncode == 2 and "Traceback" not in ran.stderr
    lines = ran.stderr.strip().splitlines()
    assert len(lines) == 1 and str(answers) in lines[0] and message in lines[0], lines


def test_choices_are_answered_by_letter_or_text_as_documented(tmp_path: Path) -> None:
    """docs/authoring.md and the grader agree: a letter or the text; a number is graded
    wrong with a note saying what is expected."""
    doc = flat((ROOT / "docs" / "authoring.md").read_text())
    assert "by its letter (`a`, `b`, …, as the choices are shown) or its text" in doc
    assert "by its number" not in doc
    answers = tmp_path / "answers.toml"
    for given, right in (("b", True), ("tower_1", True), ("2", False), ("1", False)):
        answers.write_text(f'[answers]\nstep-time = 20\nwho = "{given}"\nwhich-op = "x"\n')
        ran = simsync("learn", "1", "--answers", str(answers), data=tmp_path)
        out = flat(ran.stdout)
        assert ("2/3 first try" if right else "1/3 first try") in out, (given, out)
        note = "(Answer with the letter of a choice (a to b) or its text.)"
        assert (note in out) == given.isdigit(), (given, out)


def test_answers_to_unknown_questions_are_reported(tmp_path: Path) -> None:
    answers = tmp_path / "answers.toml"
    answers.write_text('[answers]\nstep-time = 20\nstep_time = 20\n"who\\u001b[2J" = "b"\n')
    ran = simsync("learn", "1", "--answers", str(answers), data=tmp_path)
    warnings = [line for line in ran.stderr.splitlines() if "has no question" in line]
    assert len(warnings) == 2 and "'step_time'" in warnings[0]
    assert "\x1b" not in ran.stderr and "its questions: step-time, who, which-op" in warnings[0]


def test_a_given_answer_with_escape_codes_is_shown_escaped(tmp_path: Path) -> None:
    answers = tmp_path / "answers.toml"
    answers.write_text('[answers]\nwhich-op = "\\u001b]0;pwned\\u0007\\u001b[2J"\n')
    ran = simsync("learn", "1", "--answers", str(answers), data=tmp_path)
    assert ran.returncode == 1 and "\x1b" not in ran.stdout and "\\x1b" in ran.stdout


@pytest.mark.parametrize("typed", ["²", "1²", "٣", "-1", "1.5"])
def test_the_menu_takes_only_plain_lesson_numbers(tmp_path: Path, typed: str) -> None:
    """`isdigit` accepts "²": int() then raised ValueError."""
    ran = simsync("learn", data=tmp_path, stdin=typed + "\n")
    assert ran.returncode == 2 and "Traceback" not in ran.stderr
    assert ran.stderr.strip() == f"simsync: error: expected a lesson number, got {typed!r}"


def test_a_race_that_ends_in_a_tie_has_no_winner_to_ask_about(tmp_path: Path) -> None:
    root = tmp_path / "lessons"
    folder = root / "01-tie"
    folder.mkdir(parents=True)
    shutil.copy(FIXTURES / "01-tiny" / "tiny.toml", folder / "a.toml")
    shutil.copy(FIXTURES / "01-tiny" / "tiny.toml", folder / "b.toml")
    (folder / "b.toml").write_text((folder / "a.toml").read_text().replace("tiny", "other"))
    (folder / "lesson.toml").write_text(
        'title = "Tie"\n[[steps]]\nkind = "question"\nid = "w"\ntype = "choice"\n'
        'prompt = "Who wins?"\nchoices = ["tiny", "other"]\nanswer = "winner"\n'
        'race = ["a.toml", "b.toml"]\n'
    )
    checked = simsync("lessons", "check", lessons=root, data=tmp_path)
    assert checked.returncode == 1 and "Traceback" not in checked.stderr
    assert "answer '' is not among the choices" in flat(checked.stdout)
