"""Batch norm across towers on TensorFlow (logical CPU devices): the three variants cross-
checked, and the race of every tower's UPDATE_OPS seen for real."""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import numpy as np
import pytest

from simsync.scenario import load_scenario

pytestmark = pytest.mark.tf

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "batch_norm.toml"


@functools.cache
def checked(variant: str, steps: int = 4):
    from simsync.crosscheck import crosscheck

    scenario = load_scenario(EXAMPLE).with_run(steps=steps, seed=2)
    model = dataclasses.replace(scenario.model, batch_norm=variant)
    return crosscheck(dataclasses.replace(scenario, model=model), warmup=1)


@pytest.mark.parametrize("variant", ["local", "update_ops", "synchronized"])
def test_crosscheck_passes(variant: str) -> None:
    report = checked(variant).report
    assert report["structure"]["ok"], report["structure"]["violations"][:3]
    values = report["values"]
    assert values["ok"], values
    assert {"losses", "batch_norm/gamma", "layer_0/kernel"} <= set(values["compared"])
    moving = {"batch_norm/moving_mean", "batch_norm/moving_variance"}
    # racing updates are checked step by step instead of compared once
    assert (moving <= set(values["compared"])) == (variant != "update_ops")


def test_every_towers_update_ops_race_on_tensorflow() -> None:
    """Each step, the real moving mean is the sum of both towers' updates from the old value,
    x' = (2m - 1) x + (1 - m)(b0 + b1) (the research note's dominant outcome), or one of the
    sequential orders; never the average that "implicitly averaged" promises."""
    check = checked("update_ops", steps=8)
    m = check.scenario.model.momentum
    race = check.report["values"]["moving_statistics"]["race"]
    steps = len(check.real.moving)  # warm-up, traced and timed steps
    assert steps == check.real.total_steps
    assert race["predicted"]["batch_norm/moving_mean"] == {"sum": steps}
    assert race["racing_updates_predicted"] == 2 * steps  # tower 1, mean and variance, each step
    sums = averages = 0
    before = np.zeros(16)
    for record in check.real.moving:
        updates = record["updates"]
        b0 = updates["tower_0/batch_norm/update_moving_mean"]["batch_norm/moving_mean"]["batch"]
        b1 = updates["tower_1/batch_norm/update_moving_mean"]["batch_norm/moving_mean"]["batch"]
        after = record["values"]["batch_norm/moving_mean"]
        sums += np.allclose(after, (2 * m - 1) * before + (1 - m) * (b0 + b1), atol=1e-12)
        averages += np.allclose(after, m * before + (1 - m) * (b0 + b1) / 2, atol=1e-12)
        before = after
    assert sums >= 1 and averages == 0
    assert check.report["values"]["ok"]


def test_keras_synchronized_batch_norm_under_mirrored_strategy_agrees() -> None:
    """Keras's BatchNormalization(synchronized=True), one replica per tower: the same
    parameters and moving statistics as the simulated synchronized variant (Keras keeps the
    learning rate in float32, hence not 1e-16); per-tower statistics do not."""
    from simsync.simulation import simulate
    from simsync.tf_backend.session.keras_reference import keras_synchronized

    scenario = load_scenario(EXAMPLE).with_run(steps=3, seed=1)
    variants = {
        v: dataclasses.replace(scenario, model=dataclasses.replace(scenario.model, batch_norm=v))
        for v in ("synchronized", "local")
    }
    keras = keras_synchronized(variants["synchronized"])
    assert len(keras) == 8  # 2 dense layers, gamma, beta, the moving mean and variance
    for variant, limit in (("synchronized", 1e-8), ("local", None)):
        trace = simulate(variants[variant]).trace
        simulated = {**trace.params, **trace.values}
        diff = max(float(np.max(np.abs(simulated[n] - value))) for n, value in keras.items())
        assert diff < limit if limit else diff > 1e-4, (variant, diff)


def test_a_keras_3_layer_in_graph_mode_adds_nothing_to_update_ops() -> None:
    """The pitfall lesson 7 shows: the gate on UPDATE_OPS then waits for nothing."""
    import keras

    from simsync.tf_backend.session.runtime import load_tensorflow

    tf = load_tensorflow()  # graph mode, as the answer's code runs
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float32, [8, 3])
        keras.layers.BatchNormalization()(x, training=True)
        assert tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS) == []
