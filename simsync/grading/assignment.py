"""The assignment format: a folder ``NN-slug/`` with ``assignment.toml``, ``starter/``,
``solution/`` and the scenario the graphs are built for (docs/assignments.md)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

from simsync.errors import SimsyncError, printable
from simsync.files import InputError, read_toml

__all__ = [
    "KINDS",
    "Assignment",
    "AssignmentError",
    "Check",
    "assignments_root",
    "find_assignment",
    "load_assignment",
    "load_assignments",
]

#: The kinds of check, and the keys each one takes besides the common ones.
KINDS: dict[str, tuple[str, ...]] = {
    "structure": (
        "sync_points",
        "sync_point_count",
        "sync_points_made_in",
        "updates_take_every_tower",
        "updates_average_towers",
        "devices",
        "before",
        "towers",
    ),
    "simulation": ("expression", "equals", "at_most", "at_least", "reference", "tolerance"),
    "answer": ("answer", "expression", "of", "tolerance"),
    "tensorflow": ("steps",),
}
COMMON = ("name", "task", "kind", "points", "hidden", "graph")
TOP = ("title", "summary", "scenario", "target_loss", "files", "tasks", "checks")
FOLDER = re.compile(r"^(\d\d)-[a-z0-9-]+$")


class AssignmentError(SimsyncError):
    """An assignment folder that does not follow the format: one line naming file and key."""


@dataclass(frozen=True)
class Check:
    """One graded test: what it checks (``kind`` and its keys), on which graph, for how many
    points, and whether the student sees it before the deadline."""

    name: str
    task: str
    kind: str
    points: float
    hidden: bool
    #: ``"towers.py:build"`` (a function of the submission, run in the sandbox),
    #: ``"scenario.toml"`` (a scenario whose ``[training]`` table the submission sets) or
    #: ``"train.py"`` (the submission's TensorFlow program, imported in the sandbox)
    graph: str
    keys: dict[str, Any] = field(default_factory=dict)

    @property
    def runs_tensorflow(self) -> bool:
        """Whether the check runs TensorFlow: a ``tensorflow`` check, or any check of a
        TensorFlow program (``graph = "train.py"``, imported by running it)."""
        return self.kind == "tensorflow" or (self.graph.endswith(".py") and ":" not in self.graph)


@dataclass(frozen=True)
class Assignment:
    number: int
    slug: str
    folder: Path
    title: str
    summary: str
    scenario: Path
    files: tuple[str, ...]
    tasks: dict[str, str]
    checks: tuple[Check, ...]
    target_loss: float | None = None

    @property
    def starter(self) -> Path:
        return self.folder / "starter"

    @property
    def solution(self) -> Path:
        return self.folder / "solution"

    def points(self, hidden: bool = True) -> float:
        return sum(c.points for c in self.checks if hidden or not c.hidden)


def assignments_root() -> Path:
    """Where the assignments are: ``$SIMSYNC_ASSIGNMENTS``, or the ones installed with simsync."""
    override = os.environ.get("SIMSYNC_ASSIGNMENTS")
    return Path(override) if override else Path(str(files("simsync.assignments")))


def load_assignments(root: Path | None = None) -> list[Assignment]:
    """Every assignment folder under ``root``, by number."""
    given = root is not None or bool(os.environ.get("SIMSYNC_ASSIGNMENTS"))
    root = root or assignments_root()
    try:
        folders = sorted(p for p in root.iterdir() if p.is_dir() and FOLDER.match(p.name))
    except OSError as error:
        where = "" if not given or root != assignments_root() else "SIMSYNC_ASSIGNMENTS="
        raise AssignmentError(
            f"{where}{printable(str(root), one_line=True)}: not a folder of assignments "
            f"({error.strerror or error})"
        ) from None
    return [load_assignment(folder) for folder in folders]


def find_assignment(number: int, root: Path | None = None) -> Assignment:
    found = [a for a in load_assignments(root) if a.number == number]
    if not found:
        known = ", ".join(str(a.number) for a in load_assignments(root)) or "none"
        raise AssignmentError(f"no assignment {number}; assignments: {known}")
    return found[0]


def load_assignment(folder: Path) -> Assignment:
    """Read and check ``folder/assignment.toml``: every problem is one :class:`AssignmentError`
    naming the file and the key."""
    path = folder / "assignment.toml"
    try:
        data = read_toml(path, "assignment file")
    except InputError as error:
        raise AssignmentError(str(error)) from None
    _only(path, "", data, TOP)
    for key in ("title", "scenario", "files", "tasks", "checks"):
        if key not in data:
            raise AssignmentError(f"{path}: missing key '{key}'")
    tasks = {str(t["id"]): str(t["title"]) for t in data["tasks"]}
    checks = tuple(_check(path, i, item, tasks) for i, item in enumerate(data["checks"]))
    assignment = Assignment(
        number=int(folder.name[:2]),
        slug=folder.name,
        folder=folder,
        title=str(data["title"]),
        summary=str(data.get("summary", "")),
        scenario=folder / str(data["scenario"]),
        files=tuple(data["files"]),
        tasks=tasks,
        checks=checks,
        target_loss=data.get("target_loss"),
    )
    for side in (assignment.starter, assignment.solution):
        for name in assignment.files:
            if not (side / name).is_file():
                raise AssignmentError(f"{path}: files: {side.name}/{name} does not exist")
    if not assignment.scenario.is_file():
        raise AssignmentError(f"{path}: scenario: {assignment.scenario} does not exist")
    return assignment


def _check(path: Path, index: int, item: dict[str, Any], tasks: dict[str, str]) -> Check:
    where = f"checks[{index}]"
    kind = item.get("kind")
    if kind not in KINDS:
        raise AssignmentError(f"{path}: {where}.kind: {kind!r}; allowed: {', '.join(KINDS)}")
    _only(path, where, item, COMMON + KINDS[kind])
    for key in ("name", "task", "points", "graph"):
        if key not in item:
            raise AssignmentError(f"{path}: {where}: missing key '{key}'")
    if str(item["task"]) not in tasks:
        raise AssignmentError(f"{path}: {where}.task: {item['task']!r} is not one of the tasks")
    return Check(
        name=str(item["name"]),
        task=str(item["task"]),
        kind=kind,
        points=float(item["points"]),
        hidden=bool(item.get("hidden", False)),
        graph=str(item["graph"]),
        keys={k: v for k, v in item.items() if k not in COMMON},
    )


def _only(path: Path, where: str, data: dict[str, Any], allowed: tuple[str, ...]) -> None:
    for key in data:
        if key not in allowed:
            prefix = f"{where}." if where else ""
            raise AssignmentError(
                f"{path}: {prefix}{key}: unknown key; allowed: {', '.join(allowed)}"
            )
