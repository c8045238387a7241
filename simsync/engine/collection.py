"""Python's cyclic garbage collector, paused while a trace is built or read.

A simulation's trace is hundreds of thousands of small records (named tuples) that make no
reference cycles. While the engine builds it, or a summary reads it, every collection the
allocations set off would scan those records again, a full one all of them, and free nothing:
reference counting frees them anyway. So both run with the collector paused.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_paused"]


@contextmanager
def collector_paused() -> Iterator[None]:
    """Run the block with the cyclic collector off; on as before, after it.

    >>> import gc
    >>> with collector_paused():
    ...     gc.isenabled()
    False
    >>> gc.isenabled()
    True
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
