"""The four kinds of check. Each takes what it needs and returns (passed, output): the output
speaks to the student and says what was expected and what was found."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from simsync.grading.assignment import Check
from simsync.grading.graphs import Built
from simsync.tutor.facts import ExpressionError, evaluate

__all__ = ["VALUE_TOLERANCE", "answer", "simulation", "structure", "tensorflow"]

#: parameters of two runs of the same training agree to about 1e-15 in float64
VALUE_TOLERANCE = 1e-9

Verdict = tuple[bool, str]
#: a simulation's facts, as the sandbox sent them
Facts = dict[str, Any]


def structure(check: Check, found: dict[str, Any]) -> Verdict:
    """Sync points (exactly these, or this many, or each made in this function of a
    program), devices (op or variable -> device), happens-before pairs (a path from the first
    op to the second) and the number of towers, as the sandbox read them off the graph
    (:func:`simsync.grading.child.structure_of`; where a program made its sync points, from
    its import)."""
    keys, problems, shown = check.keys, [], []
    if "sync_points" in keys:
        points = found["sync_points"]
        shown.append(f"sync points: {points}")
        if points != list(keys["sync_points"]):
            problems.append(f"expected the sync points {list(keys['sync_points'])}, found {points}")
    pruned = found.get("pruned") or {}
    for op, device in keys.get("devices", {}).items():
        placed = found["devices"].get(op)
        if placed is None:
            problems.append(_missing(op, pruned))
        elif placed["device"] != device and device not in placed["participants"]:
            problems.append(_misplaced(op, placed["device"], device, found))
    paths = {(p["before"], p["after"]): p for p in found["before"]}
    for before, after in keys.get("before", []):
        pair = paths[(before, after)]
        if pair["missing"] is not None:
            problems.append(f"no op named '{pair['missing']}'")
        elif not pair["path"]:
            problems.append(f"'{after}' does not wait for '{before}' (no path between them)")
    if "sync_point_count" in keys:
        count = len(found["sync_points"])
        shown.append(f"{count} sync points")
        if count != keys["sync_point_count"]:
            problems.append(f"expected {keys['sync_point_count']} sync points, found {count}")
    if keys.get("updates_take_every_tower"):
        problems += _updates(found)
    if keys.get("updates_average_towers"):
        wrong = _averages(found)
        problems += wrong
        if not wrong:
            towers = found["averaging"]["towers"]
            shown.append(f"each update weighs the {towers} towers' gradients alike")
    if "sync_points_made_in" in keys:
        problems += _made_in(str(keys["sync_points_made_in"]), found, check.graph)
    if "towers" in keys:
        shown.append(f"towers: {found['towers']}")
        if found["towers"] != keys["towers"]:
            problems.append(_towers(int(keys["towers"]), found["towers"], pruned))
    if any("never runs" in problem for problem in problems):
        problems.append(PRUNED)  # why, once
    return (not problems, "; ".join(problems) if problems else "; ".join(shown) or "as asked")


#: why a program's step runs less than it builds
PRUNED = (
    "TensorFlow runs only what the training loop's fetches need, and nothing the others "
    "compute reaches them: does your average_gradients take every tower's gradients?"
)


def _missing(op: str, pruned: dict[str, Any]) -> str:
    """An op the graph graded lacks: one the program builds but its step never runs, or
    none of that name."""
    if op in pruned.get("ops", ()):
        return f"your program builds '{op}', but a training step never runs it"
    return f"no op named '{op}'"


def _towers(expected: int, found: int, pruned: dict[str, Any]) -> str:
    """Too few towers: the program may build them all while its step runs fewer."""
    built = int(pruned.get("built_towers") or 0)
    if built > found:
        return (
            f"expected {expected} towers, found {found} in a training step; your program "
            f"builds {built}, but a training step never runs them all"
        )
    return f"expected {expected} towers, found {found}"


def _misplaced(name: str, placed: str, device: str, found: dict[str, Any]) -> str:
    """A variable (or op) on the wrong device, with every other variable there too, and how
    a variable's device is chosen."""
    variables = found.get("variables") or {}
    if name not in variables:
        return f"'{name}' runs on {placed}, expected {device}"
    also = sorted(v for v, where in variables.items() if where != device and v != name)
    others = f"; so do {', '.join(also)}" if also else ""
    return (
        f"'{name}' lives on {placed}, expected {device}{others} (a variable lives where it is "
        f"made: make it under tf.device('{device}'))"
    )


def _updates(found: dict[str, Any]) -> list[str]:
    """Problems with the variables' updates: each must compute with every tower's data (an
    update that only waits for a tower, by a control dependency, does not average it)."""
    updates = found.get("updates")
    if not updates:
        return ["no update of a variable computes with a tower's data in a training step"]
    wrong = [u for u in updates if u["missing"]]
    if not wrong:
        return []
    first = wrong[0]
    towers = ", ".join(f"tower_{t}" for t in first["missing"][:8])
    more = f" (and {len(wrong) - 1} more updates)" if len(wrong) > 1 else ""
    return [
        f"'{first['op']}' takes no data from {towers}{more}: each variable's update must "
        "compute with every tower's gradient (the average), not only wait for them"
    ]


#: how far a mean's tower weights (1/N each) and fit may be from exact: float32 sums in
#: another order are some 1e-6 apart, a mean in bfloat16 some 2e-3
WEIGHT_TOLERANCE = 1e-2


def _averages(found: dict[str, Any]) -> list[str]:
    """Problems with the weights the variables' updates give the towers, measured by their
    values (:mod:`~simsync.tf_backend.program.averaging`): each must be the mean, every
    tower weighing the same."""
    averaging = found.get("averaging")
    if averaging is None and "pruned" in found:  # a program whose measuring never ended
        return [
            "how your updates weigh the towers was not measured: the grader's process for "
            "your program ended before the measuring was done (its time is limited: is a "
            "step of your program slow?)"
        ]
    if averaging is None:
        return ["only a TensorFlow program (graph = 'train.py') has its averaging measured"]
    if averaging["problem"] is not None:
        return [f"how your updates weigh the towers could not be measured: {averaging['problem']}"]
    problems = [p for p in map(_average_problem, averaging["updates"]) if p is not None]
    if len(problems) > 1:
        return [f"{problems[0]} (and {len(problems) - 1} more updates)"]
    return problems or _data_weight_problem(averaging) or _given_problem(averaging.get("given"))


#: how much the updates' size may vary from batch to batch (the standard deviation of its
#: log): measured at most 0.10 on the reference and 32 honest variants (the tenth and
#: eleventh attacks'), 0.26 for a loss weighed by its labels; random spikes of a tower's
#: weight, which would widen what a skew may hide in, measured 0.5 to 0.9
DATA_NOISE_MOST = 0.3
#: how much more one tower's data may weigh than another's (a factor)
DATA_WEIGHT_RATIO = 1.5


#: how much of an update's change from batch to batch may fit no multiple of the given
#: model's gradient (plus a multiple of the variable: weight decay): measured at most 0.0033
#: over the 408 variables of the reference and 52 honest variants (the twelfth attack's
#: harness, bfloat16 and float16 among them)
GIVEN_RESIDUAL = 0.05


def _given_problem(given: dict[str, Any] | None) -> list[str]:
    """What is wrong with the updates against the given model's, batch by batch
    (:func:`~simsync.tf_backend.program.averaging._given_model`): each update of a variable
    the given model trains must be a positive multiple of the given model's gradient of the
    towers' data (give or take a part of no batch's: weight decay), alike for every
    tower's data. A tower that turns or scales its gradient by something its data carries
    (its own number, the sign of a value) shows here, whatever the weights say.

    >>> _given_problem(None), _given_problem({"problem": None, "variables": [
    ...     {"variable": "w", "residual": 0.0, "least": 1.0, "most": 1.0,
    ...      "weights": [1.0, 1.0], "noise": 0.0}]})
    ([], [])
    >>> def said(least, most):
    ...     variables = [{"variable": "w", "residual": 0.0, "least": least, "most": most,
    ...                   "weights": [1.0, 1.0], "noise": 0.0}]
    ...     return _given_problem({"problem": None, "variables": variables})[0]
    >>> print(said(-1.0, 1.0)[:68])
    the update of 'w' goes against the given model's gradient for some b
    >>> print(said(-1.0, -0.5)[:80])
    the update of 'w' goes against the given model's gradient for every batch: it cl
    """
    if given is None:
        return []
    if given["problem"] is not None:
        return [f"your updates could not be compared with the given model's: {given['problem']}"]
    for variable in given["variables"]:
        name = variable["variable"]
        if variable["residual"] > GIVEN_RESIDUAL:
            share = min(variable["residual"], 1.0)
            return [
                f"the update of '{name}' is not the given model's gradient of the towers' "
                f"data: {share:.0%} of how it changes from batch to batch fits no multiple "
                "of it (a loss of your own, or something else mixed in)"
            ]
        if variable["most"] <= 0:
            return [
                f"the update of '{name}' goes against the given model's gradient for every "
                "batch: it climbs the loss (a loss turned, or a learning rate below 0)"
            ]
        if variable["least"] <= 0:
            return [
                f"the update of '{name}' goes against the given model's gradient for some "
                "batches (turned by something in the data): a mean of the towers' "
                "gradients follows it for every batch"
            ]
        problem = _weight_problem(variable["weights"], variable["noise"])
        if problem:
            return [f"the update of '{name}': {problem[0]}"]
    turned = given.get("setting_turns")
    if turned is not None:
        return [_setting_problem(turned)]
    stepped = _step_problem(given.get("steps", []), [v["variable"] for v in given["variables"]])
    trained = given.get("trained")  # a step of a longer training, on more batches
    return stepped or ([trained] if trained else [])


def _setting_problem(turned: dict[str, Any]) -> str:
    """What is wrong with a setting of the program's updates that ``turned`` out of what it
    may take at some count of steps.

    >>> turned = {"setting": "momentum", "at": 501.0, "value": "1.5", "allowed": "between 0 and 1"}
    >>> print(_setting_problem(turned))  # doctest: +NORMALIZE_WHITESPACE
    your updates' setting ('momentum') is 1.5 once the count of steps is 501 (a schedule
    that turns training uphill, or makes it diverge): keep it between 0 and 1 at every count
    """
    from simsync.tf_backend.program.averaging import RATES, REWRITTEN_ALIKE  # (no TensorFlow)

    setting = turned["setting"]
    what = "learning rate" if setting in RATES else "setting"
    if turned["allowed"] == REWRITTEN_ALIKE:
        return (
            f"your updates' {what} ('{setting}') is {turned['value']} once the count of "
            f"steps is {turned['at']:,.0f}: TensorFlow's graph rewriting, on in your own "
            "session, changes it (log(1 + x) becomes log1p(x), exp(x) - 1 becomes expm1(x)); "
            "compute it with ops whose values do not depend on it"
        )
    return (
        f"your updates' {what} ('{setting}') is {turned['value']} once the count of steps is "
        f"{turned['at']:,.0f} (a schedule that turns training uphill, or makes it diverge): "
        f"keep it {turned['allowed']} at every count"
    )


#: how much smaller than the given model's the program's steps may change a variable, at
#: their largest: measured 0.0045 or more (Adam with an epsilon of 1) over the reference and
#: 89 honest variants of the twelfth and thirteenth attacks (Adam, RMSProp and momentum at
#: a rate of 0.001, warm-ups, step schedules, Adagrad, FTRL, ...); Adadelta at TensorFlow's
#: default rate of 0.001 measured 0.00067 and is refused. A graph that trains a variable far
#: less leaves its training to something else (variables loaded from Python) or to no one
#: (its gradient scaled to nothing)
STEP_SIZE_LEAST = 1e-3
#: a whole step is uphill below this cosine with the given model's; a variable's steps,
#: on the whole, at 0 or below. Adam's step is not the gradient's way: at a rate of 0.01,
#: from new slots, one step of a bias of 10 values measured -0.10 (the fifteenth attack), a
#: rate below 0 measures -1
UPHILL_STEP = -0.5


def _step_problem(steps: list[dict[str, list[float]]], names: list[str]) -> list[str]:
    """What is wrong with the program's whole steps against the given model's, from the
    same values and batches (:func:`~simsync.tf_backend.program.averaging._descent`), for
    each variable the given model trains (``names``): every step that changes it by more
    than rounding must take it no further uphill than :data:`UPHILL_STEP`, and all of them
    downhill on the whole as the given model's do (a positive mean cosine: any optimizer's
    steps do), and its largest change must be at least
    :data:`STEP_SIZE_LEAST` of the given model's (a rate that warms up or decays trains it
    at some count).

    >>> _step_problem([{"along": [0.7], "size": [1.7]}, {"along": [0.9], "size": [0.0]}], ["w"])
    []
    >>> print(_step_problem([{"along": [1.0], "size": [1.0]},
    ...                      {"along": [-1.0], "size": [1.0]}], ["w"])[0][:61])
    your training's step 2 takes 'w' uphill where the given model
    >>> print(_step_problem([{"along": [1.0], "size": [0.0]}], ["w"])[0][:45])
    your training does not change 'w' where the g
    """
    ways: dict[str, list[float]] = {name: [] for name in names}
    for number, step in enumerate(steps, start=1):
        for name, along, size in zip(names, step["along"], step["size"], strict=False):
            # (a change far smaller than the given model's is rounding, its way no sign:
            # a rate decayed to 1e-13 measured cosines of 0.09)
            if size < STEP_SIZE_LEAST:
                continue
            ways[name].append(along)
            if along < UPHILL_STEP:
                return [
                    f"your training's step {number} takes '{name}' uphill where the given "
                    f"model's takes it down (their changes' cosine {along:.2f}): a learning "
                    "rate below 0, or one that turns with the count of steps"
                ]
    for name, found in ways.items():
        if found and sum(found) <= 0:
            return [
                f"your training takes '{name}' uphill where the given model's takes it down "
                f"(their changes' mean cosine {sum(found) / len(found):.2f} over "
                f"{len(found)} steps): a learning rate below 0, or one that turns with the "
                "count of steps"
            ]
    for index, name in enumerate(names):
        largest = max((step["size"][index] for step in steps if index < len(step["size"])),
                      default=1.0)  # fmt: skip
        if largest == 0:
            return [
                f"your training does not change '{name}' where the given model's does (a "
                "learning rate of 0, a gradient scaled to nothing, or training done outside "
                "TensorFlow's graph)"
            ]
        if largest < STEP_SIZE_LEAST:
            return [
                f"your training changes '{name}' at most {largest:.2g} times as much as the "
                f"given model's does, from the same values and batches (at least "
                f"{STEP_SIZE_LEAST:g}): train it in the graph, at a rate not so small"
            ]
    return []


def _data_weight_problem(averaging: dict[str, Any]) -> list[str]:
    """A tower whose own data weighs more in the updates than another's, across several
    steps of it (:func:`~simsync.tf_backend.program.averaging._data_weights`): its data, not
    its place, carries its weight (a column of each tower's own number scaling its loss), or
    the weight changes from batch to batch (at random, or with its data) by more than honest
    batches' gradients do. A mean weighs every tower's alike.

    >>> _data_weight_problem({"data_weights": [1.005, 0.946, 1.019, 1.032], "data_noise": 0.08})
    []
    >>> print(_data_weight_problem({"data_weights": [4.27, 0.61, 0.63, 0.62],
    ...                             "data_noise": 0.06})[0][:75])
    tower_0's data weighs 7.0 times as much as tower_1's in the updates, across
    """
    weights, noise = averaging.get("data_weights") or [], float(averaging.get("data_noise", 0))
    return _weight_problem(weights, noise)


def _weight_problem(weights: list[float], noise: float) -> list[str]:
    """A tower's data that weighs more than another's (``weights``, factors of their
    geometric mean), or weights that change from batch to batch by more than honest
    batches' gradients do (``noise``, a standard deviation of their logs)."""
    if len(weights) < 2:
        return []
    if noise > DATA_NOISE_MOST:
        return [
            f"how much a tower's data weighs in the updates changes from batch to batch by a "
            f"factor of {math.exp(noise):.1f} (a random or data-dependent scale of its loss): "
            "a mean weighs every tower's gradient alike"
        ]
    most = max(range(len(weights)), key=weights.__getitem__)
    least = min(range(len(weights)), key=weights.__getitem__)
    ratio = weights[most] / weights[least] if weights[least] > 0 else math.inf
    if ratio <= DATA_WEIGHT_RATIO:
        return []
    shown = f"{ratio:.1f} times" if ratio < 1e6 else "over a million times"
    return [
        f"tower_{most}'s data weighs {shown} as much as tower_{least}'s in the updates, "
        "across several steps of each tower's own data: each tower's data carries a weight "
        "of its own (its loss scaled by something in its batch); a mean weighs every "
        "tower's gradient alike"
    ]


def _average_problem(update: dict[str, Any]) -> str | None:
    """What is wrong with how one update weighs the towers, or None: the mean weighs each
    1/N, fits exactly, and changes neither when the towers' batches are permuted nor when
    the same batches come again."""
    weights, op = update["weights"], update["op"]
    alike = update["permuted"] <= WEIGHT_TOLERANCE
    equal = bool(weights) and all(abs(w - 1 / len(weights)) <= WEIGHT_TOLERANCE for w in weights)
    if not update["finite"]:
        return (
            f"'{op}' computes values that are no numbers (NaN or infinite) with the towers' "
            "data: its average cannot be measured"
        )
    if update["repeated"] > WEIGHT_TOLERANCE:
        return (
            f"'{op}' computes another value from the same data when run again (random "
            "numbers, or state of its own, after the towers): its average cannot be measured"
        )
    if not weights:
        return f"'{op}' computes the same with any tower's data: it averages no tower's gradient"
    if alike and (update["residual"] > WEIGHT_TOLERANCE or not equal):
        return (
            f"'{op}' treats the towers alike, but is no sum of their gradients with fixed "
            "weights (a max, or a step after the mean that depends on the gradients, such "
            "as tf.clip_by_global_norm): the mean itself is measured, so clip each tower's "
            "gradients before the average, if at all"
        )
    if update["residual"] > WEIGHT_TOLERANCE:
        return f"'{op}' is no weighted sum of the towers' gradients: take the mean of every tower's"
    if not equal:
        shown = ", ".join(f"{round(w, 2) + 0.0:.2f}" for w in weights[:8])  # no -0.00
        more = ", ..." if len(weights) > 8 else ""
        return (
            f"'{op}' weighs the towers' gradients {shown}{more}: the mean weighs each "
            f"{1 / len(weights):.2f}"
        )
    if not alike:
        return (
            f"'{op}' changes when the towers swap their batches: a mean of every tower's "
            "gradient does not"
        )
    return None


def _made_in(function: str, found: dict[str, Any], program: str) -> list[str]:
    """Problems with where the program made its sync points: each in ``function`` of the
    ``program`` file."""
    made_in = found.get("made_in")
    if made_in is None:
        return ["only a TensorFlow program (graph = 'train.py') says where it made an op"]
    if not made_in:
        return [f"no sync point: {function} makes none"]
    return [
        f"the sync point '{point}' is made in {where or 'code of no file of yours'}, "
        f"not in {function} of {program}"
        for point, where in made_in.items()
        if not (where or "").startswith(f"{function} ({program}:")
    ]


def simulation(check: Check, facts: Facts, reference: Facts | None) -> Verdict:
    """An expression over the simulation's facts against ``equals``, ``at_most``,
    ``at_least`` or the reference's value of the same expression (``reference = true``)."""
    keys, expression = check.keys, check.keys["expression"]
    value = _evaluate(expression, facts)
    tolerance = float(keys.get("tolerance", 0.01))
    if keys.get("reference"):
        if reference is None:
            return False, "the reference solution could not be simulated"
        expected = _evaluate(expression, reference)
        return _compare(expression, value, expected, tolerance, "the reference gives")
    if "equals" in keys:
        return _compare(expression, value, keys["equals"], tolerance, "expected")
    if value is None and ("at_most" in keys or "at_least" in keys):
        return False, f"{expression} has no value for your graph (never reached)"
    limits: dict[str, float] = {
        k: _bound(keys[k], expression, reference) for k in ("at_most", "at_least") if k in keys
    }
    said = f"{expression} = {_show(value)}" + _bounds(keys, limits, tolerance)
    if "at_most" in limits and not float(value) <= limits["at_most"] * (1 + tolerance):
        return False, said
    if "at_least" in limits and not float(value) >= limits["at_least"] * (1 - tolerance):
        return False, said
    return True, said


def least_slowed(check: Check, measured: list[Facts]) -> Facts:
    """Of several measurings of one graph, the one that other work on the machine slowed
    least, by ``check``'s expression: the lowest where the check bounds it from above (a
    step's time), the highest where from below (examples a second).

    >>> check = Check("step", "1", "simulation", 1.0, False, "train.py", {"expression": "t",
    ...               "at_most": "reference"})
    >>> least_slowed(check, [{"t": 2.0}, {"t": 1.5}])
    {'t': 1.5}
    """
    expression = check.keys["expression"]
    values = []
    for found in measured:
        with contextlib.suppress(ExpressionError):
            value = _evaluate(expression, found)
            if isinstance(value, int | float) and math.isfinite(value):
                values.append((float(value), found))
    if not values:
        return measured[0]
    pick = max if "at_least" in check.keys and "at_most" not in check.keys else min
    return pick(values, key=lambda pair: pair[0])[1]


def _bounds(keys: dict[str, Any], limits: Mapping[str, float], tolerance: float) -> str:
    """What a value was held to: each bound, the reference's value where it is one, and the
    tolerance that widens it.

    >>> _bounds({"at_most": "reference"}, {"at_most": 1.2}, 0.5)
    "; expected at most 1.8 (the reference's 1.2, and 50 % more)"
    >>> _bounds({"at_least": 4000}, {"at_least": 4000.0}, 0.0)
    '; expected at least 4000'
    """
    parts = []
    for key, word, sign in (("at_most", "at most", 1), ("at_least", "at least", -1)):
        if key not in limits:
            continue
        bound = limits[key] * (1 + sign * tolerance)
        if keys.get(key) == "reference":
            more = "more" if sign > 0 else "less"
            how = f" (the reference's {_show(limits[key])}, and {tolerance * 100:g} % {more})"
        else:
            how = f" ({tolerance * 100:g} % of tolerance)" if tolerance else ""
        parts.append(f"{word} {_show(bound)}{how}")
    return "; expected " + " and ".join(parts) if parts else ""


def _bound(limit: Any, expression: str, reference: Facts | None) -> float:
    """A limit: a number, or ``"reference"`` (the reference's value of the expression)."""
    if limit != "reference":
        return float(limit)
    if reference is None:
        raise ExpressionError("the reference solution could not be simulated")
    value = _evaluate(expression, reference)
    if value is None:
        raise ExpressionError(f"{expression} has no value for the reference solution")
    return float(value)


def answer(
    check: Check, answers: tuple[dict[str, Any] | None, str | None], facts: Facts
) -> Verdict:
    """The student's answer (``answers.toml``, key ``answer``; read in the sandbox: the table
    or why it could not be) against the expression's value over the simulation of ``of``
    (the submission's graph or the reference's)."""
    key, expression = check.keys["answer"], check.keys["expression"]
    table, problem = answers
    if table is None:
        return False, problem or "answers.toml could not be read"
    if key not in table:
        return False, f"answers.toml has no '{key}'"
    expected = _evaluate(expression, facts)
    return _compare(
        key,
        table[key],
        expected,
        float(check.keys.get("tolerance", 0.05)),
        "the simulation gives",
    )


def tensorflow(check: Check, submission: Built, reference: Built) -> Verdict:
    """Both graphs ran ``steps`` steps on TensorFlow (in the sandbox); the parameters must be
    equal."""
    steps = int(check.keys.get("steps", 3))
    if reference.params is None:
        return False, f"the reference solution failed on TensorFlow: {reference.params_error}"
    if submission.params is None:
        return False, f"your graph could not run on TensorFlow: {submission.params_error}"
    mine, theirs = _arrays(submission.params), _arrays(reference.params)
    if set(mine) != set(theirs):
        return False, f"your variables {sorted(mine)} are not the reference's {sorted(theirs)}"
    worst = max(float(abs(mine[n] - theirs[n]).max()) for n in mine)
    if worst > VALUE_TOLERANCE:
        return False, f"after {steps} steps on TensorFlow your parameters differ by {worst:.3g}"
    return True, f"after {steps} steps on TensorFlow the parameters agree (max |diff| {worst:.1e})"


def _arrays(params: dict[str, Any]) -> dict[str, np.ndarray]:
    return {name: np.asarray(value, dtype=float) for name, value in params.items()}


def _evaluate(expression: str, facts: Facts) -> Any:
    try:
        return evaluate(expression, facts)
    except (ExpressionError, TypeError, ArithmeticError) as error:
        raise ExpressionError(f"{expression} cannot be computed for this graph: {error}") from None


def _compare(name: str, value: Any, expected: Any, tolerance: float, source: str) -> Verdict:
    if isinstance(expected, int | float) and not isinstance(expected, bool):
        if isinstance(value, bool) or not isinstance(value, int | float):  # not true, not "1"
            return False, f"{name} = {_show(value)}, not a number; {source} {_show(expected)}"
        ok = math.isclose(float(value), expected, rel_tol=tolerance, abs_tol=1e-12)
    else:
        ok = value == expected
    return ok, f"{name} = {_show(value)}; {source} {_show(expected)}"


def _show(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return repr(value) if isinstance(value, str) else str(value)
