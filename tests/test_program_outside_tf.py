"""Ops of a graded graph that reach outside it, found wherever they are: at the top of the
graph, in a function's body, a tf.print to a file (the seventeenth attack read the
grader's files and wrote over the given model through them)."""

from __future__ import annotations

import pytest

tf = pytest.importorskip("tensorflow")

from simsync.tf_backend.program.outside import reaches_outside  # noqa: E402


def _graph_def(build) -> object:
    graph = tf.Graph()
    with graph.as_default():
        x = tf.constant(2.0) * 3.0
        build(x)
    return graph.as_graph_def()


@pytest.mark.tf
def test_a_graph_of_computation_and_prints_to_the_terminal_reaches_nothing() -> None:
    def build(x):
        tf.print(x)  # to the standard error
        tf.compat.v1.summary.scalar("x", x)  # a summary's bytes, no writer: no file
        v = tf.Variable(1.0)
        v.assign_add(x)

    assert reaches_outside(_graph_def(build)) is None


@pytest.mark.tf
@pytest.mark.parametrize(
    ("build", "said"),
    [
        (lambda x: tf.io.read_file("/proc/self/status"), "ReadFile op 'ReadFile' reads or writes"),
        (lambda x: tf.io.write_file("given/model.meta", "x"), "WriteFile op 'WriteFile'"),
        (lambda x: tf.io.matching_files("train.meta"), "MatchingFiles op"),
        (lambda x: tf.print(x, output_stream="file:///proc/self/fd/3"), "PrintV2 op 'PrintV2'"),
        (lambda x: tf.compat.v1.train.Saver([tf.Variable(1.0)]), "SaveV2 op 'save/SaveV2'"),
        (  # the eighteenth attack's: a dataset rebuilt from a GraphDef held as data
            lambda x: tf.raw_ops.DatasetFromGraph(graph_def=tf.strings.as_string(x)),
            "DatasetFromGraph op",
        ),
        (
            lambda x: tf.numpy_function(lambda a: a, [x], tf.float32),
            "runs Python inside the graph",
        ),
    ],
)
def test_an_op_that_reaches_a_file_python_or_a_checkpoint_is_named(build, said: str) -> None:
    why = reaches_outside(_graph_def(build))
    assert why is not None and said in why, why
    assert "\n" not in why


@pytest.mark.tf
def test_a_file_read_inside_a_functions_body_is_found_too() -> None:
    @tf.function
    def sneaky(x):
        return x + tf.strings.to_number(tf.strings.substr(tf.io.read_file("/x"), 0, 1))

    why = reaches_outside(_graph_def(sneaky))
    assert why is not None and "ReadFile op 'ReadFile' in a function of the graph" in why, why
