"""The course commands: ``simsync assignments list|start|check|pack`` and ``simsync grade``.

Output is plain text, one line per check, so it reads the same in a terminal, a CI log and
Gradescope's stdout. Bad input is a :class:`~simsync.errors.UsageError` (status 2).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from simsync.errors import UsageError
from simsync.grading.assignment import Assignment, find_assignment, load_assignments
from simsync.grading.grader import Grade, grade
from simsync.words import plural

__all__ = [
    "assignments_check",
    "assignments_list",
    "assignments_start",
    "grade_command",
    "write_atomically",
]


def write_atomically(path: Path, data: bytes) -> None:
    """Write ``path`` whole or not at all: a temporary file in the same folder, renamed."""
    handle, partial = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".partial")
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(partial, 0o666 & ~mask)  # as open() would create it, not mkstemp's 0600
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(partial, path)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise


def assignments_list() -> int:
    for a in load_assignments():
        tasks = ", ".join(f"{k} {v}" for k, v in a.tasks.items())
        print(f"{a.number:2d}  {a.title}  ({plural(a.points(), 'point')}; tasks: {tasks})")
        if a.summary:
            print(f"    {a.summary}")
    return 0


def assignments_start(number: int, folder: Path, *, solution: bool = False) -> int:
    """Copy the starter (or the reference solution) with the README and the scenario."""
    assignment = find_assignment(number)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise UsageError(f"{folder} exists and is not an empty folder; choose a new one")
    folder.mkdir(parents=True, exist_ok=True)
    source = assignment.solution if solution else assignment.starter
    copies = [source / name for name in assignment.files]
    copies += [assignment.folder / "README.md", assignment.scenario]
    for path in copies:
        write_atomically(folder / path.name, path.read_bytes())
    which = "reference solution" if solution else "starter"
    print(f"Assignment {number} ({which}) in {folder}: edit {', '.join(assignment.files)}, then")
    print(f"  simsync grade {folder} --assignment {number}")
    return 0


def grade_command(
    folder: Path,
    number: int,
    *,
    hidden: bool = False,
    tensorflow: bool = True,
    gradescope: Path | None = None,
) -> int:
    if not folder.is_dir():
        raise UsageError(f"{folder}: no such folder (the submission to grade)")
    if gradescope is not None and not gradescope.parent.is_dir():
        raise UsageError(f"cannot write {gradescope}: no folder {gradescope.parent}")
    assignment = find_assignment(number)
    result = grade(assignment, folder, hidden=hidden, tensorflow=tensorflow)
    print(report(result, hidden=hidden))
    if gradescope is not None:
        text = json.dumps(result.gradescope(), indent=2) + "\n"
        write_atomically(gradescope, text.encode())
        print(f"wrote {gradescope}")
    return 0


def report(result: Grade, *, hidden: bool) -> str:
    """The per-check report a student reads."""
    a = result.assignment
    lines = [f"Assignment {a.number}: {a.title}"]
    for r in result.results:
        mark = "✓" if r.passed else "✗"
        lines.append(
            f"  {mark} {r.score:g}/{r.check.points:g}  Task {r.check.task}  {r.check.name}"
        )
        lines.append(f"      {r.output}")
    skipped = len(a.checks) - len(result.results)
    note = f" (not run: {skipped} hidden or TensorFlow checks)" if skipped else ""
    lines.append(f"Score: {result.score:g}/{result.max_score:g}{note}")
    if result.protections:  # some of the submission's code ran: say how it was contained
        lines.append(
            "Your code ran in a sandbox: "
            + "; ".join(f"{k} {v}" for k, v in result.protections.items())
        )
    return "\n".join(lines)


def assignments_check(*, tensorflow: bool = True) -> int:
    """Prove every assignment: the reference gets full marks, the starter does not."""
    failures = 0
    for a in load_assignments():
        failures += _prove(a, tensorflow)
    print("all assignments check" if not failures else plural(failures, "problem"))
    return 1 if failures else 0


def _prove(a: Assignment, tensorflow: bool) -> int:
    reference = grade(a, a.solution, hidden=True, tensorflow=tensorflow)
    starter = grade(a, a.starter, hidden=True, tensorflow=tensorflow)
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
