"""Where a program made an op, read off its source by the parent (no TensorFlow here).

The program's process names, for each op, the file and line of the program's innermost frame
when TensorFlow made it (``op.traceback``). That process ran the program, so what it names is
a claim; the parent holds the program's files (it copied them), and reads the rest off their
syntax tree (:mod:`ast`), never off the claim:

- the **function** is the innermost ``def`` (or ``class``) around that line, ``<module>``
  outside every one (a comprehension or a lambda belongs to the function it is written in);
- the **line must be one that can make an op**: inside a call of something the program does
  not define itself (a TensorFlow function, a method, a builtin such as ``sum``) or inside an
  operator (``a + b``, ``-a``, ``x[0]``, ``a < b`` on tensors). A line that only calls the
  program's own functions cannot be the innermost frame of an op: that function's own frame
  would be;
- an op that **joins tensors** (:data:`JOINS`: a concat, a stack, a sum of several: where
  towers meet) must be one that line can make: a ``concat`` only on a line that calls a
  function of that name (``tf.concat``), an ``AddV2`` on a line with ``+`` or a call of
  ``add``, ``sum`` or ``reduce``, a ``Pack`` on a line that calls TensorFlow (which packs the
  lists it is given).

A claim that fails, or names a file or a line the program does not have, names no place. So
a report that moves an op into another function must name a line of that function that
itself makes ops of its type; docs/assignments.md says what a student could still claim.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["JOINS", "Source", "made_in"]

#: nodes whose evaluation may make an op: a call, or an operator on tensors
_MAKERS = (ast.Call, ast.BinOp, ast.UnaryOp, ast.Subscript, ast.Compare, ast.AugAssign)
#: op types that join tensors, and what on a line can make each: the names of the functions
#: called (their last name: ``tf.compat.v1.concat`` is ``concat``), an operator, or
#: ``"tensorflow"`` for any call of TensorFlow's
JOINS: dict[str, frozenset[str | type[ast.operator]]] = {
    "ConcatV2": frozenset({"concat", "concatenate", "Concatenate"}),
    "Concat": frozenset({"concat"}),
    "AddN": frozenset({"add_n", "accumulate_n"}),
    "AddV2": frozenset({"add", "sum", "reduce", ast.Add}),
    "Add": frozenset({"add", "sum", "reduce", ast.Add}),
    "Pack": frozenset({"stack", "parallel_stack", "tensorflow"}),
}


@dataclass(frozen=True)
class Source:
    """A program's ``.py`` files, as the parent copied them: name -> bytes."""

    files: tuple[tuple[str, bytes], ...]

    @classmethod
    def of(cls, files: Mapping[str, bytes]) -> Source:
        return cls(tuple(sorted((n, b) for n, b in files.items() if n.endswith(".py"))))


def made_in(source: Source, file: str, line: int, op_type: str = "") -> str | None:
    """``function (file:line)``: where the program made an op (of ``op_type``), when ``file``
    is one of its files and ``line`` one that can make such an op there (see the module's
    docstring); else None.

    >>> program = Source.of({"t.py": b'''import tensorflow as tf
    ... def helper(g):
    ...     return tf.concat(g, 0)
    ... def average_gradients(g):
    ...     e = [tf.expand_dims(x, 0) for x in g]
    ...     return helper(e)
    ... x = [tf.constant(1.0) for _ in range(2)]
    ... '''})
    >>> made_in(program, "t.py", 3, "ConcatV2"), made_in(program, "t.py", 7)
    ('helper (t.py:3)', '<module> (t.py:7)')
    >>> made_in(program, "t.py", 6), made_in(program, "t.py", 5, "ConcatV2")
    (None, None)
    >>> made_in(program, "t.py", 1), made_in(program, "x.py", 3)
    (None, None)
    """
    found = _index(source).get(file)
    if found is None or line not in found.makers:
        return None
    makes = JOINS.get(op_type)
    if makes is not None and not makes & found.makers[line]:
        return None
    return f"{found.function_at(line)} ({file}:{line})"


@dataclass(frozen=True)
class _File:
    #: (first line, last line, name) of every def and class, outermost first
    scopes: tuple[tuple[int, int, str], ...]
    #: the lines that can make an op, each with what on it can (names called, operators)
    makers: Mapping[int, frozenset[str | type[ast.operator]]]

    def function_at(self, line: int) -> str:
        inside = [name for first, last, name in self.scopes if first <= line <= last]
        return inside[-1] if inside else "<module>"


@functools.cache
def _index(source: Source) -> dict[str, _File]:
    """Each file that parses: its scopes and the lines that can make an op."""
    trees = {}
    for name, content in source.files:
        try:
            trees[name] = ast.parse(content, filename=name)
        except (SyntaxError, ValueError):  # it did not run as it is: it names no place
            continue
    own = {
        node.name
        for tree in trees.values()
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    }
    return {name: _file(tree, own) for name, tree in trees.items()}


def _file(tree: ast.Module, own: set[str]) -> _File:
    tensorflow = _tensorflow_names(tree)
    scopes = []
    makers: dict[int, set[str | type[ast.operator]]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            scopes.append((node.lineno, node.end_lineno or node.lineno, node.name))
        if not isinstance(node, _MAKERS):
            continue
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in own:
            continue  # a call of the program's own function: its frame would be the innermost
        what = _what(node, tensorflow)
        for line in range(node.lineno, (node.end_lineno or node.lineno) + 1):
            makers.setdefault(line, set()).update(what)
    scopes.sort(key=lambda scope: (scope[0], -scope[1]))
    return _File(tuple(scopes), {line: frozenset(what) for line, what in makers.items()})


def _what(node: ast.AST, tensorflow: set[str]) -> set[str | type[ast.operator]]:
    """What ``node`` is, as :data:`JOINS` names it: a call's last name (and
    ``"tensorflow"`` for a call of TensorFlow's), an operator's class; a call of something
    unnamed (``Concatenate()(x)``) could be anything."""
    if isinstance(node, ast.BinOp | ast.AugAssign):
        return {type(node.op)}
    if not isinstance(node, ast.Call):
        return {""}
    func, root = node.func, node.func
    while isinstance(root, ast.Attribute):
        root = root.value
    names: set[str | type[ast.operator]] = set()
    if isinstance(func, ast.Attribute):
        names.add(func.attr)
    elif isinstance(func, ast.Name):
        names.add(func.id)
    else:
        return {name for kind in JOINS.values() for name in kind}
    if isinstance(root, ast.Name) and root.id in tensorflow:
        names.add("tensorflow")
    return names


def _tensorflow_names(tree: ast.Module) -> set[str]:
    """The names a file binds to TensorFlow or a part of it (``import tensorflow as tf``,
    ``from tensorflow.compat import v1``)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "tensorflow":
                    names.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tensorflow"):
            names.update(alias.asname or alias.name for alias in node.names)
    return names
