"""Towers, found from an imported graph's names and devices (no TensorFlow here).

A tower is what the program built once per device in its tower loop. The rule, in order:

1. **Name scope.** The top-level scopes that are one prefix and an index (``tower_0``,
   ``tower_1``, ...; ``gpu0``, ``gpu1``; ``replica_0``) with the indices exactly ``0 .. N-1``,
   ``N >= 2``, each holding at least :data:`MIN_TOWER_OPS` ops. Where several prefixes
   qualify, the one holding the most ops. (``ExpandDims``, ``ExpandDims_1``, ... do not: TF's
   own numbering of repeated names starts without an index.) Not when the GPUs run more than
   :data:`MOST_OUTSIDE` times as many ops as those scopes hold: then the scopes are a few
   ops named by index in the loop (``tf.random.normal(name="images_%d" % i)``), not the
   towers, and the devices say more.
2. **Device.** Otherwise, when ops run on two or more ``/gpu:i``, each GPU's ops are a tower;
   with no GPU, when ops run on two or more ``/cpu:i`` (a ``tf.distribute`` strategy's
   replicas on logical CPUs), each CPU's.
3. Otherwise there is one tower or none: the graph is simulated as it is, with no tower.

>>> found = find_towers(["tower_0/a", "tower_0/b", "tower_0/c", "tower_1/a", "tower_1/b",
...                      "tower_1/c", "ExpandDims", "ExpandDims_1/dim", "concat"], {})
>>> found.count, found.rule, found.of("tower_1/b"), found.of("concat")
(2, 'name scope tower_<i>', 1, None)
>>> find_towers(["a", "b"], {"a": "/gpu:0", "b": "/gpu:1"}).rule
'device /gpu:<i>'
>>> find_towers(["a", "b", "c"], {"a": "/cpu:0", "b": "/cpu:1", "c": "/cpu:1"}).of("c")
1
>>> loop = [f"images_{i}/{op}" for i in (0, 1) for op in ("shape", "normal", "mul")]
>>> loop += [f"{op}_{i}" for i in (0, 1) for op in ("MatMul", "Relu", "Softmax", "Mean",
...          "grad_MatMul", "grad_Relu", "Apply")]
>>> find_towers(loop, {n: f"/gpu:{n.split('_')[-1][0]}" for n in loop}).rule
'device /gpu:<i>'
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

__all__ = ["MIN_TOWER_OPS", "Towers", "find_towers"]

#: ops a scope must hold to be a tower
MIN_TOWER_OPS = 3
#: the scopes are not the towers when the GPUs run more than so many times their ops
MOST_OUTSIDE = 2
_INDEXED = re.compile(r"(.*?)(\d+)")
_GPU = re.compile(r"/gpu:(\d+)$")
_CPU = re.compile(r"/cpu:(\d+)$")


@dataclass(frozen=True)
class Towers:
    """How many towers, by which rule, and each op's tower (None: shared)."""

    count: int
    rule: str
    prefix: str | None = None
    towers: dict[str, int] = field(default_factory=dict)

    def of(self, name: str) -> int | None:
        """The tower of op ``name``, or None."""
        return self.towers.get(name)

    def scope(self, tower: int) -> str | None:
        """Tower ``tower``'s name scope (``tower_3``), when towers are found by scope."""
        return None if self.prefix is None else f"{self.prefix}{tower}"


def find_towers(names: list[str], devices: dict[str, str]) -> Towers:
    """The towers of the ops ``names`` placed on ``devices`` (see the module's docstring)."""
    tops = Counter(name.split("/", 1)[0] for name in names if "/" in name)
    scopes: dict[str, dict[int, int]] = {}
    for top, count in tops.items():
        found = _INDEXED.fullmatch(top)
        if found is not None and count >= MIN_TOWER_OPS:
            scopes.setdefault(found.group(1), {})[int(found.group(2))] = count
    qualified = [
        (sum(indices.values()), prefix)
        for prefix, indices in scopes.items()
        if len(indices) >= 2 and set(indices) == set(range(len(indices)))
    ]
    gpus = {name: _GPU.match(device) for name, device in devices.items()}
    indices = {int(m.group(1)) for m in gpus.values() if m is not None}
    on_gpus = sum(1 for name in names if gpus.get(name) is not None)
    if qualified and len(indices) >= 2 and on_gpus > MOST_OUTSIDE * max(qualified)[0]:
        qualified = []  # a few ops named by index: the devices say more
    if qualified:
        _, prefix = max(qualified)
        towers = {}
        for name in names:
            top, slash, _ = name.partition("/")
            found = _INDEXED.fullmatch(top)
            if slash and found is not None and found.group(1) == prefix:
                index = int(found.group(2))
                if index in scopes[prefix]:
                    towers[name] = index
        return Towers(len(scopes[prefix]), f"name scope {prefix}<i>", prefix, towers)
    if len(indices) >= 2:
        return _by_device(gpus, "gpu")
    cpus = {name: _CPU.match(device) for name, device in devices.items()}
    if not indices and len({int(m.group(1)) for m in cpus.values() if m is not None}) >= 2:
        return _by_device(cpus, "cpu")  # a strategy's replicas on logical CPUs
    return Towers(0, "none: no tower scopes, at most one GPU")


def _by_device(found: dict[str, re.Match[str] | None], kind: str) -> Towers:
    """Each device's ops a tower, in the order of the devices' numbers."""
    indices = {int(m.group(1)) for m in found.values() if m is not None}
    order = {index: rank for rank, index in enumerate(sorted(indices))}
    towers = {name: order[int(m.group(1))] for name, m in found.items() if m is not None}
    return Towers(len(indices), f"device /{kind}:<i>", None, towers)
