"""The scenario's compute time, made real: a matrix product sized per step.

A tower's forward and backward ops run the model for real (they compute the loss and the
gradients the cross-check compares), but a small model takes microseconds, while the scenario
says ``[compute] mean = 0.010``. So each of those ops also multiplies ``rows`` rows of 256 by a
``256 x 256`` matrix, with ``rows`` fed every step. The rows go in blocks of
:data:`BLOCK` (a loop, then the rest), so the work stays in the processor's caches and its time
grows in proportion to ``rows``: one ``rows x 256`` matrix would not fit from about 10 ms of
work on, and each row would then cost twice as much (measured here: 0.59 of a nominal second
at 10 ms, 1.02 at 20 ms and 1.35 at 40 ms; in blocks 0.62, 0.64, 0.63):

    rows = draw(tower, step) * fraction / speed / seconds_per_row

``draw`` is the simulator's own seeded draw for that tower and step, so a random straggler in the
simulation is the same straggler in TensorFlow; a device at speed 0.5 multiplies twice as many
rows: it is really slower, doing proportionally more real work. ``seconds_per_row`` is measured
on this machine when a run starts (:func:`measure_seconds_per_row`).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

__all__ = [
    "WORK_WIDTH",
    "measure_bandwidth",
    "measure_seconds_per_row",
    "rows_for",
    "work_op",
]

WORK_WIDTH = 256
#: Rows multiplied at a time: a block and its product take 1 MiB each.
BLOCK = 1024


def work_op(tf: Any, rows: Any, width: int = WORK_WIDTH) -> Any:
    """A scalar that costs ``rows`` matrix-vector products of size ``width`` to compute."""
    scale = tf.constant(1e-3, tf.float32)
    w = tf.fill([width, width], scale, name="work_weights")
    block = tf.fill([BLOCK, width], scale, name="work_block")
    blocks = rows // BLOCK

    def body(index: Any, total: Any) -> tuple[Any, Any]:
        return index + 1, total + tf.reduce_sum(tf.matmul(block, w))

    _, total = tf.compat.v1.while_loop(
        lambda index, _total: index < blocks,
        body,
        (tf.constant(0), tf.constant(0.0)),
        back_prop=False,
        parallel_iterations=1,
        name="work_blocks",
    )
    rest = tf.fill(tf.stack([rows - blocks * BLOCK, width]), scale, name="work_rows")
    return tf.add(total, tf.reduce_sum(tf.matmul(rest, w)), name="work")


#: About 1 GB of work matrix: beyond it, a scenario's compute time is too long to make real.
MAX_ROWS = 2**20


def rows_for(seconds: float, seconds_per_row: float) -> int:
    """Rows of work that take ``seconds`` (0 for no time).

    >>> rows_for(0.01, 2e-6), rows_for(0.0, 2e-6)
    (5000, 0)
    """
    rows = max(0, round(seconds / seconds_per_row))
    if rows > MAX_ROWS:
        from simsync.tf_backend.session.runtime import BackendError

        raise BackendError(
            f"a compute time of {seconds:.3g} s is too long for the TensorFlow backend to make "
            f"real here (at most about {MAX_ROWS * seconds_per_row:.2g} s per op); use a "
            "smaller [compute] mean for cross-checks"
        )
    return rows


def measure_seconds_per_row(tf: Any, config: Any, device: str, repeats: int = 25) -> float:
    """Seconds one row of work takes on ``device`` here: the slope between a small and a large
    product (so the fixed cost of running an op is not counted), alternated, median of
    ``repeats`` after a few untimed ones (about 0.4 s in all; the large product takes some
    8 ms)."""
    small, large = 1024, 16 * BLOCK
    graph = tf.Graph()
    with graph.as_default(), tf.device(device):
        rows = tf.compat.v1.placeholder(tf.int32, [])
        total = work_op(tf, rows)
    with tf.compat.v1.Session(graph=graph, config=config) as session:
        for _ in range(5):  # warm-up: the first products run slower
            session.run(total, {rows: large})
        slopes = []
        for _ in range(repeats):
            times = [_time(session, total, {rows: count}) for count in (small, large)]
            slopes.append((times[1] - times[0]) / (large - small))
    return max(statistics.median(slopes), 1e-9)


def _time(session: Any, fetches: Any, feeds: dict[Any, Any]) -> float:
    started = time.perf_counter()
    session.run(fetches, feeds)
    return time.perf_counter() - started


def measure_bandwidth(tf: Any, config: Any, gpu: str, repeats: int = 15) -> float:
    """Bytes per second of a copy from the host to ``gpu``: a variable on the CPU summed on
    the GPU, which copies it there at every run; the slope between a small and a large one
    (so the fixed cost of a run is not counted), alternated, median of ``repeats``."""
    small, large = 1 << 20, 16 << 20  # float32 numbers: 4 MiB and 64 MiB
    graph = tf.Graph()
    sums = {}
    with graph.as_default():
        for count in (small, large):
            with tf.device("/device:CPU:0"):
                variable = tf.Variable(tf.ones([count], tf.float32), name=f"copied_{count}")
            with tf.device(gpu):
                sums[count] = tf.reduce_sum(tf.identity(variable.read_value()))
        init = tf.compat.v1.global_variables_initializer()
    with tf.compat.v1.Session(graph=graph, config=config) as session:
        session.run(init)
        for _ in range(3):
            session.run(list(sums.values()))
        slopes = []
        for _ in range(repeats):
            times = [_time(session, sums[count], {}) for count in (small, large)]
            slopes.append((times[1] - times[0]) / ((large - small) * 4))
    return 1 / max(statistics.median(slopes), 1e-15)
