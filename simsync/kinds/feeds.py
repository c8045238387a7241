"""Where towers meet, resources included: the sync points of :mod:`simsync.ir.analysis` with
the inputs that reach an op through a resource.

A take of an accumulator has no tensor from the workers; it waits until enough of their
pushes are in. Which ops put into a resource and which get from it is their kinds' to say
(each kind's :class:`~simsync.ir.resources.Action`), so the IR's analysis takes it as
``feeds`` and this module passes it: every caller above the kinds asks here.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

from simsync.ir import Graph, meeting_points
from simsync.ir import input_towers as ir_input_towers
from simsync.ir.resources import TAKE
from simsync.kinds.registry import kind_of

__all__ = ["Users", "input_towers", "resource_feeds", "resource_users", "sync_points"]


class Users(NamedTuple):
    """The ops that act on one resource, in graph order: those that put, those that get."""

    puts: list[str]
    gets: list[str]


def resource_users(graph: Graph) -> dict[str, Users]:
    """For every resource of ``graph``, the ops that put into it and those that get from it
    (their kinds' actions say which).

    >>> from simsync.patterns import tiny_example
    >>> resource_users(tiny_example())
    {}
    """
    users = {name: Users([], []) for name in graph.resources}
    for op in graph.ops():
        action = kind_of(op.kind).action
        if op.resource is not None and action is not None and op.resource in users:
            (users[op.resource].puts if action.puts else users[op.resource].gets).append(op.name)
    return users


def resource_feeds(graph: Graph) -> dict[str, tuple[str, ...]]:
    """For every op that gets from a resource, the ops that put into it, in graph order.

    >>> from simsync.patterns import tiny_example
    >>> resource_feeds(tiny_example())
    {}
    """
    feeds: dict[str, tuple[str, ...]] = graph.memo("resource_feeds", partial(_feeds, graph))
    return feeds


def _feeds(graph: Graph) -> dict[str, tuple[str, ...]]:
    # a take of R >= 2 waits for R pushes; a take of R = 1, a dequeue of a token or of a
    # program's elements waits for nobody in particular
    return {
        getter: tuple(users.puts)
        for users in resource_users(graph).values()
        if users.puts
        for getter in users.gets
        if graph.op(getter).amount >= 2 and kind_of(graph.op(getter).kind).action is TAKE
    }


def sync_points(graph: Graph) -> list[str]:
    """Ops where towers meet (:func:`simsync.ir.meeting_points`), through tensors or through a
    resource: SyncReplicasOptimizer's take of each accumulator waits for the workers'
    pushes, so it is one; a worker's dequeue of a token, put by the chief, is not.

    >>> from simsync.patterns import tiny_example
    >>> sync_points(tiny_example())
    ['average_gradients']
    """
    return meeting_points(graph, resource_feeds(graph))


def input_towers(graph: Graph, name: str) -> dict[str, int]:
    """The inputs of op ``name`` that are one tower's own work, through tensors or a
    resource (:func:`simsync.ir.input_towers`)."""
    return ir_input_towers(graph, name, resource_feeds(graph))
