"""Views in a notebook: a simulation as one HTML block (its summary table, its timeline and
its graph as pictures), for Jupyter's ``_repr_html_``.

The summary is the terminal's own table, exported by rich as HTML with inline styles (no style
sheet to load); the pictures are the PNGs ``--timeline`` and ``graph --format png`` write,
inlined as ``data:`` URLs, so the cell's output is complete in a saved notebook too.
"""

from __future__ import annotations

import base64
import html
import io
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console, RenderableType

from simsync.ir import Graph
from simsync.trace import Trace
from simsync.viz.png import write_png
from simsync.viz.report import SummaryView
from simsync.viz.timeline_picture import write_timeline_picture

if TYPE_CHECKING:
    from simsync.simulation.results import Summary

__all__ = ["png_bytes", "simulation_html", "text_html"]

_PRE = (
    "<pre style=\"font-family: Menlo, 'DejaVu Sans Mono', Consolas, monospace; "
    'font-size: 12px; line-height: 1.25">{code}</pre>'
)


def text_html(renderable: RenderableType, width: int = 100) -> str:
    """A rich renderable as an HTML fragment (a ``<pre>`` with inline colours)."""
    console = Console(record=True, width=width, file=io.StringIO(), color_system="truecolor")
    console.print(renderable)
    return console.export_html(inline_styles=True, code_format=_PRE)


def png_bytes(draw: Callable[[Path], None]) -> bytes:
    """The bytes of the PNG ``draw(path)`` writes, through a temporary folder of its own."""
    with tempfile.TemporaryDirectory(prefix="simsync-picture-") as folder:
        path = Path(folder) / "picture.png"
        draw(path)
        return path.read_bytes()


def _img(png: bytes, alt: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}"/>'


def simulation_html(
    facts: Summary, graph: Graph, trace: Trace, sync_points: list[str], steps: int = 2
) -> str:
    """A simulation's summary table, the first ``steps`` steps' timeline and its graph, as HTML.

    Examples
    --------
    >>> from simsync.simulation import simulate, summary
    >>> from simsync.scenario import Scenario, ClusterConfig
    >>> sim = simulate(Scenario("two", cluster=ClusterConfig(2)))
    >>> page = simulation_html(summary(sim), sim.graph, sim.trace, sim.sync_points)
    >>> page.count("<img"), "average_gradients" in page
    (2, True)
    """
    timeline = png_bytes(
        lambda path: write_timeline_picture(
            path, [("simulated", trace)], steps=steps, sync_points=sync_points
        )
    )
    drawn = png_bytes(lambda path: write_png(graph, path))
    return "\n".join(
        [
            text_html(SummaryView(facts)),
            _img(timeline, f"timeline of the first {steps} steps"),
            "<details><summary>the dataflow graph</summary>",
            _img(drawn, f"dataflow graph {graph.name}"),
            "</details>",
        ]
    )
