"""The example notebook, executed cell by cell, and what its result shows inline."""

from __future__ import annotations

import ast
import base64
import json
import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "examples" / "notebook.ipynb"


def _run(notebook: Path) -> list[object]:
    """Execute the notebook's code cells in order, in one namespace, as a kernel would, and
    return each cell's result: the value of its last line when that is an expression."""
    namespace: dict[str, object] = {}
    results: list[object] = []
    for cell in json.loads(notebook.read_text())["cells"]:
        if cell["cell_type"] != "code":
            continue
        tree = ast.parse("".join(cell["source"]))
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        exec(compile(tree, str(notebook), "exec"), namespace)
        value = None
        if last is not None:
            value = eval(compile(ast.Expression(last.value), str(notebook), "eval"), namespace)
        results.append(value)
    return results


def test_the_notebook_runs_and_its_simulation_shows_table_timeline_and_graph(
    monkeypatch,
) -> None:
    monkeypatch.chdir(ROOT)  # the notebook opens examples/ as Jupyter started at the root would
    shown, (sync_points, step_ms) = _run(NOTEBOOK)
    page = shown._repr_html_()  # type: ignore[attr-defined]
    # the summary table, as text in the page: the sync point and the four towers' waits
    text = re.sub(r"<[^>]+>", "", page)
    assert "average_gradients" in text and all(f"tower_{t}" in text for t in range(4))
    pictures = re.findall(r'<img alt="([^"]*)" src="data:image/png;base64,([^"]+)"', page)
    assert [alt.split(" ")[0] for alt, _ in pictures] == ["timeline", "dataflow"]
    for _, data in pictures:
        assert base64.b64decode(data)[:8] == b"\x89PNG\r\n\x1a\n"
    # the second cell reads the same run: four towers meet once
    assert sync_points == ["average_gradients"] and step_ms > 0


def test_the_notebook_is_saved_without_outputs() -> None:
    # outputs would hold base64 pictures and go stale: the notebook is kept clean
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    assert all(not cell.get("outputs") for cell in cells if cell["cell_type"] == "code")
    assert os.path.getsize(NOTEBOOK) < 4096
