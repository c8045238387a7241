"""A contest of scenarios (``simsync compare``, a lesson's race): each run's loss curve and
when it reached the target loss.

Plain data, filled by :func:`simsync.simulation.contest` and drawn by :mod:`simsync.viz.curves`.
(A *race* in simsync's code is what TensorFlow's threads do: updates racing on a variable.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Contest", "Entrant"]


@dataclass(frozen=True)
class Entrant:
    """One scenario's run in the contest."""

    name: str
    mode: str | None  # as the graph's maker said; None for a graph of no pattern
    curve: list[tuple[float, float]]  # (seconds, loss)
    reached: float | None  # when it first got to the target loss
    updates: int
    staleness: float | None  # mean, of the applied updates; None: one client updates
    stalest: int | None = None  # the most stale applied update; None as above

    @property
    def final_loss(self) -> float:
        return self.curve[-1][1]

    @property
    def finished(self) -> float:
        return self.curve[-1][0]

    @property
    def label(self) -> str:
        """The run's name and mode (and mean staleness, where updates can be stale)."""
        said = [self.mode] if self.mode is not None else []
        if self.staleness is not None:
            said.append(f"staleness {self.staleness:.2f}")
        return f"{self.name} ({', '.join(said)})" if said else self.name

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.name,
            "mode": self.mode,
            "final_loss": self.final_loss,
            "reached_target_seconds": self.reached,
            "finished_seconds": self.finished,
            "updates": self.updates,
            "staleness_mean": self.staleness,
            "staleness_max": self.stalest,
        }


@dataclass(frozen=True)
class Contest:
    """The entrants, and the target loss they race to (the worst of their final losses)."""

    target: float
    entrants: list[Entrant]

    @property
    def winner(self) -> int | None:
        """The index of the first entrant to reach the target (on a tie, the first listed)."""
        arrived = [i for i, r in enumerate(self.entrants) if r.reached is not None]
        return min(arrived, key=lambda i: self.entrants[i].reached or 0.0, default=None)

    @property
    def clear_winner(self) -> int | None:
        """The first to reach the target, if no other reached it at the same time: a tie (the
        same scenario twice, say) has no winner to mark or to ask about.

        >>> a = Entrant("a", "sync", [(0.01, 1.0)], 0.01, 1, None)
        >>> b = Entrant("b", "async", [(0.02, 1.0)], 0.02, 2, 0.0)
        >>> Contest(1.0, [b, a]).clear_winner, Contest(1.0, [a, a]).clear_winner
        (1, None)
        """
        first = self.winner
        if first is None:
            return None
        when = self.entrants[first].reached
        tied = sum(1 for entrant in self.entrants if entrant.reached == when)
        return first if tied == 1 else None

    def to_json(self) -> dict[str, Any]:
        return {"target_loss": self.target, "runs": [r.to_json() for r in self.entrants]}
