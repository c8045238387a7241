"""What simsync made of a TensorFlow program: the import, its sync points, its step.

The view of ``simsync simulate PROGRAM.py`` (and of a lesson's program step), read from the
JSON summary of :func:`simsync.simulation.user_program.program_summary`: how many TensorFlow
ops the program built and how many a step runs, how towers were found, what was ignored and
why, each sync point with the function and line of the program that made it, where the costs
came from and what was changed, then the simulation's summary.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text

from simsync.ir import natural_key
from simsync.viz.report import SummaryView, waited
from simsync.words import listed, ms, plural

__all__ = ["ProgramView", "fit_line", "simulated_line", "values_lines"]


def made_in_lines(
    made_in: Mapping[str, str | None],
    shown: int = 3,
    waits: Mapping[str, Mapping[str, float]] | None = None,
) -> list[str]:
    """The sync points grouped by where the program made them (function, file and line),
    a few names each: a gate such as ``control_dependencies(update_ops)`` makes one per op
    under it, and one line per op would bury the point. With ``waits`` (each sync point's
    mean wait by tower, as a summary has them), the names where the towers waited longest
    come first: a strategy's step makes its all-reduces and the reads of its updated
    variables in one line of the program.

    >>> for line in made_in_lines({"concat_1": "average_gradients (t.py:9)",
    ...                            "concat": "average_gradients (t.py:9)", "apply": None}):
    ...     print(line)
    2 sync points made in average_gradients (t.py:9): concat, concat_1
    1 sync point made in the graph: apply
    >>> made_in_lines({f"c{i}": "f (t.py:1)" for i in range(5)}, shown=2)
    ['5 sync points made in f (t.py:1): c0, c1, and 3 more']
    >>> made_in_lines({f"c{i}": "f (t.py:1)" for i in range(5)}, shown=2,
    ...               waits={"c3": {"tower_0": 0.5, "tower_1": 0.0}})
    ['5 sync points made in f (t.py:1): c3, c0, and 3 more']
    """
    groups: dict[str, list[str]] = {}
    for name, made in made_in.items():
        groups.setdefault(made or "the graph", []).append(name)
    lines = []
    for where, found in groups.items():
        names = sorted(found, key=natural_key)  # the same order in every run
        if waits:
            names = sorted(names, key=lambda name: -waited(waits, name))
        more = f", and {len(names) - shown} more" if len(names) > shown else ""
        count = f"{len(names)} sync point{'s' if len(names) != 1 else ''}"
        lines.append(f"{count} made in {where}: {', '.join(names[:shown])}{more}")
    return lines


def simulated_line(result: Mapping[str, Any]) -> str:
    """One line of what the simulation of a program gave: its towers and step, and who came
    last at its sync points; or, for threads looping on their own train ops, its workers,
    their updates and staleness.

    >>> simulated_line({"towers": 2, "updating_clients": 1, "steps": 20, "waited_for": {},
    ...                 "step_time": {"mean": 0.0024}})
    'simulated: 2 towers, a step of 2.400 ms'
    >>> threads = {"towers": 4, "updating_clients": 4, "step_time": {"mean": 5e-4},
    ...            "staleness": {"mean": 2.5, "max": 3}}
    >>> for part in simulated_line(threads).split(", "):
    ...     print(part)
    simulated: 4 workers (one per looping thread)
    an update every 0.500 ms each
    staleness mean 2.50 (max 3)
    """
    mean = result["step_time"]["mean"] * 1e3
    if result["updating_clients"] > 1:  # threads looping on their own train ops
        stale = result["staleness"]
        return (
            f"simulated: {plural(result['updating_clients'], 'worker')} (one per looping "
            f"thread), an update every {mean:.3f} ms each, staleness mean "
            f"{stale['mean']:.2f} (max {stale['max']})"
        )
    line = f"simulated: {plural(result['towers'], 'tower')}, a step of {mean:.3f} ms"
    return line + _last_everywhere(result)


def _last_everywhere(result: Mapping[str, Any]) -> str:
    """Where one tower came last most often at every sync point of the simulation, and its
    own work is the longest there (``expected_last``), how often (at the sync point where
    it did so least); where the towers' work is equal at every sync point, that no tower is
    named; else nothing. A tower last only by the order the threads took equal work is not
    named: a run on TensorFlow takes it in another order.

    >>> _last_everywhere({"steps": 20, "waited_for": {"a": {"tower_1": 1, "tower_2": 19},
    ...                   "b": {"tower_2": 20}}, "expected_last": {"a": "tower_2", "b": "tower_2"}})
    '; tower_2 came last at all 2 sync points, in 19 to 20 of 20 steps'
    >>> print(_last_everywhere({"steps": 20, "waited_for": {"a": {"tower_0": 0, "tower_1": 20}},
    ...                         "expected_last": {"a": ""}}))  # doctest: +NORMALIZE_WHITESPACE
    ; the towers bring equal work to their sync points: which comes last is the order the
    threads take them in
    >>> _last_everywhere({"steps": 20, "waited_for": {"a": {"tower_1": 10, "tower_2": 10}}})
    ''

    Where the towers waited noticeably (1 % of a step, the tables' rule for a straggler) at
    some sync points only, those are the ones counted, and said to be: a ``tf.distribute``
    step also meets at reads of variables each replica keeps, where nobody waits long.

    >>> _last_everywhere({"steps": 20, "step_time": {"mean": 0.01},
    ...     "waited_for": {"read": {"tower_0": 12, "tower_1": 8}, "all_reduce": {"tower_1": 20}},
    ...     "wait": {"read": {"tower_0": 0.0, "tower_1": 1e-6}, "all_reduce": {"tower_0": 0.002}},
    ...     "expected_last": {"read": "", "all_reduce": "tower_1"}})
    '; tower_1 came last at the 1 of 2 sync points where the others waited, in 20 of 20 steps'

    Where another tower comes last at a few of them (replica 0, which does the replicas'
    shared work), the one last at most of them is named, with how many.

    >>> _last_everywhere({"steps": 20, "waited_for": {"a": {"tower_1": 20},
    ...     "b": {"tower_1": 19, "tower_0": 1}, "c": {"tower_0": 20}},
    ...     "expected_last": {"a": "tower_1", "b": "tower_1", "c": "tower_0"}})
    '; tower_1 came last at 2 of the 3 sync points, in 19 to 20 of 20 steps'
    """
    waited = dict(result.get("waited_for") or {})
    expected = result.get("expected_last") or {}
    waits = result.get("wait") or {}
    step = (result.get("step_time") or {}).get("mean") or 0.0
    noticed = {p for p in waited if max((waits.get(p) or {}).values(), default=0.0) > 0.01 * step}
    every = len(waited)
    if waits and noticed and len(noticed) < every:
        waited = {p: counts for p, counts in waited.items() if p in noticed}
    if waited and expected and not any(expected.get(point) for point in waited):
        return (
            "; the towers bring equal work to their sync points: which comes last is the order "
            "the threads take them in"
        )
    leaders: dict[str, str | None] = {}  # each sync point's one tower last most often
    for point, counts in waited.items():
        top = max(counts.values(), default=0)
        tops = [t for t, n in counts.items() if n == top] if top else []
        leaders[point] = tops[0] if len(tops) == 1 else None
    # a tower last most often where its own work is the longest (when that is known)
    named = [t for p, t in leaders.items() if t is not None and expected.get(p, t) == t]
    tower = max(sorted(set(named)), key=named.count, default=None)
    if tower is None:
        return ""
    points = [p for p, t in leaders.items() if t == tower and expected.get(p, t) == t]
    if len(points) == len(waited) == every:
        where = f"at all {every} sync points," if every > 1 else "at the sync point,"
    elif len(points) == len(waited):
        where = f"at the {len(points)} of {every} sync points where the others waited,"
    elif 2 * len(points) > len(waited):  # most of them
        where = f"at {len(points)} of the {len(waited)} sync points"
        where += " where the others waited," if len(waited) < every else ","
    else:
        return ""
    counts = sorted(waited[point][tower] for point in points)
    often = str(counts[0]) if counts[0] == counts[-1] else f"{counts[0]} to {counts[-1]}"
    return f"; {tower} came last {where} in {often} of {result['steps']} steps"


def on_gpus_lines(result: Mapping[str, Any], shown: int = 3) -> list[str]:
    """Where this machine's cores are fewer than the program's towers: the step and who came
    last as on GPUs (each tower a device of its own), beside this machine's step.

    >>> on_gpus_lines({"step_time": {"mean": 0.00177}, "on_gpus": {
    ...     "line": "here the 8 towers share 2 cores; on GPUs each tower has a device of its own",
    ...     "step_time": 0.00107, "meetings": 400, "last": {"tower_2": 201, "tower_6": 198,
    ...     "tower_0": 1}}})  # doctest: +NORMALIZE_WHITESPACE
    ['here the 8 towers share 2 cores; on GPUs each tower has a device of its own:',
     '  a step 1.070 ms there (1.770 ms here)',
     '  last at a sync point there: tower_2 50 %, tower_6 50 %']
    """
    gpus = result.get("on_gpus")
    if not gpus:
        return []
    meetings = max(1, int(gpus["meetings"]))
    ranked = sorted(gpus["last"].items(), key=lambda item: (-item[1], item[0]))
    named = [f"{tower} {round(100 * n / meetings)} %" for tower, n in ranked if n * 5 >= meetings]
    here = result["step_time"]["mean"]
    lines = [f"{gpus['line']}:", f"  a step {ms(gpus['step_time'])} ms there ({ms(here)} ms here)"]
    slowest = {tuple(towers) for towers in (gpus.get("slowest") or {}).values()}
    if len(slowest) == 1 and len(next(iter(slowest))) > 1:  # as slow as each other
        towers = listed(list(next(iter(slowest))))
        lines.append(f"  last at a sync point there: {towers}, the slowest (each as slow)")
    elif slowest == {()}:
        lines.append(
            "  last at a sync point there: no single tower (their work up to it is about equal)"
        )
    elif named:  # a tower last a fifth of the time or more
        tied = " (tied; each counts)" if sum(gpus["last"].values()) > meetings else ""
        lines.append(f"  last at a sync point there: {', '.join(named[:shown])}{tied}")
    return lines


def values_lines(values: Mapping[str, Any] | None) -> list[str]:
    """The loss of each client's first and last step, or why there are no values (nothing
    when they were not asked for).

    >>> for line in values_lines({"computed": True, "loss": {"main": [2.5, 2.0, 1.25]}}):
    ...     print(line)
    loss: 2.5 at the first step, 1.25 at step 3 (main)
    values: TensorFlow ran the program's own ops, in the simulated order
    >>> values_lines({"computed": False, "asked": True, "why": "no ops"})
    ['values: none (no ops)']
    """
    if not values or not (values.get("computed") or values.get("asked")):
        return []
    if not values["computed"]:
        return [f"values: none ({values['why']})"]
    lines = []
    for client, losses in values["loss"].items():
        if losses:
            lines.append(
                f"loss: {losses[0]:.4g} at the first step, {losses[-1]:.4g} at step "
                f"{len(losses)} ({client})"
            )
        else:
            lines.append(f"loss: none ({client} fetches no scalar of a floating type)")
    return [*lines, "values: TensorFlow ran the program's own ops, in the simulated order"]


def fit_line(fit: Mapping[str, Any] | None) -> str:
    """How the traced times were fitted to the untraced step (empty when there is no fit).

    >>> fit_line({"scale": 0.78, "per_run": 0.0, "wall": 6.24e-4, "simulated": 6.2e-4})
    'timed: traced op times x0.78, to the untraced step of the program (0.624 ms)'
    >>> fit_line({"scale": 1.0, "per_run": 1.71e-4, "wall": 4.1e-4})  # doctest: +ELLIPSIS
    "timed: ops as traced, and 0.171 ms of TensorFlow's own work in every step, to ... (0.410 ms)"
    >>> fit_line({"scale": 1.0, "why": "2 threads loop: each was timed alone"})
    'timed: traced times as measured (2 threads loop: each was timed alone)'
    """
    if not fit:
        return ""
    if "wall" not in fit:
        return f"timed: traced times as measured ({fit.get('why', '')})"
    to = f"to the untraced step of the program ({fit['wall'] * 1e3:.3f} ms)"
    if fit.get("why"):
        to = fit["why"]
    if fit.get("per_run", 0.0) > 0:
        return (
            f"timed: ops as traced, and {fit['per_run'] * 1e3:.3f} ms of TensorFlow's own "
            f"work in every step, {to}"
        )
    return f"timed: traced op times x{fit['scale']:.2f}, {to}"


def _runners(imported: Mapping[str, Any]) -> str:
    """What the queue runners' threads run beside the steps, in words (empty: none).

    >>> _runners({"queue_runner_threads": 2, "queue_runner_ops": 7})
    ', its queue runners 7 more (2 threads)'
    """
    threads = imported.get("queue_runner_threads", 0)
    if not threads:
        return ""
    return f", its queue runners {imported['queue_runner_ops']} more ({plural(threads, 'thread')})"


def _accumulators(imported: Mapping[str, Any]) -> list[str]:
    """The program's own SyncReplicasOptimizer, in words (none: no line).

    >>> _accumulators({"accumulators": ["a", "b"], "token_queues": ["sync_token_q"]})
    ['SyncReplicasOptimizer: 2 accumulators its workers push to, the token queue sync_token_q']
    """
    accumulators, tokens = imported.get("accumulators") or [], imported.get("token_queues") or []
    if not accumulators:
        return []
    line = f"SyncReplicasOptimizer: {plural(len(accumulators), 'accumulator')} its workers push to"
    if tokens:
        line += f", the token queue {', '.join(tokens)}"
    return [line]


def _update_ops(imported: Mapping[str, Any], towers: int) -> list[str]:
    """A line on the program's updates of batch norm's moving averages (its ``UPDATE_OPS``,
    and those found in no such collection), when it has any.

    >>> one = {"collected": 8, "run": 2, "towers": [0], "racing": []}
    >>> print(_update_ops({"update_ops": one}, 4)[0][:58])
    UPDATE_OPS: the training loop runs 2 of 8, tower_0's only:
    >>> every = {"collected": 4, "run": 4, "towers": [0, 1], "racing": ["mean", "variance"]}
    >>> print(_update_ops({"update_ops": every}, 2)[0][:73])
    UPDATE_OPS: the training loop runs every tower's (4 of 4): they race on 2
    >>> slim = {"collected": 0, "run": 28, "towers": [1], "racing": []}
    >>> print(_update_ops({"update_ops": slim}, 2)[0][:93])
    moving averages (in no UPDATE_OPS collection): the training loop runs 28 updates, tower_1's o
    >>> slim["read_unordered"] = {"bn/moving_mean": "ema/update_bn/moving_mean/sub"}
    >>> print(_update_ops({"update_ops": slim}, 2)[1][:73])
    1 moving average is read in the same step in no order with its update (by
    """
    found = imported.get("update_ops") or {}
    return _updates_line(found, towers) + _unordered_line(found)


def _unordered_line(found: Mapping[str, Any]) -> list[str]:
    unordered = found.get("read_unordered") or {}
    if not unordered:
        return []
    first = next(iter(unordered.values()))
    many = len(unordered) > 1
    return [
        f"{plural(len(unordered), 'moving average')} {'are' if many else 'is'} read in the same "
        f"step in no order with {'their updates' if many else 'its update'} (by {first}"
        f"{', ...' if many else ''}): that read sees the old value or the new one, whichever "
        "runs first"
    ]


def _updates_line(found: Mapping[str, Any], towers: int) -> list[str]:
    collected, run, whose = found.get("collected", 0), found.get("run", 0), found.get("towers", [])
    if not collected and not run:
        return []
    if not run:
        return [f"UPDATE_OPS: {plural(collected, 'op')}, none run by the training loop: the "
                "moving averages never change"]  # fmt: skip
    label = "UPDATE_OPS" if collected else "moving averages (in no UPDATE_OPS collection)"
    counted = f"{run} of {collected}" if collected >= run else str(run)
    line = f"{label}: the training loop runs {counted}" + ("" if collected else " updates")
    if towers > 1 and len(whose) == 1:
        return [f"{line}, tower_{whose[0]}'s only: the other towers' batch statistics never "
                "reach the moving averages"]  # fmt: skip
    racing = found.get("racing") or []
    if racing:
        return [f"{label}: the training loop runs every tower's ({counted}): they race on "
                f"{plural(len(racing), 'moving average')}, each update reading and writing it, "
                "in whatever order the towers finish"]  # fmt: skip
    return [line]


def _count(why: str, count: int) -> str:
    """``constants (why)`` and 68 as ``constants: 68 (why)``: it reads right for any count.

    >>> _count("queues and accumulators (their ops run, never blocking)", 1)
    'queues and accumulators: 1 (their ops run, never blocking)'
    """
    what, _, note = why.partition(" (")
    return f"{what}: {count}" + (f" ({note}" if note else "")


class ProgramView:
    """A rich renderable of a program's summary (``simulate PROGRAM.py --json``).

    >>> import io
    >>> result = {"source": "train.py", "imported": {"tensorflow_ops": 308, "ops": 150,
    ...     "tower_rule": "name scope tower_<i>", "ignored": {"constants": 68},
    ...     "costs": "measured now"}, "sync_points_made_in": {"concat": "average_gradients"},
    ...     "what_if": [], "scenario": "train", "steps": 2, "towers": 2,
    ...     "wait": {}, "step_time": {"mean": 0.002, "p50": 0.002, "p95": 0.002}}
    >>> out = io.StringIO()
    >>> Console(file=out, width=80, color_system=None).print(ProgramView(result, summary=False))
    >>> print("\\n".join(line.rstrip() for line in out.getvalue().splitlines()))
    train.py: imported
      308 TensorFlow ops; a step runs 150 of them; towers found by name scope
      tower_<i>
      ignored: constants: 68
      1 sync point made in average_gradients: concat
      costs: measured now
    """

    def __init__(
        self, result: Mapping[str, Any], summary: bool = True, verbose: bool = False
    ) -> None:
        #: ``verbose``: every sync point and tower of the summary's table, and every sync
        #: point's name where the lines say where they were made (else the sync point waited
        #: at longest and 4 towers, the one last most often, and 3 names a line, so the
        #: report fits about two screens of 80x24), the cache's file and how the costs were
        #: fitted
        self.result, self.summary, self.verbose = result, summary, verbose

    def lines(self) -> list[Text]:
        """The import's lines, as plain text (names are the program's, never markup)."""
        result, imported = self.result, self.result["imported"]
        ignored = ", ".join(_count(why, count) for why, count in imported["ignored"].items())
        rule = str(imported["tower_rule"])
        towers = (
            f"no towers ({rule.partition(': ')[2]})"
            if rule.startswith("none")
            else f"towers found by {rule}"
        )
        lines = [
            Text.assemble((str(result["source"]), "bold"), ": imported"),
            Text(
                f"  {imported['tensorflow_ops']} TensorFlow ops; a step runs {imported['ops']} of "
                f"them{_runners(imported)}; {towers}"
            ),
            Text(f"  ignored: {ignored or 'nothing'}"),
        ]
        lines += [Text(f"  {line}") for line in _accumulators(imported)]
        count = int(imported.get("towers_in_program") or 0)
        lines += [Text(f"  {line}") for line in _update_ops(imported, count)]
        made = made_in_lines(
            result["sync_points_made_in"],
            shown=len(result["sync_points_made_in"]) if self.verbose else 3,
            waits=result.get("wait"),
        )
        lines += [Text(f"  {line}") for line in made]
        kept = imported.get("costs_file") if self.verbose else None
        lines.append(Text(f"  costs: {imported['costs']}" + (f", kept in {kept}" if kept else "")))
        fit = fit_line(imported.get("fit")) if self.verbose else ""
        if fit:
            lines.append(Text(f"  {fit}"))
        lines += [Text(f"  what if: {line}") for line in result["what_if"]]
        lines += [Text(f"  {line}") for line in on_gpus_lines(result)]
        lines += [Text(f"  {line}") for line in values_lines(result.get("values"))]
        return lines

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for line in self.lines():  # a line wrapped keeps its indent
            indent = len(line.plain) - len(line.plain.lstrip(" "))
            if not indent:
                yield line
                continue
            for part in line[indent:].wrap(console, max(options.max_width - indent, 20)):
                part.rstrip()
                yield Text(" " * indent) + part
        if self.summary:
            most = (16, None) if self.verbose else (4, 1)  # towers, sync points
            yield SummaryView(self.result, *most)  # type: ignore[arg-type]
