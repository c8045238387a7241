"""Python's cyclic garbage collector, paused while a trace is built or read.

A simulation's trace is hundreds of thousands of small records (named tuples) that make no
reference cycles. While the engine builds it, or a summary reads it, every collection the
allocations set off would scan those records again, a full one all of them, and free nothing:
reference counting frees them anyway. So both run with the collector paused.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import TypeVar

__all__ = ["with_collector_paused"]

A = TypeVar("A")
T = TypeVar("T")


def with_collector_paused(function: Callable[[A], T], argument: A) -> T:
    """``function(argument)`` with the cyclic collector off; on as before, after it.

    It allocates nothing before pausing the collector (no context manager, no packed
    arguments): a collection that earlier garbage is due for does not land inside ``function``
    but waits until after it, when a trace read and dropped may be freed already.

    >>> import gc
    >>> with_collector_paused(lambda _: gc.isenabled(), None), gc.isenabled()
    (False, True)
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        return function(argument)
    finally:
        if collecting:
            gc.enable()
