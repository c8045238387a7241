"""The course commands: ``simsync assignments list|start|check|pack`` and ``simsync grade``.

Output is plain text, one line per check, so it reads the same in a terminal, a CI log and
Gradescope's stdout. Bad input is a :class:`~simsync.errors.UsageError` (status 2).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

from simsync.errors import UsageError, printable
from simsync.files import atomic_writer, folder_holding, own_folders
from simsync.grading.assignment import Assignment, find_assignment, load_assignments
from simsync.grading.grader import LEFT_OUT, Grade, grade, not_run_said
from simsync.sandbox.bubblewrap import Sandbox, find_sandbox
from simsync.terminal import on_ending_signals, usable_width
from simsync.words import listed, plural

__all__ = [
    "assignments_check",
    "assignments_list",
    "assignments_start",
    "grade_command",
]


def assignments_list() -> int:
    for a in load_assignments():
        tasks = ", ".join(f"{k} {v}" for k, v in a.tasks.items())
        line = f"{a.number:2d}  {a.title}  ({plural(a.points(), 'point')}; tasks: {tasks})"
        print(wrapped(line, "    "))
        if a.summary:
            print(wrapped(f"    {a.summary}", "    "))
    return 0


def wrapped(line: str, indent: str, stream: Any = None) -> str:
    """``line`` broken between words to the terminal's width, its later lines indented, when
    ``stream`` (standard output) is a terminal; as it is otherwise (a file, a pipe: one line
    for one item).

    >>> import io
    >>> wrapped("a " * 50, "  ", io.StringIO()) == "a " * 50
    True
    """
    stream = sys.stdout if stream is None else stream
    if not getattr(stream, "isatty", lambda: False)():
        return line
    width = usable_width(os.environ, stream) or shutil.get_terminal_size().columns
    return textwrap.fill(
        line, width=width, subsequent_indent=indent, break_long_words=False,
        break_on_hyphens=False,
    )  # fmt: skip


def assignments_start(number: int, folder: Path, *, solution: bool = False) -> int:
    """Copy the starter (or the reference solution) with the README and the scenario: the
    folder is made whole, beside its place, and renamed there, so a failure (a full disk)
    leaves nothing behind and a retry starts afresh."""
    assignment = find_assignment(number)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise UsageError(f"{folder} exists and is not an empty folder; choose a new one")
    parent = folder.absolute().parent
    if not parent.is_dir():
        raise UsageError(f"cannot make {folder}: no folder {parent}")
    source = assignment.solution if solution else assignment.starter
    copies = [source / name for name in assignment.files]
    copies += [assignment.folder / "README.md", assignment.scenario]
    try:
        with tempfile.TemporaryDirectory(prefix=".simsync-start-", dir=parent) as staging:
            for path in copies:
                shutil.copyfile(path, Path(staging, path.name))
            os.chmod(staging, 0o777 & ~_umask())
            os.replace(staging, folder)  # an empty folder is replaced as a whole
            os.mkdir(staging)  # for TemporaryDirectory to remove
    except OSError as error:
        raise UsageError(f"cannot make {folder}: {error.strerror or error}") from None
    which = "reference solution" if solution else "starter"
    print(f"Assignment {number} ({which}) in {folder}: edit {', '.join(assignment.files)}, then")
    print(f"  simsync grade {folder} --assignment {number}")
    return 0


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def grade_command(
    folder: Path,
    number: int,
    *,
    hidden: bool = False,
    tensorflow: bool = True,
    gradescope: Path | None = None,
    unsafe: bool = False,
    tasks: list[str] | None = None,
) -> int:
    """Grade ``folder`` and print the report; with ``gradescope``, also write results.json
    there (``-``: to standard output, the report then to standard error); with ``tasks``,
    only those tasks' checks."""
    if not folder.is_dir():
        what = "a file, not a folder" if folder.exists() else "no such folder"
        raise UsageError(f"{folder}: {what} (the submission to grade: its folder)")
    temporary = Path(tempfile.gettempdir()).resolve()
    if temporary == folder.resolve() or folder.resolve() in temporary.parents:
        raise UsageError(
            f"{folder}: holds the temporary folder {temporary} (TMPDIR), where the grader "
            "copies the submission: it would copy itself; set TMPDIR to a folder outside it"
        )
    to_stdout = gradescope is not None and str(gradescope) == "-"
    assignment = find_assignment(number)
    if gradescope is not None and not to_stdout:
        _check_target(gradescope, folder, assignment)
    only = _checks_of(assignment, tasks) if tasks else None
    sandbox = find_sandbox(unsafe)
    with _terminate_as_interrupt():
        result = grade(
            assignment, folder, hidden=hidden, tensorflow=tensorflow, sandbox=sandbox, only=only
        )
    print(report(result, hidden=hidden), file=sys.stderr if to_stdout else sys.stdout)
    if gradescope is not None:
        text = json.dumps(result.gradescope(), indent=2) + "\n"
        if to_stdout:
            sys.stdout.write(text)
        else:
            with atomic_writer(gradescope) as out:
                out.write(text)
            print(f"wrote {printable(str(gradescope), one_line=True)}")
    return 0


def _checks_of(assignment: Assignment, tasks: list[str]) -> list[str]:
    """The names of the checks of ``tasks``, each one of the assignment's tasks."""
    for task in tasks:
        if task not in assignment.tasks:
            raise UsageError(
                f"--task {task}: assignment {assignment.number} has no such task; "
                f"its tasks: {listed(sorted(assignment.tasks))}"
            )
    return [c.name for c in assignment.checks if c.task in tasks]


def _check_target(target: Path, submission: Path, assignment: Assignment) -> None:
    """results.json is never written into the grading's inputs (the submission, the
    assignment's folder, simsync's own) nor over a folder."""
    if not target.absolute().parent.is_dir():
        raise UsageError(f"cannot write {target}: no folder {target.parent}")
    if target.is_dir():
        raise UsageError(f"cannot write {target}: it is a folder")
    if target.is_symlink() or (target.exists() and not target.is_file()):
        raise UsageError(
            f"cannot write {target}: it is not a regular file (a link, a device or a FIFO); "
            "name a file of its own for results.json"
        )
    inputs = {
        "the submission being graded": submission,
        f"assignment {assignment.number}'s own folder": assignment.folder,
        **own_folders(),
    }
    holder = folder_holding(target, inputs)
    if holder is not None:
        what, folder = holder
        raise UsageError(
            f"cannot write {target}: it is inside {what} ({folder}); write results outside it"
        )


def _terminate_as_interrupt() -> contextlib.AbstractContextManager[None]:
    """``kill``, a closed terminal (:data:`~simsync.terminal.ENDING_SIGNALS`) stop grading as
    Ctrl-C does: the sandbox ended, temporary folders removed."""
    return on_ending_signals(KeyboardInterrupt)


def report(result: Grade, *, hidden: bool) -> str:
    """The per-check report a student reads."""
    a = result.assignment
    lines = [f"Assignment {a.number}: {a.title}"]
    for r in result.results:
        mark = "✓" if r.passed else "✗"
        lines.append(
            wrapped(
                f"  {mark} {r.score:g}/{r.check.points:g}  Task {r.check.task}  {r.check.name}",
                "      ",
            )
        )
        lines.append(wrapped(f"      {r.output}", "      "))
    note = f" (not run: {not_run_said(result.not_run)})" if result.not_run else ""
    lines.append(f"Score: {result.score:g}/{result.max_score:g}{note}")
    if result.left_out:
        lines.append(wrapped(f"{LEFT_OUT}: {', '.join(result.left_out)}", "  "))
    if result.protections:  # some of the submission's code ran: say how it was contained
        lines.append(
            wrapped(
                "How your code was run: "
                + "; ".join(f"{k}: {v}" for k, v in result.protections.items()),
                "  ",
            )
        )
    return "\n".join(lines)


def assignments_check(*, tensorflow: bool = True, unsafe: bool = False) -> int:
    """Prove every assignment: the reference gets full marks, the starter does not."""
    failures = 0
    sandbox = find_sandbox(unsafe)
    for a in load_assignments():
        failures += _prove(a, tensorflow, sandbox)
    print("all assignments check" if not failures else plural(failures, "problem"))
    return 1 if failures else 0


def _prove(a: Assignment, tensorflow: bool, sandbox: Sandbox) -> int:
    if not tensorflow and all(c.runs_tensorflow for c in a.checks):
        print(f"{a.slug}: not checked (every check runs TensorFlow)")
        return 0
    reference = grade(a, a.solution, hidden=True, tensorflow=tensorflow, sandbox=sandbox)
    starter = grade(a, a.starter, hidden=True, tensorflow=tensorflow, sandbox=sandbox)
    problems = 0
    if reference.score < reference.max_score:
        problems += 1
        print(f"{a.slug}: the reference gets {reference.score:g}/{reference.max_score:g}")
        print(report(reference, hidden=True))
    if starter.score >= starter.max_score:
        problems += 1
        print(f"{a.slug}: the starter gets full marks ({starter.score:g})")
    if not problems:
        print(
            f"{a.slug}: reference {reference.score:g}/{reference.max_score:g}, "
            f"starter {starter.score:g}/{starter.max_score:g} "
            f"({reference.seconds + starter.seconds:.1f} s)"
        )
    return problems
