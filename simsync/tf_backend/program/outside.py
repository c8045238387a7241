"""Ops of a graded graph that reach outside it: files, the network, Python, debug dumps.

The process that measures a graded program's exported graph runs none of the program's
code, but it runs the graph's own ops: its initialisers, its queue runners, its step. An op
that reads or writes a file could then write over what the grader reads next (the given
model beside the graph), read it (the reference solution's graph, shown back through an
error), or tell the grader's sandbox from a student's own machine (``/proc/self/status``, a
file only the grader makes) and train otherwise outside it. So an exported graph that
holds such an op anywhere is not graded (:func:`reaches_outside`): a ``Saver``'s ops too,
as which ops the grader's runs take could be bent to include them.

TensorFlow's op names say what reaches outside: its readers, files, checkpoints, summary
writers, datasets that read or write files, remote calls, Python's functions, debug
dumps, and graphs carried as data (``DatasetFromGraph``: the eighteenth attack read files
through a dataset rebuilt from a GraphDef held in a string): :data:`OUTSIDE_WORDS`,
:data:`OUTSIDE`. A ``tf.print`` to a file (``output_stream="file://..."``) too, where one
to the standard error is not. Run in the
measuring process (TensorFlow there); the graph is a ``tf.Graph``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["OUTSIDE", "OUTSIDE_WORDS", "is_outside", "reaches_outside"]

#: parts of an op type's name that reach outside the graph (``ReadFile``,
#: ``TFRecordReaderV2``, ``SaveV2``, ``WriteScalarSummary``, ``EagerPyFunc``, ...)
OUTSIDE_WORDS = (
    *("File", "Reader", "Record", "Checkpoint", "Save", "Restore", "Snapshot", "Sql"),
    *("LMDB", "CSVDataset", "Rpc", "DataService", "PyFunc", "Debug", "Dump", "Vocab"),
    *("Immutable", "Writer", "DistributedSave"),
    # a graph or a function carried as data (a dataset rebuilt from a GraphDef, an
    # iterator's state), whose nodes no check of the graph's could read; compiled code
    *("FromGraph", "DeserializeIterator", "RegisterDataset", "Xla", "TPU"),
    # values kept in the session between runs, outside every variable
    *("SessionHandle", "SessionTensor"),
)
#: op types that reach outside though no word of :data:`OUTSIDE_WORDS` says so
OUTSIDE = frozenset(
    {
        *("MatchingFiles", "LoadAndRemapMatrix", "LoadDataset", "CacheDataset"),
        *("CacheDatasetV2", "TextLineDataset", "WriteSummary"),
        # a protocol buffer's descriptors read from a file (``descriptor_source``), a
        # vocabulary or a text read from one (``vocab_file``, ``filename``)
        *("DecodeProtoV2", "EncodeProto", "FixedUnigramCandidateSampler", "Skipgram"),
        # a function run on another task, by its name (the twenty-first attack)
        "RemoteCall",
    }
)
#: op types named by a word above that reach nothing: a tensor's copy, a string's parse
INSIDE = frozenset({"Snapshot", "DecodeCSV"})
#: what a program is told to do instead, by what its op does
ADVICE = {
    "PyFunc": (
        "runs Python inside the graph: the process that measures a graded graph runs none "
        "of your code, so write it with TensorFlow's ops"
    ),
    "": (
        "reads or writes outside the graph (a file, a checkpoint, a summary, a dataset, the "
        "network): a graded graph computes with its data and variables only, so take it out "
        "of the graph (a Saver too: make none in a graded program)"
    ),
}


def is_outside(kind: str, stream: str = "") -> bool:
    """Whether an op of type ``kind`` reaches outside the graph (see the module's
    docstring); ``stream``: a ``PrintV2``'s ``output_stream``.

    >>> [is_outside(k) for k in ("ReadFile", "TFRecordReaderV2", "SaveV2", "EagerPyFunc")]
    [True, True, True, True]
    >>> [is_outside(k) for k in ("WriteScalarSummary", "MatchingFiles", "DebugIdentityV2")]
    [True, True, True]
    >>> [is_outside(k) for k in ("MatMul", "TensorArrayWriteV3", "ScalarSummary", "DecodeCSV")]
    [False, False, False, False]
    >>> is_outside("PrintV2", "stderr"), is_outside("PrintV2", "file:///tmp/x")
    (False, True)
    >>> [is_outside(k) for k in ("DatasetFromGraph", "DeserializeIterator", "GetSessionHandle")]
    [True, True, True]
    """
    if kind == "PrintV2":  # tf.print: to a file, or to the standard streams and the log
        return stream.startswith("file://")
    if kind in INSIDE:
        return False
    return kind in OUTSIDE or kind.startswith("Write") or any(w in kind for w in OUTSIDE_WORDS)


def reaches_outside(graph_def: Any) -> str | None:
    """Why the graded graph of ``graph_def`` (a ``GraphDef``: read before it is imported,
    as importing a MetaGraphDef adds a ``Saver`` of its own) cannot be measured, in one
    line: a node of it, or of a function of its library (a ``tf.function``'s body, a
    ``tf.cond``'s branch, a dataset's map), reaches outside (:func:`is_outside`); None when
    none does (``tests/test_program_outside_tf.py``)."""
    for node in graph_def.node:
        if is_outside(node.op, _stream(node)):
            return _said(node.op, f"'{node.name}'")
    for function in graph_def.library.function:
        for node in function.node_def:
            if is_outside(node.op, _stream(node)):
                where = f"'{node.name}' in a function of the graph ({function.signature.name})"
                return _said(node.op, where)
    return None


def _stream(node: Any) -> str:
    """A ``PrintV2`` node's ``output_stream``, else an empty string."""
    if node.op != "PrintV2" or "output_stream" not in node.attr:
        return ""
    return bytes(node.attr["output_stream"].s).decode(errors="replace")


def _said(kind: str, where: str) -> str:
    advice = ADVICE["PyFunc"] if "PyFunc" in kind else ADVICE[""]
    return f"its graph's {kind} op {where} {advice}"
