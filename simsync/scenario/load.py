"""Read a scenario file (TOML), check it against the schema, and build a :class:`Scenario`.

Every problem becomes one :class:`~simsync.errors.ScenarioError` whose message names the file,
the key and what is allowed, e.g.::

    four.toml: [cluster] speeds: expected 4 entries (one per device), got 3
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from pathlib import Path
from typing import Any

from simsync.errors import ScenarioError
from simsync.files import InputError, read_toml
from simsync.kinds import KINDS
from simsync.numerics import parameter_shapes
from simsync.scenario.model import (
    ClusterConfig,
    ComputeConfig,
    LinkConfig,
    ModelConfig,
    RunConfig,
    Scenario,
    TrainingConfig,
)
from simsync.scenario.schema import REQUIRED, TABLES, Field, fields_of

__all__ = ["MAX_PARAMETERS", "check_scenario", "load_scenario", "scenario_from_dict"]

#: Models beyond this many parameters are not "small models with real numbers".
MAX_PARAMETERS = 10_000_000
#: Numbers in one tower's batch at its widest layer (batch_size x features, hidden or
#: classes): 80 MB of float64. Beyond it one step's arrays no longer fit a small machine.
MAX_BATCH_NUMBERS = 10_000_000


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate the scenario file at ``path``.

    Raises :class:`ScenarioError` for a missing file, a TOML syntax error or a schema violation.
    """
    path = Path(path)
    try:
        data = read_toml(path, "scenario file")
    except InputError as error:
        if error.reason == "malformed" and path.suffix.lower() != ".toml":
            raise ScenarioError(
                f"{error} (a scenario is a .toml file; a TensorFlow program .py, .meta or .pbtxt)"
            ) from None
        raise ScenarioError(str(error)) from None
    return scenario_from_dict(data, source=str(path))


def scenario_from_dict(data: dict[str, Any], source: str = "<dict>") -> Scenario:
    r"""Validate a parsed scenario (as TOML gives it) and build a :class:`Scenario`.

    Examples
    --------
    >>> s = scenario_from_dict({"name": "x", "cluster": {"devices": 2}, "compute": {"mean": 0.01}})
    >>> s.cluster.speeds
    (1.0, 1.0)
    >>> try:
    ...     scenario_from_dict({"name": "x", "cluster": {"devices": 2, "speed": [1]}})
    ... except ScenarioError as error:
    ...     print(*str(error).split("; "), sep="\n")
    <dict>: [cluster] unknown key 'speed' (did you mean 'speeds'?)
    allowed keys: devices, speeds, host_cores, core_efficiency, gpus, gpu_contention, link
    """
    values = {table: _read_table(data, table, source) for table in TABLES}
    return dataclasses.replace(_build(values, source), notes=_ignored(data, values, source))


def _ignored(data: dict[str, Any], v: dict[str, dict[str, Any]], source: str) -> tuple[str, ...]:
    """Keys the file sets that the rest of the scenario makes meaningless."""
    given = {(table, key) for table in TABLES for key in _lookup(data, table, source)}
    distribution, aggregation = v["compute"]["distribution"], v["training"]["aggregation"]
    mode = v["training"]["mode"]
    towers = mode == "sync"  # in-graph towers: the only mode that aggregates in the graph
    rules = [
        (
            ("compute", "shift"),
            distribution != "shifted_exponential",
            'used only with distribution = "shifted_exponential"',
        ),
        (
            ("compute", "sigma"),
            distribution != "lognormal",
            'used only with distribution = "lognormal"',
        ),
        (("model", "hidden"), v["model"]["kind"] != "mlp", 'used only with kind = "mlp"'),
        (
            ("costs", "allreduce"),
            aggregation != "allreduce" or not towers,
            'used only with mode = "sync" and aggregation = "allreduce"',
        ),
        (
            ("costs", "aggregate"),
            aggregation == "allreduce" or not towers,
            'used only with mode = "sync" and aggregation = "parameter_server" (all-reduce '
            "averages in its own op; asynchronous workers apply their own gradients; "
            "SyncReplicasOptimizer's accumulators average)",
        ),
        (
            ("training", "aggregation"),
            not towers,
            'used only with mode = "sync": other modes apply through the parameter server',
        ),
        *(
            (("training", key), mode != "async", 'used only with mode = "async"')
            for key in ("staleness_bound", "max_staleness", "apply")
        ),
        *(
            (("training", key), mode != "sync_replicas", 'used only with mode = "sync_replicas"')
            for key in ("replicas_to_aggregate", "init_tokens", "chief_queue_runner")
        ),
        *(  # the costs of the ops that act on a queue or an accumulator
            (
                ("costs", kind.cost_key),
                mode != "sync_replicas",
                'used only with mode = "sync_replicas"',
            )
            for kind in KINDS.values()
            if kind.action is not None and kind.cost_key is not None
        ),
        (
            ("costs", "queue_runner_run"),
            mode != "sync_replicas",
            'used only with mode = "sync_replicas"',
        ),
        *(
            (("model", key), v["model"]["batch_norm"] == "none", "used only with batch_norm")
            for key in ("momentum", "epsilon")
        ),
        *(
            (("costs", key), v["model"]["batch_norm"] != "synchronized", why)
            for key, why in (
                ("batch_statistics", 'used only with batch_norm = "synchronized"'),
                ("statistics_gradients", 'used only with batch_norm = "synchronized"'),
            )
        ),
        (
            ("costs", "moving_average"),
            v["model"]["batch_norm"] == "none",
            "used only with batch_norm",
        ),
        (
            ("cluster", "core_efficiency"),
            v["cluster"]["host_cores"] is None,
            "used only with host_cores",
        ),
        (
            ("cluster", "gpus"),
            mode == "sync_replicas",
            'not used with mode = "sync_replicas": each task runs on a host of its own',
        ),
        (("cluster", "gpu_contention"), v["cluster"]["gpus"] is None, "used only with gpus"),
    ]
    return tuple(
        f"{source}: [{table}] {key} is ignored: {why}"
        for (table, key), ignored, why in rules
        if ignored and (table, key) in given
    )


def check_scenario(scenario: Scenario) -> Scenario:
    """Validate a scenario built in Python against the schema, as a file would be.

    >>> from simsync.scenario import ClusterConfig, ComputeConfig
    >>> try:
    ...     check_scenario(Scenario("s", compute=ComputeConfig(mean=-1.0)))
    ... except ScenarioError as error:
    ...     print(*str(error).split("; "), sep="\\n")
    <python>: [compute] mean: must be from 1e-09 to 1e+06 (got -1.0
    allowed: a number of seconds from 1e-09 to 1e+06)
    """
    data = {
        "name": scenario.name,
        "description": scenario.description,
        "run": dataclasses.asdict(scenario.run),
        "cluster": {k: v for k, v in dataclasses.asdict(scenario.cluster).items() if v is not None},
        "compute": dataclasses.asdict(scenario.compute),
        "costs": dict(scenario.costs),
        "model": dataclasses.asdict(scenario.model),
        "training": {
            k: v for k, v in dataclasses.asdict(scenario.training).items() if v is not None
        },
    }
    scenario_from_dict(data, source=scenario.source)
    return scenario


def _subtables(table: str) -> list[str]:
    prefix = f"{table}." if table else ""
    return [
        t[len(prefix) :]
        for t in TABLES
        if t.startswith(prefix) and t != table and "." not in t[len(prefix) :]
    ]


def _lookup(data: dict[str, Any], table: str, source: str) -> dict[str, Any]:
    node: Any = data
    for part in table.split(".") if table else []:
        node = node.get(part, {})
        if not isinstance(node, dict):
            raise ScenarioError(f"{source}: [{table}] must be a table, got {_type_name(node)}")
    return node


def _read_table(data: dict[str, Any], table: str, source: str) -> dict[str, Any]:
    node = _lookup(data, table, source)
    fields = fields_of(table)
    subtables = _subtables(table)
    allowed = [*fields, *subtables]
    for key in node:
        if key not in allowed:
            where = f"[{table}] " if table else ""
            hint = difflib.get_close_matches(key, allowed, n=1)
            did_you_mean = f" (did you mean '{hint[0]}'?)" if hint else ""
            raise ScenarioError(
                f"{source}: {where}unknown key '{key}'{did_you_mean}; "
                f"allowed keys: {', '.join(allowed)}"
            )
    return {key: _read_value(node, spec, source) for key, spec in fields.items()}


def _read_value(node: dict[str, Any], spec: Field, source: str) -> Any:
    if spec.key not in node:
        if spec.default is REQUIRED:
            raise ScenarioError(f"{source}: {spec.path} is required ({spec.allowed})")
        return spec.default
    value = _coerce(node[spec.key], spec, source)
    problem = spec.check(value) if spec.check is not None and value is not None else None
    if problem:
        raise ScenarioError(
            f"{source}: {spec.path}: {problem} (got {node[spec.key]!r}; allowed: {spec.allowed})"
        )
    return value


def _coerce(raw: Any, spec: Field, source: str) -> Any:
    def wrong() -> ScenarioError:
        return ScenarioError(
            f"{source}: {spec.path}: expected {spec.allowed}, got {_type_name(raw)} {raw!r}"
        )

    if spec.kind == "str":
        if not isinstance(raw, str):
            raise wrong()
        return raw
    if spec.kind == "bool":
        if not isinstance(raw, bool):
            raise wrong()
        return raw
    if spec.kind in ("int", "float"):
        return _number(raw, spec, wrong)
    if not isinstance(raw, list | tuple):
        raise wrong()
    return tuple(_number(item, spec, wrong) for item in raw)


def _number(raw: Any, spec: Field, wrong: Any) -> float | int:
    if isinstance(raw, bool):
        raise wrong()
    if spec.kind in ("int", "ints"):
        if not isinstance(raw, int):
            raise wrong()
        return raw
    if isinstance(raw, str) and raw.strip().lower() in ("inf", "infinity"):
        raw = math.inf
    if not isinstance(raw, int | float) or math.isnan(raw):
        raise wrong()
    if math.isinf(raw) and not spec.infinite_ok:
        raise wrong()
    return float(raw)


def _check_batch_norm(v: dict[str, dict[str, Any]], source: str) -> None:
    """Batch norm needs a hidden layer to normalise and the towers' graph with a parameter
    server (where the moving statistics live)."""
    model, training = v["model"], v["training"]
    if model["batch_norm"] == "none":
        return
    if model["kind"] != "mlp":
        needs = 'kind = "mlp" (a hidden layer to normalise)'
    elif training["mode"] != "sync" or training["aggregation"] != "parameter_server":
        needs = '[training] mode = "sync" with aggregation = "parameter_server"'
    else:
        return
    raise ScenarioError(
        f"{source}: [model] batch_norm = {model['batch_norm']!r} needs {needs}; "
        f'or batch_norm = "none"'
    )


def _type_name(value: Any) -> str:
    names = {
        str: "a string",
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        list: "a list",
        dict: "a table",
    }
    return names.get(type(value), type(value).__name__)


def _build(v: dict[str, dict[str, Any]], source: str) -> Scenario:
    cluster = v["cluster"]
    devices = cluster["devices"]
    speeds = cluster["speeds"] if cluster["speeds"] is not None else (1.0,) * devices
    if len(speeds) != devices:
        raise ScenarioError(
            f"{source}: [cluster] speeds: expected {devices} entries (one per device), "
            f"got {len(speeds)}"
        )
    compute = v["compute"]
    if compute["distribution"] == "shifted_exponential" and compute["shift"] >= compute["mean"]:
        raise ScenarioError(
            f"{source}: [compute] shift: must be less than mean ({compute['mean']}) for "
            f"shifted_exponential, got {compute['shift']}"
        )
    model = v["model"]
    if model["kind"] == "mlp" and not model["hidden"]:
        raise ScenarioError(f"{source}: [model] hidden: mlp needs at least one hidden layer")
    _check_batch_norm(v, source)
    spec = ModelConfig(**{**model, "hidden": tuple(model["hidden"])})
    parameters = sum(math.prod(shape) for shape in parameter_shapes(spec).values())
    if parameters > MAX_PARAMETERS:
        raise ScenarioError(
            f"{source}: [model]: {parameters:,} parameters; the simulator computes real numbers "
            f"for small models only (at most {MAX_PARAMETERS:,})"
        )
    widest = max(spec.features, spec.classes, *(spec.hidden if spec.kind == "mlp" else ()))
    if spec.batch_size * widest > MAX_BATCH_NUMBERS:
        raise ScenarioError(
            f"{source}: [model] batch_size: {spec.batch_size:,} examples x {widest:,} (the "
            f"widest layer) is {spec.batch_size * widest:,} numbers per tower and step; the "
            f"simulator computes real numbers for small batches only (at most "
            f"{MAX_BATCH_NUMBERS:,})"
        )
    return Scenario(
        name=v[""]["name"],
        description=v[""]["description"],
        source=source,
        run=RunConfig(**v["run"]),
        cluster=ClusterConfig(
            devices=devices,
            speeds=tuple(speeds),
            host_cores=cluster["host_cores"],
            core_efficiency=cluster["core_efficiency"],
            link=LinkConfig(**v["cluster.link"]),
            gpus=cluster["gpus"],
            gpu_contention=cluster["gpu_contention"],
        ),
        compute=ComputeConfig(**compute),
        costs={key: value for key, value in v["costs"].items() if value is not None},
        model=spec,
        training=TrainingConfig(**v["training"]),
    )
