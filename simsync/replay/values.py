"""Numerics as a replay of a trace: the values follow from the order of reads and writes.

An executor (the SimPy engine, or TensorFlow) decides *when* every read, write, push and take
happened; values never change that order in these graphs (there is no data-dependent control
flow). So the values of a run are computed afterwards, from the trace alone, by this one
replay, whichever executor wrote the trace:

1. Start every variable at its initial value (version 0): the model's parameters, and the
   variables that hold numbers no gradient moves (moving statistics, written by their own
   update ops); counters carry no value.
2. Walk the ledger of updates in the order they landed (each variable's versions in the
   order they were made). For each applied one, evaluate the
   apply op of its run: its inputs are evaluated first, op by op with each kind's numpy rule
   (:mod:`simsync.kinds`); a ``read`` gives the variables at the versions that run recorded, a
   ``take`` the mean of the gradients its accumulator accepted since the last take (in the
   order of the accumulator's events). The apply's value is the next version of each variable
   it writes (:func:`~simsync.kinds.apply.sgd_step`). Dropped updates change nothing.
3. Every run's loss is the mean of its forward ops' losses; runs whose gradients were never
   applied (dropped, or pushed stale) still have one.

Ops of one kind that are ready together are evaluated in one batch (a kind's ``numpy_batch``):
the towers of a synchronous step, which read one version, in one pass; and, looking ahead in
the ledger, the gradients of updates whose read versions already exist, as asynchronous workers
need them.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simsync.errors import SimsyncError, SimulationError
from simsync.ir import Graph, Op
from simsync.kinds.contract import Inputs, OpLike
from simsync.numerics import ModelSpec, batch_source, init_params
from simsync.replay.context import RunContext, RunKey, RunOp, Versions
from simsync.replay.index import replay_index
from simsync.trace import Trace, takes

__all__ = ["Replayed", "replay"]

#: A loss above this is divergence even while it is finite (cross-entropy of a model with
#: exploding logits grows linearly, never to infinity).
DIVERGED = 1e6
#: How many ledger lines ahead the replay looks for gradients it can batch.
LOOKAHEAD = 256


@dataclass
class Replayed:
    """What a replay computed: every trainable variable's final value, each run's loss, and
    the final value of every other variable that holds numbers (moving statistics)."""

    params: dict[str, np.ndarray]
    losses: dict[RunKey, float]
    values: dict[str, np.ndarray] = field(default_factory=dict)


def replay(graph: Graph, trace: Trace, spec: ModelSpec, seed: int) -> Replayed:
    """Replay ``trace`` of ``graph`` through the numpy model ``spec`` initialised from ``seed``.

    Raises :class:`~simsync.errors.SimsyncError` when the ledger cannot be replayed (a version
    made twice or skipped, a take that does not match its accumulator's pushes), and
    :class:`~simsync.errors.SimulationError` when the loss diverges.

    >>> from simsync.simulation import simulate
    >>> from simsync.scenario import ClusterConfig, ComputeConfig, Scenario, TrainingConfig
    >>> sim = simulate(Scenario("a", cluster=ClusterConfig(devices=3),
    ...                         compute=ComputeConfig("exponential", 0.01),
    ...                         training=TrainingConfig(mode="async")).with_run(steps=20))
    >>> again = replay(sim.graph, sim.trace, sim.scenario.model, 0)
    >>> max(float(abs(again.params[n] - v).max()) for n, v in sim.trace.params.items())
    0.0
    """
    return _Replay(graph, trace, spec, seed).run()


def _mean(losses: list[float]) -> float:
    """The mean of a run's losses (one loss is its own mean: no numpy call)."""
    return float(losses[0]) if len(losses) == 1 else float(np.mean(losses))


class _Replay:
    """The replay of one trace: the graph's :class:`~simsync.replay.index.ReplayIndex`
    (made once per graph) and this trace's state (the variables' versions, the runs being
    evaluated, their losses, what the trace says each run read and took)."""

    def __init__(self, graph: Graph, trace: Trace, spec: ModelSpec, seed: int) -> None:
        self.graph, self.trace, self.spec, self.seed = graph, trace, spec, seed
        index = replay_index(graph)
        # the index's, bound here: the rules' hot paths read them
        self.index, self.ops, self.inputs = index.client_index, index.ops, index.inputs
        self.op_of, self.written, self.kind_of = index.op_of, index.written, index.kind_of
        self.about, self.no_inputs = index.about, index.no_inputs
        self.positions, self.parameter_of = index.positions, index.parameter_of
        self.trainable, self.reads_model = index.trainable, index.reads_model
        self.model_reads = index.model_reads
        initial = init_params(spec, seed)
        self.state = {
            name: Versions(
                initial[v.model_parameter].copy()
                if v.trainable
                else np.full(v.shape, v.initial or 0.0)
            )
            for name, v in graph.variables.items()
            if not v.counter
        }
        #: the runs being evaluated: their values and batches
        self.runs: dict[RunKey, RunContext] = {}
        self.batches_of = batch_source(spec, seed)
        #: per tuple of variables an op reads, those that hold numbers (not counters)
        self.numbered: dict[tuple[str, ...], tuple[str, ...]] = {}
        self.read_dicts: dict[tuple[tuple[str, ...], tuple[int, ...]], dict[str, np.ndarray]] = {}
        self.losses: dict[RunKey, list[float]] = defaultdict(list)
        #: per read op of a run whose read ops saw a variable at several versions, the
        #: versions it saw of the variables that hold numbers (other runs: ``versions``)
        self.op_versions: dict[RunOp, dict[str, int]] = {}
        #: per run, the versions some read op of it saw besides those in ``versions``
        self.other_versions: dict[RunKey, list[tuple[str, int]]] = defaultdict(list)
        #: per run, the version of each variable it read (its last read op's)
        self.versions = self._versions_read()
        self.takes = self._takes()
        #: per run, the runs whose pushes its takes average
        self.pushers: dict[RunKey, set[RunKey]] = defaultdict(set)
        for (run, _), pushes in self.takes.items():
            self.pushers[run].update(p[0] for p in pushes)
        #: per run, the applies and accepted pushes still to replay: its values are dropped at 0
        self.effects_left: Counter[RunKey] = Counter(
            (u.client, u.step) for u in trace.updates if u.applied
        )
        self.effects_left.update(p[0] for pushes in self.takes.values() for p in pushes)
        #: per run, its read ops not evaluated yet: the versions it read are released at 0
        self.reads_left: dict[RunKey, int] = {}

    # -- what the trace says ----------------------------------------------------------------
    def _versions_read(self) -> dict[RunKey, dict[str, int]]:
        """Per run that reads model variables, the version of each it read: from its read
        records; else (a TensorFlow ledger fetched on untraced runs) the version its update
        read. Each such version is kept until the run's reads have been evaluated."""
        readers = {client: bool(count) for client, count in self.model_reads.items()}
        state, op_of = self.state, self.op_of
        runs: dict[RunKey, dict[str, int]] = defaultdict(dict)
        for client, step, op, read, *_ in self.trace.updates:
            if readers[client]:
                versions = runs[client, step]
                for variable in op_of[op].writes:
                    versions.setdefault(variable, read)
        first: dict[RunKey, list[tuple[str, int]]] = {}
        mixed: set[RunKey] = set()  # runs whose read ops saw a variable at several versions
        for client, step, op, seen in self.trace.reads:
            numbered = [(v, n) for v, n in zip(op_of[op].reads, seen, strict=True) if v in state]
            if numbered:
                run = client, step
                versions = runs[run]
                earlier = first.setdefault(run, numbered)
                differs = earlier is not numbered and earlier != numbered  # the usual: equal
                if differs and any(versions.get(v, n) != n for v, n in numbered):
                    mixed.add(run)
                versions.update(numbered)
        if mixed:  # there, each read op keeps the versions it saw
            for client, step, op, seen in self.trace.reads:
                if (client, step) in mixed:
                    self.op_versions[(client, step), op] = {
                        v: n for v, n in zip(op_of[op].reads, seen, strict=True) if v in state
                    }
        for versions in runs.values():
            for variable, version in versions.items():
                if variable in state:
                    state[variable].readers[version] += 1
        # a run whose read ops saw a variable at several versions (a write landed between
        # them) keeps the others too
        for (run, _), saw in self.op_versions.items():
            for variable, version in saw.items():
                held = self.other_versions[run]
                if runs[run][variable] != version and (variable, version) not in held:
                    held.append((variable, version))
                    state[variable].readers[version] += 1
        return runs

    def _takes(self) -> dict[RunOp, list[RunOp]]:
        """For every take, the accepted pushes it averaged (:func:`simsync.trace.takes`: those
        its accumulator accepted since its previous take), which must be as many as it took."""
        found: dict[RunOp, list[RunOp]] = {}
        for take, pushes in takes(self.trace.resources):
            if len(pushes) != take.amount:
                raise SimsyncError(
                    f"the ledger cannot be replayed: {take.op} ({take.client} step "
                    f"{take.step}) took {take.amount} gradients from {take.resource}, "
                    f"but {len(pushes)} were accepted since the take before"
                )
            found[(take.client, take.step), take.op] = [((p.client, p.step), p.op) for p in pushes]
        return found

    # -- the replay -------------------------------------------------------------------------
    def run(self) -> Replayed:
        ledger = self._ledger()
        with np.errstate(over="ignore", invalid="ignore"):  # divergence is reported by _loss
            position = 0
            while position < len(ledger):
                update = ledger[position]
                run = (update.client, update.step)
                if self._missing(run, update.op):
                    self._lookahead(ledger, position)
                chained = self._chain(ledger, position)
                if chained:
                    position += chained
                    continue
                self._apply(run, update.op, update.before)
                position += 1
            self._all_losses()
        final = {name: state.values[state.version].copy() for name, state in self.state.items()}
        variables = self.graph.variables
        return Replayed(
            {name: value for name, value in final.items() if variables[name].trainable},
            {run: _mean(ls) for run, ls in self.losses.items()},
            {name: value for name, value in final.items() if not variables[name].trainable},
        )

    def _ledger(self) -> list[Any]:
        """The applied updates in the order they landed: as recorded, except that the updates
        of each variable go by the version each made (threads may record out of order)."""
        ledger = [u for u in self.trace.updates if u.applied]
        slots: dict[str, list[int]] = defaultdict(list)
        for position, update in enumerate(ledger):
            slots[self.op_of[update.op].writes[0]].append(position)
        ordered = list(ledger)
        for positions in slots.values():
            by_version = sorted((ledger[p] for p in positions), key=lambda u: u.before)
            for position, update in zip(positions, by_version, strict=True):
                ordered[position] = update
        return ordered

    def _apply(self, run: RunKey, name: str, before: int) -> None:
        op = self.op_of[name]
        written = [v for v in op.writes if v in self.state]
        for variable in written:
            state = self.state[variable]
            if state.version != before:
                raise SimsyncError(
                    f"the ledger cannot be replayed: {name} ({run[0]} step {run[1]}) "
                    f"landed on version {before} of {variable}, which is at version "
                    f"{state.version} in the order of the ledger (a version made twice, or one "
                    f"missing)"
                )
        rule = self.kind_of[name].numpy
        if rule is None:
            if written:  # the check refuses it, or skips the values (a generic op)
                raise SimsyncError(f"op '{name}' writes variables, but its kind has no numpy rule")
            self._done_with(run)  # it moved counters only
            return
        missing = self._missing(run, name)
        if missing:
            self._evaluate(missing)
        context = self._context(run)
        new = rule(context, op, self._inputs(context, name))
        for variable in written:
            state = self.state[variable]
            state.version += 1
            state.values[state.version] = new[variable]
            if state.readers[state.version - 1] <= 0:
                state.values.pop(state.version - 1, None)
        self._done_with(run)

    def _chain(self, ledger: list[Any], position: int) -> int:
        """Apply as one numpy pass (the kind's ``numpy_chain``) the coming updates that land one
        after another on the same variables with their gradients already evaluated (the
        asynchronous workers' applies after a lookahead); how many it applied (none when fewer
        than two qualify: :meth:`_apply` takes one)."""
        first = ledger[position]
        kind, written = self.kind_of[first.op], self.written[first.op]
        state = self.state
        if kind.numpy_chain is None or not written:
            return 0
        if any(state[variable].version != first.before for variable in written):
            return 0  # _apply says why
        runs: list[RunKey] = []
        for update in ledger[position : position + LOOKAHEAD]:
            run = (update.client, update.step)
            if (
                self.kind_of[update.op] is not kind
                or self.written[update.op] != written
                or update.before != first.before + len(runs)
                or self._missing(run, update.op)
            ):
                break
            runs.append(run)
        if len(runs) < 2:
            return 0
        names = [update.op for update in ledger[position : position + len(runs)]]
        contexts = [self._context(run) for run in runs]
        inputs = [self._inputs(c, name) for c, name in zip(contexts, names, strict=True)]
        chain = kind.numpy_chain(contexts, [self.op_of[name] for name in names], inputs)
        for variable in written:
            versions = state[variable]
            for value in chain[variable]:  # version by version, as _apply lands them
                versions.version += 1
                # a copy: a version kept for a slow reader keeps no other of the chain alive
                versions.values[versions.version] = value.copy()
                if versions.readers[versions.version - 1] <= 0:
                    versions.values.pop(versions.version - 1, None)
        for run in runs:
            self._done_with(run)
        return len(runs)

    def _inputs(self, context: RunContext, name: str) -> Inputs:
        """The inputs of op ``name`` in the run of ``context``, all evaluated."""
        op, sources, froms, positions = self.about[name]
        values = context.values
        return Inputs.of(op, froms, [values[src] for src in sources], positions)

    def _done_with(self, run: RunKey) -> None:
        """One effect of ``run`` replayed; its values go when none is left."""
        self.effects_left[run] -= 1
        if self.effects_left[run] <= 0:
            self._forget(run)

    def _forget(self, run: RunKey) -> None:
        self.runs.pop(run, None)

    def _context(self, run: RunKey) -> RunContext:
        context = self.runs.get(run)
        if context is None:
            context = self.runs[run] = RunContext(self, run)
        return context

    def _missing(self, run: RunKey, name: str) -> list[RunOp]:
        """The inputs of ``name`` in ``run`` not evaluated yet."""
        context = self.runs.get(run)
        values = context.values if context is not None else ()
        return [(run, src) for src in self.inputs[name] if src not in values]

    def _lookahead(self, ledger: list[Any], position: int) -> None:
        """Evaluate together the inputs of the coming applies whose read versions exist."""
        ready: list[RunOp] = []
        for update in ledger[position : position + LOOKAHEAD]:
            run = (update.client, update.step)
            if not self._readable(run):
                break
            ready += self._missing(run, update.op)
        self._evaluate(ready)

    def _readable(self, run: RunKey) -> bool:
        """Whether every version ``run`` needs exists: those it read, and those read by the
        runs whose pushes its takes average."""
        state, versions, others = self.state, self.versions, self.other_versions
        for needed in (run, *self.pushers.get(run, ())):
            for v, version in versions.get(needed, {}).items():
                if v in state and state[v].version < version:
                    return False
            if needed in others and any(state[v].version < n for v, n in others[needed]):
                return False
        return True

    def _all_losses(self) -> None:
        """Evaluate the forward ops of every run that has no loss yet, in batches."""
        missing = [
            ((s.client, s.step), name)
            for s in self.trace.steps
            if (s.client, s.step) not in self.losses
            for name in self.ops[s.client]
            if self.kind_of[name].carries_loss
        ]
        for start in range(0, len(missing), LOOKAHEAD):
            chunk = missing[start : start + LOOKAHEAD]
            self._evaluate(chunk)
            for run, _ in chunk:
                if self.effects_left[run] <= 0:
                    self._forget(run)

    def _evaluate(self, run_ops: Iterable[RunOp]) -> None:
        """Evaluate ``run_ops`` and whatever they need first: those not evaluated yet, then
        their inputs (and the pushes their takes average), level by level until nothing is
        missing; then from the deepest level up, kind by kind in batches."""
        levels, inputs, pushes_of = [], self.inputs, self.takes
        todo = self._unevaluated(run_ops)
        while todo:
            levels.append(todo)
            needed = [(run, src) for run, name in todo for src in inputs[name]]
            if pushes_of:
                needed += [p for n in todo for p in pushes_of.get(n, ())]
            todo = self._unevaluated(needed)
        kind_of = self.kind_of
        for depth, level in enumerate(reversed(levels)):
            groups: dict[str, list[RunOp]] = {}
            # an op of a run also an input of another was evaluated at a deeper level (the
            # deepest level was just found unevaluated)
            for run_op in self._unevaluated(level) if depth else level:
                groups.setdefault(kind_of[run_op[1]].name, []).append(run_op)
            for group in groups.values():
                self._evaluate_kind(group)

    def _unevaluated(self, run_ops: Iterable[RunOp]) -> list[RunOp]:
        """``run_ops`` without repeats, less those already evaluated."""
        runs, todo = self.runs, []
        for run_op in dict.fromkeys(run_ops):
            context = runs.get(run_op[0])
            if context is None or run_op[1] not in context.values:
                todo.append(run_op)
        return todo

    def _evaluate_kind(self, run_ops: list[RunOp]) -> None:
        """Evaluate ``run_ops``, all of one kind, with the kind's batch rule if it has one."""
        kind, runs, about = self.kind_of[run_ops[0][1]], self.runs, self.about
        contexts: list[RunContext] = []
        ops: list[Op] = []
        inputs: list[Inputs] = []
        for run, name in run_ops:
            context = runs.get(run)
            if context is None:
                context = runs[run] = RunContext(self, run)
            op, sources, froms, positions = about[name]
            contexts.append(context)
            ops.append(op)
            if sources:
                values = context.values
                inputs.append(Inputs.of(op, froms, [values[src] for src in sources], positions))
            else:
                inputs.append(self.no_inputs[name])
        if kind.numpy_batch is not None:
            results = kind.numpy_batch(contexts, ops, inputs)
        elif kind.numpy is not None:
            results = [kind.numpy(*args) for args in zip(contexts, ops, inputs, strict=True)]
        else:
            results = [None] * len(run_ops)
        reads_model, loss = self.reads_model, kind.carries_loss
        for context, (run, name), value in zip(contexts, run_ops, results, strict=True):
            context.values[name] = value
            if loss:
                self._loss(run, name, value.loss)
            if reads_model[name]:
                self._read_done(run)

    def _loss(self, run: RunKey, op: str, loss: float) -> None:
        if not math.isfinite(loss) or loss > DIVERGED:
            raise SimulationError(
                f"the loss diverged at step {run[1]} on {op} (it is {loss:.4g}); "
                f"lower [model] learning_rate (now {self.spec.learning_rate})"
            )
        self.losses[run].append(loss)

    def _read_done(self, run: RunKey) -> None:
        """One more read op of the run evaluated; after its last, the versions it read may go."""
        left = self.reads_left.get(run, self.model_reads[run[0]]) - 1
        self.reads_left[run] = left
        if left == 0:
            state = self.state
            for variable, version in self.versions.get(run, {}).items():
                if variable in state:
                    state[variable].release(version)
            for variable, version in self.other_versions.pop(run, ()):
                state[variable].release(version)

    # -- asked by the rules -----------------------------------------------------------------
    def value_read(self, run: RunKey, variable: str, version: int | None) -> np.ndarray:
        """The variable at ``version``, which ``run`` read."""
        client, step = run
        if version is None:
            raise SimsyncError(
                f"the ledger cannot be replayed: {client} step {step} reads {variable}, but the "
                f"trace says nothing of the version it saw"
            )
        try:
            return self.state[variable].values[version]
        except KeyError:
            raise SimsyncError(
                f"the ledger cannot be replayed: {client} step {step} read version {version} "
                f"of {variable} before it was made"
            ) from None

    def parameters_read(self, run: RunKey, op: OpLike) -> dict[str, np.ndarray]:
        variables = op.reads
        names = self.numbered.get(variables)
        if names is None:
            names = self.numbered[variables] = tuple(v for v in variables if v in self.state)
        versions = (self.op_versions and self.op_versions.get((run, op.name))) or self.versions.get(
            run, {}
        )
        seen = tuple([versions.get(v, -1) for v in names])
        key = (names, seen)
        found = self.read_dicts.get(key)
        if found is None:
            if len(self.read_dicts) > 4 * LOOKAHEAD:  # old versions are not read again
                self.read_dicts.clear()
            found = {self.parameter_of[v]: self.value_read(run, v, versions.get(v)) for v in names}
            self.read_dicts[key] = found
        return found

    def taken(self, run_op: RunOp) -> list[Any]:
        pushes = self.takes.get(run_op)
        if pushes is None:
            (client, step), op = run_op
            raise SimsyncError(
                f"the ledger cannot be replayed: no take by {client} step "
                f"{step} in {op}'s accumulator events"
            )
        values = [self._context(run).values.pop(name) for run, name in pushes]
        for run, _ in pushes:
            self._done_with(run)
        return values
