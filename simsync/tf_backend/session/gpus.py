"""GPUs: which process and which tower uses which GPU, and how they share one.

Every decision simsync makes about GPUs lives here, as plain functions of the number of GPUs,
so that a machine with 0, 1 or 4 GPUs is tested without any:

- **towers in this process** (:func:`tower_gpus`): with at least as many GPUs as towers each
  tower has a GPU of its own; with fewer, every GPU is split into *virtual GPUs*
  (``gpu_options.experimental.virtual_devices``) and the towers go round the GPUs: tower ``t``
  on GPU ``t mod n``. A process fixes its GPU devices when its first session starts, so the
  split serves every small scenario at once (:data:`TOWER_DEVICES` devices in all);
- **the tasks of a real cluster** (:func:`task_environment`, :func:`worker_gpu`): the parameter
  server sees no GPU (``CUDA_VISIBLE_DEVICES=""``, set before TensorFlow starts); worker ``i``
  uses GPU ``i mod n``, taking its memory as it needs it (memory growth), so workers that
  share a GPU all start;
- **helper processes on the CPU** (Keras's reference for batch norm, on logical CPU devices)
  see no GPU (:func:`cpu_only_environment`);
- **running out of GPU memory** (:func:`gpu_memory_error`) is said as such, in one line.

It imports no TensorFlow.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "TOWER_DEVICES",
    "VIRTUAL_GPU_MEMORY_MB",
    "GpuSplit",
    "cpu_only_environment",
    "gpu_memory_error",
    "split_gpus",
    "task_environment",
    "tower_gpus",
    "worker_gpu",
    "workers_on_gpus",
]

#: Tower devices a process creates at least (GPUs, virtual GPUs or logical CPU devices): one
#: configuration serves every small scenario, as TensorFlow fixes the devices once started.
TOWER_DEVICES = 8
#: The memory of each virtual GPU (TensorFlow takes it when the first session starts): the
#: scenarios' models and work take a few MB; 8 of them take 4 GiB of the GPU.
VIRTUAL_GPU_MEMORY_MB = 512


@dataclass(frozen=True)
class GpuSplit:
    """The GPU devices of this process: ``physical`` GPUs, each split into ``per_gpu``
    devices (1: not split). TensorFlow numbers them GPU by GPU: the devices of physical GPU
    ``p`` are ``GPU:p*per_gpu`` to ``GPU:p*per_gpu + per_gpu - 1``."""

    physical: int
    per_gpu: int

    @property
    def devices(self) -> int:
        return self.physical * self.per_gpu


def split_gpus(physical: int, towers: int) -> GpuSplit:
    """How a process with ``physical`` GPUs (at least one) splits them: not at all with
    :data:`TOWER_DEVICES` or more, else into enough virtual GPUs for that many towers (and
    for ``towers``).

    >>> split_gpus(1, 4)
    GpuSplit(physical=1, per_gpu=8)
    >>> [split_gpus(n, towers).per_gpu for n, towers in ((4, 4), (8, 2), (2, 16))]
    [2, 1, 8]
    """
    needed = max(TOWER_DEVICES, towers)
    return GpuSplit(physical, 1 if physical >= needed else math.ceil(needed / physical))


def tower_gpus(towers: int, split: GpuSplit) -> list[int]:
    """The TensorFlow GPU device of each tower: round the physical GPUs first (each tower a GPU
    of its own while there are enough), then their next virtual GPU.

    >>> tower_gpus(4, GpuSplit(1, 8)), tower_gpus(4, GpuSplit(4, 2)), tower_gpus(3, GpuSplit(2, 4))
    ([0, 1, 2, 3], [0, 2, 4, 6], [0, 4, 1])
    """
    if towers > split.devices:
        raise ValueError(f"{towers} towers on {split.devices} GPU devices")
    return [(t % split.physical) * split.per_gpu + t // split.physical for t in range(towers)]


def cpu_only_environment() -> dict[str, str]:
    """What a process that must see no GPU sets before TensorFlow starts."""
    return {"CUDA_VISIBLE_DEVICES": ""}


def task_environment(job: str) -> dict[str, str]:
    """What a cluster task sets in its environment before TensorFlow starts: the parameter
    server holds variables and queues on its CPU and sees no GPU (a GPU's context alone takes
    hundreds of MB, and without memory growth the whole memory).

    >>> task_environment("ps"), task_environment("worker")
    ({'CUDA_VISIBLE_DEVICES': ''}, {})
    """
    return cpu_only_environment() if job == "ps" else {}


def worker_gpu(index: int, gpus: int) -> int | None:
    """The GPU worker ``index`` uses among ``gpus`` (None: there is none); workers share the
    GPUs in turn, each taking memory as it needs it.

    >>> [worker_gpu(i, 0) for i in range(3)], [worker_gpu(i, 1) for i in range(3)]
    ([None, None, None], [0, 0, 0])
    >>> [worker_gpu(i, 4) for i in range(6)]
    [0, 1, 2, 3, 0, 1]
    """
    return None if gpus <= 0 else index % gpus


def workers_on_gpus(workers: int, gpus: int) -> str:
    """What a cluster's workers run on, in words, for the person waiting.

    >>> workers_on_gpus(4, 0), workers_on_gpus(4, 1), workers_on_gpus(4, 4), workers_on_gpus(3, 2)
    ('', '4 workers share 1 GPU', 'each worker on a GPU of its own', '3 workers share 2 GPUs')
    """
    if gpus <= 0:
        return ""
    if workers <= gpus:
        return "each worker on a GPU of its own"
    return f"{workers} workers share {gpus} GPU{'s' if gpus > 1 else ''}"


#: What TensorFlow and CUDA say when a GPU's memory runs out.
_OUT_OF_MEMORY = ("out of memory", "OOM when allocating", "CUDA_ERROR_OUT_OF_MEMORY")


def gpu_memory_error(message: str) -> bool:
    """Whether a TensorFlow error says that a GPU's memory ran out.

    >>> gpu_memory_error("cudaSetDevice() on GPU:0 failed. Status: out of memory")
    True
    >>> gpu_memory_error("Could not start gRPC server: address already in use")
    False
    """
    return any(words.lower() in message.lower() for words in _OUT_OF_MEMORY)
