"""A race of scenarios run on TensorFlow: who reaches the target loss first, predicted for this
machine and measured, in interleaved rounds.

Each round runs every scenario once on TensorFlow (its ``[run] steps`` after a warm-up, none
traced op by op),
the rounds in alternating order (first to last, then last to first), so that a slow spell of
the machine falls on every run alike. A round's runs are lined up as the simulator's race
lines them up (:func:`simsync.simulation.line_up`: their loss against wall-clock time), to one
target for every round: the worst final loss of any run of any round. The prediction
simulates each scenario with this machine's costs (its profile), as a cross-check's does.

The verdict (:func:`race_verdict`): the same run first in every round, by a lead over the next
run of its round larger than its lead moved between rounds and than this machine's drift, is a
finding, "as predicted" when it is the run predicted first and "not as predicted" when not;
anything less is "inconclusive here": the machine's noise then decides more than the runs do.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from simsync.crosscheck.compare import MACHINE, predicted_scenario, resolve_profile
from simsync.crosscheck.evidence import DRIFT
from simsync.patterns import build
from simsync.scenario import Scenario
from simsync.scenario.profile import Profile
from simsync.simulation import Contest, Simulation, entrant_names, line_up, simulate
from simsync.tf_backend import TensorFlowRun, run_on_tensorflow
from simsync.trace import Trace

__all__ = ["ROUNDS", "RaceCheck", "race_on_tensorflow", "race_verdict"]

#: interleaved rounds of the race on TensorFlow
ROUNDS = 2

AS_PREDICTED, NOT_AS_PREDICTED, INCONCLUSIVE = (
    "as predicted",
    "not as predicted",
    "inconclusive here",
)


@dataclass(frozen=True)
class RaceCheck:
    """The race predicted for this machine, each round's race on TensorFlow, and the verdict
    with the rule that decided it (one line)."""

    predicted: Contest
    rounds: list[Contest]
    verdict: str
    rule: str

    @property
    def names(self) -> list[str]:
        return [entrant.name for entrant in self.predicted.entrants]


def race_on_tensorflow(
    scenarios: Sequence[Scenario],
    *,
    profile: Profile | str | None = MACHINE,
    rounds: int = ROUNDS,
    warmup: int = 1,
    on_progress: Callable[[str], None] | None = None,
) -> RaceCheck:
    """Race ``scenarios`` on TensorFlow for ``rounds`` interleaved rounds and in the
    simulator with this machine's costs (``profile``: see
    :func:`~simsync.crosscheck.crosscheck`), and say whether the predicted winner won."""
    resolved = resolve_profile(profile, on_progress)
    names = entrant_names(scenarios)
    graphs = [build(scenario) for scenario in scenarios]
    measured: list[dict[int, Simulation]] = [{} for _ in range(rounds)]
    predicted: dict[int, Simulation] = {}
    runs, done, order = rounds * len(scenarios), 0, list(range(len(scenarios)))
    for round_ in range(rounds):
        for index in order if round_ % 2 == 0 else order[::-1]:
            scenario, graph = scenarios[index], graphs[index]
            if on_progress is not None:
                on_progress(f"round {round_ + 1} of {rounds}, {names[index]} ({done + 1}/{runs})")
            real = run_on_tensorflow(
                scenario, warmup=warmup, timing_steps=0, graph=graph, trace_ops=False
            )
            measured[round_][index] = Simulation(scenario, graph, _traced(real), 0.0)
            if index not in predicted:  # this machine's costs, as the first run measured it
                predicted[index] = simulate(predicted_scenario(scenario, resolved, real))
            done += 1
    # one target for every round: the worst final loss of any run of any round (a run's
    # last losses move from round to round, as the workers' updates land in another order)
    target = max(line_up(names, [ran[i] for i in order]).target for ran in measured)
    lined_up = [line_up(names, [ran[i] for i in order], target) for ran in measured]
    guess = line_up(names, [predicted[i] for i in order])
    verdict, rule = race_verdict(_first(guess), [_reached(contest) for contest in lined_up])
    return RaceCheck(guess, lined_up, verdict, rule)


def _traced(real: TensorFlowRun) -> Trace:
    """``real``'s trace without its warm-up runs (asynchronous workers keep them in their
    trace; the simulator's race has none). Its runs were not traced op by op, which costs
    time of its own that the prediction leaves out."""
    kept = {run for run, phase in real.phases.items() if phase in ("traced", "untraced")}
    if not real.phases:  # one client: its trace holds the traced steps only
        return real.trace
    return dataclasses.replace(
        real.trace,
        steps=[s for s in real.trace.steps if (s.client, s.step) in kept],
        updates=[u for u in real.trace.updates if (u.client, u.step) in kept],
    )


def _first(contest: Contest) -> str | None:
    """The name of the run that reached the target first, or None (a tie, or none did)."""
    winner = contest.clear_winner
    return None if winner is None else contest.entrants[winner].name


def _reached(contest: Contest) -> dict[str, float | None]:
    """When each run reached the target, by name."""
    return {entrant.name: entrant.reached for entrant in contest.entrants}


def race_verdict(predicted: str | None, rounds: list[dict[str, float | None]]) -> tuple[str, str]:
    """The verdict on a race and its rule, from the predicted first run and when each run
    reached the target in each round measured (None: never).

    A round's first run is the one that got there first, alone; its **lead**, its margin over
    the next run of the same round. The runs of a round share the machine's moment, so a slow
    spell that falls on them all moves no lead: what moves it is the noise of single runs,
    shown by how much the lead moved between rounds. The same run first in every round, by a
    least lead larger than that and than this machine's drift between runs
    (:data:`~simsync.crosscheck.evidence.DRIFT`), is a finding: "as predicted" when it is
    the run predicted first, else "not as predicted". Anything less is "inconclusive here".
    (A first rule held the lead to how far any run's own time moved between rounds: a
    learner's race had async first in both rounds, 27 % and 20 % ahead, and no verdict, as
    a losing run moved 65 %.)

    >>> race_verdict("async", [{"sync": 3.0, "async": 2.0}, {"sync": 3.1, "async": 2.1}])
    ('as predicted', 'predicted first: async; first in both rounds: async, ahead of the next \
by 48 % or more, while its lead moved 2 % between rounds and this machine drifts 15 %')
    >>> race_verdict("async", [{"sync": 2.0, "async": 3.0}, {"sync": 2.1, "async": 3.1}])[0]
    'not as predicted'
    >>> verdict, rule = race_verdict("async", [{"sync": 3.0, "async": 2.0},
    ...                                        {"sync": 2.0, "async": 3.0}])
    >>> verdict, "async in round 1, sync in round 2: the rounds disagree" in rule
    ('inconclusive here', True)
    >>> race_verdict("async", [{"sync": 3.0, "async": 2.0}, {"sync": 2.5, "async": 2.4}])[1]
    'predicted first: async; first in both rounds: async, but ahead by only 4 % in a round, \
while its lead moved 46 % between rounds and this machine drifts 15 %'
    >>> race_verdict("async", [{"sync": 3.0, "async": 2.0}, {"sync": 2.0, "async": 2.0}])[1]
    'predicted first: async; no run was first alone in round 2'
    """
    said = f"predicted first: {predicted or 'none alone'}"
    firsts = []
    for number, reached in enumerate(rounds, start=1):
        times = sorted((t, name) for name, t in reached.items() if t is not None)
        if not times or (len(times) > 1 and times[0][0] == times[1][0]):
            return INCONCLUSIVE, f"{said}; no run was first alone in round {number}"
        firsts.append(times[0][1])
    if len(set(firsts)) > 1:
        each = ", ".join(f"{first} in round {n}" for n, first in enumerate(firsts, start=1))
        return (
            INCONCLUSIVE,
            f"{said}; first: {each}: the rounds disagree, so this machine drifts more than "
            "the runs differ",
        )
    first = firsts[0]
    leads = [_lead(first, reached) for reached in rounds]
    lead = min(leads)
    known = [share for share in leads if math.isfinite(share)]
    moved = max(known) - min(known) if known else 0.0
    every = "both rounds" if len(rounds) == 2 else f"all {len(rounds)} rounds"
    # the lead and what it must exceed (the larger of its moves and the drift), with as
    # many decimals as tell them apart, and the other of the two alike
    shown_lead, shown_moved, shown_drift = _percents_apart(lead, moved, DRIFT)
    noise = f"its lead moved {shown_moved} between rounds and this machine drifts {shown_drift}"
    if lead <= max(moved, DRIFT):
        return (
            INCONCLUSIVE,
            f"{said}; first in {every}: {first}, but ahead by only {shown_lead} in a "
            f"round, while {noise}",
        )
    verdict = AS_PREDICTED if first == predicted else NOT_AS_PREDICTED
    if not math.isfinite(lead):
        return verdict, f"{said}; first in {every}: {first}, and every other run never got there"
    ahead = f"ahead of the next by {shown_lead} or more"
    return verdict, f"{said}; first in {every}: {first}, {ahead}, while {noise}"


def _percents_apart(lead: float, moved: float, drift: float) -> tuple[str, str, str]:
    """A lead, how much it moved and the drift, in whole percent, or with as many decimals
    as show the lead apart from what it must exceed, the larger of the other two (a lead of
    15.06 % is more than a drift of 15 %, which '15 %' and '15 %' would not say: a
    learner's trial). An infinite lead (no other run got there) is shown as no number.

    >>> _percents_apart(0.476, 0.05, 0.15)
    ('48 %', '5 %', '15 %')
    >>> _percents_apart(0.1506, 0.02, 0.15)
    ('15.1 %', '2.0 %', '15.0 %')
    >>> _percents_apart(0.1496, 0.1502, 0.10)
    ('14.96 %', '15.02 %', '10.00 %')
    """
    bar = max(moved, drift)
    digits = 0
    while digits < 3 and math.isfinite(lead) and f"{lead:.{digits}%}" == f"{bar:.{digits}%}":
        digits += 1
    lead_shown, moved_shown, drift_shown = (
        f"{share:.{digits}%}".replace("%", " %") for share in (lead, moved, drift)
    )
    return lead_shown, moved_shown, drift_shown


def _lead(first: str, reached: dict[str, float | None]) -> float:
    """How far ahead ``first`` got there of the next run, as a share of its own time
    (infinite when no other run got there)."""
    mine = reached[first] or 0.0
    others = [t for name, t in reached.items() if name != first and t is not None]
    if not others:
        return math.inf
    return (min(others) - mine) / mine if mine > 0 else math.inf
