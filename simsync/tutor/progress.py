"""The learner's progress: which step of which lesson, and the answers given.

Saved after every step, so Ctrl-C or a closed terminal loses nothing. Lessons may run at once
on one data folder (two terminals on one lesson or on two, or a ``lessons reset`` during a
``learn``): a save takes a lock (``progress.json.lock``), reads the file again, merges into it
the lessons this process changed, and writes the result atomically
(:func:`simsync.files.atomic_writer`), so no reader ever sees half a file and progress never
moves back. Two entries of one lesson merge into:

1. the furthest step, and done if either is done;
2. every answered question; where both answered one, the answer this process just gave
   (a lesson done and taken again records its new answers), else the one in the file;
3. the tries of unanswered questions: an answer wins over a pending try, and of two pending
   tries of one question the one with more tries used (then more hints shown).

A reset is an explicit act and wins over what came before it: it counts the lesson's resets in
the file (``"resets": {lesson: n}``) and removes its entry. A process that read the file before
a reset brings nothing of that lesson back with its next save: its entry is dropped and it goes
on from the reset, so only the steps it takes afterwards count.

A file that cannot be read (not JSON, the wrong shape, too large, too deeply nested) is
reported, moved aside as ``progress.json.corrupt-<time>``, and a fresh one starts: never fatal.
A progress "file" that is not a file at all (a folder, a FIFO) is refused in one line.

Where: ``$SIMSYNC_DATA_DIR``, else ``$XDG_DATA_HOME/simsync``, else ``~/.local/share/simsync``.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from simsync.errors import UsageError
from simsync.files import InputError, locked, read_json, write_text

__all__ = ["Progress", "data_dir"]

VERSION = 1

#: One lesson's entry, and the file's lessons: ``{slug: entry}``.
Entry = dict[str, Any]
Lessons = dict[str, Entry]


def data_dir() -> Path:
    """The folder simsync keeps the learner's data in."""
    if os.environ.get("SIMSYNC_DATA_DIR"):
        return Path(os.environ["SIMSYNC_DATA_DIR"])
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "simsync"


class Progress:
    """Progress per lesson: ``{"step": next step index, "done": bool, "answers": {...}}``, and
    ``"pending": {question: {"tries": n, "hints": k}}`` while a question is not finished."""

    def __init__(self, path: Path | None = None, *, persist: bool = True) -> None:
        self.path = path or data_dir() / "progress.json"
        self.persist = persist
        self.warning: str | None = None
        self._changed: set[str] = set()  # lessons to merge into the file at the next save
        self._answered: set[tuple[str, str]] = set()  # (lesson, question) answered since then
        self._resetting: set[str] = set()  # lessons reset since then
        self._forget_all = False
        self.resets: dict[str, int] = {}  # the resets of each lesson this process knows of
        self.lessons: Lessons = self._load() if persist else {}

    @classmethod
    def scratch(cls) -> Progress:
        """Progress kept in memory only: ``--answers`` and ``--no-input`` runs must not touch
        the learner's own."""
        return cls(persist=False)

    # -- reading and writing the file -------------------------------------------------
    def _load(self) -> Lessons:
        self._check_folder()
        lessons, resets, problem = _read(self.path)
        if problem is not None:
            try:
                with self._locked():  # another process may have written a good file meanwhile
                    lessons, resets = self._read_locked()
            except OSError as error:
                raise self._stuck(problem, error) from None
        self.resets = resets
        return lessons

    def _read_locked(self) -> tuple[Lessons, dict[str, int]]:
        """The file's lessons and resets, read under the lock; a file that cannot be read is
        set aside."""
        lessons, resets, problem = _read(self.path)
        if problem is not None:
            self._set_aside(problem)
        return lessons, resets

    def save(self) -> None:
        """Merge the lessons this process changed into the file as it is now (see the
        module's rules), and take the result as this process's view."""
        if not self.persist:
            return
        with self._writing():
            lessons, resets = self._read_locked()
            self._apply_resets(lessons, resets)
            for slug in self._changed:
                if self.resets.get(slug, 0) < resets.get(slug, 0):
                    continue  # reset elsewhere since this process read it: nothing comes back
                answered = {q for s, q in self._answered if s == slug}
                merged = _merged(self.lessons.get(slug), lessons.get(slug), answered)
                if merged is not None:
                    lessons[slug] = merged
            document: dict[str, Any] = {"version": VERSION, "lessons": lessons}
            if resets:
                document["resets"] = resets
            write_text(self.path, json.dumps(document, indent=2) + "\n")
        self.lessons, self.resets = lessons, resets
        self._changed, self._answered, self._resetting = set(), set(), set()
        self._forget_all = False

    def _apply_resets(self, lessons: Lessons, resets: dict[str, int]) -> None:
        """The resets this process made since its last save, counted in ``resets`` (and
        known here: what this process does after its reset counts)."""
        for slug in self._resetting | (set(lessons) if self._forget_all else set()):
            resets[slug] = max(resets.get(slug, 0), self.resets.get(slug, 0)) + 1
            self.resets[slug] = resets[slug]
            lessons.pop(slug, None)

    def check_writable(self) -> None:
        """Fail now, not after the first step, when progress cannot be saved."""
        if not self.persist:
            return
        with self._writing():
            pass

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """The progress folder made and the lock held for the block; a system error on the
        way is one line saying where progress cannot be kept."""
        self._check_folder()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._locked():
                yield
        except OSError as error:
            raise UsageError(
                f"cannot save your progress in {self.path.parent}: {error.strerror or error}"
                f"{_where_else()}"
            ) from None

    def _check_folder(self) -> None:
        folder = self.path.parent
        for parent in (folder, *folder.parents):
            if parent.exists():
                if not parent.is_dir():
                    raise UsageError(
                        f"cannot keep your progress in {folder}: {parent} is a file, "
                        f"not a folder{_where_else()}"
                    )
                return

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the lock beside the progress file (one process at a time reads and writes)."""
        with locked(self.path.with_name(self.path.name + ".lock")):
            yield

    def _set_aside(self, problem: str) -> None:
        """Move an unreadable file out of the way (with the lock held) and say so."""
        stamp = time.strftime("%Y%m%d%H%M%S")
        aside = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
        number = 1
        while aside.exists():
            number += 1
            aside = self.path.with_name(f"{self.path.name}.corrupt-{stamp}-{number}")
        try:
            os.replace(self.path, aside)
        except FileNotFoundError:
            return
        except OSError as error:
            raise self._stuck(problem, error) from None
        self.warning = (
            f"Your progress file {self.path} could not be read ({problem}); it was "
            f"moved to {aside} and progress starts afresh."
        )

    def _stuck(self, problem: str | None, error: OSError) -> UsageError:
        return UsageError(
            f"your progress file {self.path} cannot be read ({problem}), and it cannot be "
            f"moved aside: {error.strerror or error} in {self.path.parent}{_where_else()}"
        )

    # -- what the lessons ask ---------------------------------------------------------
    def of(self, slug: str) -> Entry:
        return self.lessons.setdefault(slug, {"step": 0, "done": False, "answers": {}})

    def reached(self, slug: str, step: int, done: bool = False) -> None:
        """The learner finished ``step - 1``: save at once."""
        entry = self.of(slug)
        entry["step"], entry["done"] = step, done or entry["done"]
        self._changed.add(slug)
        self.save()

    def answered(self, slug: str, question: str, given: Any, correct: bool, tries: int) -> None:
        entry = self.of(slug)
        entry["answers"][question] = {"given": given, "correct": correct, "tries": tries}
        entry.get("pending", {}).pop(question, None)
        if not entry.get("pending"):
            entry.pop("pending", None)
        self._changed.add(slug)
        self._answered.add((slug, question))
        self.save()

    def trying(self, slug: str, question: str, tries: int, hints: int) -> None:
        """A question not answered yet: the wrong tries used and the hints shown so far, so
        that quitting and coming back neither gives fresh tries nor hides the hints."""
        self.of(slug).setdefault("pending", {})[question] = {"tries": tries, "hints": hints}
        self._changed.add(slug)
        self.save()

    def pending(self, slug: str, question: str) -> tuple[int, int]:
        """``(tries used, hints shown)`` of a question the learner has not finished."""
        entry = self.lessons.get(slug, {}).get("pending", {}).get(question, {})
        return int(entry.get("tries", 0)), int(entry.get("hints", 0))

    def reset(self, slug: str | None = None) -> None:
        """Forget one lesson, or all of them, in every process that saves after this."""
        if slug is None:
            self._resetting |= set(self.lessons)
            self.lessons.clear()
            self._forget_all = True
        else:
            self.lessons.pop(slug, None)
            self._resetting.add(slug)
        self.save()

    def done(self, slug: str) -> bool:
        return bool(self.lessons.get(slug, {}).get("done"))

    def step(self, slug: str) -> int:
        return int(self.lessons.get(slug, {}).get("step", 0))


def _read(path: Path) -> tuple[Lessons, dict[str, int], str | None]:
    """The lessons and resets in the file (none when there is no file), or
    ``({}, {}, why it is unreadable)``. A progress "file" that is not a file is a
    :class:`UsageError`: it is nothing to set aside.

    Readers need no lock: the file is only ever replaced whole.
    """
    try:
        data = read_json(path, "progress file")
        if (
            not isinstance(data, dict)
            or type(data.get("version")) is not int
            or data["version"] != VERSION
            or not isinstance(data.get("lessons"), dict)
            or not _counts_of(data.get("resets", {}))
        ):
            raise ValueError("not a simsync progress file")
        for slug, entry in data["lessons"].items():
            _check_entry(slug, entry)
        return data["lessons"], data.get("resets", {}), None
    except InputError as error:
        if error.reason == "missing":
            return {}, {}, None
        if error.reason == "not_regular":
            raise UsageError(
                f"your progress file {path} is {error.problem}; remove it, or set "
                "SIMSYNC_DATA_DIR to another folder"
            ) from None
        return {}, {}, error.problem
    except ValueError as error:  # read, but not what a progress file holds
        return {}, {}, str(error)


def _merged(mine: Entry | None, theirs: Entry | None, answered: set[str]) -> Entry | None:
    """One lesson's entry in this process and in the file, merged (the module's rules);
    ``answered``: the questions this process answered since it last saved."""
    if mine is None or theirs is None:
        return mine if theirs is None else theirs
    answers = {**mine["answers"], **theirs["answers"]}
    answers.update({q: mine["answers"][q] for q in answered if q in mine["answers"]})
    pending: dict[str, dict[str, int]] = {}
    for question, counts in [*mine.get("pending", {}).items(), *theirs.get("pending", {}).items()]:
        kept = pending.get(question)
        if question not in answers and (kept is None or _used(counts) > _used(kept)):
            pending[question] = counts
    entry = {
        "step": max(mine["step"], theirs["step"]),
        "done": mine["done"] or theirs["done"],
        "answers": answers,
    }
    return {**entry, "pending": pending} if pending else entry


def _used(counts: dict[str, int]) -> tuple[int, int]:
    return counts["tries"], counts["hints"]


def _counts_of(resets: Any) -> bool:
    """Whether ``resets`` maps lessons to counts >= 0."""
    return isinstance(resets, dict) and all(
        type(count) is int and count >= 0 for count in resets.values()
    )


def _check_entry(slug: str, entry: Any) -> None:
    """One lesson's entry, as :class:`Progress` writes it; ``ValueError`` otherwise."""
    if not (
        isinstance(entry, dict)
        and type(entry.get("step")) is int
        and entry["step"] >= 0
        and type(entry.get("done")) is bool
        and isinstance(entry.get("answers"), dict)
        and all(isinstance(answer, dict) for answer in entry["answers"].values())
        and _counts(entry.get("pending", {}))
    ):
        raise ValueError(f"the entry of {slug} is not step/done/answers")


def _counts(pending: Any) -> bool:
    """Whether ``pending`` maps questions to ``{"tries": n, "hints": k}`` (counts >= 0)."""
    return isinstance(pending, dict) and all(
        isinstance(entry, dict)
        and all(type(entry.get(key)) is int and entry[key] >= 0 for key in ("tries", "hints"))
        for entry in pending.values()
    )


def _where_else() -> str:
    """Advice on choosing another folder."""
    return "; make it a writable folder, or set SIMSYNC_DATA_DIR to one"
