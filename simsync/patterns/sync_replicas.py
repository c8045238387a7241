"""SyncReplicasOptimizer: workers push gradients, the chief applies each step once."""

from __future__ import annotations

from simsync.ir import (
    Client,
    Cost,
    Device,
    Graph,
    GraphFacts,
    Link,
    Op,
    Resource,
    Tensor,
    Variable,
    validate,
)
from simsync.numerics import parameter_shapes
from simsync.patterns.towers import add_variables, add_worker_body
from simsync.scenario import Scenario

__all__ = [
    "APPLY_GRADIENTS",
    "ENQUEUE_TOKENS_OP",
    "GLOBAL_STEP",
    "PARAMETER_SERVER",
    "QUEUE_RUNNER",
    "TOKEN_QUEUE",
    "accumulator",
    "accumulator_note",
    "build_sync_replicas",
    "take_op",
    "update_op",
    "worker_device",
]

#: The parameter server's device, where the variables, accumulators and token queue live.
PARAMETER_SERVER = "/job:ps/task:0"
#: The token queue's name, as TensorFlow names it.
TOKEN_QUEUE = "sync_token_q"
#: The variable counting applies.
GLOBAL_STEP = "global_step"
#: The client that runs the chief's queue runner (a thread of worker 0).
QUEUE_RUNNER = "queue_runner"
#: The queue runner's op that moves the global step once every variable is updated.
APPLY_GRADIENTS = "sync_replicas/apply_gradients"
#: The queue runner's op that hands out the next step's tokens.
ENQUEUE_TOKENS_OP = "sync_replicas/enqueue_tokens"


def accumulator(variable: str) -> str:
    """The ConditionalAccumulator of one variable's gradients: ``<variable>/grad_accum``."""
    return f"{variable}/grad_accum"


def take_op(variable: str) -> str:
    """The queue runner's take of one variable's gradients:
    ``sync_replicas/take_gradients/<variable>``."""
    return f"sync_replicas/take_gradients/{variable}"


def update_op(variable: str) -> str:
    """The queue runner's update of one variable: ``sync_replicas/update/<variable>``."""
    return f"sync_replicas/update/{variable}"


def worker_device(worker: int) -> str:
    """The device of one worker task: ``/job:worker/task:<i>``."""
    return f"/job:worker/task:{worker}"


def build_sync_replicas(scenario: Scenario) -> Graph:
    """Build the graph of ``tf.train.SyncReplicasOptimizer`` with one worker per device.

    The problem: N workers train one model on a parameter server. Each step should apply the
    mean of R gradients *once* (not once per worker), and a worker should not start its next
    step before that apply, yet a straggler should not hold everybody up when R < N (backup
    workers). TensorFlow's answer is state on the parameter server and a protocol in two roles.

    State created (all on ``/job:ps/task:0`` unless said):

    * the model's variables, and ``global_step``;
    * per trainable variable ``v``, a ConditionalAccumulator ``v/grad_accum``;
    * the token queue ``sync_token_q``, holding ``init_tokens`` tokens of value 0 at start
      (``get_init_tokens_op``; default R);
    * per worker ``i``, its ``worker_i/local_step`` on ``/job:worker/task:i``, starting at 0.

    Worker ``i`` (client ``worker_i``, every worker, the chief included), each step:

    1. Read the variables; dequeue a batch; forward and backward on ``/job:worker/task:i``.
    2. Push one gradient per variable to its accumulator, tagged with ``local_step``
       (``worker_i/push_gradients/v``); a tag below the accumulator's step is dropped.
    3. After all its pushes, dequeue one token, blocking while the queue is empty
       (``worker_i/dequeue_token``), and make it the new ``local_step``.
    4. Stop once ``global_step`` has reached ``[run] steps``.

    The chief's queue runner (client ``queue_runner``, a thread looping ``sess.run(sync_op)``
    until the workers are done), each step:

    1. Take R gradients from every accumulator, blocking until each has R (it averages all it
       has, and bumps its step) (``sync_replicas/take_gradients/v``).
    2. Apply each variable's averaged gradient once, as soon as its take is done
       (``sync_replicas/update/v``, the wrapped optimizer's update of ``v``); after all of them,
       increment ``global_step`` (``sync_replicas/apply_gradients``).
    3. Enqueue ``max(N, R)`` tokens carrying the new ``global_step``
       (``sync_replicas/enqueue_tokens``).

    The two roles never share an op: one apply per step, whatever the number of workers.

    Usage:

    >>> from simsync.simulation import simulate
    >>> from simsync.scenario import ClusterConfig, ComputeConfig, Scenario, TrainingConfig
    >>> sim = simulate(Scenario("sr", cluster=ClusterConfig(3), compute=ComputeConfig(mean=0.01),
    ...                         training=TrainingConfig(mode="sync_replicas",
    ...                                                 replicas_to_aggregate=2)).with_run(steps=5))
    >>> steps = [u for u in sim.trace.updates if u.op == "sync_replicas/apply_gradients"]
    >>> len(steps), all(u.applied for u in sim.trace.updates)
    (5, True)
    """
    training, spec = scenario.training, scenario.model
    workers = scenario.towers
    replicas = training.replicas_to_aggregate or workers
    graph = _devices(scenario)
    shapes = parameter_shapes(spec)
    variables = add_variables(graph, shapes, PARAMETER_SERVER, "")
    graph.add_variable(Variable(GLOBAL_STEP, PARAMETER_SERVER, trainable=False))
    init_tokens = replicas if training.init_tokens is None else training.init_tokens
    graph.add_resource(Resource(TOKEN_QUEUE, "queue", PARAMETER_SERVER, initial=init_tokens))
    note = accumulator_note(workers, replicas, init_tokens)
    for variable in variables:
        graph.add_resource(Resource(accumulator(variable), "accumulator", PARAMETER_SERVER,
                                    note=note))  # fmt: skip
    for worker in range(workers):
        _add_worker(graph, scenario, worker, variables)
    if training.chief_queue_runner:
        _add_queue_runner(graph, scenario, variables, replicas, max(workers, replicas))
    graph.facts = GraphFacts(mode="sync_replicas", replicas_to_aggregate=replicas,
                             init_tokens=init_tokens, workers=workers)  # fmt: skip
    validate(graph)
    return graph


#: The host of every task when the scenario puts them all on one machine (``host_cores``).
ONE_MACHINE = "machine"


def _devices(scenario: Scenario) -> Graph:
    """The parameter server on its own host; each worker on a host of its own. With
    ``[cluster] host_cores``, every task is a process of one machine with that many cores
    instead (a cluster on loopback): their ops share its cores."""
    cluster = scenario.cluster
    link = cluster.link
    graph = Graph(name=scenario.name, link=Link(link.bytes_per_second, link.latency))
    shared = cluster.host_cores is not None
    if cluster.host_cores is not None:
        graph.host_cores[ONE_MACHINE] = cluster.host_cores
        graph.core_efficiency[ONE_MACHINE] = cluster.core_efficiency
    ps_host = ONE_MACHINE if shared else "ps"
    graph.add_device(Device(PARAMETER_SERVER, kind="cpu", host=ps_host, concurrent=True))
    for worker, speed in enumerate(cluster.speeds):
        host = ONE_MACHINE if shared else f"worker_{worker}"
        graph.add_device(Device(worker_device(worker), speed=speed, host=host))
    return graph


def accumulator_note(workers: int, replicas: int, init_tokens: int) -> str:
    """What an accumulator needs to make progress, for a deadlock's explanation."""
    if replicas > workers and init_tokens < replicas - workers:
        return (
            f"each step needs {replicas} gradients per variable, but the {workers} workers "
            f"push one each per token and tokens come only after an apply: with "
            f"replicas_to_aggregate ({replicas}) above the workers ({workers}), init_tokens "
            f"must be at least {replicas - workers} (it is {init_tokens})"
        )
    return f"each step needs {replicas} fresh gradients per variable"


def _add_worker(graph: Graph, scenario: Scenario, worker: int, variables: tuple[str, ...]) -> None:
    costs, scope = scenario.costs, f"worker_{worker}"
    device = worker_device(worker)
    local_step = f"{scope}/local_step"
    graph.add_variable(Variable(local_step, device, trainable=False))
    param_bytes = sum(graph.variables[v].nbytes for v in variables)
    graph.add_op(Op(f"{scope}/read_variables", "read", PARAMETER_SERVER,
                    Cost(costs.get("read", 0.0)), tower=worker, reads=variables))  # fmt: skip
    add_worker_body(graph, scenario, scope, device, worker, parameter_bytes=param_bytes)
    graph.add_op(Op(f"{scope}/dequeue_token", "dequeue_token", PARAMETER_SERVER,
                    Cost(costs.get("dequeue_token", 0.0)), tower=worker, writes=(local_step,),
                    resource=TOKEN_QUEUE))  # fmt: skip
    for variable in variables:
        push = f"{scope}/push_gradients/{variable}"
        graph.add_op(Op(push, "push_gradients", PARAMETER_SERVER,
                        Cost(costs.get("push_gradients", 0.0)), tower=worker, reads=(local_step,),
                        resource=accumulator(variable), gradient=variable))  # fmt: skip
        shape = graph.variables[variable].shape
        graph.add_tensor(Tensor(f"{scope}/gradients", push, graph.variables[variable].nbytes,
                                shape=shape, dtype="float32"))  # fmt: skip
        # the dequeue waits for every push: ``control_dependencies(train_ops)``
        graph.add_tensor(Tensor(push, f"{scope}/dequeue_token", control=True))
    graph.add_client(Client(scope, fetches=(f"{scope}/dequeue_token",),
                            overhead=costs.get("session_run", 0.0), until=GLOBAL_STEP))  # fmt: skip


def _add_queue_runner(
    graph: Graph, scenario: Scenario, variables: tuple[str, ...], replicas: int, tokens: int
) -> None:
    costs = scenario.costs
    apply, enqueue = APPLY_GRADIENTS, ENQUEUE_TOKENS_OP
    graph.add_op(Op(apply, "apply", PARAMETER_SERVER, writes=(GLOBAL_STEP,)))
    graph.add_op(Op(enqueue, "enqueue_tokens", PARAMETER_SERVER,
                    Cost(costs.get("enqueue_tokens", 0.0)), reads=(GLOBAL_STEP,),
                    resource=TOKEN_QUEUE, amount=tokens))  # fmt: skip
    for variable in variables:
        take = take_op(variable)
        update = update_op(variable)
        graph.add_op(Op(take, "take_gradients", PARAMETER_SERVER,
                        Cost(costs.get("take_gradients", 0.0)),
                        resource=accumulator(variable), amount=replicas))  # fmt: skip
        graph.add_op(Op(update, "apply", PARAMETER_SERVER, Cost(costs.get("apply", 0.0)),
                        writes=(variable,)))  # fmt: skip
        graph.add_tensor(Tensor(take, update, graph.variables[variable].nbytes))
        graph.add_tensor(Tensor(update, apply, control=True))
    graph.add_tensor(Tensor(apply, enqueue, control=True))
    overhead = costs.get("queue_runner_run", costs.get("session_run", 0.0))
    graph.add_client(Client(QUEUE_RUNNER, fetches=(enqueue,), overhead=overhead,
                            daemon=True))  # fmt: skip
