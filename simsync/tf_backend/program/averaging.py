"""Whether each update of a graded program's variables averages its towers, read off its
values: in the process that loaded the program's exported graph and runs none of its code.

A graph's structure says which towers' data an update computes with, not how much each
weighs: ``tf.concat(grads, 0)[0]`` and ``g0 + 0.0 * g1`` take every tower's data and use one
tower's only. Their values tell. The probe (:func:`probe_averaging`):

1. **Towers and their data.** The towers of the step's ops
   (:func:`~simsync.tf_backend.program.towers.find_towers`, as the import finds them), and
   where data enters each tower: a number tensor that a tower's op takes from outside the
   tower, or from a source inside it (a dequeue, a random op, a placeholder), made from no
   variable (a variable's value is the model, not data). Each tower's entries pair with the
   others' in the order they were made, of the same shapes and types. Refused: towers
   built unlike each other (other op kinds, constants or settings); data that several
   towers take (a batch each tower cuts its own part of, a number drawn once a step), which
   the measuring could not change tower by tower; data a placeholder brings (graded, it is
   fed zeros); data from state that is no queue, random op or iterator (a lookup table).
2. **The updates and their way.** Every op of the step that writes a variable, however its
   handle reached it (:func:`~simsync.tf_backend.program.capture.variables_written`), and
   its inputs that compute with a tower's data. On their way back to the towers' data there
   may be only the model (the variables the updates write) and computation: an op that
   reads other state (a counter of its runs, a clock, random numbers after the towers) or
   data not fed as a tower's (a placeholder) is refused, as it could tell the measuring
   runs from training; so is a write through a handle that is none of the graph's
   variables, a write inside a function's call, and an op that keeps what the towers
   computed elsewhere than in a variable (a table's insert, a stack's push).
3. **Batches.** One run takes every entry's value: ``B_i``, tower ``i``'s batch (the
   program's own data; random numbers where every tower got the same, as zeros fed to a
   placeholder are).
4. **Probes**, in an order drawn at random, each run feeding the entries and fetching every
   update's inputs: tower ``i`` fed ``B_i`` (twice: the first and last of the same data
   must be equal), the towers' batches rotated and two towers' swapped (a mean does not
   change), and, for each ``j``, every tower fed ``B_j`` (``V_j``). No variable is written:
   only an update's inputs run.
5. **Weights.** For each update, ``V`` (the towers fed their own batches) as the weighted sum
   ``sum c_j V_j`` that fits it best (least squares). If the update is ``sum w_i g(B_i)``,
   where ``g`` is a tower's gradient of its batch, then ``V_j = W g(B_j)`` (``W = sum w_i``)
   and ``c_j = w_j / W``: the mean (and a sum) have every ``c_j = 1/N``; ``concat[0]`` has
   ``1, 0, 0, 0``. What no weighted sum fits (a nonlinear mix) shows in the residual. An
   update of fewer values than towers (a scalar) is judged by the weights that fit every
   update at once.
6. **Weights the data carries.** Steps 3 to 5 fit any update ``sum h(B_i)`` whose ``h``
   depends on the batch only, even where ``h`` scales a tower's gradient by something in its
   batch (a column of each tower's own number): its weight goes where its batch goes. So
   the probe takes :data:`DATA_STEPS` steps of each tower's own data and, for each, the size
   of the updates with every tower fed that batch: across steps, the tower whose data
   weighs more shows (:func:`_data_weights`), as does a weight that changes at random.
7. **The given model.** A weight the data carries may also turn a gradient (the sign of a
   value in the batch) and keep its size. Where the assignment's reference solution is
   given (its export, loaded beside the program's), each update is compared, batch by
   batch, with the given model's gradient of the same batch at the same variable values
   (:func:`_given_model`): the towers must take the given model's data, made as the given
   code makes it (:func:`_pipeline`), read no variable the given model's towers do not,
   and each update must follow the given model's gradient. Then the whole step, which
   applies the updates with the program's settings (a learning rate), runs beside the
   given model's from the same values and batches (:func:`_descent`): it must go downhill
   with it, and by a step not much smaller. A setting made with a clock, random numbers or
   a queue is refused (:func:`_settings_drawn`).
8. **A training.** The program trains :data:`TRAINED` steps on its own data, each step's
   update inputs computed again as a student's own session computes them (:class:`_Twin`)
   and, with the given model, beside its gradient of the same batches
   (:func:`_trained_alike`): what arms for rare batches arms here about as often as in a
   training of that many steps.

The parent (:func:`simsync.grading.rubric.structure`, key ``updates_average_towers``)
judges the numbers, checked whole (:class:`~simsync.sandbox.wire.Averaging`).
"""

from __future__ import annotations

import concurrent.futures
import functools
import hashlib
import math
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simsync.tf_backend.program.capture import (
    HANDLE_READS,
    VARIABLE_OPS,
    WRITE_WORDS,
    Loop,
    Observer,
    calls_state,
    calls_write,
    carried_variable,
    implemented_otherwise,
    is_handle,
    program_device,
    runs_functions,
    upstream,
    variables_written,
)
from simsync.tf_backend.program.towers import find_towers

__all__ = ["probe_averaging"]

#: an update's tower inputs whose weights cannot be told apart: the smallest singular
#: value of the towers' values is less than this share of the largest
SEPARABLE = 1e-6
#: steps of each tower's own data the probe takes, to see whether a tower's data weighs
#: more in the updates than another's (:func:`_data_weights`)
DATA_STEPS = 5


def probe_averaging(loop: Loop, given: Loop | None = None) -> dict[str, Any]:
    """The weights each update of ``loop``'s step gives its towers (see the module's
    docstring): ``{"towers": N, "updates": [{"op", "weights", "joint", "finite",
    "residual", "permuted", "repeated"}], "problem": None}``, or a ``problem`` (one line)
    when they cannot be measured; with ``given`` (the given model's loop), how each update
    compares with the given model's gradient (:func:`_given_model`, key ``given``)."""
    try:
        return _probe(loop, given)
    except np.linalg.LinAlgError:  # finite numbers too large for numpy's least squares
        return {
            "towers": 0,
            "updates": [],
            "problem": "its updates' values are too large to measure (does the step diverge: "
            "a learning rate or a momentum too large?)",
        }


def _probe(loop: Loop, given: Loop | None) -> dict[str, Any]:
    """:func:`probe_averaging`'s measuring."""
    step, order, towers = _step(loop)
    calls = list(loop.calls.values())
    found: dict[str, Any] = {"towers": towers.count, "updates": [], "problem": None}
    if towers.count < 2:
        found["problem"] = "its training step has no towers to average"
        return found
    reaches = _reaching(step, towers)
    updates = _updates(step, reaches)
    if not updates:
        found["problem"] = "no update of a variable computes with a tower's data"
        return found
    entries, shared, problem = _entries(step, towers, order)
    flat = [tensor for tensors in entries for tensor in tensors]
    problem = (
        _shared_data(shared)
        or _entry_sources(flat)
        or problem
        or _unlike_towers(step, towers)
        or _hidden_writes(step)
        or _kept_elsewhere(step, reaches)
        or _state(step, towers, reaches, {t.name for t in flat})
        or _settings_drawn(step, reaches)
    )
    if problem is not None:
        found["problem"] = problem
        return found
    base: dict[Any, Any] = {}
    for call in calls:
        base.update(call.feed_dict or {})

    def run(fetches: list[Any], feed: dict[Any, Any]) -> list[Any]:
        return list(loop.observer.real_run(loop.session, fetches, feed_dict={**base, **feed}))

    n, width = towers.count, len(entries[0])
    rng = np.random.default_rng(int.from_bytes(os.urandom(8), "little"))
    steps = []  # each tower's batch, of DATA_STEPS steps of the program's own data
    for _ in range(DATA_STEPS):
        taken = run(flat, {})
        steps.append([taken[i * width : (i + 1) * width] for i in range(n)])
    batches = steps[0]
    drawn = all(_same(batches[0], batch) for batch in batches[1:])
    if drawn:  # zeros fed to every tower: random numbers instead, alike for every tower
        steps = [[_drawn(batch, rng) for batch in step] for step in steps]
        batches = steps[0]
        if all(_same(batches[0], batch) for batch in batches[1:]):
            found["problem"] = (
                "every tower is given the same data, of integers only: their gradients "
                "cannot be told apart"
            )
            return found
    fetched = [tensor for _, tensors in updates for tensor in tensors]
    swapped = [1, 0, *range(2, n)]

    def fed(assigned: list[int], given: list[list[Any]] | None = None) -> dict[Any, Any]:
        chosen = batches if given is None else given
        return {
            tensor: chosen[assigned[tower]][k]
            for tower, tensors in enumerate(entries)
            for k, tensor in enumerate(tensors)
        }

    probes: list[tuple[str, list[int]]] = [
        ("own", list(range(n))),
        ("again", list(range(n))),
        ("rotated", [(i + 1) % n for i in range(n)]),
        ("swapped", swapped),
        *((f"every {j}", [j] * n) for j in range(n)),
    ]
    values: dict[str, list[np.ndarray]] = {}
    for probe in rng.permutation(len(probes)):
        name, assigned = probes[probe]
        values[name] = _flat(run(fetched, fed(assigned)))
    parts, start = [], 0
    for _, tensors in updates:
        parts.append(slice(start, start + len(tensors)))
        start += len(tensors)

    def joined(name: str, part: slice) -> np.ndarray:
        return np.concatenate(values[name][part])

    written = {t.name: t for op in step if variables_written(op) for t in op.inputs}
    # every input of the updates but a handle: their settings and indices too
    inputs = [t for t in written.values() if _number(t) and not is_handle(t.dtype.name)]
    # the model, and the inputs of its writes (a race there is the student's training's)
    model = _model_of(loop, updates)
    of_model = {t.name for op in step if set(model) & set(variables_written(op)) for t in op.inputs}
    try:
        twin = _twin(loop, flat, base, [value for batch in batches for value in batch])
    except Exception as error:  # whatever TensorFlow raises, said in a line
        return {**found, "updates": [], "problem": f"{UNTWINNED}: {type(error).__name__}"}
    try:
        data = [
            ({**base, **fed(list(range(n)), later)}, [value for batch in later for value in batch])
            for later in steps
        ]  # every tower its own batch, of each step taken

        import tensorflow as tf

        waited = tf.compat.v1.RunOptions(timeout_in_ms=TAKEN_MS)  # made once

        def take(reads: list[Any]) -> tuple[list[list[Any]], list[Any]] | None:
            """Every tower's next batch of the program's own data, and the values of
            ``reads``; None when the data ran out."""
            taken = _taken(loop, [*flat, *reads], base, waited)
            if taken is None:
                return None
            batch = [taken[i * width : (i + 1) * width] for i in range(n)]
            return [_drawn(b, rng) for b in batch] if drawn else batch, taken[len(flat) :]

        mine = (step, towers, updates, entries[0])
        follow = None if given is None else _following(loop, given, mine)
        rewritten = _rewritten(loop, twin, inputs, data) or _trained_alike(
            loop,
            twin,
            inputs,
            step,
            (take, lambda later: {**base, **fed(list(range(n)), later)}),
            follow,
            model,
            [t.name in of_model for t in inputs],
        )
        if rewritten is not None:
            return {**found, "updates": [], "problem": rewritten}
        measured = [{name: joined(name, part) for name in values} for part in parts]
        joint = _joint_weights([(m["own"], [m[f"every {j}"] for j in range(n)]) for m in measured])
        for (op, _), m in zip(updates, measured, strict=True):
            permuted = [m["rotated"], m["swapped"]]
            every = [m[f"every {j}"] for j in range(n)]
            found["updates"].append(_weights(op, m["own"], m["again"], permuted, every, joint))
        alike = [[values[f"every {j}"] for j in range(n)]]  # every tower fed one tower's batch
        for later in steps[1:]:  # of each later step
            alike.append([_flat(run(fetched, fed([j] * n, later))) for j in range(n)])
        sizes = np.asarray([[_size(flat) for flat in row] for row in alike])
        found["data_weights"], found["data_noise"] = _data_weights(sizes)
        own = {**base, **fed(list(range(n)))}  # every tower its own batch
        beside = _written_beside(loop, step, updates, own)
        if beside is not None:
            return {**found, "updates": [], "problem": beside}
        if given is not None:

            def again(batches: list[list[Any]]) -> list[list[list[np.ndarray]]]:
                """Every tower fed each of ``batches`` in turn, at the variables' values now."""
                return [[_flat(run(fetched, fed([j] * n, batches))) for j in range(n)]]

            trained = None if follow is None else follow.problem
            found["given"] = _given_model(
                loop, given, mine, steps, alike, again, own, (twin, trained)
            )
        return found
    finally:
        twin.session.close()


#: how far a value computed with TensorFlow's graph rewriting may lie from the same value
#: computed without, relatively to the largest of its tensor (its fusions and reorderings
#: round otherwise, by far less)
REWRITTEN_TOLERANCE = 1e-3

#: of the steps :func:`_settings_turn` takes in a row, every how many the twin computes the
#: settings again (each count it sets, it computes them at)
TWIN_EVERY = 10
#: what a setting may not do at any count: compute otherwise with graph rewriting
REWRITTEN_ALIKE = "alike with and without TensorFlow's graph rewriting"
#: why the step could not be computed as a student's own session computes it
UNTWINNED = (
    "the step's updates could not be computed with TensorFlow's own graph rewriting (as a "
    "student's session does)"
)
#: what a step computes otherwise with TensorFlow's graph rewriting than without
REWRITTEN = (
    "the step's updates compute otherwise when TensorFlow rewrites the graph, as a "
    "student's own session does (Grappler: log(1 + x) becomes log1p(x), exp(x) - 1 becomes "
    "expm1(x)) than when it does not, as the measuring runs: compute the updates with ops "
    "whose values do not depend on it"
)
#: what a step computes otherwise from one run to the next, from the same values and batches
RACING = (
    "the step's updates compute otherwise from one run to the next, from the same values and "
    "batches: a read that the graph does not order against a write of the step sees the old "
    "value or the new one, whichever runs first; order them (tf.control_dependencies)"
)


@dataclass
class _Twin:
    """The program's graph as a student's own session computes it: a copy of the graph in a
    session with TensorFlow's default graph rewriting (Grappler), every tower's entry the
    read of a variable of its own, set to each batch. (A session's own options, mixed
    precision among them, live in the process that runs the program, whose word the grader
    does not take: the source rules refuse setting them.) What TensorFlow rewrites depends
    on the shapes it knows, and a fed tensor's it does not know, while a dequeue's or a
    variable's it does; the program's own feeds (``base``) are fed as its loop feeds
    them."""

    tf: Any
    observer: Observer
    copy: Any
    session: Any
    entries: list[str]  # the entries' variables, in the order their batches are given
    base: dict[str, Any]  # the program's own feeds, by tensor name
    setters: dict[tuple[str, ...], Callable[[list[Any]], None]] = field(default_factory=dict)

    def set(self, names: list[str], values: list[Any]) -> None:
        """Set the copy's variables ``names`` (their ops' names) to ``values``."""
        key = tuple(names)
        if key not in self.setters:
            run = functools.partial(self.observer.real_run, self.session)
            self.setters[key] = _setter(self.tf, self.copy, run, names)
        self.setters[key](values)

    def compute(self, tensors: list[Any], batches: list[Any] | None = None) -> list[np.ndarray]:
        """The values of ``tensors`` (the original graph's), every entry first set to its
        batch of ``batches`` (flat, in the entries' order) when given."""
        if batches is not None:
            self.set(self.entries, batches)
        ran = self.observer.real_run(self.session, [t.name for t in tensors], self.base)
        return _flat(ran)

    def compute_from(
        self,
        tensors: list[Any],
        names: list[str],
        values: list[Any],
        batches: list[Any] | None = None,
    ) -> list[np.ndarray]:
        """:meth:`compute` once the copy's variables ``names`` are set to ``values``."""
        self.set(names, values)
        return self.compute(tensors, batches)


@dataclass
class _Alone:
    """The update inputs (``fetched``) computed by themselves in the measuring session
    (``loop``'s), from given values of the variables they read (``names``), which are put
    back after: an input computed after the updates (the count of steps they gate) runs
    them. Its ops are made once."""

    loop: Loop
    fetched: list[Any]
    names: list[str]
    put: Callable[[list[Any]], None]
    reads: list[Any]

    @classmethod
    def of(cls, loop: Loop, fetched: list[Any]) -> _Alone:
        import tensorflow as tf

        names = _variables_read(fetched)
        put = _setter(tf, loop.graph, _runner(loop), names)
        return cls(loop, fetched, names, put, [_value_of(tf, loop.graph, n) for n in names])

    def now(self) -> list[Any]:
        """The values of the variables :attr:`names` now."""
        return list(self.loop.observer.real_run(self.loop.session, self.reads))

    def compute(self, feed: dict[Any, Any], values: list[Any]) -> list[np.ndarray]:
        """:attr:`fetched` on ``feed``, the variables first set to ``values``."""
        before = self.now()
        self.put(values)
        try:
            return _flat(self.loop.observer.real_run(self.loop.session, self.fetched, feed))
        finally:
            self.put(before)


def _twin(loop: Loop, entries: list[Any], base: dict[Any, Any], first: list[Any]) -> _Twin:
    """:class:`_Twin` of ``loop``'s graph: ``entries``, every tower's in order, become reads
    of variables set to ``first`` (flat, in that order); ``base`` is the program's own
    feeds. Raises what TensorFlow raises."""
    import tensorflow as tf

    graph, observer = loop.graph, loop.observer
    taken = {op.name for op in graph.get_operations()}
    copy, reads, names = tf.Graph(), {}, []
    with copy.as_default():
        for k, tensor in enumerate(entries):
            name = f"simsync_entry_{k}"
            while name in taken:
                name += "_"
            handle = tf.raw_ops.VarHandleOp(
                dtype=tensor.dtype, shape=tensor.shape, shared_name=name, name=name
            )
            reads[tensor.name] = tf.raw_ops.ReadVariableOp(resource=handle, dtype=tensor.dtype)
            names.append(handle.op.name)
        tf.graph_util.import_graph_def(graph.as_graph_def(), input_map=reads, name="")
    observer.rewriting = True
    try:
        session = tf.compat.v1.Session(graph=copy)
    finally:
        observer.rewriting = False
    fed = {graph.as_graph_element(key).name: value for key, value in base.items()}
    twin = _Twin(tf, observer, copy, session, names, fed)
    twin.set(names, first)
    return twin


def _rewritten(
    loop: Loop, twin: _Twin, fetched: list[Any], data: list[tuple[dict[Any, Any], list[Any]]]
) -> str | None:
    """Why the step's updates compute otherwise in a session that rewrites the graph as a
    student's own session does (``twin``, :class:`_Twin`) than in the measuring's, or None
    when they compute alike. Every input of the updates (``fetched``: what they write, their
    settings, a learning rate among them, and their indices; no handle) is computed in both,
    for each of ``data`` (the measuring's feed and the same batches, flat, for the twin),
    from the same values of the variables; each must agree within
    :data:`REWRITTEN_TOLERANCE`. A setting computed after the updates (Adam's powers of its
    decays) runs them in the measuring session: undone after each (:class:`_Alone`)."""
    alone = _Alone.of(loop, fetched)
    for feed, batches in data:
        values = alone.now()
        mine = functools.partial(alone.compute, feed, values)
        theirs = functools.partial(twin.compute_from, fetched, alone.names, values, batches)
        differs = _alike_once_raced(mine, theirs, mine(), theirs())
        if differs is not None:
            return differs
    return None


#: how many more times the two sessions compute a step's update inputs that differed, to
#: tell a read racing with the updates from rewriting
RACED_TRIES = 4


def _alike_once_raced(
    mine: Callable[[], list[np.ndarray]],
    theirs: Callable[[], list[np.ndarray]],
    first: list[np.ndarray],
    their_first: list[np.ndarray],
) -> str | None:
    """None when the measuring session's values of the update inputs (``first``, and
    ``mine()`` again) and the twin's (``their_first``, ``theirs()``) agree in some pair, in
    up to :data:`RACED_TRIES` more tries; else why not: :data:`RACING` when the measuring
    session's own tries differ (a race, which no pair happened to toss alike), else
    :data:`REWRITTEN`. An input computed after the updates (the count of steps they gate)
    runs them, and a read the graph does not order against them (a moving average of the
    variables) sees either value, in any session: a coin TensorFlow's scheduler tosses anew
    at each run, where a rewriting that computes otherwise does so every time (the
    twenty-fifth attack's race of a read against the step's own write was told of
    rewriting)."""
    seen, theirs_seen = [first], [their_first]
    for tried in range(RACED_TRIES + 1):
        if any(_alike(m, t) for m in seen for t in theirs_seen):
            return None
        if tried < RACED_TRIES:
            seen.append(mine())
            theirs_seen.append(theirs())
    return _told(seen, theirs_seen)


def _told(mine: list[list[np.ndarray]], theirs: list[list[np.ndarray]]) -> str:
    """Why two sessions' runs of the update inputs (each session's first run first) never
    agreed: :data:`RACING` when either session's runs differ from its own first (a coin its
    scheduler tosses anew each run), else :data:`REWRITTEN` (each computes alike every time,
    and otherwise than the other)."""
    for runs in (mine, theirs):
        if any(not _alike(runs[0], run) for run in runs[1:]):
            return RACING
    return REWRITTEN


def _alike(mine: list[np.ndarray], theirs: list[np.ndarray]) -> bool:
    """Whether every value of ``theirs`` is alike its own of ``mine`` (:func:`_differs`)."""
    return not any(_differs(m, t) for m, t in zip(mine, theirs, strict=True))


def _model_differs(
    measured: list[np.ndarray],
    computed: list[np.ndarray],
    of_model: list[bool],
    alone: Callable[[], list[np.ndarray]],
    twin: Callable[[], list[np.ndarray]],
) -> str | None:
    """Why the whole step's inputs of a write of the model (``of_model``: which of
    ``measured`` are) differ from the twin's, or None when they do not: no retry explains
    such a difference. A read the graph leaves unordered against the step's writes may race
    in a moving average (retried: :func:`_alike_once_raced`), but where it feeds the model's
    own update, the student's training takes the raced value now and then (the twenty-sixth
    attack turned a tower's gradient where a bias, read again, had already been applied:
    81 of 300 steps, and a retry of the inputs alone, which never race, passed it in 3 of 4
    gradings). Which of :data:`RACING` and :data:`REWRITTEN`: :func:`_told`, of the
    sessions run again :data:`RACED_TRIES` times each (the inputs alone, ``alone()``, in the
    measuring's, where an input gated on the updates runs them and races as the step does;
    ``twin()`` in the twin's)."""
    if not any(
        _differs(m, c) for m, c, model in zip(measured, computed, of_model, strict=True) if model
    ):
        return None
    again = range(RACED_TRIES)
    return _told([measured, *(alone() for _ in again)], [computed, *(twin() for _ in again)])


#: whole steps :func:`_trained_alike` trains, each on a batch of the program's own data: as
#: many as the given training loop takes (1,000)
TRAINED = 1000
#: how long a batch of the program's own data may take to come (a queue no thread fills)
TAKEN_MS = 10_000


def _trained_alike(
    loop: Loop,
    twin: _Twin,
    fetched: list[Any],
    step: list[Any],
    data: tuple[
        Callable[[list[Any]], tuple[list[list[Any]], list[Any]] | None],
        Callable[[list[list[Any]]], dict[Any, Any]],
    ],
    follow: _Following | None,
    model: list[str],
    of_model: list[bool],
) -> str | None:
    """Why the step's updates compute otherwise, at some step of a training of
    :data:`TRAINED` steps on the program's own data, in a session that rewrites the graph
    as a student's own session does (``twin``) than in the measuring's; None when they
    compute alike at every step. With ``follow``, each step is also compared with the given
    model's gradient of its batches, and why it went otherwise kept there
    (:attr:`_Following.problem`), for the rubric to say after what the batches measured
    tell. Each step takes every tower's next batch with the values of the variables
    (``data``: a function that takes them, None once the data ran out, and one that makes
    the feed of those batches), takes the whole step in the measuring session on those
    batches, with every input of the updates (``fetched``) as it computed them, and
    computes those in the twin from the same values and batches. So a trigger that arms for
    rare batches, or once training has brought the variables to some state, turns a
    training of that many steps here about as often as a student's: the five steps of
    :func:`_rewritten` saw one armed for 1 batch in 1,000 about 2 times in 100. The
    training stops where the values of the model (the variables its updates write,
    ``model``) stop being finite: it diverged, and a diverged training compared in inf and
    NaN would be told of graph rewriting. The inputs of the model's writes (``of_model``:
    which of ``fetched`` are) are told from the twin's by :func:`_model_differs`, never by
    a retry. What a step's writes are given does not stop it: the twenty-fifth attack wrote
    infinity into a variable of its own at every step, the twenty-sixth gave a write of the
    model that writes no row a rate of infinity, and each stopped a training that looked at
    the writes' inputs at its first step, leaving a trigger armed for 1 batch in 2,000
    untried. The variables the step writes are put back after."""
    import tensorflow as tf

    take, feed_of = data
    alone = _Alone.of(loop, fetched)
    names = alone.names
    written, kept = _kept(tf, loop, step)
    fetches, run = _fetches(loop), _runner(loop)
    followed = [] if follow is None else follow.tensors
    known = sorted({*names, *(follow.names if follow is not None else ()), *model})
    reads = [_value_of(tf, loop.graph, name) for name in known]  # ops made once

    def twinned(values: dict[str, Any], flat: list[Any]) -> list[np.ndarray]:
        """The twin's inputs of the updates from ``values`` and the batches ``flat``."""
        return twin.compute_from(
            fetched, [*names, *twin.entries], [*(values[n] for n in names), *flat]
        )

    # the twin and the given model compute from the values before the step, in sessions
    # of their own, while the measuring session takes it: threads, as each run leaves
    # Python while TensorFlow computes
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=2)
    try:
        for count in range(1, TRAINED + 1):
            taken = take(reads)
            if taken is None:
                break
            batches, read = taken
            values = dict(zip(known, read, strict=True))
            flat = [value for batch in batches for value in batch]
            beside = pool.submit(twinned, values, flat)
            given = (
                None
                if follow is None or follow.problem is not None
                else pool.submit(follow.given, batches, values)
            )
            try:
                ran = run([*fetched, *followed, *fetches], feed_dict=feed_of(batches))
            finally:  # no thread left running into the next step or the put back
                computed = beside.result()
                theirs = None if given is None else given.result()
            if not all(np.all(np.isfinite(np.asarray(values[v]))) for v in model):
                break  # the model diverged: nothing further to compare
            measured = _flat(ran[: len(fetched)])
            alone_now = functools.partial(
                alone.compute, feed_of(batches), [values[n] for n in names]
            )
            twin_now = functools.partial(twinned, values, flat)
            differs = (
                None
                if _alike(measured, computed)
                else _model_differs(measured, computed, of_model, alone_now, twin_now)
                or _alike_once_raced(alone_now, twin_now, measured, computed)
            )
            if differs is not None:
                return differs
            if follow is not None and theirs is not None:
                mine = _flat(ran[len(fetched) : len(fetched) + len(followed)])
                follow.step(count, values, mine, theirs)
        if follow is not None:
            follow.problem = follow.problem or follow.spread()
        return None
    finally:
        pool.shutdown(wait=True)
        _setter(tf, loop.graph, run, written)([kept[name] for name in written])


#: of a training's steps, the largest ratio of the factors by which an update follows the
#: given model's gradient (a mean weighs each step's alike; a clip of each tower's gradient
#: shrinks some steps' a little)
FOLLOWED_SPREAD = 10.0
#: a step's update is judged against the given model's gradient where that gradient is at
#: least this share of its median size over the steps (a near-zero gradient fits anything)
FOLLOWED_SIZE = 0.1
#: ... and where the fit leaves less than this share of the update unexplained
FOLLOWED_FIT = 0.05


@dataclass
class _Following:
    """The given model's gradient beside each step of :func:`_trained_alike`'s training:
    its update of the same batches, from the same values of the variables it trains
    (``names``), to which each update of the program (its inputs ``tensors``, by variable
    ``mine``) must keep a factor above 0, and within :data:`FOLLOWED_SPREAD` of the other
    steps' (a mean, a sum, a learning rate scale every step's alike)."""

    names: list[str]
    tensors: list[Any]
    mine: dict[str, list[tuple[int, float]]]
    theirs: dict[str, list[tuple[int, float]]]
    set_given: Callable[[list[Any]], None]
    compute: Callable[[list[list[Any]]], list[np.ndarray]]
    factors: dict[str, list[tuple[float, float, int]]] = field(default_factory=dict)
    sizes: dict[str, list[float]] = field(default_factory=dict)
    #: why the training went otherwise than the given model's gradient, once it did
    problem: str | None = None

    def given(self, batches: list[list[Any]], values: dict[str, Any]) -> list[np.ndarray]:
        """The given model's update inputs of ``batches`` from ``values``: its variables
        set to them first."""
        self.set_given([values[name] for name in self.names])
        return self.compute(batches)

    def step(
        self,
        count: int,
        values: dict[str, Any],
        mine: list[np.ndarray],
        theirs: list[np.ndarray],
    ) -> None:
        """Compare the program's update at step ``count`` (``mine``: its update inputs) with
        the given model's gradient of the same batches from the same ``values`` (``theirs``,
        :meth:`given`): why it goes against it kept in :attr:`problem`, its factor for
        :meth:`spread`. Once one step went against it, the others are not compared."""
        if self.problem is not None:
            return
        for name in self.names:
            m = np.concatenate([sign * mine[i] for i, sign in self.mine[name]])
            t = np.concatenate([sign * theirs[i] for i, sign in self.theirs[name]])
            if m.shape != t.shape or not (np.all(np.isfinite(m)) and np.all(np.isfinite(t))):
                continue  # told by the comparison of _given_model
            w = np.asarray(values[name], dtype=np.float64).ravel()
            factor, left = _step_factor(m, t, w if w.size == m.size else np.zeros(m.size))
            size = float(np.linalg.norm(t))
            self.sizes.setdefault(name, []).append(size)
            if left >= FOLLOWED_FIT or size == 0:  # no factor fits: the other measures tell
                continue
            self.factors.setdefault(name, []).append((factor, size, count))
            if factor <= 0 and size >= FOLLOWED_SIZE * float(np.median(self.sizes[name])):
                self.problem = (
                    f"the update of '{name}' goes against the given model's gradient at "
                    f"step {count:,} of {TRAINED:,} trained on your program's own data (by "
                    f"a factor of {factor:.3g}): it climbs the loss there"
                )
                return

    def spread(self) -> str | None:
        """Why the factors by which the updates follow the given model's gradient (where
        one fits) spread over the steps more than :data:`FOLLOWED_SPREAD` times, or None."""
        for name, found in self.factors.items():
            middle = float(np.median(self.sizes[name]))
            judged = [(f, c) for f, s, c in found if f > 0 and s >= FOLLOWED_SIZE * middle]
            if len(judged) < 2:
                continue
            low, high = min(judged), max(judged)
            if high[0] > FOLLOWED_SPREAD * low[0]:
                return (
                    f"the update of '{name}' follows the given model's gradient "
                    f"{high[0] / low[0]:,.0f} times more at step {high[1]:,} than at step "
                    f"{low[1]:,} of {TRAINED:,} trained on your program's own data: a mean "
                    "weighs every step's gradient alike"
                )
        return None


def _step_factor(mine: np.ndarray, theirs: np.ndarray, model: np.ndarray) -> tuple[float, float]:
    """``mine`` (one step's update) as ``k theirs + c model`` (``c model``: weight decay):
    the factor ``k`` and the share of ``mine`` that no such sum fits.

    >>> g, w = np.array([1.0, 0.0, 2.0]), np.array([0.5, -0.2, 0.1])
    >>> k, left = _step_factor(-1000.0 * g, g, w)
    >>> round(k, 6), left < 1e-9
    (-1000.0, True)
    >>> k, left = _step_factor(g + 0.01 * w, g, w)
    >>> round(k, 6), left < 1e-9
    (1.0, True)
    """
    scales, _ = _fit_given(mine[None, :], theirs[None, :], model)
    factor = float(scales[0])
    size = float(np.linalg.norm(mine))
    fitted = factor * theirs
    rest = mine - fitted
    if np.any(model):  # with weight decay: c by least squares on what k leaves
        c = float(rest @ model) / float(model @ model)
        rest = rest - c * model
    return factor, float(np.linalg.norm(rest)) / size if size > 0 else 0.0


@dataclass
class _Beside:
    """The given model beside the program's: its step, towers' entries and own feeds
    (``base``), the variables it trains (``names``) with the indices of the update inputs
    that write each, its (``theirs``) and the program's (``mine``), and ``compute``: its
    update inputs, each tower fed its own batch."""

    step: list[Any]
    entries: list[list[Any]]
    base: dict[Any, Any]
    names: list[str]
    theirs: dict[str, list[tuple[int, float]]]
    mine: dict[str, list[tuple[int, float]]]
    compute: Callable[[list[list[Any]]], list[np.ndarray]]


def _beside_given(
    loop: Loop, given: Loop, mine: tuple[list[Any], Any, list[Any], list[Any]]
) -> _Beside | str:
    """:class:`_Beside` of the given model and ``loop``'s (``mine``: its step, towers,
    updates and a tower's entries), or why the two cannot be compared (one line)."""
    step, towers, updates, entries = mine
    g_step, g_order, g_towers = _step(given)
    g_updates = _updates(g_step, _reaching(g_step, g_towers))
    g_entries, _, problem = _entries(g_step, g_towers, g_order)
    if problem is not None or not g_updates:
        return f"the given model cannot be measured: {problem}"
    g_written, written = _by_variable(given.graph, g_updates), _by_variable(loop.graph, updates)
    mine_found, theirs_found = (step, towers, entries), (g_step, g_towers, g_entries[0])
    problem = _unlike_given(loop, given, mine_found, theirs_found) or _missing_update(
        set(g_written) - set(written)
    )
    if problem is not None:
        return problem
    base: dict[Any, Any] = {}
    for call in given.calls.values():
        base.update(call.feed_dict or {})
    fetched = [tensor for _, tensors in g_updates for tensor in tensors]

    def compute(batches: list[list[Any]]) -> list[np.ndarray]:
        fed = {t: batches[i][k] for i, ts in enumerate(g_entries) for k, t in enumerate(ts)}
        return _flat(given.observer.real_run(given.session, fetched, {**base, **fed}))

    return _Beside(g_step, g_entries, base, sorted(g_written), g_written, written, compute)


def _following(
    loop: Loop, given: Loop, mine: tuple[list[Any], Any, list[Any], list[Any]]
) -> _Following | None:
    """:class:`_Following` of the given model beside ``loop``'s training (``mine``: its
    step, towers, updates and a tower's entries), or None where the two cannot be compared
    (:func:`_given_model` says why)."""
    import tensorflow as tf

    beside = _beside_given(loop, given, mine)
    if isinstance(beside, str) or len(beside.entries) != mine[1].count:
        return None
    if any(len(beside.mine[n]) != len(beside.theirs[n]) for n in beside.names):
        return None
    try:
        set_given = _setter(tf, given.graph, _runner(given), beside.names)
    except (KeyError, ValueError):
        return None
    tensors = [tensor for _, ts in mine[2] for tensor in ts]
    return _Following(beside.names, tensors, beside.mine, beside.theirs, set_given, beside.compute)


def _taken(loop: Loop, tensors: list[Any], base: dict[Any, Any], options: Any) -> list[Any] | None:
    """The values of ``tensors`` (every tower's batch, taken from the program's own data,
    and reads of variables), or None when its data ran out or took longer than the run's
    ``options`` allow (:data:`TAKEN_MS`)."""
    import tensorflow as tf

    try:
        return list(loop.observer.real_run(loop.session, tensors, base, options=options))
    except tf.errors.OpError:
        return None


def _variables_read(tensors: list[Any]) -> list[str]:
    """The variables (their ops' names, sorted) that computing ``tensors`` reads."""
    return sorted({op.name for op in upstream(t.op for t in tensors) if op.type in VARIABLE_OPS})


def _differs(mine: np.ndarray, theirs: np.ndarray) -> bool:
    """Whether ``theirs`` lies further from ``mine`` than :data:`REWRITTEN_TOLERANCE` of
    ``mine``'s largest value (NaN where ``mine`` has NaN is alike).

    >>> _differs(np.array([4.99e-4]), np.array([-4.99e-4])), _differs(np.array([1.0, 1e-9]),
    ...                                                             np.array([1.0, -1e-9]))
    (True, False)

    Values not finite in both, where a training diverges (infinity in one, NaN in the
    other), are alike; one not finite where the other is, not; the rest are compared as
    above (an infinity once made every value of its tensor alike):

    >>> inf, nan = float("inf"), float("nan")
    >>> _differs(np.array([inf, 1.0]), np.array([nan, 1.0])), _differs(np.array([inf, 1.0]),
    ...                                                              np.array([inf, -1.0]))
    (False, True)
    >>> _differs(np.array([inf]), np.array([1.0]))
    True
    """
    mine, theirs = np.asarray(mine), np.asarray(theirs)
    if mine.shape == theirs.shape and mine.dtype.kind in "fc" and theirs.dtype.kind in "fc":
        odd, their_odd = ~np.isfinite(mine), ~np.isfinite(theirs)
        if odd.any() or their_odd.any():
            if not np.array_equal(odd, their_odd):
                return True
            mine, theirs = mine[~odd], theirs[~odd]
    scale = float(np.nanmax(np.abs(mine))) if np.size(mine) and not np.all(np.isnan(mine)) else 0.0
    near = max(REWRITTEN_TOLERANCE * scale, 1e-12)
    return not np.allclose(theirs, mine, rtol=REWRITTEN_TOLERANCE, atol=near, equal_nan=True)


def _model_of(loop: Loop, updates: list[tuple[str, list[Any]]]) -> list[str]:
    """The model: the variables ``updates`` (ops of ``loop``'s graph, by name) write."""
    return sorted(
        {
            v
            for name, _ in updates
            for v in variables_written(loop.graph.get_operation_by_name(name))
        }
    )


def _written_beside(
    loop: Loop, step: list[Any], updates: list[tuple[str, list[Any]]], feed: dict[Any, Any]
) -> str | None:
    """Why the step changes its model otherwise than its updates do (a write after them
    that undoes or resets one, a change in place of a variable's memory), or None. From the
    same values and batches, the whole step and its updates alone (what they need) must
    leave every variable the updates write alike; each run is undone after it."""
    import tensorflow as tf

    written, kept = _kept(tf, loop, step)
    model = _model_of(loop, updates)
    reads = [_value_of(tf, loop.graph, name) for name in written]
    after = []
    for ran in (_fetches(loop), [name for name, _ in updates]):
        loop.observer.real_run(loop.session, ran, feed_dict=feed)
        after.append(dict(zip(written, loop.observer.real_run(loop.session, reads), strict=True)))
        _assign(tf, loop, kept)
    for name in model:
        whole, alone = (np.asarray(a[name], dtype=np.float64) for a in after)
        if not np.allclose(whole, alone, rtol=1e-6, atol=1e-9, equal_nan=True):
            return (
                f"the step changes '{name}' otherwise than its update does (another write "
                "after it, a reset, a change in place): a step may change each variable "
                "only by its update"
            )
    return None


def _step(loop: Loop) -> tuple[list[Any], dict[str, int], Any]:
    """The ops ``loop``'s step runs, in the order they were made, that order, and its
    towers (as the import finds them)."""
    graph = loop.graph
    step = upstream([graph.get_operation_by_name(n) for n in _fetches(loop)])
    order = {op.name: index for index, op in enumerate(graph.get_operations())}
    step.sort(key=lambda op: order[op.name])
    towers = find_towers(
        [op.name for op in step], {op.name: program_device(op.device) for op in step}
    )
    return step, order, towers


def _given_model(
    loop: Loop,
    given: Loop,
    mine: tuple[list[Any], Any, list[tuple[str, list[Any]]], list[Any]],
    steps: list[list[list[Any]]],
    alike: list[list[list[np.ndarray]]],
    again: Callable[[list[list[Any]]], list[list[list[np.ndarray]]]],
    own: dict[Any, Any],
    seen: tuple[_Twin | None, str | None] = (None, None),
) -> dict[str, Any]:
    """How each update of ``loop`` compares with the given model's (``given``: the
    reference solution's loop), batch by batch (``mine``: the program's step, towers,
    updates and a tower's entries, as :func:`probe_averaging` found them): both fed the same
    batches (``steps[t][j]``, tower ``j``'s of step ``t``, fed to every tower:
    ``alike[t][j]``, the values of the updates' inputs), the given model's variables set to
    the program's values. For each variable the given model trains, the update's values
    ``V_b`` of batch ``b`` as ``k_b G_b + c w`` (:func:`_fit_given`): ``G_b`` is the given
    model's, ``k_b`` a factor of the batch's (a learning rate, a mean or a sum, a clip of
    its size) and ``c w`` a multiple of the variable ``w`` (weight decay); then again at a
    random state of the variables three times as large. A mean of the towers' gradients of
    the given model fits with every ``k_b`` alike and positive; a tower that scales or
    turns its gradient by something its data carries (its own number, the sign of a value)
    does not, whatever the weights of :func:`_weights` say, since its weight goes where its
    data goes. Then the whole step against the given model's, every tower fed its own batch
    (``own``, the program's feed of them): :func:`_descent`, whose settings the twin
    computes too (``seen``: the twin, and why the training of :func:`_trained_alike` went
    otherwise than the given model's gradient, or None).
    ``{"problem": None, "variables": [{"variable", "residual", "least", "most", "weights",
    "noise"}], "steps": [{"along", "size"}], "trained": ...}``, or a ``problem`` (one line)
    when they cannot be compared."""
    import tensorflow as tf

    step = mine[0]
    beside = _beside_given(loop, given, mine)
    if isinstance(beside, str):
        return _uncompared(beside)
    g_step, g_entries, base = beside.step, beside.entries, beside.base
    g_written, written, names = beside.theirs, beside.mine, beside.names
    model: dict[str, Any] = {}
    problem = _set_given(tf, loop, given, names, model)
    if problem is not None:
        return _uncompared(problem)

    def theirs(batch: list[Any]) -> list[np.ndarray]:
        """The given model's update inputs, every tower fed ``batch``."""
        return beside.compute([batch] * len(g_entries))

    their_runs = [[theirs(batch) for batch in step] for step in steps]
    # a second state of the model, drawn at random three times as large: an update that
    # turns once the variables grow (a sign set by their size), or adds a constant that
    # training has made the variables' own shape (so that it fits as weight decay), follows
    # the given model's gradient at one state only
    rng = np.random.default_rng(int.from_bytes(os.urandom(8), "little"))
    moved = {
        name: rng.standard_normal(np.shape(v))
        * 3.0
        * max(float(np.sqrt(np.mean(np.square(v)))), 0.1)
        for name, v in model.items()
    }
    _assign(tf, loop, moved)
    _assign(tf, given, moved)
    mine_moved, their_moved = again(steps[0]), [[theirs(batch) for batch in steps[0]]]
    _assign(tf, loop, model)  # as they were
    _assign(tf, given, model)
    found = []
    for name in names:
        mine_v = _per_batch(alike, written[name])
        theirs_v = _per_batch(their_runs, g_written[name])
        if len(written[name]) != len(g_written[name]):
            return _uncompared(
                f"'{name}' is written with the towers' data by {len(written[name])} inputs "
                f"of your step's updates, the given model's by {len(g_written[name])}: "
                "apply one update to each variable, as the given model does"
            )
        if mine_v.shape != theirs_v.shape:
            return _uncompared(
                f"the update of '{name}' takes {mine_v.shape[1]:,} values with the towers' "
                f"data, the given model's {theirs_v.shape[1]:,}"
            )
        scales, residual = _fit_given(mine_v, theirs_v, _decay(model[name], mine_v))
        spread = np.abs(scales).max(initial=0.0)
        both = scales / spread if spread > 0 else scales
        mine_m = _per_batch(mine_moved, written[name])
        theirs_m = _per_batch(their_moved, g_written[name])
        if np.all(np.isfinite(mine_m)) and np.all(np.isfinite(theirs_m)):
            # (numbers of half precision may overflow there: then the first state only)
            other, residual_moved = _fit_given(mine_m, theirs_m, _decay(moved[name], mine_v))
            residual = max(residual, residual_moved)
            both = np.concatenate([both, other / np.abs(other).max(initial=1e-300)])
        weights, noise = _data_weights(np.abs(scales).reshape(len(steps), -1))
        found.append(
            {
                "variable": name,
                "residual": round(_finite(residual), 6),
                "least": round(_finite(float(both.min())), 6) if spread > 0 else 0.0,
                "most": round(_finite(float(both.max())), 6) if spread > 0 else 0.0,
                "weights": weights,
                "noise": noise,
            }
        )
    g_own = {t: steps[0][i][k] for i, ts in enumerate(g_entries) for k, t in enumerate(ts)}
    feeds = (own, {**base, **g_own})
    twin, trained = seen
    descended, turned = _descent(tf, (loop, step), (given, g_step), names, feeds, twin)
    found_given: dict[str, Any] = {"problem": None, "variables": found, "steps": descended}
    if trained is not None:
        found_given["trained"] = trained
    return {**found_given, "setting_turns": turned} if turned else found_given


#: consecutive whole steps :func:`_descent` takes in each of its rounds, and the rounds
DESCENT_STEPS = 3
#: where, between their first values and the program's last, each round sets the step's
#: counts (the count of steps, an optimizer's powers of its decay): both ends, and two drawn
#: at random (None)
DESCENT_ROUNDS = (0.0, 1.0, None, None)


def _descent(
    tf: Any,
    mine: tuple[Loop, list[Any]],
    theirs: tuple[Loop, list[Any]],
    names: list[str],
    feeds: tuple[dict[Any, Any], ...],
    twin: _Twin | None = None,
) -> tuple[list[dict[str, list[float]]], dict[str, Any] | None]:
    """How the program's whole step moves the variables the given model trains (``names``)
    against the given model's own step (``mine`` and ``theirs``: each loop and the ops its
    step runs), from the same values and batches (``feeds``: the
    program's and the given model's, every tower its own batch): for each of
    :data:`DESCENT_STEPS` steps in a row of each of :data:`DESCENT_ROUNDS`, for each of
    ``names`` (:func:`_compared`), ``along``, the cosine between the two changes (1: the
    same way; below 0: uphill, as a learning rate below 0 takes it), and ``size``, the
    program's change as a multiple of the given model's (0: the step does not train it).
    Each round starts from the program's values of ``names``, the optimizers' slots as new
    and the step's counts (the other variables it writes, of one value each) set between
    their first values and the program's last, and takes one step unmeasured before its
    own. The updates' inputs alone (what :func:`_given_model` compares) say nothing of the
    learning rate. Then where a setting turns out of what it may take
    (:func:`_settings_turn`). The variables are as they were afterwards."""
    (loop, step), (given, g_step) = mine, theirs
    mine_feed, their_feed = feeds
    mine_written, mine_kept = _kept(tf, loop, step)
    their_written, their_kept = _kept(tf, given, g_step)
    rng = np.random.default_rng(int.from_bytes(os.urandom(8), "little"))
    model = {name: mine_kept[name] for name in names}
    others = [n for n in mine_written if n not in names]  # slots and counts
    their_others = [n for n in their_written if n not in names]
    try:
        _fresh(tf, loop, others)
        counts = [n for n in others if np.size(mine_kept[n]) == 1]
        first = dict(zip(counts, _read_all(tf, loop, counts), strict=True))
        mine_reads = [_value_of(tf, loop.graph, name) for name in names]
        their_reads = [_value_of(tf, given.graph, name) for name in names]
        found = []
        for where in DESCENT_ROUNDS:
            _fresh(tf, loop, others)
            _fresh(tf, given, their_others)
            share = rng.uniform() if where is None else where
            _assign(tf, loop, {**model, **_between(first, mine_kept, share)})
            # a step first, unmeasured: from new slots, FTRL's first step sets the variables
            # from its accumulators, not from where they were (measured cosines 0.06 to 0.2)
            loop.observer.real_run(loop.session, _fetches(loop), feed_dict=mine_feed)
            for _ in range(DESCENT_STEPS):
                now = loop.observer.real_run(loop.session, mine_reads)
                before = dict(zip(names, now, strict=True))
                _assign(tf, given, before)
                changes = []
                sides = ((loop, mine_reads, mine_feed), (given, their_reads, their_feed))
                for side, reads, feed in sides:
                    side.observer.real_run(side.session, _fetches(side), feed_dict=feed)
                    after = side.observer.real_run(side.session, reads)
                    changes.append(
                        [
                            np.asarray(a, dtype=np.float64).ravel()
                            - np.asarray(before[n], dtype=np.float64).ravel()
                            for n, a in zip(names, after, strict=True)
                        ]
                    )
                found.append(_compared(*changes))
        return found, _settings_turn(tf, loop, step, names, others, mine_feed, twin)
    finally:
        _assign(tf, loop, mine_kept)
        _assign(tf, given, their_kept)


def _compared(mine: list[np.ndarray], theirs: list[np.ndarray]) -> dict[str, list[float]]:
    """Each variable's change by the program's step (``mine``) against the given model's
    (``theirs``): ``along``, their cosine (1 where either is no change: the sizes tell),
    and ``size``, the program's as a multiple of the given model's (1 where the given
    model's is no change).

    >>> _compared([np.array([1.0, 0.0]), np.zeros(2)], [np.array([2.0, 0.0]), np.ones(2)])
    {'along': [1.0, 1.0], 'size': [0.5, 0.0]}
    """
    along, size = [], []
    for one, other in zip(mine, theirs, strict=True):
        sizes = float(np.linalg.norm(one)), float(np.linalg.norm(other))
        cosine = float(one @ other) / (sizes[0] * sizes[1]) if min(sizes) > 0 else 1.0
        along.append(round(min(max(_finite(cosine), -1.0), 1.0), 6))
        size.append(_finite(sizes[0] / sizes[1]) if sizes[1] > 0 else 1.0)
    return {"along": along, "size": size}


def _between(first: dict[str, Any], last: dict[str, Any], share: float) -> dict[str, Any]:
    """Each of ``first``'s variables (counts of one value) at ``share`` of the way from its
    first value to its last, whole where it counts in whole numbers.

    >>> _between({"step": np.int64(0), "power": np.float32(0.9)},  # float32s: 0.7 or so
    ...          {"step": np.int64(300), "power": np.float32(0.5)}, 0.5)
    {'step': 150, 'power': 0.699999988079}
    """
    found = {}
    for name, start in first.items():
        value = float(start) + share * (float(np.asarray(last[name]).ravel()[0]) - float(start))
        whole = np.issubdtype(np.asarray(start).dtype, np.integer)
        found[name] = round(value) if whole else round(value, 12)
    return found


def _read_all(tf: Any, loop: Loop, names: list[str]) -> list[Any]:
    """The values of ``loop``'s variables ``names`` now."""
    reads = [_value_of(tf, loop.graph, name) for name in names]
    return list(loop.observer.real_run(loop.session, reads))


#: the inputs of an update that are its learning rate
RATES = ("alpha", "lr", "learning_rate")
#: the settings of an update (its op's inputs, by name) and the values each may take at
#: any count of steps: a learning rate 0 or above; a momentum, a decay of Adam's, RMSProp's,
#: Adadelta's or AddSign's between 0 and 1; an epsilon, a regularization, PowerSign's base 0
#: or above; FTRL's power 0 or below
SETTINGS_ALLOWED: dict[str, tuple[float, float]] = {
    **dict.fromkeys(RATES, (0.0, math.inf)),
    **dict.fromkeys(("momentum", "beta1", "beta2", "rho", "beta", "sign_decay"), (0.0, 1.0)),
    **dict.fromkeys(("epsilon", "l1", "l2", "l2_shrinkage", "logbase"), (0.0, math.inf)),
    "lr_power": (-math.inf, 0.0),
    # Adam's powers of its decays, when the program computes them (read as the variables
    # the step keeps them in, they are state the sweep sets, not a setting)
    **dict.fromkeys(("beta1_power", "beta2_power"), (0.0, 1.0)),
}
#: the counts of steps :func:`_settings_turn` computes the settings at: every count to
#: 2,000 (a schedule that turns every 1,000 steps turns there), then 1, 2 and 5 times each
#: power of 10 to 10^9, and :data:`SWEPT_DRAWN` more drawn at random on a log scale
SWEPT = (*range(2001), *(k * 10**e for e in range(3, 7) for k in (1, 2, 5) if k * 10**e > 2000))
SWEPT_DRAWN = 500
#: the largest count swept: a count of float32 stays exact to 2^24, and a schedule of one
#: (polynomial decay with cycles) measured NaN at 244,138,905 (the fifteenth attack)
SWEPT_MOST = 10**7
#: whole steps :func:`_settings_turn` takes in a row, the settings computed after each: the
#: counts as the step itself moves them (a value that halves each step, a count that grows
#: faster than the count of steps)
ITERATED = 3000


def _settings_turn(
    tf: Any,
    loop: Loop,
    step: list[Any],
    names: list[str],
    others: list[str],
    feed: Any,
    twin: _Twin | None = None,
) -> dict[str, Any] | None:
    """The first setting of an update of the variables ``names`` (its learning rate, its
    momentum, ...: :data:`SETTINGS_ALLOWED`) out of what it may take, and at which count of
    steps; None when none is. The variables the ``step`` writes (``others``: its counts, of
    any shape, and an optimizer's slots) are set as new, then the step is taken
    :data:`ITERATED` times (fed ``feed``), the settings computed after each: the counts as
    the step itself moves them. Then, of those the settings compute with, each is set to
    each count of :data:`SWEPT` and :data:`SWEPT_DRAWN` drawn ones, and past the steps
    taken, to where as many steps would take it at their pace (a counter of several values
    that count apart). A schedule that turns once training is past what the rounds of
    :func:`_descent` measure (a count it reaches later) turns here. With ``twin``, at each
    count set (and after every :data:`TWIN_EVERY` steps taken) the settings are computed
    again as a student's own session computes them (:class:`_Twin`, from the same values of
    the variables) and must agree: a setting that TensorFlow's graph rewriting turns at some
    count is reported too. The variables are left set: the caller puts them back."""
    wanted, settings = set(names), []
    for op in step:
        args = [arg.name for arg in op.op_def.input_arg]
        if wanted & set(variables_written(op)) and len(args) == len(op.inputs):
            settings += [
                (a, t) for a, t in zip(args, op.inputs, strict=True) if a in SETTINGS_ALLOWED
            ]
    if not settings:
        return None
    settings = [(arg, t) for arg, t in settings if not _reads_only(t, others)]
    if not settings:
        return None
    tensors = [tensor for _, tensor in settings]
    everything = _variables_read(tensors)  # what the settings compute with
    kept = [name for name in others if name in everything]  # ... that the step counts

    def out(count: float, compared: list[Any] | None) -> dict[str, Any] | None:
        """Why the settings at this count are not what they may be, or None. With
        ``compared`` (the values of the counts ``kept``, or [] to read every variable the
        settings compute with), the twin computes them too."""
        computed = loop.observer.real_run(loop.session, tensors)
        for (arg, _), value in zip(settings, computed, strict=True):
            shown = _out_of_range(arg, value)
            if shown is not None:
                return {"setting": arg, "at": count, "value": shown, "allowed": _allowed(arg)}
        if twin is None or compared is None:
            return None
        if compared:
            twin.set(kept, compared)
        else:
            twin.set(everything, _read_all(tf, loop, everything))
        rewritten = twin.compute(tensors)
        for (arg, _), mine, theirs in zip(settings, _flat(computed), rewritten, strict=True):
            if _differs(mine, theirs):
                shown = f"{mine[0]:.3g} (rewritten: {theirs[0]:.3g})"
                return {"setting": arg, "at": count, "value": shown, "allowed": REWRITTEN_ALIKE}
        return None

    def counts() -> Iterator[tuple[float, list[Any] | None]]:
        """Bring the variables ``kept`` to each count in turn, and say which, with what the
        twin compares: the counts' values set, [] to read them, None for none."""
        _fresh(tf, loop, others)
        yield 0.0, []
        if not kept:  # settings of no count: the same at every count
            return
        first = [np.asarray(v, dtype=np.float64) for v in _read_all(tf, loop, kept)]
        for count in range(1, ITERATED + 1):  # as the step moves its counts
            loop.observer.real_run(loop.session, _fetches(loop), feed_dict=feed)
            yield float(count), [] if count % TWIN_EVERY == 0 else None
        now = [np.asarray(v, dtype=np.float64) for v in _read_all(tf, loop, kept)]
        moves = [(n - f) / ITERATED for n, f in zip(now, first, strict=True)]
        assign = _setter(tf, loop.graph, _runner(loop), kept)
        rng = np.random.default_rng(int.from_bytes(os.urandom(8), "little"))
        drawn = np.exp(rng.uniform(math.log(2000), math.log(SWEPT_MOST), SWEPT_DRAWN)).round()
        if twin is not None:  # the other variables as the steps left them, in both
            twin.set(everything, _read_all(tf, loop, everything))
        for count in (*SWEPT, *drawn.tolist()):
            values = [np.full(f.shape, count) for f in first]
            assign(values)
            yield float(count), values
            if count > ITERATED:  # where as many steps would take them, at their pace
                values = [f + count * m for f, m in zip(first, moves, strict=True)]
                assign(values)
                yield float(count), values

    for count, compared in counts():
        turned = out(count, compared)
        if turned is not None:
            return turned
    return None


def _reads_only(tensor: Any, names: list[str]) -> bool:
    """Whether ``tensor`` is one of the variables ``names``, read as it is (Adam's powers,
    kept by its step)."""
    op = tensor.op
    while op.type in ("Identity", "ReadVariableOp") and op.inputs:
        op = op.inputs[0].op
    return op.type in VARIABLE_OPS and op.name in names


def _cast(value: Any, kind: Any) -> np.ndarray:
    """``value`` as a variable of numpy type ``kind`` holds it: integers clipped to the
    type's range (a count of 5 × 10^9 in an int32), booleans true where not 0.

    >>> _cast([5e9, -1.0], np.int32).tolist(), _cast([2.0, 0.0], np.bool_).tolist()
    ([2147483647, -1], [True, False])
    """
    if np.dtype(kind) == np.bool_:
        return np.asarray(value) != 0
    if np.issubdtype(kind, np.integer):
        limits = np.iinfo(kind)
        value = np.clip(np.asarray(value, dtype=np.float64), limits.min, limits.max)
    return np.asarray(value).astype(kind)


def _out_of_range(arg: str, value: Any) -> str | None:
    """A value the setting ``arg`` took that it may not (:data:`SETTINGS_ALLOWED`), shown;
    None when it took none.

    >>> _out_of_range("momentum", [0.9, 1.5]), _out_of_range("lr", np.nan), _out_of_range("lr", 0)
    ('1.5', 'nan', None)
    """
    low, high = SETTINGS_ALLOWED[arg]
    values = np.asarray(value, dtype=np.float64)
    out = ~((values >= low) & (values <= high))  # NaN is out too
    return f"{values[out].flat[0]:.3g}" if out.any() else None


def _allowed(arg: str) -> str:
    """What the setting ``arg`` may take, in words.

    >>> _allowed("lr"), _allowed("rho"), _allowed("lr_power")
    ('0 or above', 'between 0 and 1', '0 or below')
    """
    low, high = SETTINGS_ALLOWED[arg]
    if high == math.inf:
        return f"{low:g} or above"
    return f"{high:g} or below" if low == -math.inf else f"between {low:g} and {high:g}"


def _setter(
    tf: Any, graph: Any, run: Callable[..., Any], names: list[str]
) -> Callable[[list[Any]], None]:
    """A function that sets ``graph``'s variables ``names`` to values (in that order, each
    of its variable's shape) with ``run`` (a session's), with ops made once."""
    ops, fed = [], []
    with graph.as_default():
        for name in names:
            op = graph.get_operation_by_name(name)
            dtype = op.get_attr("dtype")
            value = tf.compat.v1.placeholder(dtype, tf.TensorShape(op.get_attr("shape")))
            if op.outputs[0].dtype.name == "resource":
                ops.append(tf.raw_ops.AssignVariableOp(resource=op.outputs[0], value=value))
            else:
                ops.append(tf.raw_ops.Assign(ref=op.outputs[0], value=value))
            fed.append((value, dtype.as_numpy_dtype))

    def assign(values: list[Any]) -> None:
        feed = {t: _cast(v, kind) for (t, kind), v in zip(fed, values, strict=True)}
        run(ops, feed_dict=feed)

    return assign


def _runner(loop: Loop) -> Callable[..., Any]:
    """``loop``'s session's run (as :meth:`Observer.real_run` runs it)."""
    return functools.partial(loop.observer.real_run, loop.session)


def _fetches(loop: Loop) -> list[str]:
    """What ``loop``'s step runs: every call's fetches."""
    return [n for call in loop.calls.values() for n in call.fetches]


def _kept(tf: Any, loop: Loop, step: list[Any]) -> tuple[list[str], dict[str, Any]]:
    """The variables ``loop``'s ``step`` (the ops it runs) writes, and their values now."""
    written = sorted({v for op in step for v in variables_written(op)})
    reads = [_value_of(tf, loop.graph, name) for name in written]
    return written, dict(zip(written, loop.observer.real_run(loop.session, reads), strict=True))


def _fresh(tf: Any, loop: Loop, names: list[str]) -> None:
    """Set the variables ``names`` (an optimizer's slots and counts) to their initial
    values, where the graph says how (its collection of variables)."""
    with loop.graph.as_default():
        known = tf.compat.v1.global_variables() + tf.compat.v1.local_variables()
    wanted = set(names)
    initializers = [v.initializer for v in known if v.op.name in wanted]
    if initializers:
        loop.observer.real_run(loop.session, initializers)


def _decay(value: Any, mine: np.ndarray) -> np.ndarray:
    """A variable's value, flat, as weight decay would add it to its update (zeros for a
    sparse update, which takes fewer values than the variable holds)."""
    flat = np.asarray(value, dtype=np.float64).ravel()
    return flat if flat.size == mine.shape[1] else np.zeros(mine.shape[1])


def _uncompared(problem: str) -> dict[str, Any]:
    """Why a program's updates could not be compared with the given model's."""
    return {"problem": problem, "variables": []}


def _unlike_given(
    loop: Loop,
    given: Loop,
    mine: tuple[list[Any], Any, list[Any]],
    theirs_found: tuple[list[Any], Any, list[Any]],
) -> str | None:
    """Why the program's towers (``mine``: its step, towers and a tower's entries) do not
    compute with what the given model's (``theirs_found``, alike) do: other data
    (:func:`_described`), data made otherwise (:func:`_other_pipeline`), a variable the
    given model's towers do not read, or rows the data chooses; None when they do."""
    step, towers, entries = mine
    g_step, g_towers, theirs = theirs_found
    if _described(theirs) != _described(entries):
        return (
            f"each of your towers takes {_described(entries)} as its data, the given model's "
            f"{_described(theirs)} (random numbers drawn in a tower, as dropout does, count "
            "too): keep the given model and its input queue"
        )
    other = _other_pipeline(loop.graph, entries, given.graph, theirs)
    if other is not None:
        return (
            f"your towers' data is not made as the given code makes it ('{other.name}', "
            f"{other.type}, is not the given code's): keep the given input queue, and take "
            "each tower's batch from it as the starter does"
        )
    extra = sorted(_tower_reads(step, towers) - _tower_reads(g_step, g_towers))
    if extra:
        return (
            f"your towers compute with the variable '{extra[0]}', which the given model's do "
            "not (a count of the steps could tell the measuring from training): keep the "
            "given model"
        )
    placed = _placed_by_data(step, towers)
    if placed is not None and _placed_by_data(g_step, g_towers) is None:
        return (
            f"'{placed}' writes where the towers' data says (its indices compute with it), "
            "which the given model's updates do not: update every value of each variable"
        )
    return None


def _placed_by_data(step: list[Any], towers: Any) -> str | None:
    """The first write of ``step`` whose other inputs than its values (the indices of a
    scatter) compute with the towers' data, or None: its values are measured, not where
    they go."""
    reaches = _reaching(step, towers)
    for op in step:
        if not variables_written(op):
            continue
        for tensor in op.inputs:
            floating = tensor.dtype.is_floating or is_handle(tensor.dtype.name)
            if not floating and reaches[tensor.op.name]:
                return str(op.name)
    return None


def _missing_update(missing: set[str]) -> str | None:
    """Why a variable the given model trains is not trained (``missing``), or None."""
    if not missing:
        return None
    return (
        f"no update of '{min(missing)}' computes with the towers' data, and the given model "
        "trains it"
    )


def _set_given(
    tf: Any, loop: Loop, given: Loop, names: list[str], model: dict[str, Any]
) -> str | None:
    """Set the given model's variables ``names`` to the program's values (kept in
    ``model``); why not, or None."""
    reads = []
    for name in names:
        try:
            reads.append(_value_of(tf, loop.graph, name))
        except (KeyError, ValueError):
            return f"its variable '{name}' is not one"
    model.update(zip(names, loop.observer.real_run(loop.session, reads), strict=True))
    return _assign(tf, given, model)


def _other_pipeline(graph: Any, entries: list[Any], given: Any, theirs: list[Any]) -> Any:
    """The first op (in the order they were made) of what makes ``entries`` (a tower's data)
    in ``graph`` that the given model's pipeline (``theirs`` in ``given``) has none like, or
    None when the two are made alike (:func:`_pipeline`). Data made otherwise can tell
    the measuring from training (a counter of its batches, each tower's own number)."""
    known = set(_pipeline(given, theirs).values())
    made = _pipeline(graph, entries)
    order = {op.name: i for i, op in enumerate(graph.get_operations())}
    return next(
        (
            graph.get_operation_by_name(name)
            for name in sorted(made, key=order.__getitem__)
            if made[name] not in known
        ),
        None,
    )


#: ops that take a queue and change nothing of what it gives (the import counts what a
#: queue holds with them)
LOOKS_ONLY = frozenset({"QueueSize", "QueueSizeV2", "QueueIsClosed", "QueueIsClosedV2"})


def _pipeline(graph: Any, entries: list[Any]) -> dict[str, bytes]:
    """What makes ``entries``: the ops they need, and every op that takes a resource one of
    those makes (a queue's enqueues, their data, its close; not a look at its size), and so
    on; for each, a digest
    of what it computes (:func:`_signature`) and of its inputs' digests, but not of names,
    devices or seeds: two pipelines built by the same code have the same digests."""
    ops = {op.name: op for op in upstream(t.op for t in entries)}
    takers: dict[str, list[Any]] = {}
    for op in graph.get_operations():
        for tensor in op.inputs:
            if tensor.dtype.name == "resource" and op.type not in LOOKS_ONLY:
                takers.setdefault(tensor.name, []).append(op)
    grown = True
    while grown:
        grown = False
        for op in list(ops.values()):
            for tensor in op.outputs:
                for taker in takers.get(tensor.name, []):
                    if taker.name not in ops:
                        ops.update((o.name, o) for o in upstream([taker]))
                        grown = True
    digests: dict[str, bytes] = {}
    opened: set[str] = set()  # ops whose inputs are being digested: a loop's back edge

    def digest(op: Any) -> bytes:
        stack = [op]
        while stack:
            top = stack[-1]
            if top.name in digests:
                stack.pop()
                continue
            needed = [t.op for t in top.inputs] + list(top.control_inputs)
            waiting = [o for o in needed if o.name not in digests and o.name not in opened]
            if top.name not in opened and waiting:
                opened.add(top.name)
                stack.extend(waiting)
                continue
            stack.pop()
            kind, settings = _signature(top)
            parts = [kind.encode(), settings]
            parts += [digests.get(t.op.name, b"") + str(t.value_index).encode() for t in top.inputs]
            parts += sorted(digests.get(o.name, b"") for o in top.control_inputs)
            digests[top.name] = hashlib.sha256(b"\0".join(parts)).digest()
        return digests[op.name]

    return {name: digest(op) for name, op in ops.items()}


def _tower_reads(step: list[Any], towers: Any) -> set[str]:
    """The variables the towers' ops of ``step`` read (:func:`_read`)."""
    return {
        read
        for op in step
        if towers.of(op.name) is not None
        for read in map(_read, op.inputs)
        if read is not None
    }


def _described(entries: list[Any]) -> str:
    """What a tower's data is: each entry's type and shape."""
    return ", ".join(f"{t.dtype.name}{t.shape.as_list()}" for t in entries)


#: writes that add their value to the variable: a descent's value is minus the rate times
#: the gradient (an ``IndexedSlices`` gradient is applied by ``ResourceScatterAdd``), where
#: an optimizer's apply takes the gradient itself
ADDED = frozenset(
    (
        "AssignAdd",
        "AssignAddVariableOp",
        "ScatterAdd",
        "ResourceScatterAdd",
        "ScatterNdAdd",
        "ResourceScatterNdAdd",
    )
)


def _by_variable(
    graph: Any, updates: list[tuple[str, list[Any]]]
) -> dict[str, list[tuple[int, float]]]:
    """For each floating variable ``updates`` write, the indices of their inputs (in the
    order they are fetched) that write it, each with the sign that makes it point along the
    gradient (-1 for a write that adds its value: :data:`ADDED`)."""
    found: dict[str, list[tuple[int, float]]] = {}
    index = 0
    for name, tensors in updates:
        op = graph.get_operation_by_name(name)
        written = [v for v in variables_written(op) if _floating(op, v)]
        sign = -1.0 if op.type in ADDED else 1.0
        for _ in tensors:
            for variable in written:
                found.setdefault(variable, []).append((index, sign))
            index += 1
    return found


def _per_batch(runs: list[list[list[np.ndarray]]], indices: list[tuple[int, float]]) -> np.ndarray:
    """One row per batch (step by step, tower by tower): the values at ``indices``, each
    times its sign."""
    return np.stack(
        [np.concatenate([sign * run[i] for i, sign in indices]) for row in runs for run in row]
    )


def _value_of(tf: Any, graph: Any, name: str) -> Any:
    """A tensor of the variable ``name``'s value in ``graph`` (a read of its handle, or its
    reference)."""
    op = graph.get_operation_by_name(name)
    if op.type not in VARIABLE_OPS:
        raise ValueError(name)
    if op.outputs[0].dtype.name != "resource":
        return op.outputs[0]
    with graph.as_default():
        return tf.raw_ops.ReadVariableOp(resource=op.outputs[0], dtype=op.get_attr("dtype"))


def _assign(tf: Any, loop: Loop, values: dict[str, Any]) -> str | None:
    """Set ``loop``'s variables to ``values`` (by name); why not (the given model's
    variables of other shapes), or None."""
    for name, value in values.items():
        shape = tf.TensorShape(loop.graph.get_operation_by_name(name).get_attr("shape"))
        if list(np.shape(value)) != shape.as_list():
            return (
                f"its variable '{name}' is of shape {list(np.shape(value))}, the given "
                f"model's {shape.as_list()}"
            )
    _setter(tf, loop.graph, _runner(loop), list(values))(list(values.values()))
    return None


def _fit_given(mine: np.ndarray, theirs: np.ndarray, model: np.ndarray) -> tuple[np.ndarray, float]:
    """``mine`` (a row per batch) as ``k_b theirs_b + c model``: the factors ``k``, and the
    share of ``mine``'s change from batch to batch that no such sum fits. ``c model`` is
    weight decay (a multiple of the variable's own value ``model``, the same for every
    batch); ``c`` is 0 where ``mine`` fits as well without it. A constant added to every
    update is no weight decay, and fits no such sum (unless the variable is that constant:
    :func:`_given_model` measures at a second value too).

    >>> g = np.array([[1.0, 0.0, 2.0], [0.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    >>> w = np.array([0.5, -0.2, 0.1])
    >>> k, r = _fit_given(0.5 * g + 0.01 * w, g, w)
    >>> np.round(k, 6).tolist(), r < 1e-9
    ([0.5, 0.5, 0.5], True)
    >>> k, r = _fit_given(g * [[1.0], [-1.0], [1.0]], g, w)  # the second batch's turned
    >>> np.round(k, 6).tolist(), r < 1e-9
    ([1.0, -1.0, 1.0], True)
    >>> _fit_given(g + 0.5, g, w)[1] > 0.1  # a drift of 0.5 in every update
    True
    """
    mine, theirs = mine.astype(np.float64), theirs.astype(np.float64)
    model = model.astype(np.float64)
    change = float(np.linalg.norm(mine - mine.mean(axis=0)))
    norms = np.einsum("bd,bd->b", theirs, theirs)
    plain = np.einsum("bd,bd->b", mine, theirs) / np.where(norms > 0, norms, 1.0)
    left = float(np.linalg.norm(mine - plain[:, None] * theirs))
    if left <= 1e-6 * max(change, float(np.linalg.norm(mine))) or not np.any(model):
        scales, rest = plain, left
    else:  # k and c together: the normal equations of the least squares
        count = len(mine)
        matrix = np.zeros((count + 1, count + 1))
        matrix[np.arange(count), np.arange(count)] = norms
        matrix[:count, count] = matrix[count, :count] = theirs @ model
        matrix[count, count] = count * float(model @ model)
        target = np.append(np.einsum("bd,bd->b", theirs, mine), (mine @ model).sum())
        solved, *_ = np.linalg.lstsq(matrix, target, rcond=None)
        scales = solved[:count]
        rest = float(np.linalg.norm(mine - scales[:, None] * theirs - solved[count] * model))
    if change == 0:
        return scales, 0.0 if rest == 0 else 1e9
    return scales, rest / change


def _flat(ran: list[Any]) -> list[np.ndarray]:
    """The values a run fetched, each as a flat array of floats."""
    return [np.asarray(v, dtype=np.float64).ravel() for v in ran]


def _size(flat: list[np.ndarray]) -> float:
    """How large the updates' inputs of one run are, all together."""
    return float(np.linalg.norm(np.concatenate(flat))) if flat else 0.0


def _data_weights(sizes: np.ndarray) -> tuple[list[float], float]:
    """How much each tower's own data weighs in the updates, the same for every tower in a
    mean: ``sizes[t, i]`` is how large the updates are when every tower is fed tower ``i``'s
    batch of step ``t``. On a log scale, each size is a step's part, a tower's part and
    noise; the towers' parts, as factors of their geometric mean (1 each where no tower's
    data weighs more than another's), and the noise's standard deviation. Data that tells
    one tower from another (a column of each tower's own number) can weigh one tower's
    gradients more than the others' and still fit a mean, since its weight goes where its
    data goes; across steps, its tower's part shows it.

    >>> weights, noise = _data_weights(np.array([[4.0, 1e-4, 1e-4], [4.1, 1e-4, 1e-4]]))
    >>> weights[0] / weights[1] > 1e4, noise < 0.1
    (True, True)
    >>> _data_weights(np.array([[1.0, 1.2], [1.2, 1.0]]))  # noise, no tower's part
    ([1.0, 1.0], 0.182322)
    >>> _data_weights(np.array([[1.0, 0.0], [1.0, 0.0]]))[0][1]  # tower 1's data weighs nothing
    0.0
    """
    if not np.all(np.isfinite(sizes)) or not np.any(sizes > 0):
        return [], 0.0  # updates of no numbers, or of nothing: the weights say why
    logs = np.log(np.maximum(sizes, 1e-300))  # a tower's data that weighs nothing: 1e-300
    steps, towers = logs.shape
    tower_parts = logs.mean(axis=0) - logs.mean()
    step_parts = logs.mean(axis=1) - logs.mean()
    noise = logs - logs.mean() - step_parts[:, None] - tower_parts[None, :]
    freedom = max((steps - 1) * (towers - 1), 1)
    spread = float(np.sqrt((noise**2).sum() / freedom))
    return [round(float(w), 6) for w in np.exp(tower_parts)], round(_finite(spread), 6)


def _reaching(step: list[Any], towers: Any) -> dict[str, bool]:
    """For each op of ``step`` (in the order they were made: an op's inputs come first),
    whether it is a tower's or computes with a tower's data (along data edges)."""
    reaches: dict[str, bool] = {}
    for op in step:
        reaches[op.name] = towers.of(op.name) is not None or any(
            reaches.get(t.op.name, False) for t in op.inputs
        )
    return reaches


def _updates(step: list[Any], reaches: dict[str, bool]) -> list[tuple[str, list[Any]]]:
    """Each op of ``step`` that writes a variable
    (:func:`~simsync.tf_backend.program.capture.variables_written`: however its handle
    reached it), with its inputs of floating type that compute with a tower's data."""
    found = []
    for op in step:
        if not variables_written(op):
            continue
        tensors = [t for t in op.inputs if t.dtype.is_floating and reaches[t.op.name]]
        if tensors:
            found.append((op.name, tensors))
    return found


def _entries(
    step: list[Any], towers: Any, order: dict[str, int]
) -> tuple[list[list[Any]], list[Any], str | None]:
    """Each tower's entries (see the module's docstring), paired across towers, and those
    several towers take (refused: :func:`_shared_data`); or why they cannot be paired."""
    model = _from_variables(step)
    per_tower: list[dict[str, Any]] = [{} for _ in range(towers.count)]
    takers: dict[str, set[int]] = {}
    for op in step:
        tower = towers.of(op.name)
        if tower is None:
            continue
        for tensor in op.inputs:
            producer = tensor.op
            if not _number(tensor) or model[producer.name] is not False:
                continue  # the model's values, a constant's or a handle
            if towers.of(producer.name) == tower and not _source(producer):
                continue  # computed inside the tower
            per_tower[tower][tensor.name] = tensor
            takers.setdefault(tensor.name, set()).add(tower)
    entries = [
        sorted(
            (t for name, t in tensors.items() if len(takers[name]) == 1),
            key=lambda t: (order[t.op.name], t.value_index),
        )
        for tensors in per_tower
    ]
    shared = sorted(
        (t for tensors in per_tower for name, t in tensors.items() if len(takers[name]) > 1),
        key=lambda t: (order[t.op.name], t.value_index),
    )
    shared = list({t.name: t for t in shared}.values())
    if not entries[0]:
        why = "its towers are given no data of their own: their gradients are alike"
        return entries, shared, why
    for tower, tensors in enumerate(entries[1:], start=1):
        if len(tensors) != len(entries[0]) or any(
            a.dtype != b.dtype or a.shape.as_list() != b.shape.as_list()
            for a, b in zip(entries[0], tensors, strict=False)
        ):
            return entries, shared, f"tower_{tower} is given data of other shapes than tower_0's"
    if not all(t.graph.is_feedable(t) for tensors in entries for t in tensors):
        return entries, shared, "its towers' data cannot be fed to them"
    return entries, shared, None


def _shared_data(shared: list[Any]) -> str | None:
    """Why data that several towers take stops the measuring: each probe feeds it the same,
    so a tower's batch cut from it inside the tower, or a number drawn once a step (a
    random number, a clock) that the towers switch on, would not change from probe to
    probe as it does from step to step."""
    if not shared:
        return None
    return (
        f"its towers share data ('{shared[0].name}', taken by more than one tower): how each "
        "tower's gradient weighs is measured by changing each tower's own data; give each "
        "its own (a dequeue in each tower, or a split made outside the towers)"
    )


#: the sources a tower's data may come from: a queue's dequeue, random numbers (dropout),
#: a dataset's iterator
DATA_SOURCES = ("Dequeue", "Random", "Multinomial", "TruncatedNormal", "IteratorGetNext")
#: stateful ops that keep nothing (a print, an assertion, a check for NaN)
KEEP_NOTHING = frozenset({"Print", "PrintV2", "Assert", "NoOp", "CheckNumerics", "CheckNumericsV2"})


def _entry_sources(entries: list[Any]) -> str | None:
    """Why what the towers' data comes from stops the measuring: a placeholder (what a
    graded loop fed is its process's word: graded, it is fed zeros, and a tower could tell
    the measuring's numbers from its loop's), or state that is no queue, random op or
    iterator (a table's lookup, a stack); None when there is none."""
    for op in upstream([tensor.op for tensor in entries]):
        if op.type.startswith("Placeholder"):
            return (
                f"its towers' data comes from '{op.name}', a placeholder its loop feeds: "
                "graded, it is fed zeros, and the towers could tell the measuring from "
                "training; take each tower's batch in the graph (from a queue, as the "
                "starter does)"
            )
        made = all(t.dtype.name == "resource" for t in op.outputs)  # a queue's, a table's
        if _source(op) and not made and not _data_source(op):
            return (
                f"its towers compute with '{op.name}' ({op.type}), state besides the "
                "model's variables: keep the model in variables"
            )
    return None


def _kept_elsewhere(step: list[Any], reaches: dict[str, bool]) -> str | None:
    """Why the step keeps what the towers computed elsewhere than in a variable (a table's
    insert, a stack's push, a staging area, a file); None when it does not."""
    for op in step:
        if not reaches[op.name] or not op.op_def.is_stateful or op.type in KEEP_NOTHING:
            continue
        if variables_written(op) or op.type in HANDLE_READS or _data_source(op):
            continue
        if op.type in VARIABLE_OPS or (_source(op) and not op.inputs):
            continue  # a resource made (a queue's, a table's): nothing kept yet
        return (
            f"'{op.name}' ({op.type}) keeps what the towers computed elsewhere than in a "
            "variable: a step may change only its variables"
        )
    return None


def _data_source(op: Any) -> bool:
    """Whether ``op`` brings a tower's data (:data:`DATA_SOURCES`)."""
    return any(word in op.type for word in DATA_SOURCES)


def _unlike_towers(step: list[Any], towers: Any) -> str | None:
    """Why the towers do not compute the same: tower ``i``'s ops differ from tower 0's in
    their kinds, their constants or their settings, in the order they were made (a tower
    loop builds each tower alike; one that scales tower 0's loss, or draws a gate for the
    others only, would weigh them unlike any average)."""
    signatures: dict[int, list[tuple[str, bytes]]] = {}
    for op in step:
        tower = towers.of(op.name)
        if tower is not None:
            signatures.setdefault(tower, []).append(_signature(op))
    first = signatures.get(0, [])
    for tower in sorted(signatures):
        if signatures[tower] != first:
            return (
                f"tower_{tower} computes otherwise than tower_0 (other ops, constants or "
                "settings): build every tower alike, in one loop"
            )
    return None


#: an op's settings that differ from tower to tower in a tower loop of alike towers
_OWN_ATTRS = frozenset({"seed", "seed2", "_class", "shared_name", "container", "_output_shapes"})


def _signature(op: Any) -> tuple[str, bytes]:
    """What a tower's op computes, but for its name and place: its kind and its settings
    (a constant's value among them)."""
    attrs = op.node_def.attr
    kept = b"".join(
        name.encode() + attrs[name].SerializeToString(deterministic=True)
        for name in sorted(attrs)
        if name not in _OWN_ATTRS
    )
    return op.type, kept


#: an optimizer's inputs that are its settings, not the value it writes: a learning rate,
#: its decay, the powers Adam keeps (variables of their own)
SETTINGS = frozenset(
    {
        "alpha", "lr", "learning_rate", "momentum", "beta1", "beta2", "beta1_power",
        "beta2_power", "epsilon", "rho", "decay", "l1", "l2", "lr_power", "global_step",
    }
)  # fmt: skip


def _state(step: list[Any], towers: Any, reaches: dict[str, bool], fed: set[str]) -> str | None:
    """Why the step's writes are no function of the towers' data (``fed``) and the model
    (the floating variables written with the towers' data), which could tell the measuring
    runs from training; None when there is none. Walked back from the value each write of
    the step writes (its settings, a learning rate, left out), to the towers' data:

    - no data but the towers' (a dequeue, a random op or a placeholder not fed as a tower's
      data: training on other data, or state such as a clock), nor values kept by ops that
      are not variables (a queue, a stack, a staging area);
    - variables read by the towers' ops: the model's only;
    - variables read after the towers, on the way to a write of the towers' data: only its
      own (weight decay); elsewhere, the model's or its own (a moving average's). A counter
      of its runs, or values another write kept (of a step before), are neither;
    - a write of neither the model nor a variable the towers read (a moving average of the
      model, its decay set by the step's count, as cifar10_multi_gpu_train keeps) may read
      any variable: nothing the towers or the updates compute reads what it keeps (a write
      of the towers' data that read it would be refused above)."""
    in_step = {op.name for op in step}
    writes = [(op, variables_written(op)) for op in step]
    writes = [(op, written) for op, written in writes if written]
    model = {
        variable
        for op, written in writes
        if any(reaches[t.op.name] for t in _values(op))
        for variable in written
        if _floating(op, variable)
    }
    kept_apart = model | _tower_reads(step, towers)
    for op, written in writes:
        tower_write = any(reaches[t.op.name] for t in _values(op))
        if not tower_write and not set(written) & kept_apart:
            continue  # what it keeps, no training reads
        stack = [(t, towers.of(op.name) is not None) for t in _values(op)]
        seen: set[tuple[str, bool]] = set()
        while stack:
            tensor, inside = stack.pop()
            source = tensor.op
            if tensor.name in fed or (source.name, inside) in seen or source.name not in in_step:
                continue
            seen.add((source.name, inside))
            read = _read(tensor)
            if read is not None:
                allowed = (model if inside or not tower_write else set()) | set(written)
                if read not in allowed:
                    if inside:
                        return (
                            f"'{op.name}' writes what the towers computed with the variable "
                            f"'{read}', which no write of the towers' data trains (a counter "
                            "of runs, values kept from another step): state besides the "
                            "towers' data and the model"
                        )
                    return (
                        f"'{op.name}' writes what it computed after the towers with the "
                        f"variable '{read}': after the towers, a write may read only its own "
                        "variable (weight decay), not state such as a counter of runs or "
                        "values kept from another step"
                    )
                continue
            if _source(source):
                return (
                    f"'{op.name}' writes with '{source.name}' ({source.type}), state or data "
                    "besides the towers' data and the model"
                )
            if _computes_with_a_handle(source):
                return _handle_said(op, source)
            within = towers.of(source.name) is not None
            # a reference is read where it goes (a TF1 variable's value): only handles
            # are left, read by the reads above
            stack.extend((t, within) for t in source.inputs if t.dtype.name != "resource")
    return None


def _settings_drawn(step: list[Any], reaches: dict[str, bool]) -> str | None:
    """Why a setting of a write of the towers' data (its learning rate, its momentum: what
    :func:`_values` leaves out) changes from run to run otherwise than with the model's
    state (a clock, random numbers, a queue) or is fed from Python (a placeholder, even one
    with a default: what the loop feeds later is its process's word), which could turn the
    step when it is not measured; None when none does. A setting may read variables (a
    rate that decays with the count of steps)."""
    in_step = {op.name for op in step}
    for op in step:
        values = _values(op)
        if not variables_written(op) or not any(reaches[t.op.name] for t in values):
            continue
        kept = {t.name for t in values}
        stack = [t for t in op.inputs if t.name not in kept and not is_handle(t.dtype.name)]
        seen: set[str] = set()
        while stack:
            tensor = stack.pop()
            source = tensor.op
            if source.name in seen or source.name not in in_step or _read(tensor) is not None:
                continue
            seen.add(source.name)
            if source.type.startswith("Placeholder"):
                return (
                    f"'{op.name}' takes a setting (a learning rate, a momentum) fed from "
                    f"Python ('{source.name}', {source.type}): what a loop feeds is its "
                    "process's word, not graded; make it in the graph (a constant, or a "
                    "schedule of the global step)"
                )
            if _source(source):
                return (
                    f"'{op.name}' takes a setting (a learning rate, a momentum) made with "
                    f"'{source.name}' ({source.type}), which changes from run to run: a "
                    "setting may follow the count of steps, not the time or chance"
                )
            if _computes_with_a_handle(source):
                return _handle_said(op, source)
            stack.extend(t for t in source.inputs if t.dtype.name != "resource")
    return None


#: ops that change their input's memory in place: a variable's read may share it (a
#: parallel concat's update writes into the memory of the tensor it was started with, a
#: constant's too: a count of the executor's runs)
IN_PLACE = frozenset(
    {"InplaceAdd", "InplaceSub", "InplaceUpdate", "_ParallelConcatUpdate", "_ParallelConcatStart"}
)


def _computes_with_a_handle(op: Any) -> bool:
    """Whether ``op`` computes with a resource's handle itself, not with the value a read of
    it gives: a handle says where the resource is and by what name (serialized, it names
    its device: the grader's sandbox runs on other logical devices than a student's
    session), so the data ``op`` makes from it is no function of the model and the towers'
    data. A variable's reads and writes take handles to read or write them, not so."""
    if op.type in HANDLE_READS or op.type in VARIABLE_OPS or variables_written(op):
        return False
    return any(is_handle(t.dtype.name) for t in op.inputs) and any(
        not is_handle(t.dtype.name) for t in op.outputs
    )


def _handle_said(op: Any, source: Any) -> str:
    return (
        f"'{op.name}' writes with '{source.name}' ({source.type}), which computes with a "
        "resource's handle itself (where it is and by what name), not with a variable's "
        "value: read the variable and compute with its value"
    )


def _hidden_writes(step: list[Any]) -> str | None:
    """Why a write of the step cannot be measured: through a handle that leads to none of
    the graph's variables, inside a function's call (its inputs need not be what it
    writes), or in place, in the memory of a tensor a variable's read may share
    (:data:`IN_PLACE`); None when there is none."""
    for op in step:
        if op.type in IN_PLACE:
            return (
                f"'{op.name}' ({op.type}) changes a tensor in place, which may be a variable's "
                "own memory (a read of it): a step may change its variables only by writing "
                "them (an optimizer's apply, an assign)"
            )
        unknown = _unknown_handle(op)
        if unknown is not None:
            return (
                f"'{op.name}' writes through a handle ('{unknown}') that is none of the "
                "graph's variables (made inside a function, or a second handle): what it "
                "writes cannot be told; write each variable through its own handle"
            )
        if calls_write(op):  # a function it runs writes, whatever handles it takes
            return (
                f"'{op.name}' writes variables inside a function's call ({op.type}: a "
                "tf.function, tf.cond or tf.while_loop), whose writes are not measured: "
                "update the variables with an optimizer's ops"
            )
    for op in step:  # a write's own reason first (a handle made by name, said so)
        otherwise = implemented_otherwise(op)
        if otherwise is not None:
            return (
                f"'{op.name}' calls functions ({op.type}) of a graph whose function "
                f"'{otherwise}' declares what it implements (api_implements): TensorFlow may "
                "run another implementation in its place, chosen by the device and the "
                "session, which the measuring cannot tell: call plain functions"
            )
        inside = calls_state(op, KEEP_NOTHING, IN_PLACE)
        if inside is not None:  # a PartitionedCall is declared stateless, whatever it holds
            return (
                f"'{op.name}' calls a function ({op.type}: a tf.function, tf.cond or "
                f"tf.while_loop) that holds '{inside}', state besides the model's variables "
                "(a clock, a queue, a table, random numbers, a variable read inside it, a "
                "change in place), which the measuring cannot follow into the call: compute "
                "a step's functions from their inputs alone (read a variable outside, pass "
                "its value in)"
            )
    return None


def _unknown_handle(op: Any) -> str | None:
    """The handle (its tensor's name) through which an op of a writing kind writes, or a
    function's call may, that leads to none of the graph's variables; None when there is
    none."""
    writer = runs_functions(op) or any(word in op.type for word in WRITE_WORDS)
    if not writer:
        return None
    other = ("Accumulator", "Queue", "Stack", "Table")  # resources that are no variables
    for tensor in op.inputs:
        unknown = tensor.dtype.name == "resource" and carried_variable(tensor) is None
        if unknown and not any(word in op.type for word in other):
            return str(tensor.name)
    return None


def _values(op: Any) -> list[Any]:
    """The inputs of a write that carry the value it writes: not its handles, nor an
    optimizer's settings (:data:`SETTINGS`)."""
    names = [arg.name for arg in op.op_def.input_arg]
    if len(names) != len(op.inputs):  # inputs of a list's length: every one counts
        names = [""] * len(op.inputs)
    return [
        t for t, name in zip(op.inputs, names, strict=True)
        if name not in SETTINGS and not is_handle(t.dtype.name)
    ]  # fmt: skip


def _read(tensor: Any) -> str | None:
    """The variable whose value ``tensor`` is (a read of it, its reference, or the
    ``Identity`` TensorFlow 1 makes of a reference variable where it is made, ``v/read``,
    read wherever its value goes), or None."""
    op = tensor.op
    if op.type in VARIABLE_OPS:
        return str(op.name)
    if op.type in HANDLE_READS:
        return next((v for v in map(carried_variable, op.inputs) if v is not None), None)
    if op.type == "Identity" and op.inputs and op.inputs[0].dtype.name.endswith("_ref"):
        return _read(op.inputs[0])
    return None


def _floating(op: Any, variable: str) -> bool:
    """Whether ``variable`` (written by ``op``) holds floating numbers."""
    found = op.graph.get_operation_by_name(variable)
    return bool(found.get_attr("dtype").is_floating)


def _from_variables(step: list[Any]) -> dict[str, bool | None]:
    """For each op of ``step``: True when it computes with a variable's value (along data
    edges), False when it computes with data of a source (a stateful op, a placeholder) and
    no variable, None when with neither (constants, handles)."""
    found: dict[str, bool | None] = {}
    for op in step:  # in the order they were made: an op's inputs come first
        if op.type in VARIABLE_OPS:
            found[op.name] = True
            continue
        inputs = [found.get(t.op.name) for t in op.inputs]
        if any(i is True for i in inputs):
            found[op.name] = True
        elif any(i is False for i in inputs) or _source(op):
            found[op.name] = False
        else:
            found[op.name] = None
    return found


def _source(op: Any) -> bool:
    """Whether ``op`` makes data the step does not compute: a dequeue, a random op, a
    placeholder (any stateful op but a variable's, or one that keeps nothing and passes its
    input on: a print, a check for NaN)."""
    return op.type.startswith("Placeholder") or (
        op.op_def.is_stateful and op.type not in VARIABLE_OPS and op.type not in KEEP_NOTHING
    )


def _number(tensor: Any) -> bool:
    dtype = tensor.dtype
    return bool(dtype.is_floating or dtype.is_integer or dtype.is_bool)


def _same(first: Iterable[Any], second: Iterable[Any]) -> bool:
    return all(np.array_equal(a, b) for a, b in zip(first, second, strict=True))


def _drawn(batch: list[Any], rng: np.random.Generator) -> list[Any]:
    """``batch`` with its floating values drawn at random (standard normal), its integers
    kept."""
    return [
        rng.standard_normal(np.shape(v)).astype(v.dtype)
        if np.issubdtype(np.asarray(v).dtype, np.floating)
        else v
        for v in batch
    ]


def _joint_weights(measured: list[tuple[np.ndarray, list[np.ndarray]]]) -> np.ndarray | None:
    """The weights that fit every update at once (each scaled to its own size): what an
    update of fewer values than towers (a scalar, two classes' biases) is judged by, its own
    fit having more unknowns than values. None when they cannot be told apart either."""
    rows, targets = [], []
    for own, every in measured:
        matrix = np.stack(every, axis=1)
        if not (np.all(np.isfinite(matrix)) and np.all(np.isfinite(own))):
            continue
        size = max(float(np.linalg.norm(own)), float(np.abs(matrix).max(initial=0.0)))
        if size > 0:
            rows.append(matrix / size)
            targets.append(own / size)
    if not rows:
        return None
    matrix, target = np.concatenate(rows), np.concatenate(targets)
    if not _separable(matrix):
        return None
    fitted, *_ = np.linalg.lstsq(matrix, target, rcond=None)
    return np.asarray(fitted)


def _separable(matrix: np.ndarray) -> bool:
    """Whether the towers' columns of ``matrix`` can be told apart (full column rank); not
    when numbers too large for a decomposition (a step that diverges) leave it undecided.

    >>> _separable(np.eye(3)), _separable(np.array([[np.inf, 1.0], [1.0, 2.0], [0.0, 1.0]]))
    (True, False)
    """
    if matrix.shape[0] < matrix.shape[1] or not np.all(np.isfinite(matrix)):
        return False
    try:
        with np.errstate(all="ignore"):
            singular = np.linalg.svd(matrix, compute_uv=False)
    except np.linalg.LinAlgError:  # "SVD did not converge"
        return False
    return bool(singular[0] > 0 and singular[-1] >= SEPARABLE * singular[0])


def _weights(
    op: str,
    own: np.ndarray,
    again: np.ndarray,
    permuted: list[np.ndarray],
    every: list[np.ndarray],
    joint: np.ndarray | None,
) -> dict[str, Any]:
    """The weights of ``op``'s towers (see the module's docstring; ``joint``, the fit of
    every update at once, where its own values cannot tell them), the share of ``own`` no
    weighted sum fits (``residual``), and how much the towers' batches permuted and the same
    batches again change it (``permuted``, ``repeated``); each a share of ``own``'s size.
    No weights (``[]``) when the towers' values cannot be told apart."""
    size = float(np.linalg.norm(own))
    scale = size if size > 0 else 1.0
    matrix = np.stack(every, axis=1)
    finite = all(np.all(np.isfinite(v)) for v in (matrix, own, again, *permuted))
    found: dict[str, Any] = {
        "op": op, "weights": [], "residual": 1e9, "joint": False, "finite": finite,
    }  # fmt: skip
    if not finite:  # what a model blown up to NaN or infinity computes
        return {**found, "permuted": 1e9, "repeated": 1e9}
    if _separable(matrix):
        fitted, *_ = np.linalg.lstsq(matrix, own, rcond=None)
    elif joint is not None:
        fitted, found["joint"] = joint, True
    else:
        fitted = None
    if fitted is not None:
        found["weights"] = [float(w) for w in fitted]
        found["residual"] = _finite(float(np.linalg.norm(own - matrix @ fitted)) / scale)
    found["permuted"] = _finite(max(float(np.linalg.norm(p - own)) for p in permuted) / scale)
    found["repeated"] = _finite(float(np.linalg.norm(again - own)) / scale)
    return found


def _finite(value: float) -> float:
    return value if np.isfinite(value) else 1e9
