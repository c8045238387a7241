"""The findings a cross-check reads off the trace of towers of one client, by name: whether
they ran side by side, who arrived last at each sync point (overall, and step by step against
the simulation of the same steps), and each variant the interleaved
rounds compare the step with. A lesson's verify step chooses the ones it shows by these names
(checked as the lesson loads, so this module imports nothing)."""

from __future__ import annotations

__all__ = [
    "FINDINGS",
    "LAST",
    "LAST_EACH_STEP",
    "NO_SLOW_TOWER",
    "ONE_TOWER_WORKING",
    "SIDE_BY_SIDE",
]

SIDE_BY_SIDE = "side by side"
LAST = "who arrived last"
#: who came last in each step against the simulation of the same random compute times
LAST_EACH_STEP = "who came last, step by step"
#: the variants: several towers against one tower working alone; unequal speeds against all
#: at the fastest
ONE_TOWER_WORKING = "one tower working"
NO_SLOW_TOWER = "no slow tower"
FINDINGS = (SIDE_BY_SIDE, LAST, LAST_EACH_STEP, ONE_TOWER_WORKING, NO_SLOW_TOWER)
