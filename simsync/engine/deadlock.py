"""Why a simulation cannot go on: who waits for what, said in one message.

The engine ends a run as soon as no event is left while a client still has work (SimPy's
schedule is empty: nothing can ever move again). This module turns that state into a
:class:`~simsync.errors.SimulationError` that names every blocked client, the op it is blocked
in, what it waits for and what the resource holds, and, where the graph can tell, why it will
never come: no client ever puts into that resource, or the resource's own note (what it needs to
make progress, as the pattern that built it wrote it).
"""

from __future__ import annotations

from collections.abc import Mapping

from simsync.engine.clocks import Clocks
from simsync.engine.resources import Accumulator, TokenQueue
from simsync.errors import SimulationError
from simsync.ir import Graph, run_orders
from simsync.kinds import kind_of

__all__ = ["explain_deadlock"]


def explain_deadlock(
    graph: Graph,
    clocks: Clocks,
    resources: Mapping[str, TokenQueue | Accumulator],
    stuck: list[str],
) -> SimulationError:
    """The error for clients ``stuck`` with work left when nothing can move: ``clocks`` hold
    the stale-synchronous bounds, ``resources`` the queues and accumulators by name."""
    bounded = clocks.explain(stuck)
    if bounded is not None:
        return SimulationError(bounded)
    waits, notes = [], []
    blocked: dict[str, str] = {}
    putters = _putters(graph)
    for name, resource in resources.items():
        waiters = resource.blocked()
        for waiter in waiters:
            blocked[waiter.client] = name
            waits.append(
                f"{waiter.client} waits in {waiter.op} for {waiter.wants} from {name} "
                f"({resource.state()})"
            )
        if waiters:
            if name not in putters:
                notes.append(f"no client runs an op that puts into {name}")
            elif resource.resource.note:
                notes.append(resource.resource.note)
    if not waits:
        return SimulationError(
            f"deadlock: client(s) {', '.join(stuck)} wait for ops that can never run"
        )
    because = f"; {'; '.join(dict.fromkeys(notes))}" if notes else ""
    return SimulationError(f"deadlock, nothing can move: {'; '.join(waits)}{because}", blocked)


def _putters(graph: Graph) -> set[str]:
    """The resources some client's run puts into (a push or an enqueue)."""
    orders = run_orders(graph, [c.fetches for c in graph.clients])
    return {
        str(graph.op(name).resource)
        for order in orders
        for name in order
        if kind_of(graph.op(name).kind).action in ("push", "enqueue")
    }
