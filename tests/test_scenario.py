"""Scenario files: valid ones load, bad ones fail with one message naming file, key, allowed."""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simsync.errors import ScenarioError
from simsync.scenario import load_scenario, scenario_from_dict
from simsync.scenario.schema import FIELDS, TABLES, reference_markdown

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.toml"))

GOOD = """
name = "t"
[cluster]
devices = 2
[compute]
mean = 0.01
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "scenario.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_load(path: Path) -> None:
    scenario = load_scenario(path)
    assert scenario.towers == len(scenario.cluster.speeds) >= 2
    assert scenario.source == str(path)


def test_defaults_fill_missing_keys(tmp_path: Path) -> None:
    s = load_scenario(write(tmp_path, GOOD))
    assert s.run.steps == 100 and s.run.seed == 0
    assert s.cluster.speeds == (1.0, 1.0)
    assert math.isinf(s.cluster.link.bandwidth_gbps)
    assert s.training.mode == "sync" and s.training.aggregation == "parameter_server"


def test_inf_bandwidth_string(tmp_path: Path) -> None:
    s = load_scenario(write(tmp_path, GOOD + '[cluster.link]\nbandwidth_gbps = "inf"\n'))
    assert math.isinf(s.cluster.link.bytes_per_second)


BAD = [
    ("syntax", 'name = "t"\n[cluster\n', r"TOML syntax error"),
    (
        "unknown top key",
        'nmae = "x"\n' + GOOD,
        r"unknown key 'nmae' \(did you mean 'name'\?\); allowed keys: name, ",
    ),
    (
        "unknown nested key",
        GOOD.replace("devices = 2", "devices = 2\nspeed = [1, 1]"),
        r"\[cluster\] unknown key 'speed' \(did you mean 'speeds'\?\)",
    ),
    ("unknown table", GOOD + "[gpus]\nn = 1\n", r"unknown key 'gpus'"),
    (
        "wrong type",
        GOOD.replace("devices = 2", 'devices = "two"'),
        r"\[cluster\] devices: expected an integer from 1 to 16384, got a string 'two'",
    ),
    (
        "bool for int",
        GOOD.replace("devices = 2", "devices = true"),
        r"\[cluster\] devices: expected an integer from 1 to 16384, got a boolean",
    ),
    (
        "negative time",
        GOOD.replace("mean = 0.01", "mean = -0.01"),
        r"\[compute\] mean: must be from 1e-09 to 1e\+06 \(got -0.01; allowed: a number of "
        r"seconds from 1e-09 to 1e\+06\)",
    ),
    ("negative cost", GOOD + "[costs]\napply = -1\n", r"\[costs\] apply: must be from 0 to 1e\+06"),
    (
        "speeds length",
        GOOD.replace("devices = 2", "devices = 2\nspeeds = [1, 1, 1]"),
        r"\[cluster\] speeds: expected 2 entries \(one per device\), got 3",
    ),
    (
        "zero speed",
        GOOD.replace("devices = 2", "devices = 2\nspeeds = [1, 0]"),
        r"\[cluster\] speeds: every entry must be from 0.001 to 1000",
    ),
    (
        "unknown mode",
        GOOD + '[training]\nmode = "ring"\n',
        r'\[training\] mode: unknown value \'ring\'.*allowed: one of "sync"',
    ),
    (
        "unknown distribution",
        GOOD.replace("mean = 0.01", 'mean = 0.01\ndistribution = "gauss"'),
        r'\[compute\] distribution: unknown value \'gauss\'.*"lognormal"',
    ),
    (
        "missing required",
        'name = "t"\n[compute]\nmean = 0.01\n',
        r"\[cluster\] devices is required",
    ),
    (
        "shift too big",
        GOOD.replace(
            "mean = 0.01", 'mean = 0.01\ndistribution = "shifted_exponential"\nshift = 0.02'
        ),
        r"\[compute\] shift: must be less than mean",
    ),
    ("table not a table", 'name = "t"\ncluster = 3\n', r"\[cluster\] must be a table"),
    ("nan", GOOD.replace("mean = 0.01", "mean = nan"), r"\[compute\] mean: expected"),
]


@pytest.mark.parametrize(
    ("text", "pattern"), [(t, p) for _, t, p in BAD], ids=[name for name, _, _ in BAD]
)
def test_bad_files_name_file_key_and_allowed(tmp_path: Path, text: str, pattern: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ")
    assert re.search(pattern, message), message
    assert "\n" not in message


def test_missing_file_is_a_scenario_error(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="no such scenario file"):
        load_scenario(tmp_path / "absent.toml")


def test_every_key_is_documented() -> None:
    doc = (ROOT / "docs" / "scenarios.md").read_text()
    assert reference_markdown() in doc, "regenerate the reference: see reference_markdown()"
    for table in TABLES:
        if table:
            assert f"### [{table}]" in doc, table
    for field in FIELDS:
        assert f"| `{field.key}` |" in doc, field.path


valid_dicts = st.fixed_dictionaries(
    {
        "name": st.text(st.characters(blacklist_categories=("Cc",)), min_size=1, max_size=10),
        "run": st.fixed_dictionaries(
            {"steps": st.integers(1, 10**6), "seed": st.integers(0, 2**32)}
        ),
        "cluster": st.integers(1, 16).flatmap(
            lambda n: st.fixed_dictionaries(
                {
                    "devices": st.just(n),
                    "speeds": st.lists(st.floats(0.01, 100), min_size=n, max_size=n),
                }
            )
        ),
        "compute": st.fixed_dictionaries(
            {
                "distribution": st.sampled_from(["constant", "exponential", "lognormal"]),
                "mean": st.floats(1e-6, 10),
            }
        ),
        "training": st.fixed_dictionaries(
            {
                "aggregation": st.sampled_from(["parameter_server", "allreduce"]),
            }
        ),
    }
)


@given(valid_dicts)
def test_valid_dicts_round_trip(data: dict) -> None:
    s = scenario_from_dict(data)
    assert s.name == data["name"]
    assert s.run.steps == data["run"]["steps"] and s.run.seed == data["run"]["seed"]
    assert s.cluster.speeds == tuple(data["cluster"]["speeds"])
    assert s.compute.mean == data["compute"]["mean"]
    assert s.training.aggregation == data["training"]["aggregation"]


@given(
    st.sampled_from([f for f in FIELDS if f.kind in ("int", "float")]),
    st.one_of(st.text(max_size=3), st.booleans(), st.lists(st.integers(), max_size=2)),
)
def test_wrong_types_always_name_the_key(field, value) -> None:
    data = {"name": "t", "cluster": {"devices": 2}, "compute": {"mean": 0.01}}
    if isinstance(value, str) and value.strip().lower() in ("inf", "infinity"):
        value = "x"
    node = data
    for part in field.table.split(".") if field.table else []:
        node = node.setdefault(part, {})
    node[field.key] = value
    with pytest.raises(ScenarioError) as info:
        scenario_from_dict(data, source="f.toml")
    assert str(info.value).startswith(f"f.toml: {field.path}")


@pytest.mark.parametrize(
    ("table", "key"),
    [("compute", "mean"), ("model", "learning_rate"), ("costs", "apply"), ("link", "latency_us")],
)
def test_infinity_is_only_for_bandwidth(table: str, key: str) -> None:
    data = {
        "name": "t",
        "cluster": {"devices": 2, "link": {"bandwidth_gbps": "inf"}},
        "compute": {"mean": 0.01},
    }
    node = data["cluster"]["link"] if table == "link" else data.setdefault(table, {})
    node[key] = math.inf
    with pytest.raises(ScenarioError, match=rf"{key}: expected"):
        scenario_from_dict(data)
    node[key] = 1.0
    assert math.isinf(scenario_from_dict(data).cluster.link.bandwidth_gbps)


def test_empty_speeds_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="speeds: expected 2 entries"):
        load_scenario(write(tmp_path, GOOD.replace("devices = 2", "devices = 2\nspeeds = []")))


def test_python_scenarios_meet_the_file_rules() -> None:
    from simsync.patterns import build
    from simsync.scenario import ClusterConfig, ComputeConfig, Scenario

    assert ClusterConfig(devices=3).speeds == (1.0, 1.0, 1.0)
    with pytest.raises(ScenarioError, match=r"<python>: \[costs\] unknown key 'aply'"):
        build(Scenario("s", compute=ComputeConfig(mean=0.01), costs={"aply": 1.0}))
    with pytest.raises(ScenarioError, match=r"\[compute\] sigma: must be greater than 0 and"):
        build(Scenario("s", compute=ComputeConfig(mean=0.01, sigma=40.0)))


def test_file_defaults_equal_python_defaults() -> None:
    """The schema (files) and the dataclasses (Python) declare defaults twice: keep them equal."""
    from simsync.scenario import ClusterConfig, ComputeConfig, Scenario

    from_file = scenario_from_dict(
        {"name": "d", "cluster": {"devices": 3}, "compute": {"mean": 0.01}}, source="<python>"
    )
    from_python = Scenario("d", cluster=ClusterConfig(devices=3), compute=ComputeConfig(mean=0.01))
    # a missing cost is 0 (one with no default is left out): compare costs by value, the rest
    # as they are
    keys = [f.key for f in FIELDS if f.table == "costs" and f.default is not None]
    assert all(from_file.costs[k] == from_python.costs.get(k, 0.0) == 0.0 for k in keys)
    unset = [f.key for f in FIELDS if f.table == "costs" and f.default is None]
    assert unset == ["queue_runner_run"] and not set(unset) & set(from_file.costs)
    assert from_file == dataclasses.replace(from_python, costs=from_file.costs)


def test_settings_that_cannot_take_effect_are_noted(tmp_path: Path) -> None:
    text = GOOD.replace("mean = 0.01", "mean = 0.01\nshift = 0.002\nsigma = 1.0") + (
        '[model]\nkind = "softmax"\nhidden = [8]\n[costs]\nallreduce = 0.001\n'
    )
    notes = load_scenario(write(tmp_path, text)).notes
    assert [n.split(": ", 1)[1] for n in notes] == [
        '[compute] shift is ignored: used only with distribution = "shifted_exponential"',
        '[compute] sigma is ignored: used only with distribution = "lognormal"',
        '[model] hidden is ignored: used only with kind = "mlp"',
        '[costs] allreduce is ignored: used only with mode = "sync" and aggregation = "allreduce"',
    ]
    assert load_scenario(write(tmp_path, GOOD)).notes == ()
