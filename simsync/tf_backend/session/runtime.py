"""Starting TensorFlow: the lazy import, the devices, and the session configuration.

TensorFlow is imported here and only here, on first use, so nothing else in simsync pays its
import time (about five seconds). Devices:

- with GPUs, ``/gpu:i`` is a GPU device (:mod:`simsync.tf_backend.session.gpus`): a GPU of its own
  while there are as many GPUs as towers, else one of the *virtual GPUs* every GPU is split
  into, which share that GPU's compute and its link to the host (the simulator models them
  with ``[cluster] gpus`` and ``gpu_contention``); ``/cpu:0`` (variables) is ``CPU:0``;
- without, the CPU is split into logical devices: ``/cpu:0`` is ``CPU:0`` and
  ``/gpu:i`` is ``CPU:i+1``. They share the host's cores; the session runs one op per core at a
  time (``inter_op_parallelism_threads`` = cores, ``intra_op_parallelism_threads`` = 1), the
  contention the simulator models with ``[cluster] host_cores``.

The session turns off TensorFlow's graph rewriter (grappler), so every op of the graph runs as
built and maps back to its IR op by name scope, and oneDNN kernels (``TF_ENABLE_ONEDNN_OPTS=0``),
whose own thread pools would not respect one op per core.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from simsync.errors import SimsyncError
from simsync.tf_backend.session.gpus import (
    TOWER_DEVICES,
    VIRTUAL_GPU_MEMORY_MB,
    GpuSplit,
    split_gpus,
    tower_gpus,
)
from simsync.words import plural

__all__ = [
    "BackendError",
    "DevicePlan",
    "gpu_names",
    "gpu_plan",
    "load_tensorflow",
    "plan_devices",
    "session_config",
]

_tf: ModuleType | None = None
#: Logical CPU devices created in this process (TensorFlow fixes them once it has started).
_LOGICAL: dict[str, int] = {}
MIN_LOGICAL_DEVICES = TOWER_DEVICES + 1  # /cpu:0 and 8 towers: one configuration for all
#: How this process splits its GPUs (fixed by its first session, as TensorFlow fixes them).
_SPLIT: dict[str, GpuSplit] = {}


class BackendError(SimsyncError):
    """TensorFlow is missing, fails to start, or cannot run this scenario."""


def load_tensorflow() -> ModuleType:
    """Import TensorFlow in graph mode, quietly, or raise :class:`BackendError` saying why."""
    global _tf
    if _tf is not None:
        return _tf
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # its C++ errors about absent GPUs too
    # oneDNN kernels bring thread pools of their own; TensorFlow's plain kernels honour
    # intra_op_parallelism_threads = 1, which the one-op-per-core model relies on.
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    try:
        with native_stderr_filtered():
            import tensorflow as tf
    except ImportError as error:
        raise BackendError(
            f"TensorFlow is not installed ({error}); install it with: pip install tensorflow"
        ) from None
    except Exception as error:  # a broken install raises anything
        raise BackendError(f"TensorFlow failed to start: {error}") from None
    tf.get_logger().setLevel("ERROR")
    tf.compat.v1.disable_eager_execution()
    _tf = tf
    return tf


#: Native log lines TensorFlow prints on every machine without a GPU, whatever
#: TF_CPP_MIN_LOG_LEVEL says (they come before its logging is set up).
HARMLESS = (
    "All log messages before absl::InitializeLog()",
    "Could not find cuda drivers",
    "failed call to cuInit",
    "oneDNN custom operations are on",
)


@contextlib.contextmanager
def native_stderr_filtered() -> Iterator[None]:
    """Catch what native code writes to file descriptor 2 meanwhile, and pass on every line
    but the :data:`HARMLESS` ones (a learner should not see GPU warnings on a CPU machine)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            lines = caught.read().decode(errors="replace").splitlines()
            kept = [line for line in lines if not any(h in line for h in HARMLESS)]
            if kept:
                print("\n".join(kept), file=sys.stderr)


@dataclass(frozen=True)
class DevicePlan:
    """Where each IR device runs in TensorFlow."""

    mapping: dict[str, str]
    kind: str  # "gpu" (a GPU per tower), "virtual-gpu" (towers share GPUs) or "logical-cpu"
    host_cores: int | None  # cores the devices share (logical CPUs), None for GPUs
    cpu_devices: int  # CPU devices the session must create
    #: this process's GPU devices (None: no GPU)
    split: GpuSplit | None = None
    towers: int = 0

    @property
    def gpus(self) -> int:
        """Physical GPUs the towers run on (0: none)."""
        return 0 if self.split is None else min(self.towers, self.split.physical)

    def describe(self) -> str:
        """What the run (and so the prediction) is for: ``3 logical devices sharing 2 cores``,
        ``2 GPUs and the CPU``, ``4 towers on 1 GPU: 4 virtual GPUs``."""
        if self.kind == "gpu":
            return f"{plural(self.towers, 'GPU')} and the CPU"
        if self.kind == "virtual-gpu":
            towers = plural(self.towers, "tower")
            return f"{towers} on {plural(self.gpus, 'GPU')}: {self.towers} virtual GPUs"
        devices = plural(len(self.mapping), "logical device")
        return f"{devices} sharing {plural(self.host_cores or 1, 'core')}"


def plan_devices(devices: list[str], towers: int) -> DevicePlan:
    """Map IR devices (``/cpu:0``, ``/gpu:0`` ...) to TensorFlow devices.

    Raises :class:`BackendError` when TensorFlow has already started with fewer logical
    devices (or GPU devices) than the scenario needs.
    """
    tf = load_tensorflow()
    with native_stderr_filtered():  # the first device query loads the GPU plugin
        gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        return _gpu_plan(devices, towers, len(gpus))
    needed = towers + 1
    available = _ensure_logical_cpus(tf, max(needed, MIN_LOGICAL_DEVICES))
    if available < needed:
        raise BackendError(
            f"{towers} towers need {needed} logical CPU devices, but TensorFlow already started "
            f"in this process with {available}; run the scenario in a new process"
        )
    mapping = {}
    for device in devices:
        kind, _, index = device.strip("/").partition(":")
        number = 0 if kind == "cpu" else int(index) + 1
        mapping[device] = f"/device:CPU:{number}"
    return DevicePlan(mapping, "logical-cpu", os.cpu_count() or 1, available, towers=towers)


def _gpu_plan(devices: list[str], towers: int, physical: int) -> DevicePlan:
    if "gpu" not in _SPLIT:
        _SPLIT["gpu"] = split_gpus(physical, towers)
        _configure_gpus(load_tensorflow(), _SPLIT["gpu"])
    split = _SPLIT["gpu"]
    if split.devices < towers:
        raise BackendError(
            f"{towers} towers need {towers} GPU devices, but TensorFlow already started in this "
            f"process with {split.devices}; run the scenario in a new process"
        )
    return gpu_plan(devices, towers, split)


def gpu_plan(devices: list[str], towers: int, split: GpuSplit) -> DevicePlan:
    """Towers on the GPU devices of ``split``: GPUs of their own while there are enough, else
    virtual GPUs (:func:`~simsync.tf_backend.session.gpus.tower_gpus`).

    >>> from simsync.tf_backend.session.gpus import split_gpus
    >>> plan = gpu_plan(["/cpu:0", "/gpu:0", "/gpu:1"], 2, split_gpus(1, 2))
    >>> plan.mapping["/gpu:1"], plan.describe()
    ('/device:GPU:1', '2 towers on 1 GPU: 2 virtual GPUs')
    """
    placed = tower_gpus(towers, split)
    mapping = {}
    for device in devices:
        kind, _, index = device.strip("/").partition(":")
        number = 0 if kind == "cpu" else placed[int(index)]
        mapping[device] = f"/device:{kind.upper()}:{number}"
    kind = "gpu" if towers <= split.physical else "virtual-gpu"
    return DevicePlan(mapping, kind, None, 1, split, towers)


def gpu_names() -> list[str]:
    """The names of this machine's GPUs, as TensorFlow sees them (``NVIDIA H100 80GB HBM3``)."""
    tf = load_tensorflow()
    with native_stderr_filtered():
        gpus = tf.config.list_physical_devices("GPU")
    return [tf.config.experimental.get_device_details(g).get("device_name", g.name) for g in gpus]


def _configure_gpus(tf: Any, split: GpuSplit) -> None:
    """Give TensorFlow's own runtime the GPU devices the sessions will use, before it starts
    them (building a loop starts it): the virtual GPUs with their memory, or whole GPUs taking
    memory as they need it. Left alone, it would take all of every GPU's memory at once."""
    gpus = tf.config.list_physical_devices("GPU")
    with contextlib.suppress(RuntimeError, ValueError):  # already started: sessions decide
        for gpu in gpus:
            if split.per_gpu > 1:
                memory = tf.config.LogicalDeviceConfiguration(memory_limit=VIRTUAL_GPU_MEMORY_MB)
                tf.config.set_logical_device_configuration(gpu, [memory] * split.per_gpu)
            else:
                tf.config.experimental.set_memory_growth(gpu, True)


def _ensure_logical_cpus(tf: Any, count: int) -> int:
    if "cpu" in _LOGICAL:
        return _LOGICAL["cpu"]
    cpu = tf.config.list_physical_devices("CPU")[0]
    # If TensorFlow was initialised already this raises; sessions still create their
    # ``device_count`` CPU devices, which is what simsync's sessions use.
    with contextlib.suppress(RuntimeError):
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(count)]
        )
    _LOGICAL["cpu"] = count
    return count


def session_config(plan: DevicePlan) -> Any:
    """The ``ConfigProto`` every simsync session uses. With GPUs, every session of the process
    creates the same GPU devices: split into virtual GPUs of a fixed memory each, or whole
    GPUs taking memory as they need it (other processes may share them)."""
    tf = load_tensorflow()
    cores = plan.host_cores or os.cpu_count() or 1
    config = tf.compat.v1.ConfigProto(
        device_count={"CPU": plan.cpu_devices},
        inter_op_parallelism_threads=cores,
        intra_op_parallelism_threads=1,
        allow_soft_placement=False,
    )
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    split = plan.split
    if split is not None and split.per_gpu > 1:
        for _ in range(split.physical):
            config.gpu_options.experimental.virtual_devices.add(
                memory_limit_mb=[VIRTUAL_GPU_MEMORY_MB] * split.per_gpu
            )
    elif split is not None:
        config.gpu_options.allow_growth = True
    return config
