"""Renderings of graphs and traces: terminal views (rich), DOT and PNG pictures, Chrome traces.

Terminal renderables follow rich's protocol (``__rich_console__``): print them with a
``rich.console.Console``. matplotlib is imported only when a PNG is drawn; SimPy and TensorFlow
never are, so the views read any :class:`~simsync.trace.Trace`, simulated or measured.
"""

from simsync.viz.chrome import chrome_trace, overlaps, write_chrome_trace
from simsync.viz.code import CodeView
from simsync.viz.crosscheck import CrossCheckView, ProfileView
from simsync.viz.curves import LossCurves, RaceTable, write_loss_png
from simsync.viz.dot import to_dot
from simsync.viz.fold import folded_by_scope
from simsync.viz.graph_text import GraphView
from simsync.viz.import_report import ProgramView, simulated_line
from simsync.viz.png import write_png
from simsync.viz.report import LedgerView, SummaryView
from simsync.viz.timeline import Timeline, device_sort_key, kind_style, legend_order
from simsync.viz.timeline_picture import write_timeline_picture

__all__ = [
    "CodeView",
    "CrossCheckView",
    "GraphView",
    "LedgerView",
    "LossCurves",
    "ProfileView",
    "ProgramView",
    "RaceTable",
    "SummaryView",
    "Timeline",
    "chrome_trace",
    "device_sort_key",
    "folded_by_scope",
    "kind_style",
    "legend_order",
    "overlaps",
    "simulated_line",
    "to_dot",
    "write_chrome_trace",
    "write_loss_png",
    "write_png",
    "write_timeline_picture",
]
