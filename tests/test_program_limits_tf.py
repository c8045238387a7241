"""Programs that run into the importer's limits: each one line that says why (issue 36)."""

from __future__ import annotations

from pathlib import Path

import pytest

from simsync.simulation.importing import import_program
from simsync.tf_backend.program.load import ImportLimits, ProgramError

pytestmark = pytest.mark.tf

LOOP = """
w = tf.compat.v1.get_variable("w", [4])
train = w.assign_add(tf.ones([4]))
sess = tf.compat.v1.Session()
sess.run(tf.compat.v1.global_variables_initializer())
for _ in range(100):
    sess.run(train)
"""


def program(tmp_path: Path, before: str, loop: str = LOOP) -> Path:
    path = tmp_path / "train.py"
    head = "import tensorflow as tf\ntf.compat.v1.disable_eager_execution()\n"
    path.write_text(head + before + loop)
    return path


def test_a_session_of_a_tensorflow_server_is_one_line_at_once(tmp_path):
    loop = LOOP.replace("tf.compat.v1.Session()", 'tf.compat.v1.Session("grpc://127.0.0.1:2222")')
    with pytest.raises(ProgramError, match=r"connects its session to a TensorFlow server"):
        import_program(program(tmp_path, "", loop), limits=ImportLimits(wall_seconds=60))


def test_a_program_that_prints_a_gigabyte_still_imports(tmp_path):
    path = program(tmp_path, 'for _ in range(1100):\n    print("x" * 2**20)\n')
    imported = import_program(path, cache=False, processes=1)
    assert imported.report["clients"] == ["main"]


def test_a_loop_before_the_first_run_is_named_at_the_time_limit(tmp_path):
    path = program(tmp_path, "while True:\n    pass\n")
    with pytest.raises(ProgramError, match=r"took longer than 20 s \(a loop before its first"):
        import_program(path, limits=ImportLimits(wall_seconds=20))


def test_a_thousand_threads_are_one_line(tmp_path):
    before = (
        "import threading, time\n"
        "for _ in range(1000):\n"
        "    threading.Thread(target=time.sleep, args=(600,), daemon=True).start()\n"
    )
    with pytest.raises(ProgramError) as raised:
        import_program(program(tmp_path, before), limits=ImportLimits(wall_seconds=60))
    said = str(raised.value)
    assert "\n" not in said and ("can't start new thread" in said or "threads" in said), said


def test_a_program_of_one_process_per_task_is_one_line_at_its_server(tmp_path):
    """Its parameter server's task, run alone: it starts its own server (localhost is
    named in the sandbox) and would wait there for the others for ever."""
    before = (
        'cluster = tf.train.ClusterSpec({"ps": ["localhost:2222"], "worker": ["localhost:2223"]})\n'
        'server = tf.compat.v1.train.Server(cluster, job_name="ps", task_index=0)\n'
        "server.join()\n"
    )
    with pytest.raises(ProgramError, match=r"waits on its TensorFlow server") as raised:
        import_program(program(tmp_path, before), limits=ImportLimits(wall_seconds=60))
    assert "--tasks ps=1,worker=2" in str(raised.value) and "\n" not in str(raised.value)
