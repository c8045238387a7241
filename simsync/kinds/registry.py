"""The registry of op kinds: each kind declared once, the way JAX declares a primitive.

An :class:`OpKind` carries everything simsync knows about one kind of op: a line of meaning, its
look in every view, the ``[costs]`` key of its fixed time, what it does to a stateful resource,
its numpy meaning (used by the replay that gives every run its values) and its TensorFlow
lowering. Executors, views and the scenario schema look a kind up here (:func:`kind_of`) instead
of switching on its name, and an unknown kind fails the same way everywhere.

A kind also declares the role its value plays (``provides``: ``"loss"``, ``"gradients"``,
...), the inputs it needs by role (``needs``, see :mod:`simsync.kinds.contract`) and which
variables it may write (``may_write``); :func:`simsync.kinds.graph_check.check_graph` holds every op
of a graph to its kind's declarations before anything runs.

Rules are plain functions stored on the kind; each finds its inputs by role through
:class:`~simsync.kinds.contract.Inputs` (the data inputs, in the graph's declared order):

- ``numpy(ctx, op, inputs) -> value``: the op's value from its inputs' values; ``ctx`` is the
  run's :class:`~simsync.replay.RunContext` (its batch, the variables at the versions it
  read, the gradients a take averages);
- ``numpy_batch(contexts, ops, inputs) -> values``: the same for many ops of the kind at once
  (the replay batches towers that read the same version);
- ``numpy_chain(contexts, ops, inputs) -> {variable: values}``: for ops that write variables,
  many of them landing one after another on the same variables, each on the version the one
  before made (asynchronous workers' applies): per variable written, its value after each op
  in turn, stacked on a first axis; bit for bit what ``numpy`` gives op by op;
- ``lower(builder, op, inputs) -> value``: TensorFlow ops for the IR op, built through the
  backend's builder (``builder.tf`` is the TensorFlow module, passed in: nothing here imports it);
- ``abstract(op, inputs, context) -> Abstract``: what the value will be, from what the inputs'
  will be, before anything runs (JAX's abstract evaluation); it raises :class:`GraphError` when
  the values could not be computed with the model (a gradient missing for a variable written,
  parameters the model lacks). Without it the kind's value is just its role.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from simsync.errors import GraphError
from simsync.ir.resources import RESOURCE_KINDS, Action
from simsync.kinds.contract import (
    ROLES,
    AbstractRule,
    BuilderLike,
    Input,
    Inputs,
    OpLike,
    RunLike,
)

__all__ = [
    "CATEGORIES",
    "KINDS",
    "OpKind",
    "Style",
    "cost_keys",
    "kind_of",
    "providers",
    "register",
]

#: What a variable may be, for :attr:`OpKind.may_write`: a model parameter, a counter (a global
#: or local step), or numbers no gradient moves (batch norm's moving statistics).
CATEGORIES = ("trainable", "counter", "statistic")

NumpyRule = Callable[[RunLike, OpLike, Inputs], Any]
BatchRule = Callable[[Sequence[RunLike], Sequence[OpLike], Sequence[Inputs]], list[Any]]
ChainRule = Callable[[Sequence[RunLike], Sequence[OpLike], Sequence[Inputs]], dict[str, Any]]
LoweringRule = Callable[[BuilderLike, OpLike, Inputs], Any]


@dataclass(frozen=True)
class Style:
    """How a kind is drawn: a letter for the terminal, a rich colour and a hex colour."""

    letter: str
    color: str
    hex: str


@dataclass(frozen=True)
class OpKind:
    """One kind of op, declared once.

    ``cost_key`` is the ``[costs]`` key of the kind's fixed time (``None``: its time is drawn
    from ``[compute]``). ``action`` is what the op does to its resource, one of the actions
    defined in :mod:`simsync.ir.resources`: ``PUSH`` a gradient to an accumulator
    (non-blocking, dropped when stale), ``TAKE`` the mean from one (blocks until enough were
    pushed), ``ENQUEUE`` tokens on a queue, ``DEQUEUE`` one (blocks while empty).
    ``carries_loss`` marks the kind whose value is the tower's loss.

    ``provides`` is the role of the kind's value (``None``: it has none, as ``generic``);
    ``needs`` the inputs it takes, by role (any other data input is an error where values are
    computed); ``may_write`` the categories of variables (:data:`CATEGORIES`) its ops may write.
    ``computes`` is False for a kind that computes no value at all (``generic``): values are
    not computed through its ops.
    """

    name: str
    doc: str
    style: Style
    cost_key: str | None = None
    action: Action | None = None
    carries_loss: bool = False
    provides: str | None = None
    needs: tuple[Input, ...] = ()
    may_write: frozenset[str] = frozenset()
    computes: bool = True
    numpy: NumpyRule | None = None
    numpy_batch: BatchRule | None = None
    numpy_chain: ChainRule | None = None
    lower: LoweringRule | None = None
    abstract: AbstractRule | None = None
    #: why ``lower`` is None, for the backend's error message
    unlowered: str = "it has no TensorFlow lowering"


#: Every kind, in the order views list them.
KINDS: dict[str, OpKind] = {}


def register(kind: OpKind) -> OpKind:
    """Add ``kind`` to the registry (once)."""
    if kind.name in KINDS:
        raise GraphError(f"op kind '{kind.name}' is declared twice")
    if kind.action is not None and kind.action.resource not in RESOURCE_KINDS:
        raise GraphError(f"op kind '{kind.name}': unknown resource {kind.action.resource!r}")
    if not kind.may_write <= set(CATEGORIES):
        raise GraphError(f"op kind '{kind.name}': unknown variables {set(kind.may_write)}")
    KINDS[kind.name] = kind
    ROLES[kind.name] = kind.provides
    return kind


def kind_of(name: str) -> OpKind:
    """The kind called ``name``; a :class:`GraphError` naming the known kinds otherwise.

    >>> import simsync.kinds
    >>> kind_of("forward").style.letter
    'F'
    >>> kind_of("foward")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    simsync.errors.GraphError: unknown op kind 'foward'; did you mean 'forward'? known kinds: ...
    """
    try:
        return KINDS[name]
    except KeyError:
        raise GraphError(f"unknown op kind '{name}'; {known_kinds(name)}") from None


def known_kinds(name: str) -> str:
    """What to say of an unknown kind ``name``: the nearest known one, then all of them.

    >>> import simsync.kinds
    >>> known_kinds("apply_gradients")  # doctest: +ELLIPSIS
    "did you mean 'apply'? known kinds: read, dequeue, ..."
    """
    inside = sorted((k for k in KINDS if k in name.lower()), key=len, reverse=True)
    close = inside[:1] or difflib.get_close_matches(name, KINDS, n=1, cutoff=0.6)
    guess = f"did you mean '{close[0]}'? " if close else ""
    known = ", ".join(k for k in KINDS if KINDS[k].computes)
    opaque = " or ".join(f"'{k}' (timing only)" for k in KINDS if not KINDS[k].computes)
    return f"{guess}known kinds: {known}" + (f", or {opaque}" if opaque else "")


def providers(*roles: str) -> list[str]:
    """The kinds whose value plays one of ``roles``, in registry order.

    >>> import simsync.kinds
    >>> providers("gradients")
    ['moments_backward', 'backward', 'aggregate', 'allreduce', 'take_gradients']
    """
    return [name for name, kind in KINDS.items() if kind.provides in roles]


def cost_keys() -> tuple[str, ...]:
    """The ``[costs]`` keys of the kinds with a fixed time, in registry order."""
    return tuple(k.cost_key for k in KINDS.values() if k.cost_key is not None)
