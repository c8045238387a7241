"""Batch norm across towers: numerics (finite differences), the three variants simulated."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from simsync.numerics import ModelSpec, init_params, make_batch, make_batches
from simsync.numerics import batch_norm as bn
from simsync.numerics.models import Batch

SPEC = ModelSpec(kind="mlp", features=5, classes=3, hidden=(6, 4), batch_size=8, batch_norm="local")


def _numeric_gradient(f, params, name, h=1e-6):
    grad = np.zeros_like(params[name])
    for index in np.ndindex(grad.shape):
        saved = params[name][index]
        params[name][index] = saved + h
        up = f(params)
        params[name][index] = saved - h
        down = f(params)
        params[name][index] = saved
        grad[index] = (up - down) / (2 * h)
    return grad


def _concatenated(batches):
    return Batch(np.concatenate([b.x for b in batches]), np.concatenate([b.y for b in batches]))


def _mean_loss_synchronized(spec, params, batches):
    """The mean of the towers' losses, each normalised with the statistics of all batches
    (computed here straight from the concatenated inputs, not from the sums)."""
    z = np.concatenate([b.x for b in batches]) @ params["layer_0/kernel"] + params["layer_0/bias"]
    given = bn.Statistics(z.mean(axis=0), z.var(axis=0), len(z), {})
    return np.mean([bn.forward(spec, params, b, given)[0] for b in batches])


def test_local_gradients_match_finite_differences():
    params = init_params(SPEC, 3)
    params["batch_norm/gamma"] = np.linspace(0.5, 1.5, 6)
    params["batch_norm/beta"] = np.linspace(-0.2, 0.3, 6)
    batch = make_batch(SPEC, 3, (0, 0, 0))
    grads = bn.backward(SPEC, bn.forward(SPEC, params, batch)[1])
    assert set(grads) == set(params)
    for name in params:
        numeric = _numeric_gradient(lambda p: bn.forward(SPEC, p, batch)[0], params, name)
        assert np.allclose(grads[name], numeric, atol=1e-7), name


def test_synchronized_gradients_through_global_statistics_match_finite_differences():
    """Each tower's partial gradients, the statistics' gradients summed over towers, then the
    first layer's through the sums: their mean is the gradient of the mean loss."""
    params = init_params(SPEC, 4)
    batches = make_batches(SPEC, 4, 0, 0, 3)
    sums = [bn.moments(bn.pre_activation(params, b.x)) for b in batches]
    given = bn.statistics(*(list(part) for part in zip(*sums, strict=True)), {})
    partials = [bn.backward(SPEC, bn.forward(SPEC, params, b, given)[1]) for b in batches]
    by_mean = np.sum([p.mean for p in partials], axis=0)
    by_variance = np.sum([p.variance for p in partials], axis=0)
    towers = []
    for part in partials:
        by_z = part.direct + bn.through_statistics(part.cache.z, given, by_mean, by_variance)
        towers.append({**part.grads, **bn.layer_gradients(part.cache.batch.x, by_z)})
    for name in params:
        mean = np.mean([t[name] for t in towers], axis=0)
        numeric = _numeric_gradient(
            lambda p: _mean_loss_synchronized(SPEC, p, batches), params, name
        )
        assert np.allclose(mean, numeric, atol=1e-7), name
    # and one device on the concatenated batch computes the same gradients
    one = bn.backward(SPEC, bn.forward(SPEC, params, _concatenated(batches))[1])
    for name in params:
        assert np.allclose(np.mean([t[name] for t in towers], axis=0), one[name], atol=1e-12)


def test_statistics_from_sums_are_the_batch_mean_and_biased_variance():
    z = np.random.default_rng(0).normal(2.0, 3.0, size=(40, 3))
    parts = [bn.moments(z[:15]), bn.moments(z[15:])]
    stats = bn.statistics(*(list(p) for p in zip(*parts, strict=True)), {})
    assert np.allclose(stats.mean, z.mean(axis=0)) and np.allclose(stats.variance, z.var(axis=0))


# -- the three variants, simulated -------------------------------------------------------------

MOMENTUM = 0.9


def _scenario(variant, towers=2, steps=1, **model):
    from simsync.scenario import scenario_from_dict

    return scenario_from_dict(
        {
            "name": f"bn-{variant}",
            "run": {"steps": steps, "seed": 5},
            "cluster": {"devices": towers},
            "compute": {"mean": 0.01},
            "model": {
                "kind": "mlp",
                "features": 5,
                "classes": 3,
                "hidden": [6, 4],
                "batch_size": 8,
                "batch_norm": variant,
                "momentum": MOMENTUM,
                **model,
            },
        }
    )


def _simulate(variant, towers=2, steps=1, **model):
    from simsync.simulation import simulate

    return simulate(_scenario(variant, towers, steps, **model))


def _layer_input(params, batch):
    """z = x W + b, written out here (not through the numerics)."""
    return batch.x @ params["layer_0/kernel"] + params["layer_0/bias"]


def test_synchronized_towers_equal_one_device_on_the_concatenated_batch():
    towers, steps = 3, 4
    sim = _simulate("synchronized", towers, steps)
    spec = sim.scenario.model
    params = init_params(spec, 5)
    mean, variance = np.zeros(6), np.ones(6)
    for step in range(steps):
        batch = _concatenated(make_batches(spec, 5, 0, step, towers))
        z = _layer_input(params, batch)
        mean = MOMENTUM * mean + (1 - MOMENTUM) * z.mean(axis=0)
        variance = MOMENTUM * variance + (1 - MOMENTUM) * z.var(axis=0)
        grads = bn.backward(spec, bn.forward(spec, params, batch)[1])
        params = {n: v - spec.learning_rate * grads[n] for n, v in params.items()}
    for name, value in params.items():
        assert np.allclose(sim.trace.params[name], value, atol=1e-12), name
    assert np.allclose(sim.trace.values["batch_norm/moving_mean"], mean, atol=1e-12)
    assert np.allclose(sim.trace.values["batch_norm/moving_variance"], variance, atol=1e-12)


def test_local_updates_tower_zero_only_and_update_ops_adds_up_every_tower():
    """After one step (research note): tower 0 only gives m x + (1 - m) b0; every tower's
    update, all reading the old value, gives (2m - 1) x + (1 - m)(b0 + b1); the parameters are
    the same in both (each tower normalises with its own statistics)."""
    local, racing = _simulate("local"), _simulate("update_ops")
    spec = local.scenario.model
    params = init_params(spec, 5)
    zs = [_layer_input(params, b) for b in make_batches(spec, 5, 0, 0, 2)]
    m = MOMENTUM
    for name, start, stat in (("moving_mean", 0.0, np.mean), ("moving_variance", 1.0, np.var)):
        b0, b1 = stat(zs[0], axis=0), stat(zs[1], axis=0)
        assert np.allclose(local.trace.values[f"batch_norm/{name}"], m * start + (1 - m) * b0)
        summed = (2 * m - 1) * start + (1 - m) * (b0 + b1)
        assert np.allclose(racing.trace.values[f"batch_norm/{name}"], summed)
    for name in params:
        assert np.array_equal(local.trace.params[name], racing.trace.params[name])
    # the loss: the mean of the towers' losses, each normalised with its own statistics
    own = [bn.forward(spec, params, b)[0] for b in make_batches(spec, 5, 0, 0, 2)]
    for sim in (local, racing):
        assert sim.trace.steps[0].loss == pytest.approx(np.mean(own), abs=1e-14)


def test_racing_updates_in_simulate_json():
    from simsync.simulation.summary import summary

    counts = {}
    for variant in ("local", "update_ops", "synchronized"):
        report = summary(_simulate(variant, towers=3, steps=4))["batch_norm"]
        assert report["variant"] == variant and len(report["moving_mean"]) == 6
        counts[variant] = report["racing_updates"]
    # every step, towers 1 and 2 land on a value they did not read, for mean and variance
    assert counts == {"local": 0, "update_ops": 2 * 2 * 4, "synchronized": 0}
    assert "batch_norm" not in summary(_simulate("none"))


def test_the_forward_sync_point_waits_for_the_slowest_tower():
    from simsync.scenario import ClusterConfig
    from simsync.simulation import simulate
    from simsync.trace import sync_waits

    slow = dataclasses.replace(
        _scenario("synchronized", towers=2, steps=3), cluster=ClusterConfig(2, (1.0, 0.5))
    )
    sim = simulate(slow)
    assert sim.sync_points[0] == "batch_norm/statistics"
    waits = sync_waits(sim.graph, sim.trace, sim.sync_points)
    (wait,) = [w for w in waits if w.sync_point == "batch_norm/statistics"]
    # the first half of the forward time (1/3 of 10 ms): tower 0 is done after 1/6 of 10 ms,
    # tower 1 (half as fast) after 1/3, every step
    assert wait.last == {"tower_0": 0, "tower_1": 3}
    assert wait.mean_wait["tower_0"] == pytest.approx(0.01 / 6, rel=1e-9)


def test_batch_norm_needs_an_mlp_and_the_parameter_server():
    from simsync.errors import ScenarioError
    from simsync.scenario import scenario_from_dict

    base = {"name": "x", "cluster": {"devices": 2}, "compute": {"mean": 0.01}}
    with pytest.raises(ScenarioError, match=r"\[model\] batch_norm = 'local' needs kind"):
        scenario_from_dict({**base, "model": {"batch_norm": "local"}})
    with pytest.raises(ScenarioError, match="parameter_server"):
        scenario_from_dict(
            {
                **base,
                "model": {"kind": "mlp", "batch_norm": "update_ops"},
                "training": {"aggregation": "allreduce"},
            }
        )
    with pytest.raises(ScenarioError, match="unknown value 'global'"):
        scenario_from_dict({**base, "model": {"kind": "mlp", "batch_norm": "global"}})
    notes = scenario_from_dict({**base, "model": {"momentum": 0.5}}).notes
    assert notes == ("<dict>: [model] momentum is ignored: used only with batch_norm",)


def test_the_outcomes_a_race_of_two_updates_allows():
    """The research note's closed forms: a sum, or one update after the other."""
    from simsync.kinds.moving_average import race_outcomes

    x, b0, b1, m = 0.7, 2.0, -1.5, 0.9
    assert race_outcomes(x, [b0, b1], m) == pytest.approx(
        {
            "sum": (2 * m - 1) * x + (1 - m) * (b0 + b1),
            "sequential 0,1": m * m * x + m * (1 - m) * b0 + (1 - m) * b1,
            "sequential 1,0": m * m * x + m * (1 - m) * b1 + (1 - m) * b0,
        }
    )
    assert race_outcomes(x, [b0], m) == pytest.approx({"sequential 0": m * x + (1 - m) * b0})


def test_simulate_json_lists_the_outcomes_the_race_allows():
    from simsync.simulation.summary import summary

    racing = summary(_simulate("update_ops", towers=3))["batch_norm"]
    assert racing["outcome"] == "sum"
    assert racing["allowed_outcomes"][0] == "sum" and len(racing["allowed_outcomes"]) == 1 + 6
    synchronized = summary(_simulate("synchronized", towers=3))["batch_norm"]
    assert synchronized["allowed_outcomes"] == ["sequential 0"]
