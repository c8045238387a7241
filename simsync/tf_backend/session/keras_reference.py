"""Keras's own synchronised batch norm, a reference for ``batch_norm = "synchronized"``.

``tf.keras.layers.BatchNormalization(synchronized=True)`` under ``tf.distribute.MirroredStrategy``
all-reduces every replica's sum, sum of squares and count, normalises with the global mean and
(biased) variance, and differentiates through the all-reduce. Here the scenario's model is
built from Keras layers with the simulator's initial parameters, one replica per tower on the
towers' devices, and trained on the simulator's batches with plain SGD (the loss averaged over
the global batch, the gradients summed over the replicas): its parameters and moving statistics
must be those of the simulated ``synchronized`` variant.

It runs in a process of its own: Keras and ``MirroredStrategy`` need eager TensorFlow, which
the graph-mode backend turns off for its process, and logical devices are fixed when
TensorFlow starts.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from simsync.numerics import init_params, make_batches
from simsync.numerics.batch_norm import BETA, GAMMA, MOVING_MEAN, MOVING_VARIANCE
from simsync.scenario import Scenario
from simsync.tf_backend.session.gpus import cpu_only_environment
from simsync.tf_backend.session.runtime import BackendError

__all__ = ["keras_synchronized"]


def keras_synchronized(scenario: Scenario) -> dict[str, np.ndarray]:
    """Train ``[run] steps`` steps with Keras's synchronised batch norm, one replica per tower
    on logical CPU devices, in a new process; the parameters and the moving statistics after
    them, named as the simulator names them. Raises :class:`BackendError` with the child's
    last line if it fails."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "scenario.pickle"
        path.write_bytes(pickle.dumps(scenario))
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **cpu_only_environment()}
        command = [sys.executable, "-m", "simsync.tf_backend.session.keras_reference", str(path)]
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise BackendError(f"Keras's synchronized batch norm failed: {last}")
        result: dict[str, np.ndarray] = pickle.loads(path.read_bytes())
        return result


def _train(scenario: Scenario) -> dict[str, np.ndarray]:
    import tensorflow as tf  # eager, in this process of its own

    spec = scenario.model
    cpu = tf.config.list_physical_devices("CPU")[0]
    logical = [tf.config.LogicalDeviceConfiguration() for _ in range(scenario.towers + 1)]
    tf.config.set_logical_device_configuration(cpu, logical)
    devices = [f"/device:CPU:{t + 1}" for t in range(scenario.towers)]
    strategy = tf.distribute.MirroredStrategy(devices)
    initial = init_params(spec, scenario.run.seed)
    with strategy.scope():
        layers = _layers(tf, spec, initial)
        import keras

        optimizer = keras.optimizers.SGD(spec.learning_rate)
    variables = [v for layer in layers.values() for v in layer.trainable_variables]
    global_batch = spec.batch_size * scenario.towers

    def replica_step(x: Any, y: Any) -> None:
        with tf.GradientTape() as tape:
            logits = _apply(tf, layers, x)
            losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
            loss = tf.nn.compute_average_loss(losses, global_batch_size=global_batch)
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables, strict=True))

    @tf.function
    def train_step(x: Any, y: Any) -> None:
        strategy.run(replica_step, args=(x, y))

    for step in range(scenario.run.steps):
        batches = make_batches(spec, scenario.run.seed, 0, step, scenario.towers)
        x = strategy.experimental_distribute_values_from_function(
            lambda ctx, b=batches: tf.constant(b[ctx.replica_id_in_sync_group].x)
        )
        y = strategy.experimental_distribute_values_from_function(
            lambda ctx, b=batches: tf.constant(b[ctx.replica_id_in_sync_group].y)
        )
        train_step(x, y)
    return _named(layers)


def _layers(tf: Any, spec: Any, initial: dict[str, np.ndarray]) -> dict[str, Any]:
    import keras

    constant = keras.initializers.Constant
    layers: dict[str, Any] = {}
    for layer in range(len(spec.widths) - 1):
        kernel, bias = initial[f"layer_{layer}/kernel"], initial[f"layer_{layer}/bias"]
        layers[f"layer_{layer}"] = keras.layers.Dense(
            kernel.shape[1],
            kernel_initializer=constant(kernel),
            bias_initializer=constant(bias),
            dtype="float64",
        )
        layers[f"layer_{layer}"].build((None, kernel.shape[0]))
    layers["batch_norm"] = keras.layers.BatchNormalization(
        synchronized=True, momentum=spec.momentum, epsilon=spec.epsilon, dtype="float64"
    )
    layers["batch_norm"].build((None, spec.widths[1]))
    return layers


def _apply(tf: Any, layers: dict[str, Any], x: Any) -> Any:
    dense = [name for name in layers if name.startswith("layer_")]
    h = tf.nn.relu(layers["batch_norm"](layers[dense[0]](x), training=True))
    for position, name in enumerate(dense[1:], start=1):
        h = layers[name](h)
        if position < len(dense) - 1:
            h = tf.nn.relu(h)
    return h


def _named(layers: dict[str, Any]) -> dict[str, np.ndarray]:
    named = {}
    for name, layer in layers.items():
        if name.startswith("layer_"):
            named[f"{name}/kernel"] = layer.kernel.numpy()
            named[f"{name}/bias"] = layer.bias.numpy()
    norm = layers["batch_norm"]
    named[GAMMA], named[BETA] = norm.gamma.numpy(), norm.beta.numpy()
    named[MOVING_MEAN], named[MOVING_VARIANCE] = (
        norm.moving_mean.numpy(),
        norm.moving_variance.numpy(),
    )
    return named


if __name__ == "__main__":  # the child process: the scenario in, the values out, one file
    _path = Path(sys.argv[1])
    _path.write_bytes(pickle.dumps(_train(pickle.loads(_path.read_bytes()))))
