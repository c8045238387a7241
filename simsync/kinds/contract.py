"""What a kind declares about its inputs and outputs, and what its rules are given.

Every kind **provides** one role: what its value means to the ops it feeds (``"parameters"``,
``"batch"``, ``"loss"``, ``"gradients"``, ...). It **needs** its inputs by role, never by the
kind of the op that makes them (:class:`Input`: which role, how many), so any kind that
provides a role can stand where another did. The rules find their inputs through one helper,
:class:`Inputs`, and so does the check (:mod:`simsync.kinds.graph_check`) that says, before anything
runs, which input an op lacks and what would give it.

Rules are typed with protocols, not the executors' own classes: :class:`OpLike` (what a rule
may read off an op), :class:`RunLike` (what a numpy rule may ask of its run: the replay's
:class:`~simsync.replay.RunContext`), :class:`BuilderLike` (what a lowering rule builds
with: the TensorFlow backend's ``Builder``), and :class:`AbstractContext` (what an abstract
rule may ask of the graph and the model: :mod:`simsync.kinds.graph_check`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from simsync.errors import GraphError
from simsync.numerics import Batch, ModelSpec

__all__ = [
    "Abstract",
    "AbstractContext",
    "BuilderLike",
    "GraphContext",
    "Input",
    "Inputs",
    "LoweredLike",
    "OpLike",
    "RunLike",
    "one",
    "optional",
    "some",
    "the",
]


class OpLike(Protocol):
    """What a rule may read off an op (:class:`simsync.ir.Op` is one)."""

    @property
    def name(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def device(self) -> str: ...
    @property
    def devices(self) -> tuple[str, ...]: ...
    @property
    def tower(self) -> int | None: ...
    @property
    def reads(self) -> tuple[str, ...]: ...
    @property
    def writes(self) -> tuple[str, ...]: ...
    @property
    def max_staleness(self) -> int | None: ...
    @property
    def resource(self) -> str | None: ...
    @property
    def amount(self) -> int: ...
    @property
    def gradient(self) -> str | None: ...


class RunLike(Protocol):
    """What a numpy rule may ask of the run it is evaluated in."""

    @property
    def spec(self) -> ModelSpec: ...
    def parameter(self, variable: str) -> str: ...
    def trainable(self, variable: str) -> bool: ...
    def read_parameters(self, op: OpLike) -> dict[str, np.ndarray]: ...
    def current(self, variable: str) -> np.ndarray: ...
    def batch(self, tower: int) -> Batch: ...
    def taken(self, op: OpLike) -> list[Any]: ...


class LoweredLike(Protocol):
    """The handles a lowering rule records for the run (``tf_backend.lower.Lowered``)."""

    losses: dict[int, Any]
    batches: dict[int, tuple[Any, Any]]
    variables: dict[str, Any]
    read_versions: dict[str, dict[str, Any]]
    write_versions: dict[str, dict[str, Any]]
    applied: dict[str, Any]
    moving: dict[str, dict[str, dict[str, Any]]]


class BuilderLike(Protocol):
    """What a lowering rule builds with (``tf_backend.lower.Builder``); ``tf`` is the
    TensorFlow module, passed in: nothing in :mod:`simsync.kinds` imports it."""

    tf: Any
    spec: ModelSpec
    versions: dict[str, Any]

    @property
    def lowered(self) -> LoweredLike: ...
    def parameter(self, variable: str) -> str: ...
    def feed(self, dtype: Any, shape: list[int], name: str) -> Any: ...
    def work(self, op: OpLike) -> Any: ...
    def model_loss(self, params: dict[str, Any], x: Any, y: Any) -> Any: ...
    def normalized_loss(
        self, params: dict[str, Any], x: Any, y: Any, given: Any
    ) -> tuple[Any, Any]: ...
    def pre_activation(self, params: dict[str, Any], x: Any) -> Any: ...
    def ring_allreduce(self, devices: tuple[str, ...], grads: list[Any]) -> dict[str, Any]: ...
    def read_version(self, op: OpLike) -> Any: ...


@dataclass(frozen=True)
class Input:
    """An input a kind needs, by role: ``roles`` (any of them will do; the first names it),
    at least ``least`` and at most ``most`` (``None``: any number) of them.

    ``when``, if given, makes the input required only for the ops it is true of (an apply
    needs gradients only when it writes trainable variables); for the others it is optional.
    """

    roles: tuple[str, ...]
    least: int = 1
    most: int | None = 1
    when: Callable[[OpLike, GraphContext], bool] | None = None

    @property
    def role(self) -> str:
        """The role that names the input in messages."""
        return self.roles[0]

    def required(self, op: OpLike, graph: GraphContext) -> int:
        """How many such inputs ``op`` needs at least."""
        return self.least if self.when is None or self.when(op, graph) else 0


def one(*roles: str) -> Input:
    """Exactly one input with one of ``roles``."""
    return Input(roles)


def optional(*roles: str) -> Input:
    """At most one input with one of ``roles``."""
    return Input(roles, least=0)


def some(*roles: str, when: Callable[[OpLike, GraphContext], bool] | None = None) -> Input:
    """One or more inputs with one of ``roles`` (``when``: see :class:`Input`)."""
    return Input(roles, most=None, when=when)


#: kind name -> the role it provides; filled by :func:`simsync.kinds.registry.register`
ROLES: dict[str, str | None] = {}


def the(role: str) -> str:
    """The role with its article, for messages: ``the loss``, ``the gradients``."""
    return f"the {role}"


def slots(roles: Sequence[str | None]) -> dict[str | None, tuple[int, ...]]:
    """The positions of the inputs of each role, given each input's role in order.

    >>> slots(["parameters", "batch", "parameters"])
    {'parameters': (0, 2), 'batch': (1,)}
    """
    found: dict[str | None, list[int]] = {}
    for position, role in enumerate(roles):
        found.setdefault(role, []).append(position)
    return {role: tuple(positions) for role, positions in found.items()}


class Inputs:
    """An op's data inputs (``(source op, value)`` in the graph's declared order), found by
    the role their source's kind provides: the one way every rule reads its inputs.

    Inputs from an op whose kind provides no role (``generic``) carry no value and are
    never returned; control edges are not inputs at all.

    >>> import simsync.kinds
    >>> from simsync.ir import Op
    >>> read, dequeue = Op("r", "read", "/cpu:0"), Op("d", "dequeue", "/gpu:0")
    >>> found = Inputs(Op("loss", "forward", "/gpu:0"), [(read, "params"), (dequeue, "xy")])
    >>> found.one("batch"), found.optional("statistics"), found.all("parameters")
    ('xy', None, ['params'])
    >>> found.one("loss")
    Traceback (most recent call last):
    ...
    simsync.errors.GraphError: op 'loss' (forward) needs one loss, and 0 of its inputs give one
    """

    __slots__ = ("froms", "op", "slots", "values")

    def __init__(self, op: OpLike, items: Sequence[tuple[OpLike, Any]]) -> None:
        self.op = op
        self.froms: Sequence[OpLike] = [source for source, _ in items]
        self.values: Sequence[Any] = [value for _, value in items]
        self.slots = slots([ROLES.get(source.kind) for source in self.froms])

    @classmethod
    def of(
        cls,
        op: OpLike,
        froms: Sequence[OpLike],
        values: Sequence[Any],
        slots: dict[str | None, tuple[int, ...]],
    ) -> Inputs:
        """The inputs from ``froms`` with ``values``, their positions by role (:func:`slots`)
        known already: the replay's hot path builds them for every op it evaluates."""
        inputs = cls.__new__(cls)
        inputs.op, inputs.froms, inputs.values, inputs.slots = op, froms, values, slots
        return inputs

    def _positions(self, roles: tuple[str, ...]) -> Sequence[int]:
        if len(roles) == 1:
            return self.slots.get(roles[0], ())
        return sorted(i for role in roles for i in self.slots.get(role, ()))

    def all(self, *roles: str) -> list[Any]:
        """The values of the inputs with one of ``roles``, in the graph's order."""
        values = self.values
        return [values[i] for i in self._positions(roles)]

    def sources(self, *roles: str) -> list[OpLike]:
        """The ops that give the inputs with one of ``roles``, in the graph's order."""
        froms = self.froms
        return [froms[i] for i in self._positions(roles)]

    def one(self, *roles: str) -> Any:
        """The value of the one input with one of ``roles``; a :class:`GraphError` otherwise."""
        found = self.slots.get(roles[0], ()) if len(roles) == 1 else self._positions(roles)
        if len(found) != 1:
            raise GraphError(
                f"op '{self.op.name}' ({self.op.kind}) needs one {roles[0]}, and {len(found)} "
                f"of its inputs give one"
            )
        return self.values[found[0]]

    def optional(self, *roles: str) -> Any:
        """The value of the input with one of ``roles``, or None if there is none."""
        found = self.all(*roles)
        if len(found) > 1:
            raise GraphError(
                f"op '{self.op.name}' ({self.op.kind}) takes at most one {roles[0]}, and "
                f"{len(found)} of its inputs give one"
            )
        return found[0] if found else None

    def some(self, *roles: str) -> list[Any]:
        """The values of the inputs with one of ``roles``: at least one."""
        found = self.all(*roles)
        if not found:
            raise GraphError(
                f"op '{self.op.name}' ({self.op.kind}) needs {the(roles[0])}, and none of its "
                f"inputs gives it"
            )
        return found


@dataclass(frozen=True)
class Abstract:
    """What an op's value will be, known before anything runs (JAX's abstract value): its
    ``role``; for parameters and gradients, the model ``parameters`` it holds; ``partial``
    gradients still lack the part through batch norm's global statistics; a ``loss`` carries
    its batch ``statistics`` when the model normalises (``given``: global ones, from another
    op)."""

    role: str
    parameters: frozenset[str] = frozenset()
    partial: bool = False
    statistics: bool = False
    given: bool = False


class GraphContext(Protocol):
    """What a kind's declarations may ask of the graph (before anything runs)."""

    def parameter(self, variable: str) -> str:
        """The model parameter ``variable`` holds."""
        ...

    def category(self, variable: str) -> str:
        """``"trainable"``, ``"counter"`` or ``"statistic"`` (numbers no gradient moves)."""
        ...

    def pushes(self, resource: str) -> list[OpLike]:
        """The ops that push to ``resource``."""
        ...


class AbstractContext(GraphContext, Protocol):
    """What an abstract rule may ask of the graph and of the model the values are computed
    with."""

    @property
    def spec(self) -> ModelSpec: ...
    @property
    def trainable(self) -> frozenset[str]:
        """The model's trainable parameters."""
        ...

    @property
    def moving(self) -> frozenset[str]:
        """The model's moving statistics (none without batch norm)."""
        ...


AbstractRule = Callable[[OpLike, Inputs, AbstractContext], Abstract]
