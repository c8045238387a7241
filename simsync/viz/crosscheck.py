"""The cross-check report in the terminal: structure, values, timing, and what a mismatch means."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any, assert_never

from rich.console import Console, ConsoleOptions, RenderResult
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from simsync.findings import LAST, LAST_EACH_STEP, NO_SLOW_TOWER, ONE_TOWER_WORKING, SIDE_BY_SIDE
from simsync.trace.staleness import STANDS_OUT
from simsync.words import listed, ms, plural

if TYPE_CHECKING:  # the cross-check is not imported to draw what it found
    from simsync.crosscheck.report import (
        Arrival,
        AsyncReport,
        MachineCheck,
        MovingCheck,
        ProtocolComparison,
        Ratio,
        RefitReport,
        Report,
        StalenessEvidence,
        StepByStep,
        Structure,
        SyncReplicasReport,
        SyncReport,
        Violation,
    )

__all__ = ["CrossCheckView", "EvidenceView", "ProfileView", "stale_where"]

#: What timed the real ops of a kind, when not TensorFlow's executor records (on a CPU).
TIMED_BY = {"kernels": " (GPU kernels)", "both": " (GPU kernels, executor)"}

WHY_TIMING_DIFFERS = (
    "Timing is a prediction, not a replay: TensorFlow's scheduler may run ready ops in another "
    "order than the simulator, every real op has a framework cost, and other programs on the "
    "machine take cores."
)
#: What to do about it, by where the predicted costs came from.
REMEDY = {
    "scenario": " Without --scenario-costs, the prediction uses this machine's measured costs.",
    "machine": " If this machine has changed its load since it was measured, `simsync "
    "calibrate` measures it again.",
    "file": "",
}


def _mark(ok: bool) -> Text:
    return Text("✓ agree", style="bold green") if ok else Text("✗ DISAGREE", style="bold red")


def _percent(error: float | None) -> str:
    return "n/a" if error is None else f"{error * 100:+.1f} %"


def _share(histogram: Mapping[str, int], key: str) -> str:
    total = sum(histogram.values())
    share = histogram.get(key, 0) / total if total else 0.0
    return f"{share * 100:5.1f} % " + "█" * round(share * 20)


def _heading(report: Report, what: str) -> Text:
    """``Cross-check <scenario>: <what>``."""
    return Text.assemble(("Cross-check ", "bold"), (report["scenario"], "bold cyan"), f": {what}")


def _median_said(timing: Mapping[str, Any]) -> str:
    """What the predicted median step time is, against the measured one and its interval:
    where it is off by more than 5 %, or lies outside the interval, said; else nothing.

    >>> print(_median_said({"error_median": -0.027, "measured_interval": [0.028579, 0.029212],
    ...       "predicted_median_step_time": 0.027961}))  # doctest: +NORMALIZE_WHITESPACE
    The predicted median step time is off by -2.7 %: close, but outside the measured
    interval (28.579–29.212 ms), which holds the spread of this run's own steps only.
    >>> print(_median_said({"error_median": 0.08, "measured_interval": [0.9, 1.2],
    ...       "predicted_median_step_time": 1.08}))  # doctest: +NORMALIZE_WHITESPACE
    The predicted median step time is off by +8.0 %, within this machine's noise (inside
    the measured interval).
    >>> _median_said({"error_median": 0.01, "measured_interval": [0.9, 1.2],
    ...               "predicted_median_step_time": 1.01})
    ''
    """
    error, (low, high) = timing["error_median"], timing["measured_interval"]
    if error is None:
        return ""
    inside = low <= timing["predicted_median_step_time"] <= high
    off = f"The predicted median step time is off by {_percent(error)}"
    if not inside:
        close = "close, but outside" if abs(error) <= 0.05 else "outside"
        return (
            f"{off}: {close} the measured interval ({ms(low)}–{ms(high)} ms), which holds "
            "the spread of this run's own steps only."
        )
    if abs(error) > 0.05:
        return f"{off}, within this machine's noise (inside the measured interval)."
    return ""


def _accepted_said(protocol: ProtocolComparison, replicas: int) -> str | None:
    """Where a side's accumulators accepted more gradients than ``replicas`` for each of
    its applies, how that can be: an apply averages every gradient accepted by then, and
    those accepted after the last apply wait for a step the run ended before.

    >>> side = {"global_step": 10, "applies": 10, "one_apply_per_step": True,
    ...         "gradients": {"pushed": 40, "accepted": 31, "dropped": 9, "split": 0},
    ...         "dropped_per_step": 0.9}
    >>> print(_accepted_said({"predicted": side, "measured": side}, 3))
    ... # doctest: +NORMALIZE_WHITESPACE
    accepted: more than 3 × 10 applies = 30, as an apply averages every gradient accepted
    by then (at least 3), and one accepted after the last apply waits for a step the run
    ended before
    >>> exact = {**side, "gradients": {**side["gradients"], "accepted": 30}}
    >>> _accepted_said({"predicted": exact, "measured": exact}, 3) is None
    True
    """
    sides = (protocol["predicted"], protocol["measured"])
    if not any(s["gradients"]["accepted"] > replicas * s["global_step"] for s in sides):
        return None
    steps = " or ".join(sorted({str(s["global_step"]) for s in sides}))
    least = " or ".join(sorted({str(replicas * s["global_step"]) for s in sides}))
    return (
        f"accepted: more than {replicas} × {steps} applies = {least}, as an apply averages "
        f"every gradient accepted by then (at least {replicas}), and one accepted after the "
        "last apply waits for a step the run ended before"
    )


def _checks_table(structure: Structure, detail: str) -> Table:
    """The table of checks, its first row the structure's (``detail`` says what was checked)."""
    table = Table(title="Does TensorFlow do what the graph says?", title_justify="left")
    for column in ("check", "result", "detail"):
        table.add_column(column)
    table.add_row("structure", _mark(structure["ok"]), detail)
    return table


class CrossCheckView:
    """A rich renderable of a cross-check report (:mod:`simsync.crosscheck.report`): the
    tables of its kind of check, which the report's ``check`` declares."""

    def __init__(self, report: Report, findings: Collection[str] | None = None) -> None:
        self.report = report
        self.findings = findings  # the findings shown (simsync.findings); None: every one

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        r = self.report
        if r["check"] == "cluster":  # a real cluster: the protocol is checked
            yield from self._cluster(r)
        elif r["check"] == "racing_clients":  # the race is checked, not predicted
            yield from self._asynchronous(r)
        elif r["check"] == "one_client":
            yield from self._synchronous(r)
        else:
            assert_never(r)

    def _synchronous(self, r: SyncReport) -> RenderResult:
        """Towers of one client: structure, values, timing and the evidence of the run."""
        yield _heading(
            r,
            f"{r['steps']} traced steps after {r['warmup']} warm-up, TensorFlow "
            f"{r['tensorflow']} on {r['devices']}",
        )
        if "fewer_towers" in r:
            yield Text(r["fewer_towers"], style="yellow")
        yield self._checks(r)
        yield self._timing(r)
        said = _median_said(r["timing"])
        if said:
            yield Text(said + " " + WHY_TIMING_DIFFERS + REMEDY[r["costs_kind"]], style="yellow")
        refitted = r.get("refit")
        if refitted is not None:
            yield _refit(refitted)
        compared = [  # the comparisons shown below (a lesson may show none of them)
            ratio
            for ratio in r["evidence"]["ratios"]
            if self.findings is None or ratio["variant"] in self.findings
        ]
        if compared:  # the note is about them: it says how they are judged
            table = r["timing"].get("measured_median_step_time")
            yield from _drift(r["evidence"]["machine"], refitted is not None, table)
        yield EvidenceView(r, self.findings)
        yield from _problems(r["structure"]["violations"], r["unmapped_tensorflow_ops"])

    def _cluster(self, r: SyncReplicasReport) -> RenderResult:
        """SyncReplicasOptimizer on a real cluster: structure, replay, protocol, timing."""
        yield _heading(
            r,
            f"TensorFlow {r['tensorflow']}'s SyncReplicasOptimizer, {r['workers']} workers, "
            f"{r['replicas_to_aggregate']} gradients per step, {r['steps']} steps, on "
            f"{r['devices']}",
        )
        structure, values = r["structure"], r["values"]
        table = _checks_table(
            structure,
            f"{structure['checked']} happens-before relations of the protocol in "
            f"{structure['runs']} runs, {len(structure['violations'])} violated",
        )
        table.add_row(
            "replay",
            _mark(values["ok"]),
            f"the real ledger replayed in numpy, variable by variable: parameters differ by "
            f"at most {values['max_abs_diff']:.2e}, losses by {values['loss_max_abs_diff']:.2e}",
        )
        measured = r["protocol"]["measured"]
        table.add_row(
            "one apply per step",
            _mark(measured["one_apply_per_step"]),
            f"{measured['applies']} applies for global step {measured['global_step']}",
        )
        yield table
        yield self._gradients(r["protocol"], r["replicas_to_aggregate"])
        timing = r["timing"]
        yield Text(
            f"Time between applies: predicted {ms(timing['predicted_step_time'])} ms, "
            f"measured {ms(timing['measured_step_time'])} ms ({_percent(timing['error'])})."
        )
        priced = timing.get("priced")
        if priced:
            costs = ", ".join(
                f"{k} {ms(v)} ms" for k, v in sorted(priced["costs"].items()) if k in COST_KEYS
            )
            yield Text(
                f"Priced for this machine: the tasks are processes sharing its "
                f"{plural(priced['host_cores'], 'core')} (efficiency "
                f"{priced['core_efficiency']:.2f} with all busy), and the cluster's own ops "
                f"cost what a reference cluster measured here once ({costs}). The scenario's "
                f"own costs, a task per host, would predict "
                f"{ms(priced['unpriced_step_time'])} ms."
            )
        elif timing["error"] is not None and abs(timing["error"]) > 0.1:
            yield Text(
                "Timing is a prediction: the tasks ran on the hosts of the cluster file, which "
                "this machine cannot price; [costs] push_gradients, take_gradients, "
                "dequeue_token and read say what the cluster's own ops cost there.",
                style="yellow",
            )
        yield from _problems(r["structure"]["violations"], None)

    @staticmethod
    def _gradients(protocol: ProtocolComparison, replicas: int) -> Table:
        table = Table(
            title="Gradients: predicted and measured",
            title_justify="left",
            caption=_accepted_said(protocol, replicas),
            caption_justify="left",
        )
        for column in ("side", "pushed", "accepted", "dropped", "dropped per step"):
            table.add_column(column, justify="left" if column == "side" else "right")
        for side, row in (("predicted", protocol["predicted"]), ("measured", protocol["measured"])):
            g, per_step = row["gradients"], row["dropped_per_step"]
            dropped = str(g["dropped"]) + (f" (+{g['split']} split)" if g.get("split") else "")
            table.add_row(side, str(g["pushed"]), str(g["accepted"]), dropped,
                          "–" if per_step is None else f"{per_step:.2f}")  # fmt: skip
        return table

    def _asynchronous(self, r: AsyncReport) -> RenderResult:
        """Structure, replay of the real ledger, staleness and throughput."""
        yield _heading(
            r,
            f"{r['workers']} worker threads, {r['updates']} updates taken from one pool "
            f"({r['warmup']} warm-up and {r['steps']} traced-phase runs for each worker, then "
            "as many timed: a faster worker takes more of them), TensorFlow "
            f"{r['tensorflow']} on {r['devices']}",
        )
        structure, values = r["structure"], r["values"]
        table = _checks_table(
            structure,
            f"{structure['checked']} arrows of the graph checked (an op starts after its inputs "
            f"end), {len(structure['violations'])} broken, in the "
            f"{plural(structure['runs'], 'run')} "
            "traced op by op (TensorFlow traces one run at a time; the others run meanwhile "
            "untraced)",
        )
        detail = (
            f"TensorFlow's ledger replayed in numpy: parameters differ by at most "
            f"{values['max_abs_diff']:.2e} (tolerance {values['tolerance']:.0e})"
            if values["replayed"]
            else f"not replayable: {values['why']}"
        )
        if values["exact"]:
            table.add_row("replay", _mark(values["ok"]), detail)
        else:
            note = values["note"] or ""
            table.add_row(
                "replay",
                Text("≈ lock-free", style="bold yellow"),
                f"{detail}. {note[:1].upper()}{note[1:]}.",
            )
        yield table
        yield self._staleness(r)
        throughput = r["throughput"]
        yield Text(
            f"Updates per second: predicted {throughput['predicted']:.1f}, measured "
            f"{throughput['measured']:.1f} ({_percent(throughput['error'])}) over "
            f"{throughput['timed_runs']} untraced runs."
        )
        if throughput["error"] is not None and abs(throughput["error"]) > 0.15:
            yield Text(
                "Timing is a prediction, not a replay: every worker here is a Python thread; "
                "the prediction gives each its turn at Python's lock (the GIL) and a core for "
                "its own work, as measured on this machine, but the machine's other load "
                "takes cores too, and the staleness follows the timing.",
                style="yellow",
            )
        yield EvidenceView(r, self.findings)
        yield from _problems(r["structure"]["violations"], r["unmapped_tensorflow_ops"])

    @staticmethod
    def _staleness(r: AsyncReport) -> Table:
        staleness = r["staleness"]
        predicted, measured = staleness["predicted"], staleness["measured"]
        table = Table(
            title="Staleness of the updates (updates landed between read and apply)",
            title_justify="left",
        )
        for column in ("what", "predicted", "measured"):
            table.add_column(column, justify="right" if column != "what" else "left")
        table.add_row("mean", f"{predicted['mean']:.2f}", f"{measured['mean']:.2f}")
        table.add_row("max", str(predicted["max"]), str(measured["max"]))
        table.add_row(
            "applied / dropped",
            f"{predicted['updates_applied']} / {predicted['updates_dropped']}",
            f"{measured['updates_applied']} / {measured['updates_dropped']}",
        )
        keys = sorted({*predicted["histogram"], *measured["histogram"]}, key=int)
        for key in keys[:12]:
            table.add_row(
                f"  staleness {key}",
                _share(predicted["histogram"], key),
                _share(measured["histogram"], key),
            )
        if len(keys) > 12:
            table.add_row(f"  … {len(keys) - 12} more values", "", "")
        table.add_row(
            "histogram distance (0 same … 1 disjoint)", f"{staleness['distance']:.3f}", ""
        )
        by_worker = staleness.get("by_worker") or {}
        for worker in list(by_worker.get("predicted", {}))[:16]:
            sides: list[Mapping[str, Any]] = [
                by_worker.get(side, {}).get(worker, {}) for side in ("predicted", "measured")
            ]
            table.add_row(
                f"  {worker}: mean (updates)",
                *(
                    "–" if row.get("mean") is None else f"{row['mean']:.2f} ({row['applied']})"
                    for row in sides
                ),
            )
        stalest = staleness.get("stalest")
        if stalest is not None:
            # the rule, where a learner compares it with the rows above (0.62 and 1.86 read
            # "none stands out" with no reason: the mean of the four was 1.3)
            table.add_row(
                f"stalest worker ({STANDS_OUT:g}x the mean)",
                *(stalest.get(side) or "none" for side in ("predicted", "measured")),
            )
        return table

    @staticmethod
    def _checks(r: SyncReport) -> Table:
        structure, values = r["structure"], r["values"]
        table = _checks_table(
            structure,
            f"{structure['checked']} happens-before relations checked, "
            f"{len(structure['violations'])} violated",
        )
        table.add_row(
            "values",
            _mark(values["ok"]),
            f"parameters differ by at most {values['max_abs_diff']:.2e}, losses by "
            f"{values['loss_max_abs_diff']:.2e} (tolerance {values['tolerance']:.0e})",
        )
        moving = values.get("moving_statistics")
        if moving:
            table.add_row("moving statistics", _mark(moving["ok"]), _moving(moving))
        return table

    @staticmethod
    def _timing(r: SyncReport) -> Table:
        timing = r["timing"]
        title = f"Timing, predicted from {_costs(r['costs'])}"
        table = Table(
            title=title,
            title_justify="left",
            # as wide as its title: a title wrapped at the table's width split the date it
            # ends with across a page's end at 80 columns
            min_width=len(title),
            caption="error: (predicted - measured) / measured. Under the measured median: "
            "its 95 % interval. Op times come from the traced steps, which tracing slows: "
            "a tower's ops there can add up to more than an untraced step",
            caption_justify="left",
        )
        for column in ("what", "predicted (ms)", "measured (ms)", "error"):
            table.add_column(column, justify="right" if column != "what" else "left")
        table.add_row(
            Text("step time, mean", style="bold"),
            ms(timing["predicted_step_time"]),
            ms(timing["measured_step_time"]),
            _percent(timing["error"]),
        )
        low, high = timing["measured_interval"]
        table.add_row(
            "step time, median",
            ms(timing["predicted_median_step_time"]),
            f"{ms(timing['measured_median_step_time'])}\n({ms(low)}–{ms(high)})",
            _percent(timing["error_median"]),
        )
        for kind, row in timing["ops"].items():
            timed_by = TIMED_BY.get(row["timed_by"], "")
            if row.get("stand_in"):  # the scenario's own number: said, not judged silently
                timed_by += (
                    " (predicted at the scenario's own cost: this machine's profile has none)"
                )
            table.add_row(
                f"  {kind} op{timed_by}",
                ms(row["predicted"]),
                ms(row["measured"]),
                _percent(row["error"]),
            )
        return table


def _problems(violations: list[Violation], unmapped: Mapping[str, int] | None) -> RenderResult:
    """The first violations of the structure, and the TensorFlow ops that map to no IR op."""
    for violation in violations[:10]:
        where = f"  {violation.get('client', 'main')} step {violation['step']}: "
        if "missing" in violation:
            yield Text(
                f"{where}{violation['missing']} does not appear in TensorFlow's trace",
                style="red",
            )
            continue
        yield Text(
            f"{where}{violation['after']} started "
            f"{violation['overlap_seconds'] * 1e6:.0f} us before "
            f"{violation['before']} ended",
            style="red",
        )
    if unmapped:
        names = ", ".join(sorted(unmapped)[:8])
        yield Text(f"TensorFlow ops that map to no IR op: {names}", style="yellow")


def _refit(refit: RefitReport) -> Text:
    """What this session measured again, against the profile, and what the profile as
    cached would have predicted (in a learner's words: the profile is "the numbers stored
    when it was last calibrated")."""
    session, scale, efficiency = (
        refit["session_run"],
        refit["compute_scale"],
        refit["core_efficiency"],
    )
    error = refit["cached_error_median"]
    return Text(
        "Other work on this machine changes how fast it runs, so its speed was measured "
        "again between the timed steps, and the predictions above use what was measured "
        "(in brackets, the numbers stored when it was last calibrated): each sess.run's own "
        f"time {ms(session[1])} ms ({ms(session[0])})"
        + (
            f" (the least it can be: steps with no work took {ms(floor)} ms in this session, "
            "less than the stored costs of their ops alone)"
            if (floor := refit.get("session_run_floor")) is not None
            else ""
        )
        + ", real seconds per second of compute "
        f"{scale[1]:.2f} ({scale[0]:.2f}), speed of busy cores sharing the machine "
        f"{efficiency[1]:.2f} ({efficiency[0]:.2f}). With the stored numbers the median step "
        f"would have been predicted {ms(refit['cached_predicted_median_step_time'])} ms"
        + (f", off by {_percent(error)} from the measured median." if error is not None else "."),
        style="dim",
    )


def _drift(
    machine: MachineCheck | None, refitted: bool = False, table: float | None = None
) -> RenderResult:
    """A note when the machine no longer runs as its profile says (checked only when the
    predictions are for this machine); and when the table's median step (``table``, timed
    apart from the alternating rounds) is further from the rounds' own steps than this
    machine drifts between runs: its load changed while the check ran (a learner saw 38.6 ms
    in the table beside 17.1 ms in the rounds, and "faster now" beside a step 55 % slower
    than predicted): said whether or not the machine drifted."""
    own = machine.get("scenario") if machine else None
    if own and table and abs(table - own["measured"]) > DRIFT * min(table, own["measured"]):
        yield Text(
            f"The table's steps, timed apart from the alternating rounds, took {ms(table)} ms "
            f"against {ms(own['measured'])} ms in the rounds: this machine's load changed "
            "while the check ran, so the table's timing rows hold for neither; the "
            "comparisons below, timed in alternating rounds, are what this check can judge.",
            style="yellow",
        )
    if not machine or not machine["drifted"]:
        return
    faster = machine["predicted"] > machine["interval"][1]
    yield Text(
        f"In the alternating rounds, steps with {VARIANTS[machine['variant']][1]} took "
        f"{ms(machine['measured'])} ms here, where the numbers stored when this machine was "
        f"last calibrated predict {ms(machine['predicted'])} ms"
        + (
            f", and the scenario's own steps {ms(own['measured'])} ms (the table's median is "
            f"of the steps timed apart from these rounds) where those numbers predict "
            f"{ms(own['predicted'])} ms"
            + (" (the table's prediction uses the numbers measured again)" if refitted else "")
            if (own := machine.get("scenario"))
            else ""
        )
        + f": the machine is {'faster' if faster else 'slower'} "
        "now than when it was measured (its load has changed), so "
        + (
            "the comparisons below use what this session measured again."
            if refitted
            else "the comparisons below give no verdict. `simsync calibrate` measures it again."
        ),
        style="yellow",
    )


def _costs(costs: str) -> str:
    """The timing table's words for where the predicted costs came from."""
    return "the scenario's own costs" if costs == "scenario" else costs


#: below this width, the findings of a real run are paragraphs, not a table's rows
NARROW = 100


class EvidenceView:
    """What the real run shows (:mod:`simsync.crosscheck.evidence`), one row per finding:
    its verdict, or "inconclusive here" with the reason, and the numbers behind it. The
    findings are those of the report's kind of check: towers side by side, who arrived last,
    what a variant changes (``one_client``); whether the updates were stale
    (``racing_clients``). Where the
    predictions came from is the report's ``costs`` and ``costs_kind``. Nothing is shown
    when there is no finding (one tower). With ``findings`` (of
    :data:`~simsync.findings.FINDINGS`), the
    towers' findings shown are those only (a lesson's own questions)."""

    def __init__(
        self, report: SyncReport | AsyncReport, findings: Collection[str] | None = None
    ) -> None:
        self.report = report
        self.findings = findings
        costs, kind = report["costs"], report["costs_kind"]
        self.predicted = "for this machine" if kind == "machine" else f"from {_costs(costs)}"

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        rows: list[tuple[str, Text, str]] = []
        r = self.report
        if r["check"] == "one_client":
            self._towers(rows, r)
        else:
            stale = r["evidence"]["staleness"]
            if stale:
                rows += [_stale(stale), _stale_predicted(stale, self.predicted)]
        if not rows:
            return
        if options.max_width < NARROW:  # each finding a paragraph: a column of 25 characters
            # took one verdict's evidence over three pages of an 80x24 terminal
            yield Text("What the real run shows", style="italic")
            for question, answer, evidence in rows:
                yield Text.assemble((question, "bold"), " → ", answer)
                yield Padding(Text(evidence), (0, 0, 0, 2))
            return
        table = Table(title="What the real run shows", title_justify="left")
        for column in ("question", "answer", "evidence"):
            table.add_column(column)
        for row in rows:
            table.add_row(*row)
        yield table

    def _shown(self, finding: str) -> bool:
        return self.findings is None or finding in self.findings

    def _towers(self, rows: list[tuple[str, Text, str]], r: SyncReport) -> None:
        evidence = r["evidence"]
        together = evidence["side_by_side"]
        if together and self._shown(SIDE_BY_SIDE):
            rows.append((
                "did the towers run side by side?",
                _verdict(together["verdict"], "side by side"),
                f"in {together['overlapped_steps']} of {together['steps']} traced steps the "
                "towers' forward and backward ops ran at the same time for at least half of "
                f"the shorter tower's compute (median {together['median_share'] * 100:.0f} %); "
                "one after another, they would never overlap",
            ))  # fmt: skip
        for found in evidence["arrivals"] if self._shown(LAST) else ():
            rows.append((f"who arrived last at {found['sync_point']}?", *_last(found)))
        for found in evidence["arrivals"] if self._shown(LAST_EACH_STEP) else ():
            by_step = found.get("step_by_step")
            if by_step:
                rows.append(_last_each_step(found["sync_point"], by_step, found["steps"]))
        for ratio in evidence["ratios"]:
            if self._shown(ratio["variant"]):
                rows.append(_ratio(ratio, self.predicted))


def _verdict(verdict: str, expected: str) -> Text:
    """``verdict`` in green if it is the ``expected`` one, in red if not."""
    if verdict == "inconclusive":
        return Text("inconclusive here", style="bold yellow")
    style = "bold green" if verdict == expected else "bold red"
    return Text(verdict, style=style)


def _last(found: Arrival) -> tuple[Text, str]:
    # here, not at the top: the package's import would bring the engine (and SimPy) to viz
    from simsync.crosscheck.evidence import scheduled_last, usually_last

    steps, last, expected = found["steps"], found["last"], found["expected"]
    tower = usually_last(found)
    predicted = _predicted_last(found)
    agrees = found.get("as_predicted") != "not as predicted"
    if tower:
        others = [w for t, w in found["mean_wait"].items() if t != tower]
        wait = sum(others) / len(others) * 1e3 if others else 0.0
        return Text(tower, style="bold green" if agrees else "bold red"), (
            f"{tower}'s input came last in {last.get(tower, 0)} of {steps} traced steps; the "
            f"others waited for it {wait:.2f} ms on average; it has the most work{predicted}"
        )
    counts = ", ".join(f"{t} {n}" for t, n in last.items())
    scheduled = scheduled_last(found)
    if scheduled and expected:
        why = (
            f"{scheduled} came last more often than chance allows, though {expected} has the "
            "most work: the order TensorFlow's threads took the towers in outweighed the "
            "work (towers sharing cores)"
        )
    elif expected:
        why = f"{expected} has the most work, but no tower came last more often than chance allows"
    else:
        why = (
            "the towers do about the same work on devices about as fast, so which one comes "
            "last is the order TensorFlow's scheduler picked in this run, and another run can "
            "pick another"
        )
    if found.get("as_predicted") in ("as predicted", "not as predicted"):
        verdict = Text(
            f"no single tower, {found['as_predicted']}"
            if not found.get("predicted_last")
            else str(found["as_predicted"]),
            style="bold green" if agrees else "bold red",
        )
    else:
        verdict = Text("inconclusive here", style="bold yellow")
    return verdict, f"last in {steps} traced steps: {counts}; {why}{predicted}"


def _last_each_step(point: str, by_step: StepByStep, traced: int = 0) -> tuple[str, Text, str]:
    """Who came last at ``point`` in each traced step, against the simulation of the same
    steps (:func:`simsync.crosscheck.evidence.step_by_step`), as a row.

    >>> found = {"steps": 18, "matched": 17, "chance": 0.5, "towers_last": 2, "needed": 12,
    ...          "verdict": "as predicted"}
    >>> question, answer, evidence = _last_each_step("average_gradients", found)
    >>> print(question, answer, sep=" → ")
    who came last at average_gradients, step by step? → as predicted
    >>> print(evidence[:83])
    in 17 of 18 traced steps the tower that came last was the one the simulation of the
    """
    steps, matched, verdict = by_step["steps"], by_step["matched"], by_step["verdict"]
    evidence = (
        f"in {matched} of {steps} traced steps the tower that came last was the one the "
        "simulation of the same steps had last: the same random compute times, so the "
        f"one that drew the longest; {by_step['towers_last']} different towers were last "
        f"in them, and a guess would be right in {by_step['chance'] * 100:.0f} % of steps"
    )
    if traced > steps:  # learner trial 56 read "17 of 17" under "20 traced steps"
        left = traced - steps
        evidence += (
            f" ({'one' if left == 1 else left} of the {traced} traced steps "
            f"{'is' if left == 1 else 'are'} left out: there the simulation's towers arrived "
            "too close together to say which is last)"
        )
    if verdict == "as predicted":
        answer = Text("as predicted", style="bold green")
        evidence += ": the step waited for whichever tower drew the longest time"
    elif verdict == "not as predicted":
        answer = Text("not as predicted", style="bold red")
        evidence += ": no more often than a guess"
    else:
        answer = Text("inconclusive here", style="bold yellow")
        evidence += f": it takes {by_step['needed']} of them, more than a guess gets by chance"
    return f"who came last at {point}, step by step?", answer, evidence


def _predicted_last(found: Arrival) -> str:
    """What the simulation predicted of who comes last, as a clause."""
    if "predicted_share" not in found:
        return ""
    expected, share = found["expected"], found["predicted_share"]
    named = found.get("predicted_last") or "no single tower"
    clause = (
        f"; the simulation has {expected} last in {share * 100:.0f} % of "
        f"{found.get('predicted_steps', 0)} steps, so {named} is usually last"
    )
    if share < 0.95:
        clause += (
            " (with fewer cores than towers, TensorFlow's threads run one tower each to its "
            "end, and which towers they start first changes from step to step: a fast tower "
            "started after the slow one can end after it)"
        )
    verdict = found.get("as_predicted", "")
    if verdict == "inconclusive":
        return clause + "; one of the two names a tower the other cannot tell"
    return clause + f": {verdict}"


#: Each variant of the interleaved rounds in words: the question its comparison answers, and
#: its steps (after "Steps with").
VARIANTS = {
    ONE_TOWER_WORKING: (
        "a step against one tower working alone",
        "only one tower working",
    ),
    NO_SLOW_TOWER: ("a step against the same step with no slow tower", "no slow tower"),
}


#: The measured costs of a cluster that are seconds (the rest of ``priced["costs"]`` is how
#: they were fitted).
COST_KEYS = ("read", "push_gradients", "dequeue_token", "take_gradients", "apply",
             "enqueue_tokens", "session_run", "queue_runner_run")  # fmt: skip


def _ratio(ratio: Ratio, predicted: str) -> tuple[str, Text, str]:
    low, high = ratio["interval"]
    hypotheses = ", ".join(f"{name} {value:.2f}x" for name, value in ratio["hypotheses"].items())
    evidence = (
        f"{ratio['ratio']:.2f}x as long (95 % interval {low:.2f}–{high:.2f}, "
        f"{ratio['rounds']} alternating rounds in one session); predicted {predicted}: "
        f"{hypotheses}; "
    )
    if ratio.get("out_of_date"):
        evidence += "no verdict: this machine's profile is out of date (see above)"
    else:
        evidence += ratio_rule(ratio)
    verdict = ratio["verdict"]
    answer = (
        Text("inconclusive here", style="bold yellow")
        if verdict == "inconclusive"
        else Text(verdict, style="bold cyan")  # a measurement, neither right nor wrong
    )
    return VARIANTS[ratio["variant"]][0], answer, evidence


#: how much a machine drifts between runs, for a report that did not say (an older one)
DRIFT = 0.15


def ratio_rule(ratio: Ratio) -> str:
    """The rule that decided a comparison's verdict, with its numbers: the interval widened by
    how much this machine drifts between runs, which predictions it holds, and how far apart
    they are (:func:`simsync.crosscheck.evidence.interleaved_ratio`).

    >>> base = {"interval": [3.49, 4.04], "drift": 0.15, "hypotheses": {"side by side": 4.24,
    ...         "one after another": 4.58}}
    >>> rule = ratio_rule({**base, "verdict": "inconclusive", "why": "several inside"})
    >>> rule[:70]
    "with this machine's drift between runs (15%) the interval is 2.97–4.65"
    >>> rule[72:129]
    "both 'side by side' and 'one after another' lie in it, 8%"
    >>> rule[129:]
    ' apart: less than the drift, no verdict'
    >>> ratio_rule({"interval": [1.8, 2.2], "hypotheses": {"waits": 2.0, "does not wait": 1.0},
    ...             "verdict": "waits", "why": None})[72:]
    "only 'waits' lies in it, and 'does not wait' is 50% from 'waits': the answer is 'waits'"
    """
    low, high = ratio["interval"]
    drift = ratio.get("drift", DRIFT)
    wide_low, wide_high = low * (1 - drift), high * (1 + drift)
    hypotheses = ratio["hypotheses"]
    inside = [n for n, v in hypotheses.items() if wide_low <= v <= wide_high]
    rule = (
        f"with this machine's drift between runs ({_whole_percent(drift)}) the interval is "
        f"{wide_low:.2f}–{wide_high:.2f}: "
    )
    if not inside:
        return rule + "no prediction lies in it: no verdict"
    if len(inside) == 1:
        kept = hypotheses[inside[0]]
        others = {n: abs(v - kept) / kept for n, v in hypotheses.items() if n != inside[0]}
        nearest = min(others, key=others.__getitem__) if others else None
        if nearest is None:
            return rule + f"only '{inside[0]}' lies in it: the answer is '{ratio['verdict']}'"
        away = _whole_percent(others[nearest])
        if others[nearest] > drift:
            said = f"only '{inside[0]}' lies in it, and '{nearest}' is {away} from '{inside[0]}'"
            return rule + f"{said}: the answer is '{ratio['verdict']}'"
        return rule + (
            f"only '{inside[0]}' lies in it, but '{nearest}' is {away} from '{inside[0]}': less "
            "than the "
            "drift, no verdict"
        )
    values = [hypotheses[n] for n in inside]
    apart = (max(values) - min(values)) / min(values)
    if apart <= drift:
        return rule + (
            f"{_quoted_both(inside)} lie in it, {_whole_percent(apart)} apart: less than the "
            "drift, no verdict"
        )
    return rule + f"{_quoted_both(inside)} lie in it: no verdict"


def _quoted_both(names: list[str]) -> str:
    """Predictions named in a sentence: ``both 'a' and 'b'``, or ``'a', 'b' and 'c'``."""
    quoted = listed([f"'{name}'" for name in names])
    return f"both {quoted}" if len(names) == 2 else quoted


def _whole_percent(share: float) -> str:
    """A share in whole percent, with no space: a narrow table cell breaks its lines at any
    space (a no-break space too), and "15" at a line's end with "%" on the next misleads.

    >>> _whole_percent(0.083)
    '8%'
    """
    return f"{share * 100:.0f}%"


def _stale(stale: StalenessEvidence) -> tuple[str, Text, str]:
    low, _ = stale["interval"]
    text = (
        Text("inconclusive here", style="bold yellow")
        if stale["verdict"] == "inconclusive"
        else Text(stale["verdict"], style="bold")
    )
    return (
        "were the updates stale?",
        text,
        f"{stale['stale_updates']} of {stale['updates']} applied updates read variables that "
        f"other updates changed before theirs landed; mean staleness {stale['mean']:.2f}, "
        f"and at least {low:.2f} in the 95 % interval of the ledger's blocks",
    )


def _stale_predicted(stale: StalenessEvidence, predicted: str) -> tuple[str, Text, str]:
    low, high = stale["interval"]
    verdict = stale["prediction"]
    style = {"as predicted": "bold green", "not as predicted": "bold red"}.get(verdict)
    text = Text(verdict, style=style) if style else Text("inconclusive here", style="bold yellow")
    interval = (
        f"the 95 % interval {low:.2f}–{high:.2f} of the measured one ({stale['blocks']} "
        "blocks of the ledger, in the order the updates landed)"
    )
    said = stale_where(stale, interval) + (": no verdict" if verdict == "inconclusive" else "")
    return (
        "is the staleness the predicted one?",
        text,
        f"predicted {stale['predicted']:.2f} {predicted}, {said}",
    )


def stale_where(stale: StalenessEvidence, interval: str) -> str:
    """Where a staleness prediction lies against the measured ``interval`` (its words),
    and the margin that decided: the one phrase of the cross-check's table and of a
    program's report.

    >>> stale_where({"prediction": "inconclusive", "margin": 0.5}, "that interval")
    'outside that interval, but by less than 0.50, how far that interval moves from one run to the next on this machine'
    """  # noqa: E501
    moves = (
        f"{stale['margin']:.2f}, how far that interval moves from one run to the next on "
        "this machine"
    )
    return {
        "as predicted": f"inside {interval}",
        "not as predicted": f"outside {interval}, by more than {moves}",
        "inconclusive": f"outside {interval}, but by less than {moves}",
    }[stale["prediction"]]


def _moving(moving: MovingCheck) -> str:
    """What the check of the moving statistics found: equal, or which outcome of the race
    happened how often against the simulator's prediction."""
    if "race" not in moving:
        return f"differ by at most {moving['max_abs_diff']:.2e}"
    race, lines = moving["race"], []
    for variable, happened in race["happened"].items():
        seen = ", ".join(
            f"{outcome} in {count} of {race['steps']}" for outcome, count in happened.items()
        )
        predicted = ", ".join(race["predicted"].get(variable, {}))
        lines.append(f"{variable.rpartition('/')[2]}: {seen} (predicted: {predicted})")
    return (
        f"racing updates: after each of the {race['steps']} steps run (warm-up, traced and "
        "timed alike), one outcome the race allows?\n" + "\n".join(lines)
    )


class ProfileView:
    """A calibration profile as a table."""

    def __init__(self, profile: Mapping[str, Any]) -> None:
        self.profile = profile

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        p = self.profile
        table = Table(
            title=f"Calibration on {p['devices']} (TensorFlow {p['tensorflow']})",
            title_justify="left",
        )
        table.add_column("what")
        table.add_column("measured", justify="right")
        for kind, seconds in p["costs"].items():
            table.add_row(f"{kind} op", f"{seconds * 1e6:.0f} us")
        overhead = p["compute_overhead"]
        table.add_row(
            "compute: real seconds per second of work asked for",
            f"{p['compute_scale']:.3f}"
            + (f" + {overhead * 1e6:.0f} us per op" if overhead else ""),
        )
        table.add_row("sess.run outside the ops", f"{p['session_run'] * 1e6:.0f} us")
        table.add_row("copy between devices", f"{p['latency_us']:.0f} us")
        table.add_row("host cores shared by the devices", str(p["host_cores"]))
        table.add_row("each core's speed when all are busy", f"{p.get('core_efficiency', 1):.2f}")
        if p.get("gpus"):
            table.add_row("GPUs", str(p["gpus"]))
            table.add_row(
                "virtual GPUs of a GPU slowing each other (contention)",
                f"{p.get('gpu_contention', 0):.2f}",
            )
        if p.get("bandwidth_gbps"):
            table.add_row("copy from the host to a GPU", f"{p['bandwidth_gbps']:.1f} Gbit/s")
        yield table
