"""Where a program made an op, read off its source by the parent (no TensorFlow here).

The program's process names, for each op, the file and line of the program's innermost frame
when TensorFlow made it (``op.traceback``). That process ran the program, so what it names is
a claim; the parent holds the program's files (it copied them), and reads the rest off their
syntax tree (:mod:`ast`), never off the claim:

- the **file** must be the program, or one of its modules that it imports (by ``import``
  statements at a file's top level, followed from the program): a file beside it that
  nothing imports, or that only a function imports, made nothing; at most
  :data:`MOST_SOURCE_BYTES` of source are read, the program first;
- the **function** is the innermost ``def`` (or ``class``) around that line, by its place in
  the file (``Model.build``, ``train.<locals>``... as ``Model.build``, ``train.step``),
  ``<module>`` outside every one; a comprehension or a lambda belongs to the function it is
  written in;
- the **line must be one that can make an op**: inside a call of something the program does
  not define itself (a TensorFlow function, a method, a builtin such as ``sum``; not one of
  its own functions, nor one of its own modules' ``mymath.concat``) or inside an operator
  (``a + b``, ``-a``, ``x[0]``, ``a < b`` on tensors). A line that only calls the program's
  own functions cannot be the innermost frame of an op: that function's own frame would be;
- an op that **joins tensors** (of two computations or more, not counting constants and
  variables: where towers meet by data) must be one that line makes by name: a
  ``ConcatV2`` on a line that calls a function named ``concat``, an ``AddN`` one named
  ``add_n``, a ``DynamicStitch`` one named ``dynamic_stitch`` (its type in
  lower case, without ``_`` and its version), or as :data:`JOINS` allows (an add of ``+`` or
  ``sum``; a ``Pack`` of ``tf.stack`` or of a TensorFlow call given a list). A name is
  TensorFlow's when it is imported from it (or is an alias of it at a file's top level,
  ``tf1 = tf.compat.v1``) and bound by nothing else; a bare name called is a builtin only
  when Python has it; and none does so in a program whose files change what names mean out
  of a reader's sight (``tf.concat = mine``, ``sys.modules[...] =``, ``exec``,
  ``setattr``, ``globals()``, ``importlib``).

A claim that fails names no place. So a report that moves an op into another function must
name a line of that function, in a file the program imports, that itself makes an op of that
type by name; docs/assignments.md says what a student could still claim (a line of dead code
of that kind in that function).
"""

from __future__ import annotations

import ast
import bisect
import builtins
import functools
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["JOINS", "MOST_SOURCE_BYTES", "Source", "made_in"]

#: the most source read for places, the program's first (the parent reads it: a file of
#: megabytes of defs would take it minutes)
MOST_SOURCE_BYTES = 2**20
#: nodes whose evaluation may make an op: a call, or an operator on tensors
_MAKERS = (ast.Call, ast.BinOp, ast.UnaryOp, ast.Subscript, ast.Compare, ast.AugAssign)
#: besides a call named after their type: what else on a line makes an op that joins
#: tensors (a call's last name, an operator, ``"tensorflow list"`` for a call of
#: TensorFlow's given a list, which it packs)
JOINS: dict[str, frozenset[str | type[ast.operator]]] = {
    "ConcatV2": frozenset({"concatenate"}),
    "AddN": frozenset({"accumulate_n", "reduce"}),  # strategy.reduce(SUM, ...)
    "AddV2": frozenset({"sum", "reduce", ast.Add}),
    "Add": frozenset({"sum", "reduce", ast.Add}),
    "Sub": frozenset({"subtract", ast.Sub}),
    "Mul": frozenset({"multiply", ast.Mult}),
    "RealDiv": frozenset({"divide", "truediv", ast.Div}),
    "MatMul": frozenset({ast.MatMult}),
    # Keras' fit() under a strategy stacks the replicas' losses and metrics
    "Pack": frozenset({"stack", "parallel_stack", "tensorflow list", "fit", "train_on_batch"}),
    # a tf.distribute strategy's all-reduce: made by the optimizer's apply, the strategy's
    # own reduction, or (the replicas run in threads of their own, the reduction in the
    # caller's) the line that runs the replicas' step: ``strategy.run(step, args=...)``,
    # ``model.fit(...)``
    **{
        kind: frozenset({"apply_gradients", "minimize", "all_reduce", "batch_reduce_to"})
        | frozenset({"reduce_to", "all_gather", "run", "experimental_run_v2"})
        | frozenset({"fit", "train_on_batch"})
        for kind in ("CollectiveReduceV2", "CollectiveReduce", "NcclAllReduce")
    },
}
#: Python's own functions (``sum``): a name called that the program neither imports nor
#: binds is one of these, or made where no reading follows (a star import), and makes none
_BUILTINS = frozenset(dir(builtins))
#: a type's version suffix (``ConcatV2``, ``AddV2``)
_VERSION = re.compile(r"V\d+$")


@dataclass(frozen=True)
class Source:
    """A program's ``.py`` files, as the parent copied them (name -> bytes), and which of
    them is the program."""

    files: tuple[tuple[str, bytes], ...]
    program: str = ""

    @classmethod
    def of(cls, files: Mapping[str, bytes], program: str = "") -> Source:
        return cls(tuple(sorted((n, b) for n, b in files.items() if n.endswith(".py"))), program)


def made_in(
    source: Source, file: str, line: int, op_type: str = "", joins: bool = False
) -> str | None:
    """``function (file:line)``: where the program made an op of ``op_type`` (one that
    ``joins`` tensors of two computations or more), when the claim holds (see the module's
    docstring); else None.

    >>> program = Source.of({"t.py": b'''import tensorflow as tf
    ... def helper(g):
    ...     return tf.concat(g, 0)
    ... def average_gradients(g):
    ...     e = [tf.expand_dims(x, 0) for x in g]
    ...     return helper(e)
    ... class Decoy:
    ...     def average_gradients(self, g):
    ...         return tf.concat(g, 0)
    ... '''}, "t.py")
    >>> made_in(program, "t.py", 3, "ConcatV2", joins=True), made_in(program, "t.py", 5)
    ('helper (t.py:3)', 'average_gradients (t.py:5)')
    >>> made_in(program, "t.py", 9, "ConcatV2", joins=True)
    'Decoy.average_gradients (t.py:9)'
    >>> made_in(program, "t.py", 6), made_in(program, "t.py", 5, "ConcatV2", joins=True)
    (None, None)
    >>> made_in(program, "t.py", 1), made_in(program, "x.py", 3)
    (None, None)
    """
    index = _index(source)
    found = index.files.get(file)
    if found is None or file not in index.imported or line not in found.makers:
        return None
    if joins and (index.tampers or not _makes(op_type, found.makers[line])):
        return None
    return f"{found.function_at(line)} ({file}:{line})"


def _makes(op_type: str, what: frozenset[str | type[ast.operator]]) -> bool:
    """Whether a line holding ``what`` (calls' last names, operators) makes an op of
    ``op_type`` that joins tensors: a call named as the type, or as :data:`JOINS` allows.

    >>> _makes("DynamicStitch", frozenset({"dynamic_stitch"}))
    True
    >>> _makes("ConcatV2", frozenset({"expand_dims", "tensorflow"}))
    False
    """
    named = _VERSION.sub("", op_type).lower()
    called = {name.replace("_", "").lower() for name in what if isinstance(name, str)}
    return named in called or bool(JOINS.get(op_type, frozenset()) & what)


@dataclass(frozen=True)
class _File:
    #: the innermost def or class of each line that can make an op (``<module>`` outside)
    functions: Mapping[int, str]
    #: the lines that can make an op, each with what on it can (names called, operators)
    makers: Mapping[int, frozenset[str | type[ast.operator]]]
    #: it changes what names mean out of a reader's sight (:attr:`_Names.tampers`)
    tampers: bool = False

    def function_at(self, line: int) -> str:
        return self.functions.get(line, "<module>")


@dataclass(frozen=True)
class _Index:
    files: dict[str, _File]
    #: the files the program runs: itself and the modules it imports, followed
    imported: frozenset[str]

    @property
    def tampers(self) -> bool:
        """Whether a file the program runs changes what names mean out of sight: then no
        line makes an op that joins tensors by name."""
        return any(self.files[name].tampers for name in self.imported if name in self.files)


@functools.cache
def _index(source: Source) -> _Index:
    """Each file that parses: its scopes and the lines that can make an op; and which files
    the program imports."""
    trees, read = {}, 0
    first = sorted(source.files, key=lambda file: file[0] != source.program)  # the program
    for name, content in first:
        read += len(content)
        if read > MOST_SOURCE_BYTES:
            continue  # past what a program of a few hundred lines needs: it names no place
        try:
            trees[name] = ast.parse(content, filename=name)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue  # it did not run as it is, or it is nested past reading: it names no place
    modules = {name[: -len(".py")]: name for name in trees}
    imported = _imported(source.program, trees, modules)
    # the functions and classes of the files it runs (a file beside it that it never imports
    # defines none of its names)
    own = {
        node.name
        for name, tree in trees.items()
        if name in imported
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    }
    files = {name: _file(tree, own, set(modules)) for name, tree in trees.items()}
    return _Index(files, imported)


def _imported(
    program: str, trees: dict[str, ast.Module], modules: dict[str, str]
) -> frozenset[str]:
    """The program and every module of its folder it imports, transitively, by the import
    statements it surely runs: those of a file's top level (not in a function, which may
    never be called, nor under an ``if``, a ``try`` or a loop); any file, when the program is
    not named (a claim is then checked against all of them)."""
    if program not in trees:
        return frozenset(trees)
    seen, stack = {program}, [program]
    while stack:
        for node in trees[stack.pop()].body:
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module.split(".")[0]]
            for found in (modules[n] for n in names if n in modules):
                if found not in seen:
                    seen.add(found)
                    stack.append(found)
    return frozenset(seen)


@dataclass(frozen=True)
class _Names:
    """What a file's names are bound to: TensorFlow (``import tensorflow as tf``), another
    module (``import functools``, ``from functools import reduce``: a library), the program's
    own modules and functions, or anything else (an assignment, a parameter, a class)."""

    tensorflow: frozenset[str]
    library: frozenset[str]
    own: frozenset[str]
    bound: frozenset[str]
    #: names bound once, at the file's top level, to what a TensorFlow call made
    #: (``strategy = tf.distribute.MirroredStrategy()``): their methods are TensorFlow's
    objects: frozenset[str] = frozenset()
    #: the file changes what names mean where no reading of it can follow: it assigns to a
    #: module's attribute (``tf.concat = mine``), to ``sys.modules``, or calls ``exec``,
    #: ``setattr``, ``globals()`` and the like
    tampers: bool = False


#: calls that change what a name means, out of the reader's sight
_TAMPERING = frozenset(
    {"exec", "eval", "compile", "setattr", "delattr", "globals", "locals", "vars", "__import__"}
)


def _names(tree: ast.Module, own: set[str], modules: set[str]) -> _Names:
    tensorflow: set[str] = set()
    library: set[str] = set()
    own_here, bound, aliased = set(own), set(), set()
    tampers = False

    def kind(top: str, relative: bool = False) -> set[str]:
        if top == "tensorflow":
            return tensorflow
        return own_here if top in modules or relative else library

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                kind(top).add(alias.asname or top)
                tampers |= top == "importlib"
        elif isinstance(node, ast.ImportFrom):
            top = (node.module or "").split(".")[0]
            for alias in node.names:
                kind(top, bool(node.level)).add(alias.asname or alias.name)
            tampers |= top == "importlib"
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            bound.add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.MatchAs | ast.MatchStar) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            bound.add(node.rest)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            own_here.add(node.name)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            tampers |= node.func.id in _TAMPERING
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store | ast.Del):
            value = node.value
            tampers |= isinstance(value, ast.Attribute) and value.attr == "modules"
    made = set()
    for node in _top_level(tree.body):  # ``tf1 = tf.compat.v1``: TensorFlow by another name
        if not (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            continue
        if _rooted(node.value) in tensorflow:
            aliased.add(node.targets[0].id)
        elif isinstance(node.value, ast.Call) and _rooted(node.value.func) in tensorflow:
            made.add(node.targets[0].id)  # strategy = tf.distribute.MirroredStrategy()
    # a name bound by anything else anywhere (a parameter ``tf``, ``tf = Fake()``) is not
    # TensorFlow's, nor its alias
    others = {n for n in bound if n not in aliased or _rebound(tree, n)}
    tensorflow = (tensorflow - others) | (aliased - others)
    tampers |= any(
        isinstance(node, ast.Attribute)
        and isinstance(node.ctx, ast.Store | ast.Del)
        and _rooted(node) in tensorflow | library
        for node in ast.walk(tree)
    )
    objects = {n for n in made if not _rebound(tree, n)} - own_here
    return _Names(
        frozenset(tensorflow),
        frozenset(library - others),
        frozenset(own_here),
        frozenset(others),
        frozenset(objects),
        tampers,
    )


def _top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements of a file's top level, those in its ``with`` blocks too
    (``with strategy.scope():``)."""
    for node in body:
        yield node
        if isinstance(node, ast.With):
            yield from _top_level(node.body)


def _rooted(node: ast.expr) -> str | None:
    """The name an attribute chain starts from (``tf`` of ``tf.compat.v1``), or None."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _rebound(tree: ast.Module, name: str) -> bool:
    """Whether ``name`` is bound other than by one alias at the file's top level."""
    stores = [
        node
        for node in ast.walk(tree)
        if (isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store))
        or (isinstance(node, ast.arg) and node.arg == name)
    ]
    return len(stores) != 1


def _file(tree: ast.Module, own: set[str], modules: set[str]) -> _File:
    names = _names(tree, own, modules)
    makers: dict[int, set[str | type[ast.operator]]] = {}
    for node in ast.walk(tree):
        if not isinstance(node, _MAKERS):
            continue
        if isinstance(node, ast.Call) and _own_call(node.func, names):
            continue  # a call of the program's own function: its frame would be the innermost
        what = _what(node, names)
        for line in range(node.lineno, (node.end_lineno or node.lineno) + 1):
            makers.setdefault(line, set()).update(what)
    return _File(
        _innermost(_scopes(tree), makers),
        {k: frozenset(v) for k, v in makers.items()},
        names.tampers,
    )


def _innermost(
    scopes: tuple[tuple[int, int, str], ...], lines: Mapping[int, Any]
) -> dict[int, str]:
    """The innermost scope of each of ``lines``, found once (a claim is then looked up, not
    searched: a report of 200,000 claims in a file of 100,000 defs is read in a moment).

    >>> _innermost(((1, 9, "f"), (3, 4, "f.g")), {2: 0, 3: 0, 10: 0})
    {2: 'f', 3: 'f.g'}
    """
    found: dict[int, str] = {}
    wanted = sorted(lines)
    for first, last, name in scopes:  # outermost first: an inner one overwrites
        start = bisect.bisect_left(wanted, first)
        for line in wanted[start : bisect.bisect_right(wanted, last)]:
            found[line] = name
    return found


def _scopes(tree: ast.Module) -> tuple[tuple[int, int, str], ...]:
    """Every def and class with its qualified name (``Model.build``; a def inside a def by
    both names: ``train.step``), outermost first (walked without recursion: a file nested
    thousands deep is read as any other)."""
    found: list[tuple[int, int, str]] = []
    stack: list[tuple[ast.AST, str]] = [(tree, "")]
    while stack:
        node, prefix = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                found.append((child.lineno, child.end_lineno or child.lineno, name))
                stack.append((child, f"{name}."))
            else:
                stack.append((child, prefix))
    found.sort(key=lambda scope: (scope[0], -scope[1]))
    return tuple(found)


def _own_call(func: ast.expr, names: _Names) -> bool:
    """Whether a call's function is the program's own: one of its functions or classes by
    name (or imported by name from one of its modules), or an attribute of one of its own
    modules (``mymath.concat``)."""
    if isinstance(func, ast.Name):
        return func.id in names.own
    return (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Name)
        and func.value.id in names.own
    )


def _what(node: ast.AST, names: _Names) -> set[str | type[ast.operator]]:
    """What on ``node`` can make an op that joins tensors, by name: an operator's class; a
    call's last name when its function is TensorFlow's (``tf.concat``, a name imported from
    it), a library's (``functools.reduce``, ``from functools import reduce``) or a builtin's
    (``sum``): with ``"tensorflow"`` for TensorFlow's, and ``"tensorflow list"`` when it is
    given a list, which it packs. A method of an object, a name the program binds itself
    (``concat = _mean``), or a call of something unnamed (a lambda, ``getattr(...)``) makes
    none by name; the line can still make other ops (the empty set)."""
    if isinstance(node, ast.BinOp | ast.AugAssign):
        return {type(node.op)}
    if not isinstance(node, ast.Call):
        return set()
    func, root = node.func, node.func
    while isinstance(root, ast.Attribute):
        root = root.value
    if isinstance(func, ast.Name):
        tensorflow = func.id in names.tensorflow
        builtin = func.id in _BUILTINS and func.id not in names.bound | names.own
        known = tensorflow or func.id in names.library or builtin
        last = func.id
    elif isinstance(func, ast.Attribute) and isinstance(root, ast.Name):
        # tf.concat, or a method of what TensorFlow made: strategy.run, optimizer.minimize
        tensorflow = root.id in names.tensorflow or root.id in names.objects
        known = tensorflow or (root.id in names.library and root.id not in names.bound)
        last = func.attr
    else:
        return set()
    if not known:
        return set()
    found: set[str | type[ast.operator]] = {last}
    if tensorflow:
        found.add("tensorflow")
        given = [*node.args, *(k.value for k in node.keywords)]
        if any(isinstance(a, ast.List | ast.Tuple | ast.ListComp | ast.Starred) for a in given):
            found.add("tensorflow list")
    return found
