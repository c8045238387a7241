"""Grade a submission: every check of the assignment, each one's points or none, and why."""

from __future__ import annotations

import os
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simsync import words
from simsync.errors import SimsyncError, UsageError, printable
from simsync.grading import rubric
from simsync.grading.assignment import Assignment, Check
from simsync.grading.graphs import (
    REFERENCE,
    SUBMISSION,
    Built,
    ReferenceFailed,
    Sides,
    wants_reference,
)
from simsync.grading.submission import SubmissionRefused, copy_submission
from simsync.sandbox.bubblewrap import (
    Limits,
    Sandbox,
    find_sandbox,
    locked_folder,
    remove_stale_folders,
)

__all__ = ["LEFT_OUT", "Grade", "Result", "grade", "not_run_said", "shown"]

#: how a report introduces the files of a submission that were not graded
LEFT_OUT = "Not graded (only regular files are copied)"
#: the longest output of one check, and the most left-out files named
MAX_OUTPUT = 2000
MAX_LEFT_OUT = 20


@dataclass
class Result:
    check: Check
    score: float
    output: str
    #: the check's verdict (a check of no points, advice, passes or fails without a score)
    verdict: bool | None = None

    @property
    def passed(self) -> bool:
        return self.verdict if self.verdict is not None else self.score >= self.check.points


@dataclass
class Grade:
    assignment: Assignment
    results: list[Result]
    seconds: float
    protections: dict[str, str] = field(default_factory=dict)
    #: what of the submission was not copied, with why (links, FIFOs, devices)
    left_out: list[str] = field(default_factory=list)
    #: the checks not run, counted by why (the keys of :data:`NOT_RUN`)
    not_run: dict[str, int] = field(default_factory=dict)

    @property
    def score(self) -> float:
        return sum(r.score for r in self.results)

    @property
    def max_score(self) -> float:
        return sum(r.check.points for r in self.results)

    def gradescope(self) -> dict[str, Any]:
        """The ``results.json`` Gradescope reads (its autograder specification: ``score``,
        ``execution_time``, ``output``, ``tests`` with ``name``, ``score``, ``max_score``,
        ``status``, ``output`` and ``visibility``)."""
        sandbox = ", ".join(f"{k}: {v}" for k, v in self.protections.items())
        return {
            "score": self.score,
            "execution_time": round(self.seconds, 3),
            "output": f"{self.assignment.title}: {self.score:g}/{self.max_score:g}"
            + (f" (not run: {not_run_said(self.not_run)})" if self.not_run else "")
            + (f"\n{LEFT_OUT}: {', '.join(self.left_out)}" if self.left_out else "")
            + (f"\nSandbox: {sandbox}" if sandbox else ""),
            "visibility": "visible",
            "stdout_visibility": "hidden",
            "tests": [
                {
                    "name": f"Task {r.check.task}: {r.check.name}",
                    "number": str(i + 1),
                    "score": r.score,
                    "max_score": r.check.points,
                    "status": "passed" if r.passed else "failed",
                    "output": r.output,
                    "visibility": "after_published" if r.check.hidden else "visible",
                }
                for i, r in enumerate(self.results)
            ],
        }


def grade(
    assignment: Assignment,
    submission: Path,
    *,
    hidden: bool = False,
    tensorflow: bool = True,
    limits: Limits | None = None,
    sandbox: Sandbox | None = None,
    only: Collection[str] | None = None,
) -> Grade:
    """Run the assignment's checks on ``submission`` (visible ones unless ``hidden``; those
    that run TensorFlow, :attr:`~simsync.grading.assignment.Check.runs_tensorflow`, unless
    ``tensorflow`` is false; of those, only the checks named in ``only`` when it is given:
    a name the assignment has no check of is a :class:`~simsync.errors.UsageError`). The
    submission is copied first (regular
    files only, :mod:`~simsync.grading.submission`); everything that reads the copy runs in
    ``sandbox`` (default: bubblewrap, or :class:`~simsync.sandbox.bubblewrap.SandboxUnavailable`
    when it cannot start here). The reference solution is built the same way, for checks that
    compare with it. A broken or hostile submission costs the checks that need its graph,
    with the reason as their output."""
    started = time.perf_counter()
    sandbox = sandbox or find_sandbox()
    limits = limits or Limits()
    named = _named(assignment, only) if only is not None else None
    not_run: dict[str, int] = {}
    checks = []
    for check in assignment.checks:
        why = _why_not_run(check, named, hidden=hidden, tensorflow=tensorflow)
        if why is None:
            checks.append(check)
        else:
            not_run[why] = not_run.get(why, 0) + 1
    remove_stale_folders()
    with locked_folder(f"simsync-grade-{os.getpid()}-") as scratch:
        folders = {SUBMISSION: Path(scratch, SUBMISSION), REFERENCE: Path(scratch, REFERENCE)}
        for folder in folders.values():
            folder.mkdir()
        copy_submission(assignment.solution, folders[REFERENCE])
        try:
            left_out = _few(copy_submission(submission, folders[SUBMISSION]).left_out)
        except SubmissionRefused as refused:  # every check gets the reason
            left_out, results = [], [Result(c, 0.0, shown(str(refused)), False) for c in checks]
        else:
            sides = Sides(assignment, folders, checks, sandbox, limits)
            results = [_result(check, sides) for check in checks]
    seconds = time.perf_counter() - started
    protections = sandbox.protections(limits)
    if any(c.runs_tensorflow and c.kind != "tensorflow" for c in checks):
        protections["a TensorFlow program"] = _program_limits(sandbox)
    return Grade(assignment, results, seconds, protections, left_out, not_run)


def _named(assignment: Assignment, names: Collection[str]) -> set[str]:
    """``names``, each the name of one of the assignment's checks."""
    if isinstance(names, str):  # one name, not its letters
        raise UsageError(f"only= takes a list of check names, not the string {shown(names)!r}")
    known = {c.name for c in assignment.checks}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise UsageError(
            f"assignment {assignment.number} has no check named {shown(unknown[0])!r}; "
            f"its checks: {words.listed([repr(name) for name in sorted(known)])}"
        )
    return set(names)


#: why a grading did not run a check: how its report says so, of one check and of more
NOT_RUN = {
    "not asked for": ("check you did not ask for", "checks you did not ask for"),
    "hidden": ("hidden check", "hidden checks"),
    "TensorFlow": ("check that runs TensorFlow", "checks that run TensorFlow"),
}


def _why_not_run(
    check: Check, named: set[str] | None, *, hidden: bool, tensorflow: bool
) -> str | None:
    """The reason (of :data:`NOT_RUN`) ``check`` is not run, the one the user chose first;
    None when it runs."""
    if named is not None and check.name not in named:
        return "not asked for"
    if check.hidden and not hidden:
        return "hidden"
    if check.runs_tensorflow and not tensorflow:
        return "TensorFlow"
    return None


def not_run_said(counts: dict[str, int]) -> str:
    """Which checks a grading did not run, and why.

    >>> not_run_said({"hidden": 1, "not asked for": 2}), not_run_said({"TensorFlow": 1})
    ('1 hidden check, 2 checks you did not ask for', '1 check that runs TensorFlow')
    """
    return ", ".join(words.plural(n, *NOT_RUN[why]) for why, n in counts.items())


def _program_limits(sandbox: Sandbox) -> str:
    """How a submitted TensorFlow program runs (:mod:`simsync.tf_backend.program`): other
    limits than the rest, and threads."""
    from simsync.tf_backend.program.load import ImportLimits

    limits = ImportLimits()
    hook = "" if sandbox.bwrap is not None else "; NO audit hook either"
    return (
        "read first, and run only if it keeps to TensorFlow's public API; then run with "
        f"threads until its training loop is known, in the same sandbox{hook}; CPU "
        f"time {limits.cpu_seconds} s, memory {limits.memory_bytes / 2**30:g} GiB, wall "
        f"clock {limits.wall_seconds:g} s"
    )


def _few(names: list[str]) -> list[str]:
    rest = len(names) - MAX_LEFT_OUT
    kept = [shown(name, 300) for name in names[:MAX_LEFT_OUT]]
    return [*kept, f"and {rest:,} more"] if rest > 0 else kept


def _result(check: Check, sides: Sides) -> Result:
    passed, output = _run(check, sides)
    return Result(check, check.points if passed else 0.0, shown(output), passed)


def shown(text: str, most: int = MAX_OUTPUT) -> str:
    """``text`` as a report may show it: one line, no terminal controls, any bytes a file
    name held as escapes, at most ``most`` characters.

    >>> shown("ok\\n  ✓ 3/3 forged\\x1b[2K"), shown("x" * 60, most=30)
    ('ok\\\\n  ✓ 3/3 forged\\\\x1b[2K', 'xxxxxxxx… (52 more characters)')
    """
    text = printable(text, one_line=True)
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    if len(text) <= most:
        return text
    kept = most - len(f"… ({len(text):,} more characters)")  # the cut's words fit too
    return f"{text[:kept]}… ({len(text) - kept:,} more characters)"


def _run(check: Check, sides: Sides) -> tuple[bool, str]:
    side = REFERENCE if check.keys.get("of") == "reference" else SUBMISSION
    built = sides.get(side, check.graph)
    if built.error is not None:
        return False, built.error
    try:
        if check.kind == "structure":
            assert built.structure is not None
            return rubric.structure(check, built.structure)
        if check.kind == "tensorflow":
            return rubric.tensorflow(check, built, _reference(sides, check))
        if built.facts is None:
            return False, f"the simulation of your graph failed: {built.facts_error}"
        if check.kind == "simulation":
            reference = sides.get(REFERENCE, check.graph).facts if wants_reference(check) else None
            passed, said = rubric.simulation(check, built.facts, reference)
            if passed or reference is None:
                return passed, said
            return _measured_again(check, sides, built.facts, reference) or (passed, said)
        return rubric.answer(check, sides.answers(), built.facts)
    except ReferenceFailed:
        raise
    except SimsyncError as error:
        return False, str(error)
    except Exception as error:  # a graph the checks' machinery cannot handle: this check only
        return False, f"could not check your graph: {type(error).__name__}: {error}"


def _measured_again(
    check: Check, sides: Sides, facts: rubric.Facts, reference: rubric.Facts
) -> tuple[bool, str] | None:
    """A check against the reference's measured step that failed, judged again on each
    side's least slowed of two measurings (other work on the machine only slows a measuring
    down): both programs measured once more, one after the other (:meth:`Sides.measured_again`).
    None when that cannot be (a graph that is no program, a measuring that failed)."""
    try:
        again = sides.measured_again(check.graph)
    except ReferenceFailed:  # measured once already: the first measurings stand
        return None
    if again is None or again[0].facts is None or again[1].facts is None:
        return None
    mine = rubric.least_slowed(check, [facts, again[0].facts])
    theirs = rubric.least_slowed(check, [reference, again[1].facts])
    passed, said = rubric.simulation(check, mine, theirs)
    return passed, f"{said}; each the less slowed of two measurings"


def _reference(sides: Sides, check: Check) -> Built:
    return sides.get(REFERENCE, check.graph)  # a failure of its own stops the grading
