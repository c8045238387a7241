"""Expected answers come from the simulation: facts about a scenario, and expressions over them.

A question's ``answer`` is an expression such as ``step_time.mean * 1000`` or ``slowest_tower``,
evaluated over the facts of the question's scenario, so no expected answer is ever typed in by
hand. The expression language is deliberately small: numbers, strings, ``+ - * /``, dotted
names, ``[index]``, comparisons (``< <= > >= == !=``, ``and``, ``or``, ``not``, ``x if c else
y``, for a lesson's claims: :mod:`simsync.tutor.claims`), and a few functions.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import operator
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simsync.errors import SimsyncError, SimulationError

if TYPE_CHECKING:
    from simsync.simulation import Simulation

__all__ = [
    "ExpressionError",
    "evaluate",
    "program_facts",
    "program_run",
    "race_facts",
    "scenario_facts",
    "simulation_facts",
]


class ExpressionError(SimsyncError):
    """An answer expression that cannot be evaluated."""


#: Beyond this, ``harmonic`` would take long to sum; no scenario has more towers.
MAX_HARMONIC = 1_000_000


def harmonic(n: int) -> float:
    """H_n = 1 + 1/2 + ... + 1/n: the expected maximum of n exponential draws of mean 1."""
    if not 0 <= n <= MAX_HARMONIC:
        raise ValueError(f"harmonic(n) takes n from 0 to {MAX_HARMONIC:,}, got {n}")
    return sum(1 / k for k in range(1, int(n) + 1))


def lowest(values: dict[str, Any]) -> str:
    """The key of the smallest value: ``lowest(final_loss)`` names the run that ended lowest."""
    return min(values, key=values.__getitem__)


def highest(values: dict[str, Any]) -> str:
    """The key of the largest value."""
    return max(values, key=values.__getitem__)


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "harmonic": harmonic,
    "lowest": lowest,
    "highest": highest,
    "max": max,
    "min": min,
    "round": round,
    "len": len,
    "abs": abs,
}
OPERATORS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}
COMPARISONS: dict[type, Callable[[Any, Any], bool]] = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}


@functools.cache
def scenario_facts(path: Path, numerics: bool = False) -> dict[str, Any]:
    """Simulate the scenario at ``path`` and return every fact an answer may use. The loss
    facts (``loss``, ``final_loss``) need ``numerics``; timing facts do not, and are faster."""
    from simsync.scenario import load_scenario
    from simsync.simulation import simulate

    try:
        sim = simulate(load_scenario(path), numerics=numerics)
    except SimulationError as error:  # a deadlock: what it says, and who waits on what
        blocked = sorted(error.blocked.values())
        return {
            "deadlock": str(error),
            "blocked": error.blocked,
            "blocked_on": max(blocked, key=blocked.count) if blocked else "",
        }
    return simulation_facts(sim)


def simulation_facts(sim: Simulation) -> dict[str, Any]:
    """Every fact an answer may use, read off a finished simulation (of a scenario's own graph
    or of any graph run with it): the summary's keys and the derived facts below."""
    from simsync.ir import generations
    from simsync.simulation import summary
    from simsync.trace import named_straggler, stalest_client

    scenario = sim.scenario
    result = summary(sim)
    first = sim.sync_points[0] if sim.sync_points else ""
    waits = result["wait"].get(first, {})
    last = result["waited_for"].get(first, {})
    layers = generations(sim.graph)
    start = min((s.start for s in sim.trace.steps), default=0.0)
    facts: dict[str, Any] = dict(result)
    facts.update(
        {
            "compute_mean": scenario.compute.mean,
            "speeds": list(scenario.cluster.speeds),
            "slowest_speed": min(scenario.cluster.speeds),
            "ops": len(sim.graph),
            "generations": len(layers),
            "widest_generation": max(len(layer) for layer in layers),
            "ops_run_while_building": sum(1 for r in sim.trace.ops if r.start < start),
            "first_sync_point": first,
            # the straggler the table marks: last clearly most often, with the most work
            "slowest_tower": named_straggler(last, result["expected_last"].get(first, "")),
            "max_wait": max(waits.values(), default=0.0),
            "expected_max": scenario.compute.mean * harmonic(scenario.towers),
            "workers": scenario.towers,
            "stalest_worker": stalest_client(result["staleness_by_client"]),
            "deadlock": "",
            "steps_one_worker_twice": _filled_twice(sim.trace),
            "variable_updates_per_step": _updates_of_one_variable(sim) / max(result["steps"], 1),
        }
    )
    return facts


#: Steps a question about a program simulates (as its lesson's program step does).
PROGRAM_STEPS = 40
#: Facts of a scenario's set-up that an imported program does not have.
_SCENARIO_ONLY = ("compute_mean", "expected_max")


def program_run(path: Path, towers: int | None = None, speeds: tuple[float, ...] = ()) -> Any:
    """The TensorFlow program at ``path`` imported (in the sandbox) and simulated for
    :data:`PROGRAM_STEPS` steps with ``towers`` and ``speeds`` as the what-if (a
    :class:`~simsync.simulation.user_program.ProgramRun`): what a lesson's program step shows
    and its questions about the program ask. Kept while the program and the Python files beside it
    (which it may import) are unchanged, so the step and its questions see one run; a
    learner who edits them gets the new graph's."""
    return _program_run(path, _sources_digest(path), towers, speeds)


def _sources_digest(path: Path) -> str:
    """A digest of the program and the Python files in its folder, by content."""
    digest = hashlib.sha256()
    for source in sorted({path, *path.parent.glob("*.py")}):
        digest.update(source.name.encode() + b"\0" + source.read_bytes() + b"\0")
    return digest.hexdigest()


@functools.lru_cache(maxsize=8)
def _program_run(path: Path, _sources: str, towers: int | None, speeds: tuple[float, ...]) -> Any:
    from simsync.simulation.user_program import WhatIf, simulate_program

    return simulate_program(path, WhatIf(towers=towers, speeds=speeds), steps=PROGRAM_STEPS)


def program_facts(
    path: Path, towers: int | None = None, speeds: tuple[float, ...] = ()
) -> dict[str, Any]:
    """The facts of the graph the TensorFlow program at ``path`` builds
    (:func:`program_run`): those of :func:`simulation_facts`, less what only a scenario sets
    (the towers' compute mean), with the program's ``speeds``."""
    run = program_run(path, towers, speeds)
    facts = simulation_facts(run.simulation)
    for key in _SCENARIO_ONLY:
        del facts[key]
    every = [1.0] * max(len(run.graph.towers), 1)
    facts["speeds"] = [speeds[i % len(speeds)] for i in range(len(every))] if speeds else every
    facts["slowest_speed"] = min(facts["speeds"])
    return facts


def _updates_of_one_variable(sim: Any) -> int:
    """How many applied updates wrote the model's first trainable variable."""
    graph = sim.graph
    first = next((v for v, var in graph.variables.items() if var.trainable), None)
    return sum(1 for u in sim.trace.updates if u.applied and first in graph.op(u.op).writes)


def _filled_twice(trace: Any) -> int:
    """Steps in which one worker's gradients filled two slots of one accumulator's take."""
    from simsync.trace import takes_of_one_accumulator

    return sum(
        len({p.client for p in pushes}) < len(pushes)
        for _, pushes in takes_of_one_accumulator(trace)
    )


@functools.cache
def race_facts(paths: tuple[Path, ...]) -> dict[str, Any]:
    """Race the scenarios at ``paths`` (see :func:`simsync.simulation.contest`): ``winner``
    (the name of the first to reach the target loss; empty on a tie), ``target_loss``, and by
    scenario name ``reached`` and ``finished`` (seconds), ``final_loss`` and ``staleness``
    (mean)."""
    from simsync.scenario import load_scenario
    from simsync.simulation import contest

    result = contest([load_scenario(p) for p in paths])
    winner = result.clear_winner  # a tie has no winner: a question on it has no answer
    return {
        "winner": "" if winner is None else result.entrants[winner].name,
        "target_loss": result.target,
        "reached": {r.name: r.reached for r in result.entrants},
        "finished": {r.name: r.finished for r in result.entrants},
        "final_loss": {r.name: r.final_loss for r in result.entrants},
        "staleness": {r.name: r.staleness for r in result.entrants},
    }


def evaluate(expression: str, facts: dict[str, Any]) -> Any:
    """The value of ``expression`` over ``facts``.

    >>> evaluate("step_time.mean * 1000", {"step_time": {"mean": 0.02}})
    20.0
    >>> evaluate("sync_points[0]", {"sync_points": ["average_gradients"]})
    'average_gradients'
    >>> evaluate("round(harmonic(towers), 3)", {"towers": 4})
    2.083
    >>> evaluate("lowest(loss) == 'a' and 1 < towers <= 4", {"loss": {"a": 1, "b": 2}, "towers": 4})
    True
    >>> evaluate("__import__('os')", {})
    Traceback (most recent call last):
    ...
    simsync.tutor.facts.ExpressionError: unknown function '__import__' in __import__('os')
    """
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as error:
        raise ExpressionError(f"not an expression: {expression!r} ({error.msg})") from None
    return _value(tree.body, facts, expression)


def _value(node: ast.AST, facts: dict[str, Any], text: str) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float | str):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in facts:
            raise ExpressionError(
                f"unknown fact '{node.id}' in {text}; facts: {', '.join(sorted(facts))}"
            )
        return facts[node.id]
    if isinstance(node, ast.Attribute):
        return _lookup(_value(node.value, facts, text), node.attr, text)
    if isinstance(node, ast.Subscript):
        return _lookup(_value(node.value, facts, text), _value(node.slice, facts, text), text)
    if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
        left, right = _value(node.left, facts, text), _value(node.right, facts, text)
        if not all(isinstance(v, int | float) for v in (left, right)) and not (
            isinstance(node.op, ast.Add) and isinstance(left, str) and isinstance(right, str)
        ):
            raise ExpressionError(f"arithmetic on {left!r} and {right!r} in {text}")
        return _computed(OPERATORS[type(node.op)], (left, right), text)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return _computed(operator.neg, (_value(node.operand, facts, text),), text)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return not _value(node.operand, facts, text)
    if isinstance(node, ast.Compare) and all(type(op) in COMPARISONS for op in node.ops):
        values = [_value(n, facts, text) for n in (node.left, *node.comparators)]
        return all(
            _computed(COMPARISONS[type(op)], (left, right), text)
            for op, left, right in zip(node.ops, values, values[1:], strict=False)
        )
    if isinstance(node, ast.BoolOp):
        values = [_value(n, facts, text) for n in node.values]
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.IfExp):
        chosen = node.body if _value(node.test, facts, text) else node.orelse
        return _value(chosen, facts, text)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        if node.func.id not in FUNCTIONS:
            raise ExpressionError(f"unknown function '{node.func.id}' in {text}")
        arguments = tuple(_value(a, facts, text) for a in node.args)
        return _computed(FUNCTIONS[node.func.id], arguments, text)
    raise ExpressionError(f"not allowed in an answer: {ast.unparse(node)!r} in {text}")


def _computed(function: Callable[..., Any], arguments: tuple[Any, ...], text: str) -> Any:
    """``function(*arguments)``; what it cannot compute (1/0, max of nothing) says so.

    >>> evaluate("1 / (towers - 4)", {"towers": 4})
    Traceback (most recent call last):
    ...
    simsync.tutor.facts.ExpressionError: cannot compute 1 / (towers - 4) (division by zero)
    """
    try:
        return function(*arguments)
    except (TypeError, ValueError, ArithmeticError) as error:
        raise ExpressionError(f"cannot compute {text} ({error})") from None


def _lookup(container: Any, key: Any, text: str) -> Any:
    try:
        return container[key]
    except (KeyError, IndexError, TypeError):
        raise ExpressionError(f"no '{key}' in {text}") from None
