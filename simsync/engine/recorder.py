"""What the engine writes down: the variables' versions, and the Trace.

The engine decides when things happen; the :class:`Recorder` keeps what they did to the
variables (every write bumps a version; a counter takes its new value) and writes every record
of the :class:`~simsync.trace.Trace`: an op's execution, a transfer, the versions a read saw,
an update's line in the ledger, a resource's event. With ``detail=False`` it keeps only what the
replay and the statistics need: the reads, the ledger, the resource events (and the steps, which
the engine appends).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simsync.ir import Graph, Op
from simsync.ir.resources import ENQUEUE, Action, Got, Put
from simsync.kinds import fresh_enough
from simsync.trace import (
    OpRecord,
    Read,
    ResourceEvent,
    Trace,
    TransferRecord,
    Update,
    VariableAccess,
)

if TYPE_CHECKING:
    from simsync.engine.ops import Execution, Run, Transfer
    from simsync.engine.resources import Arrived

__all__ = ["Recorder"]


class Recorder:
    """The variables' versions and counters of one run of ``graph``, and its trace."""

    def __init__(self, graph: Graph, detail: bool = True) -> None:
        self.detail = detail
        self.trace = Trace(source="simulator")
        self.versions = dict.fromkeys(graph.variables, 0)
        #: values of the counters: global steps, local steps
        self.counters = {name: 0 for name, v in graph.variables.items() if v.counter}

    # -- resources --------------------------------------------------------------------------
    def initial_tokens(self, name: str, put: Put) -> None:
        """A queue's tokens at the start, as one enqueue before anything ran."""
        self.trace.resources.append(
            ResourceEvent(
                name, ENQUEUE.name, f"{name}/initial_tokens", "", 0, 0.0, put.value, put.amount
            )
        )

    def counter_read(self, op: Op) -> int:
        """The value an op puts: the first counter it reads (a worker's local step, the global
        step), 0 if none."""
        return next((self.counters[v] for v in op.reads if v in self.counters), 0)

    def put(self, run: Run, op: Op, action: Action, put: Put, time: float) -> None:
        self.trace.resources.append(
            ResourceEvent(
                str(op.resource),
                action.name,
                op.name,
                run.plan.name,
                run.step,
                time,
                put.value,
                put.amount,
                put.accepted,
            )
        )

    def got(self, run: Run, op: Op, action: Action, got: Got[Arrived], time: float) -> None:
        resource, client = str(op.resource), run.plan.name
        self.trace.resources.append(
            ResourceEvent(resource, action.name, op.name, client, run.step, time, *got[:2])
        )

    # -- ops and tensors --------------------------------------------------------------------
    def executed(self, execution: Execution, end: float) -> None:
        """An op's execution (with detail only)."""
        run, planned = execution.run, execution.planned
        self.trace.ops.append(
            OpRecord(
                *planned.record,  # the op's name, kind and devices
                run.plan.name,
                run.step,
                execution.ready,
                execution.start,
                end,
                tuple(run.arrivals[planned.index]),
                None,
                execution.blocked,
            )
        )

    def transferred(self, transfer: Transfer, end: float, arrival: float) -> None:
        """A tensor's journey to another device (with detail only)."""
        run, source = transfer.run, transfer.planned.op
        target = run.plan.ops[transfer.output.dst].op
        self.trace.transfers.append(
            TransferRecord(
                source.name,
                target.name,
                source.device,
                target.device,
                transfer.output.nbytes,
                run.plan.name,
                run.step,
                transfer.start,
                end,
                arrival,
            )
        )

    # -- variables --------------------------------------------------------------------------
    def reads(self, run: Run, op: Op, time: float) -> None:
        """The versions ``op`` sees as it starts; the run keeps the first it saw of each."""
        versions = self.versions
        self.trace.reads.append(
            Read(run.plan.name, run.step, op.name, tuple([versions[v] for v in op.reads]))
        )
        for variable in op.reads:
            run.read_versions.setdefault(variable, versions[variable])
            if self.detail:
                self._access(run, op, variable, time, write=False)

    def update(self, run: Run, op: Op, time: float) -> bool:
        """Write the ledger line of an update about to land; False if it is dropped."""
        variable = op.writes[0]
        before = self.versions[variable]
        read = run.read_versions.get(variable, before)
        applied = bool(fresh_enough(before, read, op.max_staleness))
        self.trace.updates.append(
            Update(run.plan.name, run.step, op.name, read, before, applied, time)
        )
        return applied

    def writes(self, run: Run, op: Op, time: float, token: int | None) -> None:
        """Bump the versions of what ``op`` writes; a counter takes ``token`` if given (a
        local step), else counts one more (a global step)."""
        for variable in op.writes:
            self.versions[variable] += 1
            if variable in self.counters:
                self.counters[variable] = self.counters[variable] + 1 if token is None else token
            if self.detail:
                self._access(run, op, variable, time, write=True)

    def _access(self, run: Run, op: Op, variable: str, time: float, write: bool) -> None:
        """The detail record of a read (the version seen) or a write (the version made)."""
        self.trace.accesses.append(
            VariableAccess(
                variable, op.name, run.plan.name, run.step, time, self.versions[variable], write
            )
        )
