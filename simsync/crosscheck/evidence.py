"""What the real run shows, with verdicts that survive a noisy machine.

A cross-check compares numbers; a learner wants to know whether a claim held: did the towers
run side by side, did the sync point wait for the slow tower, is a straggler's step really
slower. Each finding here comes from the real trace itself, or from step times measured in
*interleaved* rounds (the configurations alternate in one TensorFlow session, so a slow spell of
the machine hits them alike). A verdict is given only when the evidence is stronger than the
machine's noise; otherwise the finding says "inconclusive on this machine" and why.

- :func:`side_by_side`: how long the towers' compute ops ran at the same time, step by step.
  Towers that run one after another never overlap, whatever the machine's speed.
- :func:`arrivals`: at each sync point, which tower's input arrived last, and how long the
  others waited for it; a tower is named only when it came last more often than chance
  allows (:func:`simsync.trace.straggler`) *and* the graph gives it a reason to: its own
  work up to the sync point is clearly the longest (:func:`simsync.trace.expected_last`).
  Among towers of equal work on equally fast devices, which one comes last is the order
  TensorFlow's scheduler happens to pick in one session: on this 2-core machine the same
  tower can come last in 10 of 10 traced steps of one run and the other one in the next
  run, so one run names none.
- :func:`interleaved_ratio`: a configuration's step time against the scenario's, round by round:
  the median ratio, with a 95 % confidence interval of that median (order statistics, no
  assumption about the noise), against each hypothesis' predicted ratio. A hypothesis is
  excluded when its ratio lies outside the interval by more than :data:`DRIFT` (the machine
  drifts between runs by more than one session's interval shows); when the interval excludes
  every hypothesis but one, that one is the verdict, shown with the interval. This holds only
  while this machine still runs as its profile says (a prediction from an out-of-date profile
  is no yardstick).

- :func:`staleness`: whether the real updates were stale, and whether their staleness is the
  predicted one: the ledger's applied updates, in the order they landed, cut into blocks whose
  mean staleness gives the 95 % interval of the median block. "As predicted" when the
  prediction lies inside it, "not as predicted" when it lies clearly outside (by more than
  half the interval's width again, and by more than :data:`STALE_SLACK`: the blocks of one
  run share its conditions, so the interval misses how runs differ), inconclusive in between.

Which findings apply follows from the graph: several towers, a sync point, unequal speeds,
a ledger of updates.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterator, Mapping, Sequence

from simsync.crosscheck.report import (
    Arrival,
    MachineMeasure,
    Ratio,
    Report,
    SideBySide,
    StalenessEvidence,
    StepByStep,
)
from simsync.ir import Graph
from simsync.kinds import input_towers, resource_feeds, sync_points
from simsync.trace import (
    Trace,
    binomial_tail,
    came_last,
    expected_last,
    named_straggler,
    straggler,
    tower_arrivals,
    waits_at,
)
from simsync.trace.staleness import updates_by_run

__all__ = [
    "INCONCLUSIVE",
    "MOST_STEPS",
    "arrivals",
    "contradictions",
    "drifted",
    "interleaved_ratio",
    "last_verdict",
    "median_interval",
    "scheduled_last",
    "side_by_side",
    "staleness",
    "staleness_of_blocks",
    "step_by_step",
    "usually_last",
    "verdicts",
]

#: The answer of a finding that the machine's noise left open.
INCONCLUSIVE = "inconclusive"
#: A finding about steps holds when it holds in at least this share of them.
MOST_STEPS = 2 / 3
#: How far this machine drifts between runs, relatively: a variant's predicted step further
#: outside its measured interval says the machine runs otherwise than when its profile was
#: measured, and hypotheses closer than this cannot be told apart by one session.
DRIFT = 0.15
#: The share of the shorter tower's compute that must overlap another's for "side by side".
OVERLAP = 0.5


def median_interval(
    values: Sequence[float], confidence: float = 0.95
) -> tuple[float, float, float]:
    """The median of ``values`` and a ``confidence`` interval for it from order statistics
    (distribution-free: it holds whatever the noise's shape). Fewer than 6 values give the
    whole range.

    >>> median_interval([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0])
    (5.5, 2.0, 9.0)
    """
    ordered = sorted(values)
    n = len(ordered)
    median = statistics.median(ordered)
    if n < 6:
        return median, ordered[0], ordered[-1]
    # the largest j with P(Binomial(n, 1/2) < j) <= (1 - confidence) / 2
    tail, j = 0.0, 0
    while j < n // 2:
        next_tail = tail + math.comb(n, j) / 2**n
        if next_tail > (1 - confidence) / 2:
            break
        tail, j = next_tail, j + 1
    j = max(j, 1)
    return median, ordered[j - 1], ordered[n - j]


def side_by_side(graph: Graph, trace: Trace) -> SideBySide | None:
    """Per traced step, the time during which at least two towers' compute ops (the ops whose
    time the scenario's ``[compute]`` draws) ran at once, as a share of the shortest tower's
    compute time. None when the graph has fewer than two towers computing in one run."""
    compute = {op.name: op.device for op in graph.ops() if op.cost.group is not None}
    per_step: dict[tuple[str, int], dict[str, list[tuple[float, float]]]] = {}
    for record in trace.ops:
        device = compute.get(record.op)
        if device is not None:
            step = per_step.setdefault((record.client, record.step), {})
            step.setdefault(device, []).append((record.start, record.end))
    shares = [_overlap_share(spans) for spans in per_step.values() if len(spans) > 1]
    if not shares:
        return None
    overlapped = sum(1 for share in shares if share >= OVERLAP)
    apart = sum(1 for share in shares if share < 0.05)
    if overlapped >= MOST_STEPS * len(shares):
        verdict = "side by side"
    elif apart >= MOST_STEPS * len(shares):
        verdict = "one after another"
    else:
        verdict = INCONCLUSIVE
    return {
        "steps": len(shares),
        "overlapped_steps": overlapped,
        "apart_steps": apart,
        "median_share": statistics.median(shares),
        "verdict": verdict,
    }


def _overlap_share(spans: Mapping[str, list[tuple[float, float]]]) -> float:
    """Seconds when two or more devices computed at once, over the least busy device's."""
    edges = sorted(
        (time, change)
        for intervals in spans.values()
        for start, end in _union(intervals)
        for time, change in ((start, 1), (end, -1))
    )
    together, active, previous = 0.0, 0, 0.0
    for time, change in edges:
        if active >= 2:
            together += time - previous
        active, previous = active + change, time
    busy = min(sum(end - start for start, end in _union(i)) for i in spans.values())
    return min(together / busy, 1.0) if busy > 0 else 0.0


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[tuple[float, float]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def arrivals(graph: Graph, trace: Trace) -> list[Arrival]:
    """For each sync point: in how many traced steps each tower's input arrived last, and how
    long each tower's input waited on average for the last one (the tally of
    :func:`simsync.trace.waits_at`, as for a simulation). Measured from the ends of the input
    ops in the trace (real or simulated alike); a step in which an input op is missing from the
    trace is left out, and a sync point the trace never holds (an op TensorFlow does not
    trace) is met in every step that holds all its inputs."""
    found: list[Arrival] = []
    feeds = resource_feeds(graph)
    ends = _ends(trace)  # once: a program's trace holds every op of every run
    for point in sync_points(graph):
        executions = [
            (max(arrived.values(), default=0.0), arrived)
            for _, arrived in _arrived(graph, ends, point)
        ]
        waits = waits_at(point, executions)
        if waits.executions:
            found.append(
                {
                    "sync_point": point,
                    "steps": waits.executions,
                    "last": waits.last,
                    "mean_wait": waits.mean_wait,
                    "expected": expected_last(graph, point, feeds),
                }
            )
    return found


def _ends(trace: Trace) -> dict[tuple[str, int, str], float]:
    """When each op of each run of a client ended."""
    return {(r.client, r.step, r.op): r.end for r in trace.ops}


def _arrived(
    graph: Graph, ends: dict[tuple[str, int, str], float], point: str
) -> Iterator[tuple[tuple[str, int], dict[str, float]]]:
    """Each run of a client (its name and step) that met sync point ``point``, and when each
    tower's input arrived there (:func:`simsync.trace.tower_arrivals`), from when each op of
    each run ended (:func:`_ends`)."""
    sources = list(input_towers(graph, point))
    # a sync point never traced (a collective: its kernel has no event of its own) met its
    # towers in every step that traced all its inputs
    ran = [(client, step) for client, step, op in ends if op == point]
    if not ran:
        ran = list(dict.fromkeys((client, step) for client, step, _ in ends))
    for client, step in ran:
        known = {src: ends[client, step, src] for src in sources if (client, step, src) in ends}
        if len(known) == len(sources):
            yield (client, step), tower_arrivals(graph, point, known)  # an end at 0.0 counts


#: How far ahead of the next tower the simulation must have one tower at a sync point, as a
#: share of that tower's time since its step began, for the step to say who the real run
#: should have last there (closer, the machine's noise decides).
CLEAR_LEAD = 0.15


def clear_lasts(graph: Graph, trace: Trace, point: str) -> dict[tuple[str, int], str]:
    """Per run of a client (name, step): the tower that came last at ``point`` ahead of the
    next by more than :data:`CLEAR_LEAD`; runs without so clear a last are left out."""
    starts = {(s.client, s.step): s.start for s in trace.steps}
    found = {}
    for run, arrived in _arrived(graph, _ends(trace), point):
        ordered = sorted(arrived.items(), key=lambda item: item[1], reverse=True)
        if len(ordered) < 2 or run not in starts:
            continue
        (tower, at), (_, next_at) = ordered[0], ordered[1]
        if at - next_at > CLEAR_LEAD * (at - starts[run]):
            found[run] = tower
    return found


def step_by_step(graph: Graph, real: Trace, simulated: Trace, point: str) -> StepByStep | None:
    """Who came last at ``point`` in each traced step, against the simulation of the same
    steps (the same draws of the compute times): in how many of the steps where the
    simulation has one tower clearly last (:func:`clear_lasts`) the real run had the same
    one. Only where the simulation's last tower changes from step to step (random compute
    times): with one slow tower last every step, :func:`arrivals` says it all.

    ``as predicted`` when the same tower came last in at least :data:`MOST_STEPS` of them,
    more often than chance (one tower in as many as arrive) allows below
    :data:`MAJORITY_ALPHA`; ``not as predicted`` when in no more of them than chance gives,
    over at least 6 steps; else :data:`INCONCLUSIVE`."""
    expected = clear_lasts(graph, simulated, point)
    if len(set(expected.values())) < 2:
        return None
    runs = {run: arrived for run, arrived in _arrived(graph, _ends(real), point) if run in expected}
    if not runs:
        return None
    chance = 1 / max(len(arrived) for arrived in runs.values())
    matched = sum(1 for run, arrived in runs.items() if came_last(arrived) == [expected[run]])
    steps, needed = len(runs), math.ceil(MOST_STEPS * len(runs))
    if matched >= needed and binomial_tail(matched, steps, chance) < MAJORITY_ALPHA:
        verdict = "as predicted"
    elif steps >= 6 and matched <= chance * steps:
        verdict = "not as predicted"
    else:
        verdict = INCONCLUSIVE
    return {
        "steps": steps,
        "matched": matched,
        "chance": chance,
        "towers_last": len({expected[run] for run in runs}),
        "needed": needed,
        "verdict": verdict,
    }


#: How unlikely (one-sided) a count must be for a tower last in at most half the steps, for
#: it to be called the one that is usually last (:func:`usually_last_of`).
MAJORITY_ALPHA = 0.05


def usually_last_of(last: Mapping[str, int], steps: int) -> str:
    """The tower last in more than half of ``steps`` clearly beyond chance (a count that high
    below :data:`MAJORITY_ALPHA` likely if it were last in half of them), or "": the one rule
    by which a run, real or simulated, names the tower that is usually last.

    >>> usually_last_of({"tower_2": 16, "tower_3": 4}, 20), usually_last_of({"tower_2": 13}, 20)
    ('tower_2', '')
    """
    if not last or not steps:
        return ""
    tower, count = max(last.items(), key=lambda item: item[1])
    return tower if binomial_tail(count, steps, 0.5) < MAJORITY_ALPHA else ""


def last_verdict(predicted: str, measured: str) -> str:
    """Who is usually last, measured against predicted (each :func:`usually_last_of`, ""
    for no single tower): ``as predicted`` when both name the same tower or both none, ``not
    as predicted`` when they name two, else :data:`INCONCLUSIVE` (one names a tower, the
    other cannot tell).

    >>> last_verdict("", ""), last_verdict("tower_1", "tower_2"), last_verdict("tower_1", "")
    ('as predicted', 'not as predicted', 'inconclusive')
    """
    if predicted == measured:
        return "as predicted"
    return "not as predicted" if predicted and measured else INCONCLUSIVE


def with_prediction(found: Arrival, simulated: Arrival | None) -> Arrival:
    """``found`` (a real run's arrivals at a sync point) with what the simulation predicted:
    the share of its steps in which the expected tower (the one with the most work) came
    last, the tower it has usually last (:func:`usually_last_of`), and ``as_predicted``:
    ``as predicted`` when the run and the simulation name the same tower, or both none;
    ``not as predicted`` when they name two different ones; else :data:`INCONCLUSIVE` (one
    names a tower, the other cannot tell). Where the towers' work is about equal, which one
    comes last is the order the threads take them in, which the simulation does not know run
    by run: there is nothing to compare.

    With fewer cores than towers, each thread runs one tower to its end and which towers
    start first changes from step to step: the slow tower need not come last every step, and
    the simulation (TensorFlow's thread pool) says how often it does.

    >>> found = {"sync_point": "s", "steps": 20, "mean_wait": {},
    ...          "last": {"tower_2": 12, "tower_3": 8}, "expected": "tower_3"}
    >>> simulated = {**found, "steps": 400, "last": {"tower_2": 190, "tower_3": 180}}
    >>> with_prediction(found, simulated)["as_predicted"]  # type: ignore[arg-type]
    'as predicted'
    >>> always = {**simulated, "last": {"tower_3": 400}}
    >>> with_prediction(found, always)["as_predicted"]  # type: ignore[arg-type]
    'inconclusive'
    >>> other = {**found, "last": {"tower_2": 19, "tower_3": 1}}
    >>> with_prediction(other, always)["as_predicted"]  # type: ignore[arg-type]
    'not as predicted'
    """
    expected = found["expected"]
    if not expected or simulated is None or not simulated["steps"] or not found["steps"]:
        return found
    predicted = usually_last_of(simulated["last"], simulated["steps"])
    verdict = last_verdict(predicted, usually_last_of(found["last"], found["steps"]))
    return {
        **found,
        "predicted_share": simulated["last"].get(expected, 0) / simulated["steps"],
        "predicted_steps": simulated["steps"],
        "predicted_last": predicted,
        "as_predicted": verdict,
    }


def usually_last(found: Arrival) -> str | None:
    """The tower whose input arrived last more often than chance allows (the binomial test
    of :func:`simsync.trace.straggler`), when the graph gives it a reason to (it is the
    ``expected`` one, :func:`simsync.trace.expected_last`); else None. Another tower last as
    often is the order TensorFlow's scheduler picked in this session (with towers sharing
    cores, it outweighs the work): one run cannot tell it from a straggler, and the next
    run can pick another (:func:`scheduled_last`)."""
    return named_straggler(found["last"], found["expected"]) or None


def scheduled_last(found: Arrival) -> str | None:
    """The tower that came last more often than chance allows in this run without the graph
    giving it a reason to (not the ``expected`` one), or None: shown, never a verdict."""
    last = straggler(found["last"])
    return last if last and last != found["expected"] else None


def interleaved_ratio(
    measured: Mapping[str, Sequence[float]],
    variant: str,
    hypotheses: Mapping[str, float],
) -> Ratio:
    """The scenario's step time over ``variant``'s, round by round, with the 95 % interval of
    its median, against each hypothesis' predicted ratio. A hypothesis is *excluded* when its
    ratio lies outside the interval widened by :data:`DRIFT` (the interval is one session's;
    between runs the machine drifts by more). ``verdict``: the one hypothesis the interval
    does not exclude, when it excludes all the others and they lie more than :data:`DRIFT`
    from it (closer, another run could name another); else ``"inconclusive"``.

    >>> measured = {"scenario": [2.0, 2.1, 1.9, 2.0, 2.2, 1.8, 2.0, 2.1], "one": [1.0] * 8}
    >>> r = interleaved_ratio(measured, "one", {"side by side": 1.0, "one after another": 2.0})
    >>> r["ratio"], r["interval"], r["verdict"]
    (2.0, [1.8, 2.2], 'one after another')
    >>> interleaved_ratio(measured, "one", {"a": 1.95, "b": 2.05})["verdict"]
    'inconclusive'
    >>> interleaved_ratio(measured, "one", {"a": 1.0, "b": 3.0})["verdict"]  # both excluded
    'inconclusive'
    >>> interleaved_ratio(measured, "one", {"a": 1.55, "b": 1.45})["why"]  # b out, but near a
    'too close'

    Lesson 3 on a 2-core machine: the interval (1.22-1.26) just misses "waits for the
    slowest" (1.265) but excludes "does not wait" (1.00) by far: the step waits.

    >>> slow = {"scenario": [1.22, 1.23, 1.23, 1.24, 1.22, 1.26, 1.23, 1.25], "one": [1.0] * 8}
    >>> interleaved_ratio(slow, "one", {"waits": 1.265, "does not wait": 1.0})["verdict"]
    'waits'
    """
    ratios = [
        mine / theirs
        for mine, theirs in zip(measured["scenario"], measured[variant], strict=True)
        if theirs > 0
    ]
    median, low, high = median_interval(ratios)
    kept = [
        name
        for name, ratio in hypotheses.items()
        if low * (1 - DRIFT) <= ratio <= high * (1 + DRIFT)
    ]
    verdict = INCONCLUSIVE
    why: str | None = "none inside" if not kept else "several inside"
    if len(kept) == 1:  # the interval excludes every other hypothesis: by enough?
        named = hypotheses[kept[0]]
        others = [ratio for name, ratio in hypotheses.items() if name != kept[0]]
        apart = all(abs(ratio - named) > DRIFT * named for ratio in others)
        verdict, why = (kept[0], None) if apart else (INCONCLUSIVE, "too close")
    return {
        "variant": variant,
        "rounds": len(ratios),
        "ratio": median,
        "interval": [low, high],
        "spread": (high - low) / 2 / median if median > 0 else None,
        "hypotheses": dict(hypotheses),
        "verdict": verdict,
        "why": why,  # why no verdict: "none inside", "several inside" or "too close"
        "drift": DRIFT,
    }


#: Consecutive blocks the ledger is cut into for the interval of its mean staleness.
BLOCKS = 10
#: How far (in updates) beyond a run's interval a prediction must lie to be called wrong. The
#: blocks of one run share its scheduling, so from run to run the interval moves by more than
#: its width shows: lesson 4's four workers on 2 busy cores measured means of 1.21 to 1.38
#: (13 runs, one to three spare busy loops per core) with intervals as narrow as 0.25, and
#: one run of CI's three called the same prediction (1.5) wrong
STALE_SLACK = 0.5


def staleness(trace: Trace, predicted: float) -> StalenessEvidence | None:
    """Were the real updates stale (see the module's text), and by as much as ``predicted``
    (the simulated mean staleness)? None without a ledger."""
    order = sorted(trace.updates, key=lambda u: (u.before, u.time))
    runs = updates_by_run(trace)
    applied = [
        runs[key][1] for key in dict.fromkeys((u.client, u.step) for u in order) if runs[key][0]
    ]
    if not applied:
        return None
    size = max(len(applied) // BLOCKS, 1)
    blocks = [
        statistics.fmean(applied[i : i + size]) for i in range(0, len(applied) - size + 1, size)
    ]
    stale = sum(1 for value in applied if value > 0)
    return staleness_of_blocks(blocks, predicted, len(applied), stale, statistics.fmean(applied))


def staleness_of_blocks(
    blocks: Sequence[float],
    predicted: float,
    updates: int,
    stale: int | None = None,
    mean: float | None = None,
) -> StalenessEvidence:
    """:func:`staleness`'s verdicts from the mean staleness of consecutive ``blocks`` of
    ``updates`` updates, ``stale`` of them stale (None where only the blocks' means are
    known: then a run is stale when its interval lies above 0); ``mean``, that of every
    update (the blocks' own leave the last few out), else the blocks' mean.

    >>> found = staleness_of_blocks([0.2, 0.1, 0.3, 0.2, 0.2, 0.1, 0.3, 0.2], 0.0, 80)
    >>> found["verdict"], found["interval"], found["prediction"]
    ('yes', [0.1, 0.3], 'inconclusive')
    >>> staleness_of_blocks([0.0] * 8, 0.0, 80)["verdict"]
    'no'
    """
    median, low, high = median_interval(blocks)
    if (stale == 0) if stale is not None else max(blocks) == 0:
        verdict = "no"
    elif low > 0 and (stale is None or stale >= 0.1 * updates):
        verdict = "yes"
    else:
        verdict = INCONCLUSIVE
    margin = max((high - low) / 2, STALE_SLACK)
    if low <= predicted <= high:
        prediction = "as predicted"
    elif predicted < low - margin or predicted > high + margin:
        prediction = "not as predicted"
    else:
        prediction = INCONCLUSIVE
    return {
        "updates": updates,
        "stale_updates": stale,
        "mean": statistics.fmean(blocks) if mean is None else mean,
        "median_block": median,
        "interval": [low, high],
        "blocks": len(blocks),
        "predicted": predicted,
        "verdict": verdict,
        "prediction": prediction,
        "margin": margin,
    }


def verdicts(report: Report) -> dict[str, str]:
    """Every verdict of a cross-check report, by name: the checks (``agree`` or
    ``disagree``) and each finding's answer, as the report's kind of check has them. Two
    runs of one check contradict each other when a name has two different answers, neither
    of them :data:`INCONCLUSIVE`."""
    found = {
        "structure": "agree" if report["structure"]["ok"] else "disagree",
        "values": "agree" if report["values"]["ok"] else "disagree",
    }
    if report["check"] == "cluster":
        applied = report["protocol"]["measured"]["one_apply_per_step"]
        found["one apply per step"] = "agree" if applied else "disagree"
    elif report["check"] == "racing_clients":
        stale = report["evidence"]["staleness"]
        if stale:
            found["stale"] = stale["verdict"]
            found["staleness as predicted"] = stale["prediction"]
    else:
        evidence = report["evidence"]
        if evidence["side_by_side"]:
            found["side by side"] = evidence["side_by_side"]["verdict"]
        for found_at in evidence["arrivals"]:
            point = found_at["sync_point"]
            found[f"last at {point}"] = usually_last(found_at) or INCONCLUSIVE
            if "as_predicted" in found_at:
                found[f"last at {point} as predicted"] = found_at["as_predicted"]
            if "step_by_step" in found_at:
                found[f"last at {point} step by step"] = found_at["step_by_step"]["verdict"]
        for ratio in evidence["ratios"]:
            found[ratio["variant"]] = ratio["verdict"]
        moving = report["values"].get("moving_statistics")
        if moving:
            found["moving statistics"] = "agree" if moving["ok"] else "disagree"
    return found


def contradictions(runs: Sequence[Mapping[str, str]]) -> dict[str, list[str]]:
    """The verdicts that flipped over several runs: a name with two different conclusive
    answers.

    >>> contradictions([{"a": "yes", "b": "x"}, {"a": "inconclusive", "b": "x"}])
    {}
    >>> contradictions([{"a": "yes"}, {"a": "no"}])
    {'a': ['yes', 'no']}
    """
    answers: dict[str, list[str]] = {}
    for run in runs:
        for name, answer in run.items():
            answers.setdefault(name, []).append(answer)
    return {
        name: given
        for name, given in answers.items()
        if len({a for a in given if a != INCONCLUSIVE}) > 1
    }


def drifted(machine: MachineMeasure | None, own: MachineMeasure | None = None) -> bool:
    """Whether the machine check of a report (the first variant's predicted step time against
    its measured interval) says this machine has changed since its profile was measured.

    With ``own``, the scenario's own step measured the same way: a machine that changed
    changes every configuration alike, so both must disagree beyond the noise, and in the
    same direction; one that disagrees alone is an error of the prediction, not of the
    profile.

    >>> variant = {"predicted": 0.010, "measured": 0.007, "interval": [0.0068, 0.0072]}
    >>> within = {"predicted": 0.020, "measured": 0.0194, "interval": [0.019, 0.0198]}
    >>> drifted(variant), drifted(variant, within)  # type: ignore[arg-type]
    (True, False)
    """
    if not machine:
        return False
    direction = _beyond_noise(machine)
    return direction != 0 and (own is None or _beyond_noise(own) == direction)


def _beyond_noise(measure: MachineMeasure) -> int:
    """1: predicted slower than measured beyond the noise, -1: faster, 0: within it."""
    low, high = measure["interval"]
    if measure["predicted"] > high * (1 + DRIFT):
        return 1
    return -1 if measure["predicted"] < low * (1 - DRIFT) else 0
