"""The learner's progress under attack: two lessons at once, concurrent saves and readers,
unreadable files, data folders that are not folders. Real processes on a real data folder."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from simsync.tutor.content import load_lessons
from simsync.tutor.progress import Progress
from simsync.tutor.views import LessonsView

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "lessons"


def two_lessons(tmp_path: Path) -> Path:
    """A lessons folder with the fixture lesson twice: 01-tiny and 02-tiny."""
    root = tmp_path / "lessons"
    for slug in ("01-tiny", "02-tiny"):
        shutil.copytree(FIXTURES / "01-tiny", root / slug)
    return root


def environment(data: Path, lessons: Path = FIXTURES) -> dict[str, str]:
    return {**os.environ, "SIMSYNC_DATA_DIR": str(data), "SIMSYNC_LESSONS": str(lessons)}


def simsync(*args: str, data: Path, lessons: Path = FIXTURES) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "simsync", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=environment(data, lessons),
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
    )


def on_disk(data: Path) -> dict[str, dict]:
    path = data / "progress.json"
    return json.loads(path.read_text())["lessons"] if path.exists() else {}


def wait_for(condition, what: str, seconds: float = 90.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


def step_of(data: Path, slug: str) -> int:
    try:
        return int(on_disk(data).get(slug, {}).get("step", 0))
    except (OSError, ValueError):
        return -1


def test_two_lessons_at_once_keep_each_others_progress(tmp_path: Path) -> None:
    """The issue's case: `learn 1` and `learn 2` in two terminals, and a `lessons reset 2`
    while `learn 1` runs. Neither may undo the other."""
    data, lessons = tmp_path / "data", two_lessons(tmp_path)
    learners = [
        subprocess.Popen(
            [sys.executable, "-m", "simsync", "learn", number],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=environment(data, lessons),
            cwd=ROOT,
        )
        for number in ("1", "2")
    ]
    first, second = learners
    try:
        wait_for(lambda: step_of(data, "01-tiny") == 1, "lesson 1 at step 1")
        wait_for(lambda: step_of(data, "02-tiny") == 1, "lesson 2 at step 1")
        assert first.stdin is not None and second.stdin is not None
        first.stdin.write("\n\n")  # lesson 1: two more steps
        first.stdin.flush()
        wait_for(lambda: step_of(data, "01-tiny") == 3, "lesson 1 at step 3")
        second.stdin.write("\n")  # lesson 2 saves: it must not take lesson 1 back
        second.stdin.flush()
        wait_for(lambda: step_of(data, "02-tiny") == 2, "lesson 2 at step 2")
        assert step_of(data, "01-tiny") == 3
        reset = simsync("lessons", "reset", "2", "--yes", data=data, lessons=lessons)
        assert reset.returncode == 0, reset.stderr
        assert "02-tiny" not in on_disk(data)
        first.stdin.write("\n20\n")  # lesson 1 answers its question and saves again
        first.stdin.flush()
        wait_for(lambda: step_of(data, "01-tiny") == 4, "lesson 1 at step 4")
        assert "02-tiny" not in on_disk(data), "the reset of lesson 2 was undone"
    finally:
        for learner in learners:
            if learner.stdin is not None:
                learner.stdin.close()  # end of input: the lesson stops, progress saved
        for learner in learners:
            learner.wait(timeout=60)
        errors = [learner.stderr.read() if learner.stderr else "" for learner in learners]
    assert [learner.returncode for learner in learners] == [0, 0], errors
    assert on_disk(data)["01-tiny"]["answers"]["step-time"]["correct"] is True


SAVER = """
import sys
from pathlib import Path
from simsync.tutor.progress import Progress
path, slug, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
progress = Progress(path)  # loaded once, as a lesson does
for step in range(1, count + 1):
    progress.reached(slug, step)
"""

READER = """
import json, sys, time
from pathlib import Path
path, stop = Path(sys.argv[1]), Path(sys.argv[2])
reads = invalid = 0
while not stop.exists():
    try:
        text = path.read_text()
    except FileNotFoundError:
        continue
    reads += 1
    try:
        json.loads(text)
    except ValueError:
        invalid += 1
print(reads, invalid)
"""


def start(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


def test_concurrent_saves_merge_per_lesson(tmp_path: Path) -> None:
    """Three processes, each keeping the file in memory and saving 150 times: every lesson
    ends at its last step, and no save fails."""
    path = tmp_path / "progress.json"
    savers = [start(SAVER, str(path), f"0{i}-lesson", "150") for i in (1, 2, 3)]
    results = [saver.communicate(timeout=240) for saver in savers]
    assert [saver.returncode for saver in savers] == [0, 0, 0], results
    lessons = json.loads(path.read_text())["lessons"]
    assert {slug: entry["step"] for slug, entry in lessons.items()} == {
        "01-lesson": 150,
        "02-lesson": 150,
        "03-lesson": 150,
    }
    assert sorted(p.name for p in tmp_path.iterdir()) == ["progress.json", "progress.json.lock"]


def test_a_reader_never_sees_a_partial_file(tmp_path: Path) -> None:
    """Two processes saving the same lesson while a third reads the file as fast as it can:
    every read is whole JSON, and no temporary file is left behind."""
    path, stop = tmp_path / "progress.json", tmp_path / "stop"
    Progress(path).reached("01-lesson", 1)
    reader = start(READER, str(path), str(stop))
    savers = [start(SAVER, str(path), "01-lesson", "200") for _ in range(2)]
    results = [saver.communicate(timeout=240) for saver in savers]
    stop.touch()
    out, err = reader.communicate(timeout=60)
    assert [saver.returncode for saver in savers] == [0, 0], results
    reads, invalid = map(int, out.split())
    assert reads > 0 and invalid == 0, (reads, invalid, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "progress.json",
        "progress.json.lock",
        "stop",
    ]


@pytest.mark.parametrize(
    "content",
    [
        b"[" * 200_000,  # nested too deeply for any JSON reader
        b"\xff\xfe\x00binary",  # not UTF-8
        b'{"version": 1, "lessons": {"01-tiny": {"step": true, "done": false, "answers": {}}}}',
        b'{"version": true, "lessons": {}}',
        b'{"version": 1, "lessons": {"01-tiny": {"step": 1, "done": false, "answers": [1]}}}',
        b'{"version": 1, "lessons": {"01-tiny": {"step": 1, "done": false, "answers": {"a": 1}}}}',
        b'{"version": 1, "lessons": {"01-tiny": {"step": 1, "done": false, "answers": {},'
        b' "pending": {"a": {"tries": "2", "hints": 0}}}}}',
        b'{"version": 1, "lessons": {}, "resets": {"01-tiny": "1"}}',
        b" " * 1_100_000,  # larger than any progress file
    ],
    ids=[
        "nested",
        "binary",
        "step-true",
        "version-true",
        "answers-list",
        "answer-number",
        "tries-text",
        "resets-text",
        "huge",
    ],
)
def test_a_progress_file_that_cannot_be_read_is_set_aside(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "progress.json").write_bytes(content)
    for _ in range(2):  # the first run sets it aside; the second finds a fresh start
        listed = simsync("lessons", "list", data=tmp_path)
        assert listed.returncode == 0, listed.stderr
        assert "Traceback" not in listed.stderr and "0/1 done" in listed.stdout
    aside = [p for p in tmp_path.iterdir() if p.name.startswith("progress.json.corrupt-")]
    assert len(aside) == 1 and aside[0].read_bytes() == content


def test_data_dir_that_is_a_file_says_so(tmp_path: Path) -> None:
    a_file = tmp_path / "data"
    a_file.write_text("not a folder")
    for args in (["lessons", "list"], ["learn", "1"], ["lessons", "reset", "--all", "--yes"]):
        ran = simsync(*args, data=a_file)
        assert ran.returncode == 2 and "Traceback" not in ran.stderr, ran.stderr
        lines = ran.stderr.strip().splitlines()
        assert len(lines) == 1 and f"{a_file} is a file, not a folder" in lines[0]
    assert a_file.read_text() == "not a folder"


@pytest.mark.skipif(
    hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes in read-only folders"
)
def test_read_only_data_dir_with_a_corrupt_file_says_what_is_wrong(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "progress.json").write_text("{not json")
    data.chmod(0o555)
    try:
        ran = simsync("lessons", "list", data=data)
    finally:
        data.chmod(0o755)
    assert ran.returncode == 2 and "Traceback" not in ran.stderr
    message = " ".join(ran.stderr.split())
    assert "cannot be read" in message and "cannot be moved aside" in message
    assert "Permission denied" in message and str(data) in message


@pytest.mark.skipif(
    hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes in read-only folders"
)
def test_learning_in_a_read_only_data_dir_fails_before_the_first_step(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    data.chmod(0o555)
    try:
        ran = simsync("learn", "1", data=data)
    finally:
        data.chmod(0o755)
    assert ran.returncode == 2 and "Traceback" not in ran.stderr
    assert "cannot save your progress in" in ran.stderr and "step 1/" not in ran.stdout


def test_a_step_beyond_the_lesson_shows_as_its_last(tmp_path: Path) -> None:
    """An entry from a longer version of the lesson: never `step 100001/7`."""
    tiny = load_lessons(FIXTURES)[0]
    progress = Progress(tmp_path / "progress.json")
    progress.reached("01-tiny", 100_000)
    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(LessonsView([tiny], Progress(tmp_path / "progress.json")))
    shown = console.file.getvalue()  # type: ignore[attr-defined]
    assert "step 7/7" in shown and "100001" not in shown


# -- two terminals on one lesson (issue 24): each a Progress loaded at start ----------------
def terminals(tmp_path: Path, step: int = 3) -> tuple[Progress, Progress, Path]:
    """Two learners' Progress objects on one file, both loaded while the lesson was at
    ``step`` with question ``q1`` answered wrong, as `simsync learn 1` twice would be."""
    path = tmp_path / "progress.json"
    Progress(path).reached("01-tiny", step)
    Progress(path).answered("01-tiny", "q1", "7", False, 3)
    return Progress(path), Progress(path), path


def test_the_older_terminal_never_moves_progress_back(tmp_path: Path) -> None:
    """The issue's case, reproduced twice: the older terminal's save took the lesson from
    step 5 back to 3 and erased an answered question."""
    older, newer, path = terminals(tmp_path)
    newer.reached("01-tiny", 4)
    newer.answered("01-tiny", "q2", "20", True, 1)
    newer.reached("01-tiny", 5)
    older.trying("01-tiny", "q2", 1, 1)  # the older one was still on q2
    older.reached("01-tiny", 4)
    entry = Progress(path).of("01-tiny")
    assert entry["step"] == 5
    assert entry["answers"]["q2"] == {"given": "20", "correct": True, "tries": 1}
    assert entry["answers"]["q1"]["given"] == "7" and "pending" not in entry
    newer.reached("01-tiny", 7, done=True)
    older.reached("01-tiny", 6)
    assert Progress(path).done("01-tiny") and Progress(path).step("01-tiny") == 7


def test_two_pending_tries_keep_the_one_with_more_tries_used(tmp_path: Path) -> None:
    first, second, path = terminals(tmp_path)
    first.trying("01-tiny", "q2", 2, 1)
    second.trying("01-tiny", "q2", 1, 2)
    assert Progress(path).pending("01-tiny", "q2") == (2, 1)
    second.trying("01-tiny", "q3", 1, 0)
    first.reached("01-tiny", 4)
    assert Progress(path).pending("01-tiny", "q3") == (1, 0)


def test_an_answer_given_again_is_recorded_and_not_undone(tmp_path: Path) -> None:
    """A lesson taken again records its new answers; a terminal that read the old answer
    does not bring it back."""
    older, newer, path = terminals(tmp_path)
    newer.answered("01-tiny", "q1", "20", True, 2)
    older.reached("01-tiny", 4)
    assert Progress(path).of("01-tiny")["answers"]["q1"]["given"] == "20"


def test_a_reset_is_not_undone_by_a_terminal_that_read_the_file_before_it(
    tmp_path: Path,
) -> None:
    """A reset wins over what came before it: the older terminal's next save brings back
    neither its step nor its answers; the steps it takes afterwards count."""
    resetter, learner, path = terminals(tmp_path, step=5)
    resetter.reset("01-tiny")
    learner.reached("01-tiny", 6)
    assert "01-tiny" not in on_disk(tmp_path) and Progress(path).step("01-tiny") == 0
    learner.reached("01-tiny", 7)
    entry = Progress(path).of("01-tiny")
    assert entry["step"] == 7 and entry["answers"] == {}
    resetter.reached("01-tiny", 1)  # the resetter goes on from the reset too
    assert Progress(path).step("01-tiny") == 7


def test_a_reset_of_every_lesson_is_not_undone(tmp_path: Path) -> None:
    resetter, learner, path = terminals(tmp_path)
    learner.reached("02-tiny", 2)
    resetter = Progress(path)
    resetter.reset()
    learner.reached("02-tiny", 3)
    assert on_disk(tmp_path) == {}
    learner.answered("01-tiny", "q2", "1", True, 1)  # after the reset: it counts
    assert list(Progress(path).of("01-tiny")["answers"]) == ["q2"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_progress_file_that_is_a_fifo_or_a_folder_is_refused(tmp_path: Path) -> None:
    """A FIFO as progress.json hung `lessons list` and `learn` (open waited for a writer)."""
    os.mkfifo(tmp_path / "progress.json")
    other = tmp_path / "other"
    (other / "progress.json").mkdir(parents=True)
    for data, kind in ((tmp_path, "a FIFO (named pipe)"), (other, "a folder")):
        for args in (["lessons", "list"], ["learn", "1"]):
            ran = simsync(*args, data=data)
            lines = ran.stderr.strip().splitlines()
            assert ran.returncode == 2 and len(lines) == 1, ran.stderr
            assert f"your progress file {data / 'progress.json'} is {kind}" in lines[0]
    assert (other / "progress.json").is_dir() and (tmp_path / "progress.json").is_fifo()
