"""The kind-aware check: every op of a graph held to what its kind declares, before anything runs.

:func:`simsync.ir.validate` checks the structure (no cycle; devices, variables and resources
that exist; clients and their fetches) and knows nothing of what a kind means.
:func:`check_graph` calls it first, then holds every op to its kind's declarations
(:mod:`simsync.kinds.contract`). What it asks for depends on what the run will compute, so that
a graph that only needs timing is not refused for what only values need:

**Always** (timing, and every executor):

1. every op's kind is known (with a guess at the one meant);
2. an op whose kind acts on a resource (push, take, enqueue, dequeue) names one, of the type it
   acts on (an accumulator, a queue);
3. every op is run by some client: TensorFlow would never run the rest (a tensor lost, or a
   fetch missing), and a timing that leaves it out would be wrong without a word.

**Where values are computed** (``values=True``: a simulation with numerics, the TensorFlow
backend, and :func:`simsync.api.validate` unless told otherwise):

4. every op has the inputs its kind needs, by role: none missing, no more than it takes, none
   of a role it does not take (control edges order only: they are no inputs);
5. it writes only variables its kind may write, and ``max_staleness`` only with writes; and
   the ops that write a variable all write the same ones (an update moves its variables
   together: the ledger keeps one version per update).

**With the model the values are computed with** (``model``):

6. every trainable variable holds a parameter of the model, and a variable that holds numbers
   no gradient moves has the shape of the model's parameter it holds;
7. each kind's abstract rule, op by op in the graph's order, from its inputs' abstract values:
   a forward pass gets every parameter of the model, an apply a gradient for every variable it
   writes, a push the gradient it pushes, ...

An op that takes a tensor from a ``generic`` op (a kind that computes no value) is exempt from
4 and 7: its value cannot be computed anyway, and :func:`values_skipped` says so (the replay
then computes no values, rather than crash or compute wrong ones).
"""

from __future__ import annotations

from collections import defaultdict

from simsync.errors import GraphError
from simsync.ir import Graph, Op, run_orders, topological_order, validate
from simsync.ir.resources import PUSH
from simsync.kinds.contract import ROLES, Abstract, Input, Inputs, OpLike, the
from simsync.kinds.registry import KINDS, OpKind, known_kinds, providers
from simsync.numerics import ModelSpec, parameter_shapes
from simsync.numerics.batch_norm import moving_shapes
from simsync.words import article

__all__ = ["check_graph", "values_skipped"]

_CATEGORY = {
    "trainable": "a trainable variable",
    "counter": "a counter",
    "statistic": "numbers no gradient moves",
}


def check_graph(graph: Graph, model: ModelSpec | None = None, *, values: bool = True) -> None:
    """Raise :class:`GraphError` naming the first problem found, if any: one line that names
    the op, what is wrong with it and what would put it right.

    ``values=False`` checks what timing needs (the structure, known kinds, resources, every op
    run by a client); ``values=True`` also every op's inputs by role and its writes; with a
    ``model``, also that the values can be computed with that model (see the module's doc).

    Parameters
    ----------
    graph
        The graph to check.
    model
        The model the values will be computed with, if any.
    values
        Whether values will be computed (numerics on, or TensorFlow).

    Raises
    ------
    GraphError
        The first problem found.

    Examples
    --------
    >>> from simsync.ir import Client, Device, Graph, Op
    >>> g = Graph()
    >>> g.add_device(Device("/gpu:0"))
    >>> loss = g.add_op(Op("loss", "forward", "/gpu:0"))
    >>> gradients = g.add_op(Op("gradients", "backward", "/gpu:0"))
    >>> g.connect(loss, gradients)
    >>> g.add_client(Client("main", fetches=("gradients",)))
    >>> check_graph(g, values=False)  # timing needs nothing more
    >>> check_graph(g)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    simsync.errors.GraphError: op 'loss' (forward) needs the parameters: add a tensor from ...
    """
    validate(graph)
    kinds = {op.name: _known(op) for op in graph.ops()}
    for op in graph.ops():
        _resource(graph, op, kinds[op.name])
    if values:
        context, fed = _Context(graph), _fed_by_opaque(graph, kinds)
        for op in graph.ops():
            if op.name not in fed:
                _inputs(graph, op, kinds[op.name], context)
            _writes(op, kinds[op.name], context)
        _written_together(graph)
    _unrun(graph)
    if values and model is not None:
        modelled = _Model(graph, model)
        _variables(graph, modelled)
        _abstract(graph, kinds, modelled)


def values_skipped(graph: Graph) -> str | None:
    """Why the values of a run of ``graph`` cannot be computed, or None if they can: a
    ``generic`` op (a kind that computes no value) feeds an op that computes one, or writes a
    variable that holds numbers. Call it on a checked graph.

    >>> from simsync.ir import Device, Graph, Op
    >>> g = Graph()
    >>> g.add_device(Device("/gpu:0"))
    >>> matmul = g.add_op(Op("MatMul", "generic", "/gpu:0"))
    >>> loss = g.add_op(Op("loss", "forward", "/gpu:0"))
    >>> g.connect(matmul, loss)
    >>> print(values_skipped(g))  # doctest: +NORMALIZE_WHITESPACE
    values are not computed: op 'loss' (forward) takes a tensor from 'MatMul' (generic),
    which computes no value
    """
    context = _Context(graph)
    kinds = {op.name: KINDS.get(op.kind) for op in graph.ops()}
    for op in graph.ops():
        kind = kinds[op.name]
        if kind is not None and not kind.computes:
            for variable in op.writes:
                if context.category(variable) != "counter":
                    return (
                        f"values are not computed: op '{op.name}' ({op.kind}) writes "
                        f"'{variable}', which holds numbers, and computes none"
                    )
    for name in topological_order(graph):
        kind = kinds[name]
        if kind is None or not kind.computes:
            continue
        for tensor in graph.inputs(name):
            source = kinds[tensor.src]
            if not tensor.control and source is not None and not source.computes:
                return (
                    f"values are not computed: op '{name}' ({kind.name}) takes a tensor from "
                    f"'{tensor.src}' ({source.name}), which computes no value"
                )
    return None


# -- always -----------------------------------------------------------------------------------
def _known(op: Op) -> OpKind:
    kind = KINDS.get(op.kind)
    if kind is None:
        raise GraphError(f"op '{op.name}' has unknown kind '{op.kind}'; {known_kinds(op.kind)}")
    return kind


def _resource(graph: Graph, op: Op, kind: OpKind) -> None:
    """A kind that acts on a resource needs one of the type it acts on."""
    if kind.action is None:
        return
    wanted = kind.action.resource
    how = f"set resource= to one (Resource(name, '{wanted}', device))"
    if op.resource is None:
        raise GraphError(
            f"op '{op.name}' ({kind.name}) acts on {article(wanted)} but names none: {how}"
        )
    actual = graph.resources[op.resource].kind
    if actual != wanted:
        raise GraphError(
            f"op '{op.name}' ({kind.name}) acts on {article(wanted)}, but '{op.resource}' is "
            f"{article(actual)}: {how}"
        )


def _unrun(graph: Graph) -> None:
    """Every op is in some client's run. Of those that are not, the one named is where the
    chain ends (no tensor of it goes to another such op): there a tensor is lost."""
    run = set().union(*run_orders(graph, [client.fetches for client in graph.clients]))
    unrun = [op for op in graph.ops() if op.name not in run]
    ends = [op for op in unrun if all(t.dst in run for t in graph.outputs(op.name))]
    for op in ends[:1]:
        raise GraphError(
            f"op '{op.name}' ({op.kind}) is run by no client: no client fetches it, and no op "
            f"a client runs takes its tensors; add a tensor from it to an op a client runs, or "
            f"fetch it"
        )


# -- where values are computed ----------------------------------------------------------------
def _fed_by_opaque(graph: Graph, kinds: dict[str, OpKind]) -> set[str]:
    """The ops that take a tensor from an op that computes no value."""
    return {
        t.dst
        for t in graph.edges()
        if not t.control and not kinds[t.src].computes and kinds[t.dst].computes
    }


def _inputs(graph: Graph, op: Op, kind: OpKind, context: _Context) -> None:
    """The op's data inputs are what its kind needs, by role."""
    if not kind.computes:
        return  # it takes anything: its inputs only order it
    sources = [graph.op(t.src) for t in graph.inputs(op.name) if not t.control]
    for need in kind.needs:
        found = [source for source in sources if ROLES[source.kind] in need.roles]
        if len(found) < need.required(op, context):
            raise GraphError(_missing(op, need))
        if need.most is not None and len(found) > need.most:
            names = ", ".join(f"'{source.name}'" for source in found)
            raise GraphError(
                f"op '{op.name}' ({op.kind}) takes {the(need.role)} from {_count(need.most)} "
                f"op, but {len(found)} give {_pronoun(need.role)} ({names}): keep "
                f"{_count(need.most)}, or make the others control edges "
                f"(Tensor(..., control=True))"
            )
    taken = {role for need in kind.needs for role in need.roles}
    for source in sources:
        role = ROLES[source.kind]
        if role not in taken:
            raise GraphError(
                f"op '{op.name}' ({op.kind}) takes no {role}, but '{source.name}' "
                f"({source.kind}) gives it {the(str(role))}: remove that tensor, or make it a "
                f"control edge (Tensor(..., control=True)) if '{op.name}' only waits for it"
            )


def _missing(op: OpLike, need: Input) -> str:
    """What to say of an input ``op`` lacks: the role, and the kinds that provide it."""
    offers = []
    for position, role in enumerate(need.roles):
        kinds = ", ".join(f"'{k}'" for k in providers(role))
        what = _pronoun(role) if position == 0 else the(role)
        offers.append(f"{what} (kind {kinds})")
    return (
        f"op '{op.name}' ({op.kind}) needs {the(need.role)}: add a tensor from an op that "
        f"provides {' or '.join(offers)}"
    )


def _writes(op: Op, kind: OpKind, context: _Context) -> None:
    """The op writes only variables its kind may write."""
    for variable in op.writes:
        category = context.category(variable)
        if category not in kind.may_write:
            writers = [k.name for k in KINDS.values() if category in k.may_write and k.computes]
            raise GraphError(
                f"op '{op.name}' ({op.kind}) writes '{variable}' ({_CATEGORY[category]}), "
                f"which a {op.kind} op never does: let an op of kind "
                f"{' or '.join(repr(w) for w in writers)} write it"
            )
    if op.max_staleness is not None and not op.writes:
        raise GraphError(
            f"op '{op.name}' ({op.kind}) has max_staleness but writes no variable: there is "
            f"no update to drop; give it writes, or drop max_staleness"
        )


def _written_together(graph: Graph) -> None:
    """Ops that write a variable all write the same ones: an update moves them together, from
    one version (the ledger keeps one per update)."""
    writers: dict[str, Op] = {}
    for op in graph.ops():
        for variable in op.writes:
            first = writers.setdefault(variable, op)
            if set(first.writes) != set(op.writes):
                raise GraphError(
                    f"op '{op.name}' ({op.kind}) writes {', '.join(op.writes)}, but "
                    f"'{first.name}' writes '{variable}' with {', '.join(first.writes)}: an "
                    f"update moves its variables together, from one version, so the ops that "
                    f"write a variable must write the same ones"
                )


# -- with the model ---------------------------------------------------------------------------
def _variables(graph: Graph, context: _Model) -> None:
    """Every trainable variable holds a parameter of the model; one holding untrained numbers
    under a parameter's name has its shape."""
    shapes = {**parameter_shapes(context.spec), **moving_shapes(context.spec)}
    for variable in graph.variables.values():
        held = variable.model_parameter
        if variable.trainable and held not in context.trainable:
            known = ", ".join(context.trainable_order)
            raise GraphError(
                f"variable '{variable.name}' is trainable, but the model has no parameter "
                f"'{held}' (it has {known}): hold one of them (Variable(..., parameter="
                f"'{context.trainable_order[0]}')), or simulate with numerics off"
            )
        statistic = context.category(variable.name) == "statistic"
        if statistic and held in shapes and tuple(variable.shape) != shapes[held]:
            raise GraphError(
                f"variable '{variable.name}' holds '{held}' with shape "
                f"{tuple(variable.shape)}, but the model's has shape {shapes[held]}"
            )


def _abstract(graph: Graph, kinds: dict[str, OpKind], context: _Model) -> None:
    """Each op's abstract value from its inputs', in the graph's order (what the values will
    be); the kinds' abstract rules raise where the values could not be computed."""
    values: dict[str, Abstract] = {}
    for name in topological_order(graph):
        op, kind = graph.op(name), kinds[name]
        tensors = [t for t in graph.inputs(name) if not t.control]
        if not kind.computes or any(t.src not in values for t in tensors):
            continue  # no value, or none computable (a tensor from an op that computes none)
        inputs = Inputs(op, [(graph.op(t.src), values[t.src]) for t in tensors])
        abstract = kind.abstract
        values[name] = abstract(op, inputs, context) if abstract else Abstract(str(kind.provides))


# -- what the declarations may ask of the graph -----------------------------------------------
class _Context:
    """The graph, as :class:`~simsync.kinds.contract.GraphContext`."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self._pushes: dict[str, list[OpLike]] = defaultdict(list)
        for op in graph.ops():
            kind = KINDS.get(op.kind)
            if kind is not None and kind.action is PUSH and op.resource is not None:
                self._pushes[op.resource].append(op)

    def parameter(self, variable: str) -> str:
        return self.graph.variables[variable].model_parameter

    def category(self, variable: str) -> str:
        found = self.graph.variables[variable]
        return "trainable" if found.trainable else "counter" if found.counter else "statistic"

    def pushes(self, resource: str) -> list[OpLike]:
        return self._pushes.get(resource, [])


class _Model(_Context):
    """The graph and the model, as :class:`~simsync.kinds.contract.AbstractContext`."""

    def __init__(self, graph: Graph, spec: ModelSpec) -> None:
        super().__init__(graph)
        self.spec = spec
        self.trainable_order = list(parameter_shapes(spec))
        self.trainable = frozenset(self.trainable_order)
        self.moving = frozenset(moving_shapes(spec))


def _count(most: int) -> str:
    return "one" if most == 1 else str(most)


def _pronoun(role: str) -> str:
    """``them`` for a plural role (the gradients), ``it`` otherwise (the loss, the batch)."""
    return "them" if role.endswith("s") and not role.endswith("ss") else "it"
