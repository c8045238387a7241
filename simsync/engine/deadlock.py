"""Why a simulation cannot go on: who waits for what, said in one message.

The engine ends a run as soon as no event is left while a client still has work (SimPy's
schedule is empty: nothing can ever move again). This module turns that state into a
:class:`~simsync.errors.SimulationError` that names every blocked client, the op it is blocked
in, what it waits for and what the resource holds, and, where the graph can tell, why it will
never come: no client ever puts into that resource, or the resource's own note (what it needs to
make progress, as the pattern that built it wrote it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from simsync.engine.clocks import Clocks
from simsync.engine.plan import Plan
from simsync.engine.resources import Waitable
from simsync.errors import SimulationError

__all__ = ["explain_deadlock"]


def explain_deadlock(
    plans: Sequence[Plan],
    clocks: Clocks,
    resources: Mapping[str, Waitable],
    stuck: list[str],
) -> SimulationError:
    """The error for clients ``stuck`` with work left when nothing can move: ``plans`` are the
    clients' runs, ``clocks`` hold the stale-synchronous bounds, ``resources`` the queues and
    accumulators by name."""
    bounded = clocks.explain(stuck)
    if bounded is not None:
        return SimulationError(bounded)
    waits, notes = [], []
    blocked: dict[str, str] = {}
    putters = {str(p.op.resource) for plan in plans for p in plan.ops if p.puts}
    getters = {str(p.op.resource) for plan in plans for p in plan.ops if p.waits and not p.puts}
    for name, resource in resources.items():
        for waiter in [*resource.waiters, *resource.putters]:
            blocked[waiter.client] = name
        waits += resource.waiting()
        if resource.waiters:
            if resource.resource.note:
                notes.append(resource.resource.note)
            if name not in putters:
                notes.append(f"no client runs an op that puts into {name}")
        if resource.putters and name not in getters:  # a full queue nobody takes from
            notes.append(f"no client runs an op that takes from {name}")
    if not waits:
        return SimulationError(
            f"deadlock: client(s) {', '.join(stuck)} wait for ops that can never run"
        )
    because = f"; {'; '.join(dict.fromkeys(notes))}" if notes else ""
    return SimulationError(f"deadlock, nothing can move: {'; '.join(waits)}{because}", blocked)
