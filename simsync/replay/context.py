"""What the replay keeps while it walks a trace: the values of the runs being evaluated, and
the versions of every variable some run still has to read.

:class:`RunContext` is what a kind's numpy rule may ask of its run
(:class:`~simsync.kinds.contract.RunLike`): its batch, the variables at the versions it read,
the gradients a take averaged.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import numpy as np

from simsync.kinds.contract import OpLike
from simsync.numerics import Batch, ModelSpec

__all__ = ["ReplayLike", "RunContext", "RunKey", "RunOp", "Versions"]

RunKey = tuple[str, int]  # (client, step)
RunOp = tuple[RunKey, str]  # (run, op)


class ReplayLike(Protocol):
    """What a run's context asks of the replay that keeps it
    (:func:`simsync.replay.replay`)."""

    @property
    def spec(self) -> ModelSpec: ...

    # per variable: the model parameter it holds, whether it is trained, its versions kept
    @property
    def parameter_of(self) -> Mapping[str, str]: ...

    @property
    def trainable(self) -> Mapping[str, bool]: ...

    @property
    def state(self) -> Mapping[str, Versions]: ...

    # per client: its index, and the position of each tower's batch among its run's batches
    @property
    def index(self) -> Mapping[str, int]: ...

    @property
    def positions(self) -> Mapping[str, Mapping[int, int]]: ...

    @property
    def batches_of(self) -> Callable[[int, int, int], list[Batch]]: ...

    def parameters_read(self, run: RunKey, op: OpLike) -> dict[str, np.ndarray]: ...

    def taken(self, run_op: RunOp) -> list[Any]: ...


class RunContext:
    """What a kind's numpy rule may ask of the run it is evaluated in; the replay keeps the
    run's values here (by op) and its batches, until the run is done with."""

    __slots__ = ("batches", "client", "key", "replay", "step", "values")

    def __init__(self, replay: ReplayLike, key: RunKey) -> None:
        self.replay, self.key = replay, key
        self.client, self.step = key
        self.values: dict[str, Any] = {}
        self.batches: list[Batch] | None = None

    @property
    def spec(self) -> ModelSpec:
        return self.replay.spec

    def parameter(self, variable: str) -> str:
        """The model parameter ``variable`` holds."""
        return self.replay.parameter_of[variable]

    def trainable(self, variable: str) -> bool:
        return self.replay.trainable[variable]

    def read_parameters(self, op: OpLike) -> dict[str, np.ndarray]:
        """The variables the read ``op`` of this run read that hold numbers (not counters), at
        the versions it saw, by model parameter: one dict shared by every run that read the
        same versions."""
        return self.replay.parameters_read(self.key, op)

    def current(self, variable: str) -> np.ndarray:
        """The variable's latest value (an apply lands on it)."""
        state = self.replay.state[variable]
        return state.values[state.version]

    def batch(self, tower: int) -> Batch:
        """This run's batch for ``tower``: the run's batches are drawn once, in tower order."""
        replay, positions = self.replay, self.replay.positions[self.client]
        if self.batches is None:
            index = replay.index[self.client]
            self.batches = replay.batches_of(index, self.step, len(positions))
        return self.batches[positions[tower]]

    def taken(self, op: OpLike) -> list[Any]:
        """The gradients the take ``op`` of this run averaged, in the order they were pushed."""
        return self.replay.taken(((self.client, self.step), op.name))


class Versions:
    """A variable's versions the replay still needs: the latest, and those some run has yet
    to read (counted by version: a version goes once its last reader is done with it)."""

    __slots__ = ("readers", "values", "version")

    def __init__(self, value: np.ndarray) -> None:
        self.version = 0
        self.values = {0: value}
        self.readers: Counter[int] = Counter()

    def release(self, version: int) -> None:
        self.readers[version] -= 1
        if self.readers[version] <= 0 and version != self.version:
            self.values.pop(version, None)
