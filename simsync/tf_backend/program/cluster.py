"""A program written for a cluster, run as its cluster: one process per task (no TensorFlow
here; the tasks run in the sandbox, :mod:`simsync.tf_backend.program.child`).

``--tasks ps=1,worker=2`` names the cluster's jobs and how many tasks each has
(:func:`parse_tasks`). Every task runs the program in a sandbox of its own, and all of them
in one private network namespace that has only a loopback interface (:func:`private_network`,
as simsync's own clusters run: :mod:`simsync.tf_backend.cluster.namespace`), so nothing the
servers listen on can be reached from outside. Each task is told who it is the two ways
such programs read it (:func:`task_says`): ``TF_CONFIG`` (``{"cluster": {...}, "task":
{"type": "worker", "index": 1}}``) and, unless ``flags=False``, the TF1 flags after the
program's own command line: ``--job_name``, ``--task_index`` and ``--<job>_hosts`` for each
job (``--ps_hosts``, ``--worker_hosts``).

The tasks of every job but ``ps`` train: each reaches its training loop, waits there until
every one is at its own (their steps are timed together), says its graph and its costs,
then trains on as written (the others may wait for its gradients) until all of
them have said theirs; the parameter servers only serve. Their graphs are then joined into
one (:func:`join`): the state the tasks share by name on one device (variables, queues,
accumulators, which between-graph replication makes in every task's graph) is one op; every
other op is that task's own, under a name scope of its own, ``worker_<k>`` for the k-th
task that trains (the towers, :mod:`simsync.tf_backend.program.towers`), and so is its
loop (a client) and its costs. A TensorFlow 2 program's workers whose steps meet at
collectives (a ``MultiWorkerMirroredStrategy``'s all-reduces, matched by their keys across
the tasks) run in lockstep: their loops are one client (:data:`LOCKSTEP`), and only the
first worker's steps are traced (:func:`traces`).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from simsync.errors import UsageError
from simsync.tf_backend.cluster.namespace import namespace_available
from simsync.tf_backend.program.collectives import join_collectives

__all__ = [
    "FIRST_PORT",
    "MAX_TASKS",
    "PARAMETER_SERVERS",
    "SHARED",
    "join",
    "parse_tasks",
    "private_network",
    "task_says",
    "traces",
    "trainers",
]

#: the most tasks a cluster of ``--tasks`` has
MAX_TASKS = 16
#: the job whose tasks only serve (they never reach a training loop)
PARAMETER_SERVERS = "ps"
#: the port of the first task; the others follow (the network is the cluster's alone)
FIRST_PORT = 2222
#: ops that make state the tasks share by name on one device: one op for all of them
SHARED = frozenset(
    {
        "VarHandleOp", "VariableV2", "Variable", "VarHandleOpV2",
        "FIFOQueueV2", "FIFOQueue", "PaddingFIFOQueueV2", "PaddingFIFOQueue",
        "RandomShuffleQueueV2", "RandomShuffleQueue", "PriorityQueueV2", "PriorityQueue",
        "ConditionalAccumulator", "ResourceConditionalAccumulator",
        "SparseConditionalAccumulator",
    }
)  # fmt: skip
_JOB = re.compile(r"[a-z][a-z0-9_]{0,31}")
#: the code of the process that holds the private network: loopback up, then wait until
#: its standard input closes (the parent ends, or is done)
_HOLD = (
    "import sys\n"
    "from simsync.tf_backend.cluster.namespace import bring_loopback_up\n"
    "bring_loopback_up()\n"
    "print('ready', flush=True)\n"
    "sys.stdin.read()\n"
)


def parse_tasks(text: str) -> dict[str, int]:
    """``ps=1,worker=2`` as ``{"ps": 1, "worker": 2}``; one line when it is not a cluster
    simsync can run (a job of no task, no job that trains, more than :data:`MAX_TASKS`).

    >>> parse_tasks("ps=1,worker=2")
    {'ps': 1, 'worker': 2}
    >>> parse_tasks("chief=1, worker=1")
    {'chief': 1, 'worker': 1}
    """
    jobs: dict[str, int] = {}
    for part in text.split(","):
        job, equals, count = part.strip().partition("=")
        digits = count.strip()
        if not equals or not _JOB.fullmatch(job) or not (digits.isascii() and digits.isdigit()):
            raise UsageError(
                f"--tasks {text!r}: give each job and its number of tasks, such as "
                "ps=1,worker=2 (a job's name in lower case letters, digits and _)"
            )
        if job in jobs:
            raise UsageError(f"--tasks {text!r}: job {job!r} is given twice")
        jobs[job] = int(digits)
    if any(n < 1 for n in jobs.values()) or sum(jobs.values()) > MAX_TASKS:
        raise UsageError(
            f"--tasks {text!r}: every job has at least 1 task, and the cluster at most "
            f"{MAX_TASKS} (each task is a process of TensorFlow on this machine)"
        )
    if not trainers(jobs):
        raise UsageError(
            f"--tasks {text!r}: no job trains (the {PARAMETER_SERVERS} tasks only serve): "
            "add the workers, such as worker=2"
        )
    return jobs


def trainers(jobs: Mapping[str, int]) -> list[tuple[str, int]]:
    """The tasks that train, (job, index), in the order of their jobs: every job's but the
    parameter servers'."""
    return [(job, i) for job, n in jobs.items() if job != PARAMETER_SERVERS for i in range(n)]


def traces(tf_config: Mapping[str, Any]) -> bool:
    """Whether the task ``tf_config`` names (``TF_CONFIG``'s form) is the first that trains
    (:func:`trainers`), the one task of a cluster whose TensorFlow 2 step is traced by
    TensorFlow's profiler; the others run theirs untraced alongside, as many of them. With
    the profiler on in every worker of a ``MultiWorkerMirroredStrategy``, a worker that was
    not the first crashed in 3 of 12 cross-checks' runs here (``munmap_chunk(): invalid
    pointer``, SIGABRT, SIGSEGV; its peer's all-reduce then aborted), in none of 12 with
    the first alone tracing. The workers run one graph: the others' ops cost what the
    first's copies do (:func:`join`).

    >>> config = {"cluster": {"ps": ["a"], "worker": ["b", "c"]}}
    >>> [traces({**config, "task": {"type": "worker", "index": i}}) for i in (0, 1)]
    [True, False]
    """
    jobs = {job: len(addresses) for job, addresses in tf_config["cluster"].items()}
    task = tf_config["task"]
    return trainers(jobs)[:1] == [(task["type"], int(task.get("index", 0)))]


def hosts(jobs: Mapping[str, int]) -> dict[str, list[str]]:
    """Each job's tasks' addresses on the private network's loopback.

    >>> hosts({"ps": 1, "worker": 2})
    {'ps': ['127.0.0.1:2222'], 'worker': ['127.0.0.1:2223', '127.0.0.1:2224']}
    """
    port = FIRST_PORT
    found: dict[str, list[str]] = {}
    for job, count in jobs.items():
        found[job] = [f"127.0.0.1:{port + i}" for i in range(count)]
        port += count
    return found


def task_says(
    jobs: Mapping[str, int], job: str, index: int, flags: bool = True
) -> tuple[list[str], dict[str, Any]]:
    """What tells task ``index`` of ``job`` who it is: the TF1 flags to put after the
    program's command line (none without ``flags``), and ``TF_CONFIG``.

    >>> args, config = task_says({"ps": 1, "worker": 2}, "worker", 1)
    >>> args
    ['--job_name', 'worker', '--task_index', '1', '--ps_hosts', '127.0.0.1:2222', \
'--worker_hosts', '127.0.0.1:2223,127.0.0.1:2224']
    >>> config["task"]
    {'type': 'worker', 'index': 1}
    """
    addresses = hosts(jobs)
    args = []
    if flags:
        args = ["--job_name", job, "--task_index", str(index)]
        for name, listed in addresses.items():
            args += [f"--{name}_hosts", ",".join(listed)]
    return args, {"cluster": addresses, "task": {"type": job, "index": index}}


@contextlib.contextmanager
def private_network() -> Iterator[tuple[str, ...]]:
    """A private network namespace, loopback only, held while inside: the command that
    enters it (``nsenter``); one line when this machine cannot make one."""
    why = namespace_available()
    if why is None and shutil.which("nsenter") is None:
        why = "the nsenter command (util-linux) is not installed"
    if why is not None:
        raise UsageError(
            "--tasks runs the cluster's tasks in a private network of their own, which this "
            f"machine cannot make ({why}): a TensorFlow server would listen on every "
            "interface, with no password"
        )
    holder = subprocess.Popen(
        ["unshare", "--net", "--map-root-user", sys.executable, "-I", "-c", _HOLD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        start_new_session=True,
    )
    try:
        assert holder.stdout is not None
        if holder.stdout.readline().strip() != b"ready":
            raise UsageError("the cluster's private network could not be made")
        yield (
            "nsenter",
            f"--target={holder.pid}",
            "--user",
            "--net",
            "--preserve-credentials",
            "--",
        )
    finally:
        holder.kill()
        holder.wait()


def join(answers: Sequence[Mapping[str, Any]], program: str) -> dict[str, Any]:
    """The graph, machine and profile (or what a cross-check's run measured) of a cluster
    whose tasks that train said ``answers`` (each a checked ``{"graph", "machine",
    "profile"}``, or ``"measured"``, in :func:`trainers`' order), as one program's: see the
    module's docstring.

    >>> def said(device):
    ...     t = lambda op: {"op": op, "slot": 0, "shape": [], "dtype": "float32", "bytes": 4}
    ...     ops = [{"name": "w", "type": "VarHandleOp", "device": "/job:ps/task:0",
    ...             "colocate": [], "inputs": [], "control": [], "made_in": None},
    ...            {"name": "apply", "type": "ResourceApplyGradientDescent",
    ...             "device": "/job:ps/task:0", "colocate": ["w"], "inputs": [t("w")],
    ...             "control": [], "made_in": ["train.py", 9]}]
    ...     graph = {"program": "train.py", "order": ["w", "apply"], "ops": ops,
    ...              "clients": [{"thread": "MainThread", "name": "main",
    ...                           "fetches": ["apply"]}], "trainable": ["w"],
    ...              "queue_runners": [], "queue_sizes": {}, "logical_devices": False,
    ...              "collections": {"update_ops": [], "train_op": [], "global_step": []},
    ...              "cores": 2, "runs_before_loop": 1}
    ...     profile = {"ops": {"apply": {"device": "/job:ps/task:0", "seconds": 1e-5}},
    ...                "tensors": {}, "clients": {"MainThread": {"wall": 1e-3}}, "steps": 5}
    ...     return {"graph": graph, "machine": {"cores": 2}, "profile": profile}
    >>> joined = join([said(0), said(1)], "train.py")
    >>> [op["name"] for op in joined["graph"]["ops"]]
    ['w', 'worker_0/apply', 'worker_1/apply']
    >>> [(c["thread"], c["name"], c["fetches"]) for c in joined["graph"]["clients"]]
    [('worker_0', 'worker_0', ['worker_0/apply']), ('worker_1', 'worker_1', ['worker_1/apply'])]
    >>> sorted(joined["profile"]["ops"]), sorted(joined["profile"]["clients"])
    (['worker_0/apply', 'worker_1/apply'], ['worker_0', 'worker_1'])
    """
    ops: dict[str, Any] = {}
    order: list[str] = []
    clients, runners, trainable, sizes = [], [], [], {}
    collections: dict[str, list[str]] = {"update_ops": [], "train_op": [], "global_step": []}
    profile: dict[str, Any] = {"ops": {}, "tensors": {}, "shapes": {}, "clients": {}}
    measured: dict[str, Any] = {}
    for k, answer in enumerate(answers):
        graph, scope = answer["graph"], f"worker_{k}"
        by_name = {op["name"]: op for op in graph["ops"]}
        shared = {n for n, op in by_name.items() if op["type"] in SHARED}

        def named(name: str, shared: set[str] = shared, scope: str = scope) -> str:
            return name if name in shared else f"{scope}/{name}"

        def tensor(name: str, named: Any = named) -> str:  # "op:slot"
            op, colon, slot = name.rpartition(":")
            return f"{named(op)}:{slot}" if colon else named(name)

        for name in graph["order"]:
            new = named(name)
            if new in ops:
                continue  # a shared op another task made too: one
            op = dict(by_name[name])
            op["name"] = new
            op["inputs"] = [{**t, "op": named(t["op"])} for t in op["inputs"]]
            op["control"] = [named(c) for c in op["control"]]
            op["colocate"] = [named(c) for c in op["colocate"]]
            ops[new] = op
            order.append(new)
        for client in graph["clients"]:
            thread = scope if len(graph["clients"]) == 1 else f"{scope}:{client['thread']}"
            clients.append(
                {
                    **client,
                    "thread": thread,
                    "name": thread,
                    "fetches": [named(f) for f in client["fetches"]],
                    "feeds": {tensor(t): s for t, s in client.get("feeds", {}).items()},
                }
            )
            cost = answer.get("profile", {}).get("clients", {}).get(client["thread"])
            if cost is not None:  # timed while the other tasks ran theirs: together
                profile["clients"][thread] = {**cost, "together": True}
        for runner in graph["queue_runners"]:
            runners.append(
                {
                    "queue": named(runner["queue"]),
                    "threads": runner["threads"],
                    "enqueue": [named(e) for e in runner["enqueue"]],
                    "enqueue_ops": [named(e) for e in runner["enqueue_ops"]],
                }
            )
        trainable += [named(v) for v in graph["trainable"] if named(v) not in trainable]
        sizes.update({named(q): n for q, n in graph["queue_sizes"].items()})
        for key, listed in graph["collections"].items():
            collections[key] += [named(n) for n in listed if named(n) not in collections[key]]
        costs = answer.get("profile")
        if costs is not None and not costs["ops"] and k:  # not traced (see traces): the
            # first task's costs of the same ops, on this task's devices
            first = answers[0]["profile"]
            costs = {
                **first,
                "ops": {
                    n: {**c, "device": by_name[n]["device"]}
                    for n, c in first["ops"].items()
                    if n in by_name
                },
            }
        if costs is not None:
            profile["ops"].update({named(n): c for n, c in costs["ops"].items()})
            profile["tensors"].update({tensor(t): b for t, b in costs["tensors"].items()})
            shapes = costs.get("shapes", {})
            profile["shapes"].update({tensor(t): s for t, s in shapes.items()})
            profile["steps"] = costs["steps"]
        ran = answer.get("measured")
        if ran is not None:  # a cross-check's run: each client's steps, its ops renamed
            for thread, client in ran["clients"].items():
                own = scope if len(graph["clients"]) == 1 else f"{scope}:{thread}"
                steps = [[(named(r[0]), *r[1:]) for r in step] for step in client["steps"]]
                measured[own] = {**client, "steps": steps, "together": True}
    if _join_across(list(ops.values())):  # workers that meet at every step's all-reduces
        clients, profile["clients"], measured = _in_lockstep(clients, profile["clients"], measured)
    first = answers[0]["graph"]
    joined = {
        "program": program,
        "order": order,
        "ops": list(ops.values()),
        "clients": clients,
        "trainable": trainable,
        "queue_runners": runners,
        "queue_sizes": sizes,
        "collections": collections,
        "logical_devices": first["logical_devices"],
        "cores": first["cores"],
        "runs_before_loop": max(a["graph"]["runs_before_loop"] for a in answers),
    }
    said: dict[str, Any] = {"graph": joined, "machine": answers[0]["machine"]}
    if all("profile" in answer for answer in answers):
        said["profile"] = profile
    if all("measured" in answer for answer in answers):
        said["measured"] = {"clients": measured}
    return said


#: the one client of a cluster whose workers meet at every step (:func:`_in_lockstep`)
LOCKSTEP = "main"


def _join_across(ops: list[dict[str, Any]]) -> bool:
    """Join the collectives the tasks' ops make together (a ``MultiWorkerMirroredStrategy``'s
    all-reduces, one op in each worker's step, met by their keys: ``"collective"``), each
    op taking every other's data as well
    (:func:`~simsync.tf_backend.program.collectives.join_collectives`); whether there were
    any.

    >>> t = lambda op: {"op": op, "slot": 0, "shape": [], "dtype": "float32", "bytes": 4}
    >>> ops = [{"name": f"worker_{k}/reduce", "device": f"/job:worker/task:{k}",
    ...         "inputs": [t(f"worker_{k}/grad")], "collective": "k"} for k in (0, 1)]
    >>> _join_across(ops), [i["op"] for i in ops[0]["inputs"]]
    (True, ['worker_0/grad', 'worker_1/grad'])
    """
    by_key: dict[str, list[str]] = {}
    for op in ops:
        if op.get("collective") is not None:
            by_key.setdefault(op["collective"], []).append(op["name"])
    across = [names for names in by_key.values() if len({n.partition("/")[0] for n in names}) > 1]
    join_collectives(ops, across)
    return bool(across)


def _in_lockstep(
    clients: list[dict[str, Any]], costs: dict[str, Any], measured: dict[str, Any]
) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """The tasks' loops as one client (:data:`LOCKSTEP`), their clients' costs and
    cross-check's measurings as its: workers whose every step meets the others' at its
    all-reduces run their steps together, step k with step k, as the replicas of one
    process do; a client each would have each run the others' ops as its own. Its cost per
    run is the first worker's (timed while the others ran theirs); a measured step, every
    worker's k-th."""
    one = {
        "thread": LOCKSTEP,
        "name": LOCKSTEP,
        "fetches": [f for client in clients for f in client["fetches"]],
        "feeds": {t: s for client in clients for t, s in client.get("feeds", {}).items()},
    }
    first = next((costs[c["thread"]] for c in clients if c["thread"] in costs), None)
    together: dict[str, Any] = {}
    if measured:  # the steps of the tasks that traced theirs (see traces)
        runs = [measured[c["thread"]] for c in clients if c["thread"] in measured]
        traced = [run["steps"] for run in runs if run["steps"]]
        steps = [
            [record for one in traced for record in one[k]]
            for k in range(min((len(one) for one in traced), default=0))
        ]
        together[LOCKSTEP] = {**runs[0], "steps": steps}
    return [one], ({} if first is None else {LOCKSTEP: first}), together
