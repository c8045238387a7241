"""What the names of a graded program's source are, read off the modules it imports, in a
process of its own that runs no code of the program's (:func:`resolve`).

The source rules (:mod:`simsync.grading.source`) read a program's names by how it writes
them: ``np.ndarray`` is numpy's array class because ``np`` is ``import numpy as np``. A
module also holds the modules it imported, under their names or others, and the objects of
other modules: ``np.ma.core.np`` is numpy itself, ``logging.handlers.logging.Formatter`` is
logging's ``Formatter``, ``re.enum.Enum`` is enum's ``Enum``, ``np.typing.NDArray`` is the
array class behind a type hint. The thirty-third attack reached the array class, numpy's
loader and logging's formatter so, past rules that refuse them under their own names. This
module says what each path is, by importing the modules and reading the path's attributes
one by one, as the program's own process would:

- a **module**: its name (``{"module": "numpy"}``); the rules refuse one reached through
  another module's attribute (:func:`simsync.grading.source.check_source`);
- **one of the objects the rules guard** (``GUARDED``, the rules' own paths: numpy's array
  class and loader, logging's formatter, the flags, ...): that object's path
  (``{"is": "numpy.ndarray"}``), so the rules see ``np.ma.core.ndarray`` as what it is;
- anything else: nothing.

Run as ``python -I -m simsync.grading.resolver``: a JSON object ``{"paths", "guarded",
"tops", "imports", "classes"}`` on standard input (:func:`resolve` writes it), the answer as
one JSON object on standard output. Only the modules of ``tops`` the paths start at, and the
program's own imports, are imported; at most :data:`MOST_PATHS` paths of at most
:data:`MOST_PARTS` parts each.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import subprocess
import sys
import tempfile
import typing
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["MOST_PARTS", "MOST_PATHS", "RESOLVE_SECONDS", "Resolved", "resolve"]

#: paths resolved at most (the largest given program uses some hundreds)
MOST_PATHS = 20_000
#: parts of one path at most
MOST_PARTS = 30
#: how long the resolving process may take (importing TensorFlow: 3 to 5 s here)
RESOLVE_SECONDS = 120

#: what a path is: ``{"module": name}``, ``{"is": guarded path}``, or nothing
Resolved = dict[str, str]


def resolve(
    paths: Iterable[str],
    guarded: Iterable[str],
    tops: Iterable[str],
    imports: Iterable[str] = (),
    classes: Iterable[str] = (),
) -> dict[str, Resolved]:
    """What each of ``paths`` (dotted, from an imported module of ``tops``) is, resolved in a
    process of its own (see the module's docstring), which imports the modules of ``tops``
    and of ``imports`` (the program's own imports, once the rules let them through) and no
    other: a path is read by attributes alone (the thirty-fourth attack had it import
    ``tf.tools.pip_package.setup``, which ran TensorFlow's ``setup.py`` and a file of the
    folder it ran in). A class derived from one of ``classes`` is that class (absl's
    ``PythonFormatter`` is logging's ``Formatter``, numpy's ``MaskedRecords`` an array: the
    thirty-fourth attack's). It runs in a new empty folder with an empty home. Raises
    ``RuntimeError`` with one line when that process fails, or when there are more than
    :data:`MOST_PATHS` paths (the thirty-fourth attack hid its own past the last read)."""
    tops = set(tops)
    wanted = sorted({p for p in paths if p.partition(".")[0] in tops})
    if len(wanted) > MOST_PATHS:
        raise RuntimeError(
            f"it names {len(wanted):,} paths of modules, more than {MOST_PATHS:,}, more than "
            "a training program does"
        )
    if not wanted:
        return {}
    request = json.dumps(
        {
            "paths": wanted,
            "guarded": sorted(set(guarded)),
            "tops": sorted(tops),
            "imports": sorted({m for m in imports if m.partition(".")[0] in tops}),
            "classes": sorted(set(classes)),
        }
    )
    with tempfile.TemporaryDirectory(prefix="simsync-names-") as empty:
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG")}
        env.update(HOME=empty, TMPDIR=empty, TF_CPP_MIN_LOG_LEVEL="3")
        try:
            ran = subprocess.run(
                [sys.executable, "-I", "-m", "simsync.grading.resolver"],
                input=request, capture_output=True, text=True, timeout=RESOLVE_SECONDS,
                env=env, cwd=empty,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"reading its names took more than {RESOLVE_SECONDS} s") from None
    lines = ran.stdout.strip().splitlines()
    if ran.returncode != 0 or not lines:
        last = (ran.stderr.strip().splitlines() or ["no answer"])[-1][:300]
        raise RuntimeError(f"reading its names failed: {last}")
    answer = json.loads(lines[-1])
    asked = set(wanted)
    return {p: dict(found) for p, found in answer.items() if p in asked}


def _walk(path: str) -> Any:
    """The object at ``path``, reading its attributes one by one from its top module (which
    is imported already: :func:`main`); ``LookupError`` when there is none. Nothing is
    imported here: a submodule the program did not import is no attribute."""
    parts = path.split(".")
    if len(parts) > MOST_PARTS or not all(p.isidentifier() for p in parts):
        raise LookupError(path)
    found: Any = sys.modules.get(parts[0])
    if found is None:
        raise LookupError(path)
    for part in parts[1:]:
        try:
            found = getattr(found, part)
        except Exception:
            raise LookupError(path) from None
    return found


def _what(
    found: Any, guarded: Mapping[int, str], classes: Sequence[tuple[type, str]] = ()
) -> Resolved:
    """What ``found`` is: a module's name, a guarded object's path (or a guarded class's,
    for a class derived from one of ``classes``), or nothing."""
    if isinstance(found, type(sys)):
        return {"module": str(getattr(found, "__name__", ""))}
    origin = typing.get_origin(found)  # NDArray: numpy.ndarray[Any, dtype]
    for candidate in (found, origin):
        if candidate is not None and id(candidate) in guarded:
            return {"is": guarded[id(candidate)]}
    for candidate in (found, origin):
        if isinstance(candidate, type):
            for cls, path in classes:
                with contextlib.suppress(TypeError):
                    if issubclass(candidate, cls):
                        return {"is": path}
    return {}


def main() -> int:
    request = json.loads(sys.stdin.read())
    said = io.StringIO()  # what the modules print while imported is not the answer
    answer: dict[str, Resolved] = {}
    with contextlib.redirect_stdout(said), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tops = set(request["tops"])
        used = sorted({path.partition(".")[0] for path in request["paths"]} & tops)
        for module in [*used, *request["imports"]]:  # no other module is imported
            if module.partition(".")[0] in tops:
                with contextlib.suppress(Exception):
                    importlib.import_module(module)
        guarded: dict[int, str] = {}
        for path in request["guarded"]:
            with contextlib.suppress(Exception):
                guarded.setdefault(id(_walk(path)), path)
        classes: list[tuple[type, str]] = []
        for path in request.get("classes", []):  # whose derived classes are as they are
            with contextlib.suppress(Exception):
                if isinstance(cls := _walk(path), type):
                    classes.append((cls, path))
        for path in request["paths"][:MOST_PATHS]:
            if path.partition(".")[0] not in tops:  # only modules a program may import
                answer[path] = {}
                continue
            try:
                answer[path] = _what(_walk(path), guarded, classes)
            except Exception:  # what an import may raise, whatever it is: no answer
                answer[path] = {}
    print(json.dumps(answer))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
