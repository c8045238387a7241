"""The real ledger of a SyncReplicasOptimizer cluster, rebuilt from the tasks' records and checked.

The accumulator drops stale gradients silently, so which push was accepted must be found out.
What TensorFlow's source fixes (``conditional_accumulator_base.cc``,
``typed_conditional_accumulator_base.h``):

- a push with local step ``s`` is accepted iff ``s >=`` the accumulator's step when its kernel
  takes the accumulator's lock; the step only changes at a take (+1) and at ``chief_init_op``;
- a worker holds token ``s`` only after apply ``s``, hence after take ``s`` of every variable:
  its pushes find the accumulator at step ``s`` or later. So a push with local step ``s`` goes
  into take ``s + 1`` of its variable or is dropped; with no take ``s + 1`` yet, it is accepted
  and pending;
- take ``k`` completes once at least R gradients are in (``counter_ >= R``) and averages **all**
  of them (``DivideAccumGradByCounter`` divides by ``counter_``): usually R, more when pushes
  landed before the take was issued, or raced the take's own flush.

So, per variable and take ``k``, the candidates are the pushes with local step ``k - 1``, and
the accepted ones are those the accumulator processed before take ``k`` completed. The kernels'
times (one clock: the parameter server's) settle most: a push that ended before the take began
is in; one that began after the take ended is out. The rest are settled by **value**: the
average the take returned (fetched by the queue runner's own run) must equal the mean of the
accepted gradients (fetched by the pushing runs); exactly one choice of the uncertain pushes may
match (a tie is broken by kernel order). Then it checks: every take averaged at least R; every
accepted push came after the previous take; no dropped push was processed before an accepted
one; the parameters rebuilt from the initial values and the takes' averages equal TensorFlow's
final parameters. Any failure is a :class:`LedgerError`: no ledger rather than a wrong one.

Times, in seconds from the start barrier: a push or an enqueue is timed at its kernel's start,
a take or a dequeue (which wait) at its kernel's end, so each comes after what made it
possible. Events are listed in time order, except that a push which raced a take and lost is
listed after that take (its kernel may have started a few microseconds before the take's end
was recorded): per accumulator, the list is the accumulator's own order.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from simsync.kinds.apply import sgd_step
from simsync.patterns.sync_replicas import ENQUEUE_TOKENS_OP, QUEUE_RUNNER, TOKEN_QUEUE
from simsync.tf_backend.cluster.acceptance import LedgerError, Push, Take, same, settle
from simsync.tf_backend.cluster.config import ClusterRunConfig, ModelWorkload
from simsync.trace import ResourceEvent, StepRecord, Trace

__all__ = ["Ledger", "LedgerError", "NodeTiming", "build_ledger"]


class NodeTiming(NamedTuple):
    """One TensorFlow node of one traced run; seconds from the run's common time base."""

    client: str
    step: int
    device: str
    node: str
    start: float
    end: float


@dataclass
class Ledger:
    """What :func:`build_ledger` returns (see :class:`~simsync.tf_backend.cluster.ClusterRun`)."""

    trace: Trace
    params: dict[str, np.ndarray]
    global_step: int
    local_steps: dict[str, int]
    nodes: list[NodeTiming]
    pushed: dict[tuple[str, int], dict[str, Any]]
    read_versions: dict[tuple[str, int], dict[str, int]] = field(default_factory=dict)
    pending: dict[str, int] = field(default_factory=dict)
    settled_by_value: int = 0  # pushes whose fate the kernels' times alone left open
    order_disagreements: int = 0  # takes whose set the kernel order alone would get wrong


def build_ledger(config: ClusterRunConfig, reports: dict[int, dict[str, Any]]) -> Ledger:
    """The checked ledger of a run, from every worker's report (worker 0's is the chief's)."""
    chief = reports[0]
    base = float(chief["base"])
    trace = Trace(source="tensorflow-cluster")
    nodes: list[NodeTiming] = []
    pushes: dict[str, list[Push]] = defaultdict(list)
    pushed: dict[tuple[str, int], dict[str, Any]] = {}
    for worker, report in sorted(reports.items()):
        _worker_runs(worker, report, base, trace, nodes, pushes, pushed)
    takes = _queue_runner(chief, base, trace, nodes)
    events = trace.resources
    init = chief["init_tokens"]
    if init["count"] > 0:
        events.append(
            ResourceEvent(TOKEN_QUEUE, "enqueue", "sync_replicas/init_tokens", QUEUE_RUNNER, 0,
                          init["time"] - base, init["value"], init["count"])
        )  # fmt: skip
    dtypes, pending, uncertain, disagreements = chief["dtypes"], {}, 0, 0
    raced: dict[tuple[str, str, int], float] = {}
    for variable in dtypes:
        settled = settle(variable, pushes[variable], takes[variable], config.replicas,
                          dtypes[variable])  # fmt: skip
        events.extend(settled.events)
        raced.update({(f"{variable}/grad_accum", *key): t for key, t in settled.after.items()})
        pending[variable] = settled.pending
        uncertain += settled.uncertain
        disagreements += settled.disagreements
    # The accumulator's own order: a push that raced a take and lost goes after that take,
    # even if its kernel started a few microseconds before the take's end was recorded.
    events.sort(key=lambda e: (raced.get((e.resource, e.client, e.step), e.time), e.time))
    trace.steps.sort(key=lambda s: (s.start, s.client))
    params = {n: np.asarray(v, dtype=np.float64) for n, v in chief["params"].items()}
    trace.params = params
    history = _history(config, chief, takes, dtypes)
    _check_end(chief, takes, history, params, dtypes)
    ledger = Ledger(trace, params, int(chief["global_step"]), {}, nodes, pushed, pending=pending,
                    settled_by_value=uncertain, order_disagreements=disagreements)  # fmt: skip
    ledger.local_steps = {f"worker_{w}": int(r["local_step"]) for w, r in sorted(reports.items())}
    if isinstance(config.workload, ModelWorkload):
        ledger.read_versions = _read_versions(reports, history)
    return ledger


def _worker_runs(
    worker: int,
    report: dict[str, Any],
    base: float,
    trace: Trace,
    nodes: list[NodeTiming],
    pushes: dict[str, list[Push]],
    pushed: dict[tuple[str, int], dict[str, Any]],
) -> None:
    client, roles = f"worker_{worker}", report["roles"]
    for run in report["runs"]:
        step = run["step"]
        trace.steps.append(StepRecord(client, step, run["start"] - base, run["end"] - base,
                                      run["loss"]))  # fmt: skip
        spans = _spans(client, step, run["nodes"], roles, base, nodes)
        for variable, gradient in run["gradients"].items():
            start, end = _span(spans, ("push", variable), client, step)
            pushes[variable].append(Push(client, step, run["local_step"], start, end, gradient))
        pushed[(client, step)] = run["gradients"]
        _, dequeued = _span(spans, ("dequeue", ""), client, step)
        trace.resources.append(
            ResourceEvent(TOKEN_QUEUE, "dequeue", f"{client}/dequeue_token", client, step, dequeued,
                          run["token"])
        )  # fmt: skip


def _spans(
    client: str,
    step: int,
    raw: list[list[Any]],
    roles: dict[str, list[str]],
    base: float,
    nodes: list[NodeTiming],
) -> dict[tuple[str, str], tuple[float, float]]:
    """Keep every node; return the optimizer's own nodes' spans by (role, variable)."""
    spans = {}
    for device, name, start, end in raw:
        timing = NodeTiming(client, step, device, name, start * 1e-6 - base, end * 1e-6 - base)
        nodes.append(timing)
        if name in roles:
            spans[(roles[name][0], roles[name][1])] = (timing.start, timing.end)
    return spans


def _span(
    spans: dict[tuple[str, str], tuple[float, float]], key: tuple[str, str], client: str, step: int
) -> tuple[float, float]:
    if key not in spans:
        role, variable = key
        raise LedgerError(f"the trace of {client}'s run {step} has no {role} {variable}".strip())
    return spans[key]


def _queue_runner(
    chief: dict[str, Any], base: float, trace: Trace, nodes: list[NodeTiming]
) -> dict[str, list[Take]]:
    takes: dict[str, list[Take]] = defaultdict(list)
    for run in chief["queue_runner"]:
        k = run["step"]
        trace.steps.append(StepRecord(QUEUE_RUNNER, k, run["start"] - base, run["end"] - base))
        spans = _spans(QUEUE_RUNNER, k, run["nodes"], chief["roles"], base, nodes)
        for variable, average in run["takes"].items():
            start, end = _span(spans, ("take", variable), QUEUE_RUNNER, k)
            takes[variable].append(Take(k, start, end, average))
        enqueued, _ = _span(spans, ("enqueue", ""), QUEUE_RUNNER, k)
        tokens = run["tokens"]
        trace.resources.append(
            ResourceEvent(TOKEN_QUEUE, "enqueue", ENQUEUE_TOKENS_OP, QUEUE_RUNNER, k,
                          enqueued, int(tokens[0]), len(tokens))
        )  # fmt: skip
    return takes


def _history(
    config: ClusterRunConfig, chief: dict[str, Any], takes: dict[str, list[Take]], dtypes: Any
) -> list[dict[str, np.ndarray]]:
    """The variables at every global step, from the initial values and the takes' averages
    (the one SGD step, :func:`~simsync.kinds.apply.sgd_step`, at the workload's rate)."""
    rate = config.workload.learning_rate
    current = {n: np.asarray(v, dtype=np.float64) for n, v in chief["initial_params"].items()}
    history = [current]
    for k in range(len(chief["queue_runner"])):
        current = {n: v.copy() for n, v in current.items()}
        for variable in dtypes:
            average = takes[variable][k].average
            if isinstance(average, dict):
                for index, row in zip(average["indices"], average["values"], strict=True):
                    row_now = current[variable][int(index)]
                    current[variable][int(index)] = sgd_step(row_now, np.asarray(row), rate)
            else:
                current[variable] = sgd_step(current[variable], np.asarray(average), rate)
        history.append(current)
    return history


def _check_end(
    chief: dict[str, Any],
    takes: dict[str, list[Take]],
    history: list[dict[str, np.ndarray]],
    params: dict[str, np.ndarray],
    dtypes: dict[str, str],
) -> None:
    steps = len(chief["queue_runner"])
    if int(chief["global_step"]) != steps:
        raise LedgerError(f"global step {chief['global_step']} after {steps} sync_op runs")
    for variable, value in params.items():
        if not same(history[-1][variable], value, dtypes[variable]):
            raise LedgerError(f"{variable}: the takes' averages, applied in order, do not give "
                              "TensorFlow's final value")  # fmt: skip


def _read_versions(
    reports: dict[int, dict[str, Any]], history: list[dict[str, np.ndarray]]
) -> dict[tuple[str, int], dict[str, int]]:
    """The global step whose parameters each run read, per variable (-1: none of them)."""
    versions = {}
    for worker, report in sorted(reports.items()):
        for run in report["runs"]:
            found = {}
            for variable, read in run["reads"].items():
                value = np.asarray(read, dtype=np.float64)
                found[variable] = next(
                    (k for k, p in enumerate(history) if same(p[variable], value, "float64")),
                    -1,
                )
            versions[(f"worker_{worker}", run["step"])] = found
    return versions
