"""What one ``sess.run`` costs on this machine beyond its ops, split as an imported program's
clients are (``simsync.tf_backend.program.step_costs.session_run_split``): its Python side
(holds the GIL), the calling thread's CPU time, the wall time; measured ``--times`` times in
a row on one session configured as a program's (17 logical CPU devices, no Grappler), to see
how much each moves on this machine.

    python bench/session_run.py --times 6
"""

from __future__ import annotations

import argparse
import os


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--times", type=int, default=6, help="measurements in a row")
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    from simsync.tf_backend.program.capture import LOGICAL_DEVICES
    from simsync.tf_backend.program.step_costs import session_run_split

    tf.compat.v1.disable_eager_execution()
    config = tf.compat.v1.ConfigProto(device_count={"CPU": LOGICAL_DEVICES})
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    graph = tf.Graph()
    with graph.as_default():
        tf.no_op()
    session = tf.compat.v1.Session(graph=graph, config=config)
    print("python (us)  cpu (us)  wall (us)")
    for _ in range(args.times):
        found = session_run_split(tf, session)
        python, cpu, wall = (found[k] * 1e6 for k in ("python", "cpu", "overhead"))
        print(f"{python:11.1f}  {cpu:8.1f}  {wall:9.1f}")


if __name__ == "__main__":
    main()
