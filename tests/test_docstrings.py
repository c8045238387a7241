"""Public definitions say what they do: none undocumented in the IR or the public API, and
``Graph``'s methods in numpy's sections. Run as a script, it counts the undocumented public
definitions of all of ``simsync/``::

    python tests/test_docstrings.py          # the count, then each one
"""

from __future__ import annotations

import ast
import inspect
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from simsync.ir import Graph

SIMSYNC = Path(__file__).resolve().parent.parent / "simsync"
#: where every public definition must have a docstring
DOCUMENTED = [SIMSYNC / "api.py", *sorted((SIMSYNC / "ir").glob("*.py"))]

Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def public_definitions(path: Path) -> Iterator[tuple[str, Definition]]:
    """A module's public functions and classes, and the public methods of its public classes
    (a name without a leading underscore), with their qualified names."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, Definition) and not node.name.startswith("_"):
            yield node.name, node
            if isinstance(node, ast.ClassDef):
                for inner in node.body:
                    if isinstance(inner, Definition) and not inner.name.startswith("_"):
                        yield f"{node.name}.{inner.name}", inner


def undocumented(paths: list[Path], root: Path = SIMSYNC.parent) -> tuple[list[str], int]:
    """The public definitions without a docstring (``file:line name``, the file from
    ``root``), and how many public definitions there are in all."""
    missing, total = [], 0
    for path in paths:
        for name, node in public_definitions(path):
            total += 1
            if ast.get_docstring(node) is None:
                missing.append(f"{path.relative_to(root)}:{node.lineno} {name}")
    return missing, total


def test_the_ir_and_the_api_have_no_undocumented_public_definition() -> None:
    missing, total = undocumented(DOCUMENTED)
    assert total > 50  # the files were read
    assert missing == []


def test_the_count_sees_a_definition_without_a_docstring(tmp_path: Path) -> None:
    module = tmp_path / "module.py"
    module.write_text(
        'class Shown:\n    """Told."""\n\n    def plain(self):\n        pass\n\n'
        "    def _hidden(self):\n        pass\n\n"
        'def told():\n    """Told."""\n\ndef _private():\n    pass\n'
    )
    assert undocumented([module], tmp_path) == (["module.py:4 Shown.plain"], 3)


#: Graph's methods that raise nothing of their own (the rest document a Raises section)
RAISE_NOTHING = {"memo", "ops", "tensors", "edges"}
GRAPH_METHODS = sorted(
    name
    for name, member in vars(Graph).items()
    if not name.startswith("_") and inspect.isfunction(member)
)


@pytest.mark.parametrize("name", GRAPH_METHODS)
def test_graph_methods_document_parameters_and_returns_in_numpy_sections(name: str) -> None:
    method = getattr(Graph, name)
    doc = inspect.getdoc(method) or ""
    signature = inspect.signature(method)
    if len(signature.parameters) > 1:  # more than self
        assert "Parameters\n----------" in doc, name
        for parameter in list(signature.parameters)[1:]:
            assert parameter in doc.split("Parameters\n----------")[1], (name, parameter)
    if signature.return_annotation not in ("None", None):
        assert "Returns\n-------" in doc, name
    if name not in RAISE_NOTHING:
        assert "Raises\n------\nGraphError" in doc, name


def main() -> None:
    missing, total = undocumented(sorted(SIMSYNC.rglob("*.py")))
    print(f"{len(missing)} of {total} public definitions in simsync/ have no docstring")
    print("\n".join(missing))


if __name__ == "__main__":
    sys.exit(main())
