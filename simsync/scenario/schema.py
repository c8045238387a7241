"""The scenario schema: every key a scenario file may hold, its type, default and meaning.

This table is the single source of truth: the loader validates against it, ``docs/scenarios.md``
documents it (a test checks that every key here is documented there), and error messages quote
its ``allowed`` text.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from simsync.ir.limits import (
    DISTRIBUTIONS,
    MAX_SECONDS,
    MAX_SIGMA,
    MAX_SPEED,
    MAX_STEPS,
    MAX_TOKENS,
    MIN_CORE_EFFICIENCY,
    MIN_SPEED,
)
from simsync.kinds import cost_keys, kind_of

__all__ = [
    "APPLY_MODES",
    "COST_KINDS",
    "DISTRIBUTIONS",
    "FIELDS",
    "MODES",
    "REQUIRED",
    "TABLES",
    "Field",
    "fields_of",
]

#: The most devices a scenario may have: a one-step simulation of 16,384 towers takes about
#: 15 s and 650 MB here (65,536: about a minute and 2.3 GB).
MAX_DEVICES = 16384

#: Marks a field without a default.
REQUIRED: Any = object()

MODEL_KINDS = ("linear", "softmax", "mlp")
MODES = ("sync", "async", "sync_replicas")
APPLY_MODES = ("locked", "lock_free")
AGGREGATIONS = ("parameter_server", "allreduce")
BATCH_NORMS = ("none", "local", "update_ops", "synchronized")
# The limits of the numbers a graph holds (speeds, seconds, steps, tokens, sigma, core
# efficiency) are the IR's (simsync.ir.limits): a valid scenario always builds.

#: Op kinds whose fixed cost a ``[costs]`` table may set (seconds, at speed 1): read off the
#: registry of op kinds.
COST_KINDS = cost_keys()


@dataclass(frozen=True)
class Field:
    """One key of a scenario table.

    ``kind`` is one of ``int``, ``float``, ``str``, ``bool``, ``floats`` (list of numbers) and
    ``ints`` (list of integers). ``check`` returns an error text, or ``None`` when the value is
    allowed.
    """

    table: str
    key: str
    kind: str
    default: Any
    allowed: str
    doc: str
    check: Callable[[Any], str | None] | None = None
    infinite_ok: bool = False

    @property
    def path(self) -> str:
        return f"[{self.table}] {self.key}" if self.table else self.key


def _positive(value: Any) -> str | None:
    return None if value > 0 else "must be greater than 0"


def _non_negative(value: Any) -> str | None:
    return None if value >= 0 else "must not be negative"


def _finite_non_negative(value: Any) -> str | None:
    if math.isinf(value):
        return "must be finite"
    return _non_negative(value)


def _all_positive(values: Any) -> str | None:
    return None if all(v > 0 for v in values) else "every entry must be greater than 0"


def _sigma(value: Any) -> str | None:
    # beyond about 4 the lognormal's mean rests on draws too rare to ever be sampled
    return None if 0 < value <= MAX_SIGMA else f"must be greater than 0 and at most {MAX_SIGMA:g}"


def _fraction(value: Any) -> str | None:
    return None if 0 < value < 1 else "must be strictly between 0 and 1"


def _between(low: float, high: float) -> Callable[[Any], str | None]:
    """Numbers in ``[low, high]``: beyond them, times overflow or vanish in the arithmetic."""

    def check(value: Any) -> str | None:
        return None if low <= value <= high else f"must be from {low:g} to {high:g}"

    return check


def _all_between(low: float, high: float) -> Callable[[Any], str | None]:
    def check(values: Any) -> str | None:
        if all(low <= v <= high for v in values):
            return None
        return f"every entry must be from {low:g} to {high:g}"

    return check


def _layers(values: Any) -> str | None:
    return "at most 100 hidden layers" if len(values) > 100 else _all_positive(values)


def _printable(value: Any) -> str | None:
    """No control characters: a name reaches the terminal and must not drive it."""
    if any(ord(c) < 32 or 127 <= ord(c) < 160 for c in value):
        return "must not contain control characters (escape codes, line breaks)"
    return None


def _one_of(choices: tuple[str, ...]) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        return None if value in choices else f"unknown value {value!r}"

    return check


def _choices(choices: tuple[str, ...]) -> str:
    return "one of " + ", ".join(f'"{c}"' for c in choices)


FIELDS: tuple[Field, ...] = (
    Field(
        "",
        "name",
        "str",
        REQUIRED,
        "a string without control characters",
        "Short name shown in reports and traces.",
        _printable,
    ),
    Field(
        "",
        "description",
        "str",
        "",
        "a string without control characters",
        "One line saying what the scenario shows.",
        _printable,
    ),
    Field(
        "run",
        "steps",
        "int",
        100,
        f"an integer from 1 to {MAX_STEPS}",
        "Training steps to simulate (each step is one `sess.run(train_op)`).",
        _between(1, MAX_STEPS),
    ),
    Field(
        "run",
        "seed",
        "int",
        0,
        "an integer >= 0",
        "Seed for compute-time draws, initial parameters and synthetic data. "
        "Same seed, same result, bit for bit.",
        _non_negative,
    ),
    Field(
        "cluster",
        "devices",
        "int",
        REQUIRED,
        f"an integer from 1 to {MAX_DEVICES}",
        "Accelerators (`/gpu:0` ...); one tower runs on each.",
        lambda v: None if 1 <= v <= MAX_DEVICES else f"must be from 1 to {MAX_DEVICES}",
    ),
    Field(
        "cluster",
        "speeds",
        "floats",
        None,
        f"a list of numbers from {MIN_SPEED:g} to {MAX_SPEED:g}, one per device",
        "Relative speed of each device (0.5 = half as fast). Default: all 1.",
        _all_between(MIN_SPEED, MAX_SPEED),
    ),
    Field(
        "cluster",
        "host_cores",
        "int",
        None,
        "an integer >= 1",
        "CPU cores that the devices' compute shares, as when TensorFlow splits one CPU into "
        'logical devices; with mode = "sync_replicas", every task (parameter server and '
        "workers) is a process of one machine with this many cores. Leave out for real "
        "accelerators, or a task per host (no sharing).",
        _positive,
    ),
    Field(
        "cluster",
        "core_efficiency",
        "float",
        1.0,
        f"a number from {MIN_CORE_EFFICIENCY:g} to 1",
        "With `host_cores`: each core's speed when all of them are busy, relative to one busy "
        "core (shared caches and memory, hyper-threads). While k of n cores are busy, each op "
        "on them progresses at 1 - (k-1)/(n-1) x (1 - efficiency) of its speed, re-decided "
        "whenever an op starts or ends. `simsync calibrate` measures it.",
        _between(MIN_CORE_EFFICIENCY, 1),
    ),
    Field(
        "cluster",
        "gpus",
        "int",
        None,
        "an integer >= 1",
        "Physical GPUs the devices are on. With fewer GPUs than devices, each GPU is split into "
        "virtual GPUs (device i on GPU i mod gpus), as TensorFlow's "
        "`gpu_options.experimental.virtual_devices` does: they share its compute "
        "(`gpu_contention`) and its link to the host. Leave out for devices of their own; a "
        "GPU profile (`--costs h100`) sets it.",
        _positive,
    ),
    Field(
        "cluster",
        "gpu_contention",
        "float",
        0.0,
        "a number from 0 to 1",
        "With `gpus`: how much the busy virtual GPUs of one GPU slow each other. While all n of "
        "them are busy each runs at 1 / (1 + (n-1) x contention) of its speed, with fewer busy "
        "in proportion (as cores with `core_efficiency`): 0 runs them side by side, as GPUs "
        "of their own, 1 in turns. `simsync calibrate` measures it on a GPU.",
        _between(0, 1),
    ),
    Field(
        "cluster.link",
        "bandwidth_gbps",
        "float",
        math.inf,
        'a number >= 1e-06, or "inf"',
        "Bandwidth of every device's port, in gigabits per second. A transfer holds the "
        "sender's outgoing and the receiver's incoming port.",
        _between(1e-6, math.inf),
        infinite_ok=True,
    ),
    Field(
        "cluster.link",
        "latency_us",
        "float",
        0.0,
        "a number from 0 to 1e+12",
        "Latency of one transfer, in microseconds (does not hold the ports).",
        _between(0, MAX_SECONDS * 1e6),
    ),
    Field(
        "compute",
        "distribution",
        "str",
        "constant",
        _choices(DISTRIBUTIONS),
        "How one tower's forward+backward time is drawn each step.",
        _one_of(DISTRIBUTIONS),
    ),
    Field(
        "compute",
        "mean",
        "float",
        REQUIRED,
        "a number of seconds from 1e-09 to 1e+06",
        "Mean forward+backward time of one tower at speed 1.",
        _between(1e-9, MAX_SECONDS),
    ),
    Field(
        "compute",
        "shift",
        "float",
        0.0,
        "a number of seconds >= 0 and < mean",
        "shifted_exponential only: the fixed part; the rest is exponential with mean "
        "`mean - shift`.",
        _finite_non_negative,
    ),
    Field(
        "compute",
        "sigma",
        "float",
        0.5,
        f"a number > 0 and <= {MAX_SIGMA:g}",
        "lognormal only: standard deviation of the underlying normal.",
        _sigma,
    ),
    Field(
        "compute",
        "forward_fraction",
        "float",
        1 / 3,
        "a number strictly between 0 and 1",
        "Share of the drawn time spent in the forward op; the backward op takes the rest.",
        _fraction,
    ),
    Field(
        "compute",
        "overhead",
        "float",
        0.0,
        "a number of seconds from 0 to 1e+06",
        "Fixed time added to every forward and backward op, not divided by the device's speed "
        "(a framework's cost per op; `simsync calibrate` measures it).",
        _between(0, MAX_SECONDS),
    ),
    *(
        Field(
            "costs",
            kind,
            "float",
            0.0,
            "a number of seconds from 0 to 1e+06",
            f"Fixed time of every `{kind}` op at speed 1: {kind_of(kind).doc}",
            _between(0, MAX_SECONDS),
        )
        for kind in COST_KINDS
    ),
    Field(
        "costs",
        "session_run",
        "float",
        0.0,
        "a number of seconds from 0 to 1e+06",
        "Time each `sess.run` spends outside the ops (feeding, starting, fetching), before "
        "the step's first op.",
        _between(0, MAX_SECONDS),
    ),
    Field(
        "costs",
        "queue_runner_run",
        "float",
        None,
        "a number of seconds from 0 to 1e+06",
        'With mode = "sync_replicas": the same for each run of the chief\'s queue runner, '
        "from its enqueue of the tokens to its next take (default: session_run).",
        _between(0, MAX_SECONDS),
    ),
    Field(
        "model",
        "kind",
        "str",
        "softmax",
        _choices(MODEL_KINDS),
        "The model every tower trains: linear regression, softmax regression, or an MLP.",
        _one_of(MODEL_KINDS),
    ),
    Field("model", "features", "int", 32, "an integer >= 1", "Input features.", _positive),
    Field(
        "model",
        "classes",
        "int",
        10,
        "an integer >= 2",
        "Classes (softmax, mlp) or outputs (linear).",
        lambda v: None if v >= 2 else "must be at least 2",
    ),
    Field(
        "model",
        "hidden",
        "ints",
        [64],
        "a list of at most 100 integers >= 1",
        "mlp only: widths of the hidden layers (ReLU).",
        _layers,
    ),
    Field(
        "model",
        "batch_size",
        "int",
        32,
        "an integer >= 1; batch_size x the widest layer at most 10000000",
        "Examples per tower per step.",
        _positive,
    ),
    Field(
        "model", "learning_rate", "float", 0.1, "a number > 0", "Plain SGD step size.", _positive
    ),
    Field(
        "model",
        "batch_norm",
        "str",
        "none",
        _choices(BATCH_NORMS),
        'mlp with mode = "sync" and parameter_server only: batch norm after the first hidden '
        "layer. local: each tower normalises with its own batch's statistics, only tower 0 "
        "updates the moving averages (TensorFlow's cifar10 example); update_ops: every "
        "tower's moving-average updates, the apply gated on them (they race on the shared "
        "moving statistics); synchronized: global statistics from every tower's sums (a "
        "forward and a backward sync point), one moving-average update.",
        _one_of(BATCH_NORMS),
    ),
    Field(
        "model",
        "momentum",
        "float",
        0.99,
        "a number strictly between 0 and 1",
        "batch_norm only: the moving averages' momentum m (x <- m x + (1 - m) batch).",
        _fraction,
    ),
    Field(
        "model",
        "epsilon",
        "float",
        1e-3,
        "a number from 1e-12 to 1",
        "batch_norm only: added to the variance before its square root.",
        _between(1e-12, 1),
    ),
    Field(
        "training",
        "mode",
        "str",
        "sync",
        _choices(MODES),
        "sync: in-graph replicated towers, one client (the cifar10_multi_gpu_train pattern). "
        "async: one worker per device, each a client thread looping `sess.run(train_op)` on "
        "shared variables with no coordination (asynchronous SGD). The workers make "
        "`[run] steps` x devices updates in all, from one pool like a global step limit, so a "
        "fast worker makes more than a straggler. "
        "sync_replicas: TensorFlow's SyncReplicasOptimizer on a parameter server: one worker "
        "per device pushes its gradients to one accumulator per variable and waits for a "
        "token; the chief's queue runner averages R gradients, applies them once per step "
        "and hands out tokens. `[run] steps` counts global steps (applies).",
        _one_of(MODES),
    ),
    Field(
        "training",
        "aggregation",
        "str",
        "parameter_server",
        _choices(AGGREGATIONS),
        "parameter_server: gradients gather at the variables' device; allreduce: ring "
        "all-reduce among the towers, variables mirrored on every device.",
        _one_of(AGGREGATIONS),
    ),
    Field(
        "training",
        "staleness_bound",
        "int",
        None,
        "an integer >= 0",
        "async only: stale-synchronous parallel. A worker may start its update k only when "
        "every worker has finished k - bound updates; 0 gives synchronous rounds. "
        "Default: no bound.",
        _non_negative,
    ),
    Field(
        "training",
        "max_staleness",
        "int",
        None,
        "an integer >= 0",
        "async only: drop a gradient whose staleness (updates applied since its read) is "
        "above this, as TensorFlow's DropStaleGradientOptimizer does. Default: keep all.",
        _non_negative,
    ),
    Field(
        "training",
        "apply",
        "str",
        "locked",
        _choices(APPLY_MODES),
        "async only: locked: a worker's read and apply of the variables take turns under one "
        "lock (a critical section), so each read sees one version; lock_free: they never wait "
        "for each other (the seed's plain optimizer).",
        _one_of(APPLY_MODES),
    ),
    Field(
        "training",
        "replicas_to_aggregate",
        "int",
        None,
        f"an integer from 1 to {MAX_TOKENS}",
        "sync_replicas only: R, the gradients averaged per variable per step. Below the "
        "number of workers, the others are backup workers. Default: one per worker.",
        _between(1, MAX_TOKENS),
    ),
    Field(
        "training",
        "init_tokens",
        "int",
        None,
        f"an integer from 0 to {MAX_TOKENS}",
        "sync_replicas only: tokens in the queue at start (`get_init_tokens_op`). Default: R. "
        "With R above the workers, fewer than R - workers deadlocks (TensorFlow refuses; "
        "simsync explains the deadlock).",
        _between(0, MAX_TOKENS),
    ),
    Field(
        "training",
        "chief_queue_runner",
        "bool",
        True,
        "true or false",
        "sync_replicas only: whether the chief's queue runner runs. Without it nobody takes "
        "the gradients nor hands out tokens: the workers block (explained).",
    ),
)

#: Tables in the order they are documented; "" is the top level.
TABLES: tuple[str, ...] = (
    "",
    "run",
    "cluster",
    "cluster.link",
    "compute",
    "costs",
    "model",
    "training",
)


def fields_of(table: str) -> dict[str, Field]:
    """The fields of one table, by key.

    Examples
    --------
    >>> sorted(fields_of("run"))
    ['seed', 'steps']
    """
    return {f.key: f for f in FIELDS if f.table == table}


def reference_markdown() -> str:
    """The reference section of ``docs/scenarios.md``: one table per scenario table.

    A test checks that the docs hold exactly this text; regenerate it with
    ``python -c "from simsync.scenario.schema import reference_markdown as r; print(r())"``.
    """
    lines: list[str] = []
    for table in TABLES:
        fields = [f for f in FIELDS if f.table == table]
        lines += [
            f"### {'[' + table + ']' if table else 'Top level'}",
            "",
            "| key | allowed | default | meaning |",
            "|---|---|---|---|",
        ]
        lines += [f"| `{f.key}` | {f.allowed} | {_shown(f.default)} | {f.doc} |" for f in fields]
        lines.append("")
    return "\n".join(lines)


def _shown(default: Any) -> str:
    if default is REQUIRED:
        return "required"
    if default is None:
        return "none"
    if isinstance(default, bool):
        return "true" if default else "false"
    if isinstance(default, str):
        return f'"{default}"'
    if isinstance(default, float):
        return '"inf"' if math.isinf(default) else f"{default:.4g}"
    return str(default)
