"""What each check needs of a graph, gathered before anything runs, and got from the sandbox
in as few runs as that allows.

A check's graph is a function of a side's code (``"towers.py:build"``: the student's
submission, or the reference solution), a side's ``training.toml`` with the assignment's
scenario, or a side's TensorFlow program (``"train.py"``). For each (side, graph) the grader
runs, in the sandbox:

1. for a function, a ``build`` child: the side's code, alone, returns the graph as data; for
   a program, the program import's children (:mod:`simsync.tf_backend.program`, with
   ``export``): the program runs, with threads, until its training loop is known, and only
   exports it; a second process, which runs none of its code, loads that export, runs it and
   times a few traced steps, and says the graph and its costs (sealed: nothing the graph's
   ops write passes for its answer). The imported graph becomes that data; where the
   program made each op is read off its source at the lines its process named
   (:mod:`~simsync.tf_backend.program.made_in`);
2. an ``evaluate`` child with that data (or the TOML): the graph checked and rebuilt, then
   only what the checks need of it: the simulation's facts, the parameters after some steps
   on TensorFlow; and, once per grading, the submission's ``answers.toml``. It runs no code
   of the side's, and answers sealed.

Everything comes back as JSON lines (:mod:`simsync.sandbox.bubblewrap`), each checked whole
against :class:`~simsync.sandbox.wire.GradingSaid`; :class:`Built` holds it, or the one line
that says why there is none. Nothing is shared between submissions: a program's import here
has no cost cache at all, so a submission's costs and its reference's are both measured in
the same grading, by processes in which no student code ran, under the same load.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simsync.errors import SimsyncError
from simsync.files import read_input
from simsync.grading.assignment import Assignment, Check
from simsync.grading.child import simsync_folder
from simsync.grading.source import check_program
from simsync.ir import Graph, graph_to_dict
from simsync.kinds import sync_points
from simsync.sandbox.bubblewrap import Limits, Outcome, Sandbox, run_child
from simsync.sandbox.wire import GradingSaid, WireError, read_said

if TYPE_CHECKING:
    from simsync.tf_backend.program import Imported
    from simsync.tf_backend.program.load import Given

__all__ = [
    "REFERENCE",
    "SUBMISSION",
    "Built",
    "Needs",
    "ReferenceFailed",
    "Sides",
    "needs_of",
    "wants_reference",
]

SUBMISSION, REFERENCE = "submission", "reference"


@dataclass
class Needs:
    """What the checks need of one (side, graph): the structure checks' ops and pairs (their
    answers are computed in the sandbox too), the simulation's facts, TensorFlow's steps."""

    facts: bool = False
    tensorflow_steps: int = 0
    devices: list[str] = field(default_factory=list)
    before: list[list[str]] = field(default_factory=list)
    #: a program's updates are compared with the reference's (``updates_average_towers``)
    given: bool = False


@dataclass
class Built:
    """What the sandbox found of a graph, or the one line that says why there is none; each
    product (``facts``, ``params``) may be missing with its own reason. ``structure`` holds
    the structure checks' answers (:func:`simsync.grading.child.structure_of`)."""

    structure: dict[str, Any] | None = None
    error: str | None = None
    facts: dict[str, Any] | None = None
    facts_error: str | None = None
    params: dict[str, Any] | None = None
    params_error: str | None = None


def needs_of(checks: list[Check]) -> dict[tuple[str, str], Needs]:
    """For every (side, graph) some check reads: what it must provide."""
    needs: dict[tuple[str, str], Needs] = {}

    def need(side: str, spec: str) -> Needs:
        return needs.setdefault((side, spec), Needs())

    for check in checks:
        keys = check.keys
        if check.kind == "structure":
            entry = need(SUBMISSION, check.graph)
            entry.devices += list(keys.get("devices", {}))
            entry.before += [list(pair) for pair in keys.get("before", [])]
            entry.given = entry.given or bool(keys.get("updates_average_towers"))
        elif check.kind == "simulation":
            need(SUBMISSION, check.graph).facts = True
            if wants_reference(check):
                need(REFERENCE, check.graph).facts = True
        elif check.kind == "answer":
            need(keys.get("of", SUBMISSION), check.graph).facts = True
        elif check.kind == "tensorflow":
            steps = int(keys.get("steps", 3))
            for side in (SUBMISSION, REFERENCE):
                entry = need(side, check.graph)
                entry.tensorflow_steps = max(entry.tensorflow_steps, steps)
    return needs


def wants_reference(check: Check) -> bool:
    """Whether a simulation check compares with the reference's value."""
    keys = check.keys
    return bool(keys.get("reference")) or "reference" in (keys.get("at_most"), keys.get("at_least"))


class Sides:
    """The two sides of a grading (the submission's copy, the reference solution's) and
    everything got from the sandbox for them, each asked for once."""

    def __init__(
        self,
        assignment: Assignment,
        folders: dict[str, Path],
        checks: list[Check],
        sandbox: Sandbox,
        limits: Limits,
    ) -> None:
        self.assignment, self.folders = assignment, folders
        self.sandbox, self.limits = sandbox, limits
        self.needs = needs_of(checks)
        self._built: dict[tuple[str, str], Built] = {}
        self._imported: dict[tuple[str, str], Imported | Built] = {}
        self._answers: tuple[dict[str, Any] | None, str | None] | None = None
        self.scenario = read_input(assignment.scenario, "scenario file")
        self.hidden = _hidden(assignment)
        self.deadline = time.monotonic() + limits.grading_seconds

    def get(self, side: str, spec: str) -> Built:
        key = (side, spec)
        if key not in self._built:
            self._built[key] = self._build(side, spec, self.needs.get(key, Needs()))
        return self._built[key]

    def measured_again(self, spec: str) -> tuple[Built, Built] | None:
        """Both sides' TensorFlow program ``spec`` measured once more, the submission's then
        the reference's, their costs only (no averaging measured), and simulated: for a check
        of the step that failed, whose measurings may have met other work on the machine
        (the twenty-seventh attack's honest program measured 1.63 times the reference with
        one other grading beside it). None for a graph that is no program."""
        if not spec.endswith(".py"):
            return None
        return self._measure(SUBMISSION, spec), self._measure(REFERENCE, spec)

    def _measure(self, side: str, spec: str) -> Built:
        imported = self._import(side, spec, None, averaging=False)
        if isinstance(imported, Built):
            return imported
        first = self._imported.get((side, spec))
        if first is None or isinstance(first, Built) or shape(first.graph) != shape(imported.graph):
            # another graph than the one the other checks read: its time says nothing of it
            return Built(error="it built another graph when it ran again")
        request = {**self._request(Needs(facts=True)), **_program_request(imported)}
        return _built(self._run(side, request), spec)

    def answers(self) -> tuple[dict[str, Any] | None, str | None]:
        """The submission's ``answers.toml``, read in the sandbox: the table, or why not."""
        if self._answers is None:
            outcome = self._run(SUBMISSION, {"stage": "evaluate", "answers": True})
            said = outcome.said
            self._answers = (said.get("answers"), said.get("answers_error") or outcome.error)
        return self._answers

    def _request(self, needs: Needs) -> dict[str, Any]:
        """The evaluate child's request for what ``needs`` says."""
        return {
            "stage": "evaluate",
            "facts": needs.facts,
            "tensorflow_steps": needs.tensorflow_steps,
            "target_loss": self.assignment.target_loss,
            "devices": needs.devices,
            "before": needs.before,
        }

    def _build(self, side: str, spec: str, needs: Needs) -> Built:
        request = self._request(needs)
        made_in, program = None, {}
        if spec.endswith(".toml"):
            request["training"] = spec
        elif spec.endswith(".py"):  # a TensorFlow program: imported as `simulate` does
            imported = self._program(side, spec, needs.given)
            if isinstance(imported, Built):
                return imported
            request.update(_program_request(imported))
            points = sync_points(imported.graph)
            made_in = {point: imported.report["made_in"].get(point) for point in points}
            # measured by the process that loaded its graph (where its towers' weights)
            program = {"pruned": _pruned(imported), "averaging": imported.averaging}
        else:
            file, _, function = spec.partition(":")
            outcome = self._run(
                side, {"stage": "build", "module": Path(file).stem, "function": function}
            )
            graph = outcome.said.get("graph")
            if graph is None:
                reason = outcome.said.get("error") or outcome.error or "no graph came back"
                return self._failed(side, f"your {function}(scenario) in {file} failed: {reason}")
            request["graph"] = graph
        built = _built(self._run(side, request), spec)
        if built.error is not None:
            return self._failed(side, built.error)
        if made_in is not None and built.structure is not None:
            built.structure.update(made_in=made_in, **program)
        if side == REFERENCE:  # the reference's numbers too, or no grade at all
            if needs.facts and built.facts_error is not None:
                self._failed(side, built.facts_error)
            if needs.tensorflow_steps and built.params_error is not None:
                self._failed(side, built.params_error)
        return built

    def _program(self, side: str, file: str, given: bool = False) -> Imported | Built:
        """The side's TensorFlow program ``file``, run in the sandbox until its training loop
        is known (threads allowed, as TensorFlow needs; the assignments hidden), its costs
        from a few traced steps of its own graph (never cached for anyone else): its
        imported graph, or why there is none. With ``given``, a submission's updates are
        measured and compared with the reference's, batch by batch (its export loaded beside
        the submission's, in the process that runs neither's code); without, no check reads
        them, and they are not measured (the reference's, never: its export is given)."""
        key = (side, file)
        if key not in self._imported:
            model = None
            if given and side == SUBMISSION:
                reference = self._program(REFERENCE, file)
                model = None if isinstance(reference, Built) else reference.export
            self._imported[key] = self._import(side, file, model, averaging=given)
        return self._imported[key]

    def _import(
        self, side: str, file: str, given: Given | None, *, averaging: bool
    ) -> Imported | Built:
        """:meth:`_program`'s import, once per side and file."""
        from simsync.simulation.importing import import_program
        from simsync.tf_backend.program.load import ChildFailed, ImportLimits, ProgramError

        # what its process reports could be forged from inside: it keeps to the public API
        refused = check_program(self.folders[side] / file, file)
        if refused is not None:
            return self._failed(side, f"your program is not run: {refused}")
        # after the rules, whose reading of the names takes seconds: from what is left
        left = self.deadline - time.monotonic() if side == SUBMISSION else float("inf")
        if left <= 0:
            return self._failed(side, "not run: the grading took longer than it may in all")
        limits = ImportLimits()
        limits = dataclasses.replace(limits, wall_seconds=min(limits.wall_seconds, left))
        try:
            imported = import_program(
                self.folders[side] / file,
                sandbox=self.sandbox,
                limits=limits,
                hidden=self.hidden,
                export=True,  # its own process says nothing the grade rests on
                cache=False,  # measured afresh for each grading, both sides alike
                name=file,
                given=given,
                averaging=averaging,  # measured only where a check reads it
            )
        except ChildFailed as error:  # the grader's own process: for the instructor
            raise ReferenceFailed(f"the grader's sandboxed process cannot start: {error}") from None
        except ProgramError as error:
            return self._failed(side, f"your program {error}")
        measured = imported.averaging
        if given is not None and measured is not None and measured["problem"] is None:
            missing = "its updates were not compared with the given model's"  # never left out
            measured.setdefault("given", {"problem": missing, "variables": []})
        return imported

    def _failed(self, side: str, reason: str) -> Built:
        """A submission's failure costs its checks; the reference's stops the grading: it is
        the instructor's to mend, and no student should get 0 for it."""
        if side == REFERENCE:
            raise ReferenceFailed(f"the reference solution fails: {reason}")
        return Built(error=reason)

    def _run(self, side: str, request: dict[str, Any]) -> Outcome:
        limits = self.limits
        if side == SUBMISSION:  # the budget is the submission's; the reference's runs are not
            left = self.deadline - time.monotonic()
            if left <= 0:
                seconds = self.limits.grading_seconds
                return Outcome({}, f"not run: the grading took longer than {seconds:g} s in all")
            limits = dataclasses.replace(limits, wall_seconds=min(limits.wall_seconds, left))
        request = {**request, "scenario": self.scenario, "simsync": simsync_folder()}
        evaluate = request["stage"] == "evaluate"  # the stage that runs no student code
        outcome = _checked(
            run_child(
                self.sandbox,
                request,
                self.folders[side],
                limits,
                self.hidden,
                threads=evaluate,
                sealed=evaluate,
            )
        )
        if (
            not outcome.started
            and outcome.error
            and not outcome.error.startswith(("stopped", "not run"))
        ):  # the grader's own process failed before any code of a side ran
            last = (outcome.stderr.strip().splitlines() or [outcome.error])[-1]
            raise ReferenceFailed(f"the grader's sandboxed process cannot start: {last}")
        return outcome


def _checked(outcome: Outcome) -> Outcome:
    """The outcome with what the child said checked whole
    (:class:`~simsync.sandbox.wire.GradingSaid`): a build's child runs the student's code,
    which may say anything; a line of the wrong shape is the reason there is no answer."""
    try:
        said = read_said(GradingSaid, outcome.said, "its process")
    except WireError as error:
        started = {"started": True} if outcome.said.get("started") is True else {}
        return Outcome(started, f"{error}", outcome.stderr, outcome.dropped, outcome.started)
    return dataclasses.replace(outcome, said=said)


def _pruned(imported: Imported) -> dict[str, Any]:
    """What a program builds that its training step never runs (TensorFlow runs only what the
    loop's fetches need): the ops, and how many towers its whole graph has, for feedback that
    says so rather than "no op named ..."."""
    from simsync.tf_backend.program.towers import find_towers

    names = [op["name"] for op in imported.data["ops"]]
    devices = {op["name"]: op["device"] for op in imported.data["ops"]}
    return {
        "ops": sorted(set(names) - set(imported.graph.nx)),
        "built_towers": find_towers(names, devices).count,
    }


class ReferenceFailed(SimsyncError):
    """The reference solution itself, or the grader's sandboxed process, failed: the
    instructor's to mend, one line."""


def shape(graph: Graph) -> list[list[str]]:
    """A graph, its costs aside: its ops, its tensors with their sizes, its loops and what
    they fetch; each in an order of its own (two runs of a program may list alike what they
    made in another order).

    >>> from simsync.patterns import tiny_example
    >>> shape(tiny_example()) == shape(tiny_example())
    True
    """
    data = graph_to_dict(graph)
    ops = [{k: v for k, v in op.items() if k != "cost"} for op in data["ops"]]
    loops = [[c["name"], c["fetches"], c["daemon"], c["steps"]] for c in data["clients"]]
    return [
        sorted(json.dumps(part, sort_keys=True) for part in parts)
        for parts in (ops, data["tensors"], loops)
    ]


def _program_request(imported: Imported) -> dict[str, Any]:
    """What the evaluate child is given of an imported program: its graph, simulated for
    timing only (its ops compute no numbers simsync knows)."""
    return {"graph": json.dumps({"graph": graph_to_dict(imported.graph)}), "numerics": False}


def _built(outcome: Outcome, spec: str) -> Built:
    """The evaluate child's answer as a :class:`Built`: what it said before it stopped
    counts; what it did not get to gets the reason it stopped."""
    said = outcome.said
    if said.get("error") is not None or said.get("structure") is None:
        reason = said.get("error") or outcome.error or "no graph came back"
        prefix = "" if spec.endswith(".toml") else "the graph your code built: "
        return Built(error=f"{prefix}{reason}")
    missing = outcome.error or "the grader's process stopped before it got there"
    return Built(
        said["structure"],
        facts=said.get("facts"),
        facts_error=said.get("facts_error") or (None if "facts" in said else missing),
        params=said.get("params"),
        params_error=said.get("params_error") or (None if "params" in said else missing),
    )


def _hidden(assignment: Assignment) -> tuple[Path, ...]:
    """Folders the sandbox shows empty: every assignment's, the solutions among them."""
    from importlib.resources import files

    from simsync.grading.assignment import assignments_root

    found = [assignment.folder, assignments_root()]
    with contextlib.suppress(ModuleNotFoundError):
        found.append(Path(str(files("simsync.assignments"))))
    return tuple(found)
