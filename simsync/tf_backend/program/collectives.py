"""TensorFlow's collective ops (all-reduces and their kin), which meet by their keys, not by
an edge of the graph: each replica's op of one collective ends when the last replica's data
has arrived. In the graph data each such op takes every other op's data of its collective as
well (:func:`join_collectives`), so that the simulator's one rule for sync points finds it:
within one process (a ``MirroredStrategy``'s replicas), and across the processes of a
cluster's tasks (a ``MultiWorkerMirroredStrategy``'s workers,
:func:`~simsync.tf_backend.program.cluster.join`), where each op carries its key
(``"collective"``). No TensorFlow here."""

from __future__ import annotations

from typing import Any

from simsync.ir import natural_key

__all__ = ["COLLECTIVES", "NCCL", "join_collectives"]

#: TensorFlow's collective ops: the ops of one meet by their keys, one on each device
COLLECTIVES = frozenset(
    {
        *("CollectiveReduce", "CollectiveReduceV2", "CollectiveReduceV3", "CollectiveGather"),
        *("CollectiveGatherV2", "CollectiveAllToAllV2", "CollectiveAllToAllV3"),
        *("CollectiveReduceScatterV2", "CollectiveBcastSendV2", "CollectiveBcastRecvV2"),
    }
)
#: ... and NCCL's, which meet by a shared name
NCCL = frozenset({"NcclAllReduce", "NcclReduce", "NcclBroadcast"})


def join_collectives(ops: list[dict[str, Any]], groups: list[list[str]]) -> None:
    """Each op of a collective takes the data of every other op of it as well: it ends when
    the last replica's has arrived, as the collective does.

    Keys read when the step was traced can be alike for collectives that differ when it
    runs (a synchronized batch norm's statistics and their gradients, each all-reduced with
    an instance key counted at run time): where a group holds several ops of one device,
    the replicas' collectives are matched in the order they were made, which their names
    keep (the strategy makes each collective's ops one replica after another:
    ``CollectiveReduceV2`` and ``_1``, then ``_2`` and ``_3``), the first of each device's
    together, and so on."""
    by_name = {op["name"]: op for op in ops}
    for group in groups:
        for names in _one_per_device(group, by_name):
            _join(by_name, names)


def _one_per_device(names: list[str], by_name: dict[str, dict[str, Any]]) -> list[list[str]]:
    """``names`` split into collectives of one op per device, matched in the order their
    names say they were made (none when the devices hold unlike numbers of them, or all
    are on one device: a collective of one replica waits for nobody).

    >>> ops = {n: {"device": d} for n, d in [("r", "/cpu:0"), ("r_1", "/cpu:1"),
    ...                                      ("r_2", "/cpu:0"), ("r_3", "/cpu:1")]}
    >>> _one_per_device(["r_3", "r_2", "r", "r_1"], ops)
    [['r', 'r_1'], ['r_2', 'r_3']]
    """
    known = sorted((n for n in names if n in by_name), key=natural_key)
    per_device: dict[str, list[str]] = {}
    for name in known:
        per_device.setdefault(str(by_name[name].get("device")), []).append(name)
    counts = {len(members) for members in per_device.values()}
    if len(counts) != 1 or len(per_device) < 2:
        return []
    (count,) = counts
    return [[members[i] for members in per_device.values()] for i in range(count)]


def _join(by_name: dict[str, dict[str, Any]], names: list[str]) -> None:
    """The ops ``names``, one collective: each takes every other's data as well."""
    if len(names) < 2:
        return
    members = [by_name[name] for name in names if by_name[name]["inputs"]]
    for member in members:
        member["inputs"] = [
            *member["inputs"],
            *(other["inputs"][0] for other in members if other is not member),
        ]
