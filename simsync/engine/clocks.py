"""Stale-synchronous parallel in the engine: clocks of bounded clients, and who waits.

A client with a ``staleness_bound`` s may start its run k only once every bounded client has
finished k - s runs. Waiting clients are kept by the run count they need, and the slowest
client's count is kept up to date in O(1) per finished run, so a thousand workers cost no more
per run than four.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import simpy

from simsync.ir import Client

__all__ = ["Clocks"]


class Clocks:
    """Stale-synchronous parallel: how many runs each bounded client has finished, and the
    clients waiting for the slowest one to catch up."""

    def __init__(self, env: simpy.Environment, clients: list[Client]) -> None:
        self.env = env
        self.finished = {c.name: 0 for c in clients}
        self.at = {0: len(clients)} if clients else {}  # runs finished -> how many clients
        self.slowest = 0
        self.waiting: dict[int, list[tuple[str, simpy.Event]]] = {}
        #: the clients waiting now (not those woken, whose wake is due): run and runs needed
        self.blocked: dict[str, tuple[int, int]] = {}
        self.released = False

    def wait(self, client: str, step: int, needed: int) -> Generator[simpy.Event, Any, None]:
        """Before ``client``'s run ``step``: until every bounded client has finished ``needed``
        runs."""
        if needed <= self.slowest or self.released:
            return
        self.blocked[client] = (step, needed)
        event = self.env.event()
        self.waiting.setdefault(needed, []).append((client, event))
        yield event

    def tick(self, client: str) -> None:
        """``client`` has finished one more run: wake whoever the slowest's progress frees."""
        runs = self.finished[client]
        self.finished[client] = runs + 1
        self.at[runs] -= 1
        self.at[runs + 1] = self.at.get(runs + 1, 0) + 1
        while self.at.get(self.slowest, 0) == 0:
            del self.at[self.slowest]
            self.slowest += 1
            for client, event in self.waiting.pop(self.slowest, []):
                del self.blocked[client]
                event.succeed()

    def release(self) -> None:
        """Wake every waiting client, now and later (the runs are all handed out: they will
        stop)."""
        self.released = True
        for events in self.waiting.values():
            for client, event in events:
                del self.blocked[client]
                event.succeed()
        self.waiting.clear()

    def explain(self, stuck: list[str]) -> str | None:
        """Why the blocked clients can never go on, or None if none waits for the bound."""
        blocked = [c for c in stuck if c in self.blocked]
        if not blocked:
            return None
        slowest = min(self.finished, key=lambda c: self.finished[c])
        client = blocked[0]
        step, needed = self.blocked[client]
        return (
            f"deadlock: {client} can never start run {step}: with staleness_bound = "
            f"{step - needed} every bounded client must first finish {needed} runs, but "
            f"{slowest} stopped after {self.finished[slowest]}; give every client as many "
            f"steps, or raise the bound"
        )
