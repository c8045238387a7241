"""A timeline as a picture (PNG or SVG): the terminal Gantt chart's content, drawn to scale.

One panel per trace (a simulated one, and a real one below it for a cross-check), one lane
per device, time to the right in milliseconds. Each op execution is a bar in its kind's colour
(the registry's, as in every view); the time a device's result sat waiting at a sync point for
the other towers is hatched grey; a client blocked on a resource (a worker waiting for a token,
the chief for gradients) gets a lane of its own, hatched yellow while it waited; a red diamond
above the lanes marks where each sync point started. matplotlib is imported only when a
picture is drawn, and only a canvas of its own: no pyplot state, no global backend switch.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from simsync.errors import UsageError
from simsync.files import atomic_writer
from simsync.ir import natural_key
from simsync.trace import OpRecord, Trace
from simsync.viz.timeline import PICTURE_LANES, device_sort_key, kind_style

__all__ = ["TIMELINE_FORMATS", "write_timeline_picture"]

#: The pictures a timeline can be written as, by the file's suffix.
TIMELINE_FORMATS = (".png", ".svg")

_WAIT_COLOR, _BLOCKED_COLOR, _SYNC_COLOR = "#9e9e9e", "#f2c744", "#d62728"


def write_timeline_picture(
    path: str | os.PathLike[str],
    traces: Sequence[tuple[str, Trace]],
    *,
    steps: int = 2,
    sync_points: Iterable[str] = (),
    max_devices: int = PICTURE_LANES,
) -> None:
    """Draw the first ``steps`` steps of each ``(title, trace)`` as one panel, one above the
    other, and write the picture to ``path`` (``.png`` or ``.svg``, by its suffix) atomically.

    Every panel has the same devices in the same order (CPUs, then GPUs, then the rest), so a
    simulated and a real trace compare lane by lane; each panel keeps its own time axis.

    Raises
    ------
    UsageError
        If ``path`` ends in another suffix, or cannot be written.

    Examples
    --------
    >>> import tempfile, os
    >>> from simsync.trace import OpRecord, StepRecord
    >>> t = Trace(ops=[OpRecord("f", "forward", ("/gpu:0",), "main", 0, 0.0, 0.0, 0.01)],
    ...           steps=[StepRecord("main", 0, 0.0, 0.01)])
    >>> out = os.path.join(tempfile.mkdtemp(), "timeline.svg")
    >>> write_timeline_picture(out, [("simulated", t)])
    >>> open(out).read(200).count("<svg")
    1
    """
    suffix = Path(path).suffix.lower()
    if suffix not in TIMELINE_FORMATS:
        raise UsageError(
            f"{os.fspath(path)}: a timeline picture is written as "
            f"{' or '.join(TIMELINE_FORMATS)} (by the file's suffix), not {suffix or 'no suffix'}"
        )
    import matplotlib

    # names are text, not TeX: a "$" in an op's name must not start a formula
    with matplotlib.rc_context(
        {"text.parse_math": False, "svg.hashsalt": "simsync", "svg.fonttype": "none"}
    ):
        _draw(path, suffix[1:], traces, steps, set(sync_points), max(max_devices, 1))


def _lanes(records: Sequence[OpRecord], max_devices: int) -> tuple[list[str], list[str]]:
    """The device lanes (the first ``max_devices``) and the blocked clients' lanes."""
    devices = sorted({d for r in records for d in r.devices}, key=device_sort_key)
    blocked = sorted({r.client for r in records if r.blocked > 0}, key=natural_key)
    return devices[:max_devices], [f"{client} waits" for client in blocked]


def _draw(
    path: str | os.PathLike[str],
    fmt: str,
    traces: Sequence[tuple[str, Trace]],
    steps: int,
    sync_points: set[str],
    max_devices: int,
) -> None:
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    shown = [(title, [r for r in trace.ops if r.step < steps], trace) for title, trace in traces]
    every = [r for _, records, _ in shown for r in records]
    devices, blocked = _lanes(every, max_devices)
    hidden = len({d for r in every for d in r.devices}) - len(devices)
    lanes = (["sync"] if sync_points else []) + devices + blocked
    rows = len(lanes)
    panel_height = 0.35 * rows + 0.9
    fig = Figure(figsize=(11, panel_height * max(len(shown), 1) + 0.9), dpi=110)
    axes = fig.subplots(max(len(shown), 1), 1, squeeze=False)[:, 0]
    kinds: dict[str, str] = {}
    waited = False
    for ax, (title, records, trace) in zip(axes, shown, strict=False):
        t0 = min((r.start for r in records), default=0.0)
        t0 = min([t0, *(s.start for s in trace.steps if s.step < steps)])
        row = {lane: i for i, lane in enumerate(lanes)}
        by_key = {(r.client, r.step, r.op): r for r in records}
        for r in records:
            start, width = (r.start - t0) * 1e3, (r.end - r.start) * 1e3
            style = kind_style(r.kind)
            kinds.setdefault(r.kind, style.hex)
            for device in r.devices:
                if device not in row:
                    continue
                if width > 0:
                    ax.broken_barh(
                        [(start, width)],
                        (row[device] - 0.4, 0.8),
                        facecolors=style.hex,
                        edgecolors="white",
                        linewidth=0.3,
                    )
                else:  # an op that took no time: a tick where it ran
                    ax.plot(
                        [start, start],
                        [row[device] - 0.4, row[device] + 0.4],
                        color=style.hex,
                        linewidth=1.5,
                    )
            if r.blocked > 0:
                ax.broken_barh(
                    [((r.ready - t0) * 1e3, r.blocked * 1e3)],
                    (row[f"{r.client} waits"] - 0.3, 0.6),
                    facecolors="none",
                    edgecolors=_BLOCKED_COLOR,
                    hatch="///",
                    linewidth=0.6,
                )
            if r.op in sync_points:
                ax.plot([start], [row["sync"]], marker="D", color=_SYNC_COLOR, markersize=5)
                for src, arrived in r.arrivals:
                    source = by_key.get((r.client, r.step, src))
                    if source is None or r.start <= arrived:
                        continue
                    for device in source.devices:
                        if device in row:
                            waited = True
                            ax.broken_barh(
                                [((arrived - t0) * 1e3, (r.start - arrived) * 1e3)],
                                (row[device] - 0.25, 0.5),
                                facecolors="none",
                                edgecolors=_WAIT_COLOR,
                                hatch="...",
                                linewidth=0.5,
                            )
        ax.set_yticks(range(rows), lanes, fontsize=8)
        ax.set_ylim(rows - 0.4, -0.6)
        ax.set_xlabel("ms", fontsize=8)
        ax.tick_params(axis="x", labelsize=8)
        ax.grid(axis="x", color="#dddddd", linewidth=0.5)
        ax.set_axisbelow(True)
        span = max((r.end - t0 for r in records), default=1e-3) * 1e3
        ax.set_xlim(0, span * 1.01 if span > 0 else 1.0)
        ax.set_title(
            f"{title}: {_which_steps(trace, steps)}, {span:.3g} ms", fontsize=9, loc="left"
        )
    handles = [Patch(facecolor=color, label=kind) for kind, color in kinds.items()]
    if waited:
        handles.append(
            Patch(
                facecolor="none",
                edgecolor=_WAIT_COLOR,
                hatch="...",
                label="waiting at a sync point",
            )
        )
    if blocked:
        handles.append(
            Patch(
                facecolor="none",
                edgecolor=_BLOCKED_COLOR,
                hatch="///",
                label="blocked on a queue or accumulator",
            )
        )
    if handles:
        fig.legend(
            handles=handles,
            loc="lower center",
            ncols=min(len(handles), 6),
            fontsize=8,
            frameon=False,
        )
    if hidden:
        fig.text(0.01, 0.01, f"{hidden} more devices not drawn", fontsize=7, color="#666666")
    fig.tight_layout(rect=(0, 0.06 + 0.03 * (len(handles) > 6), 1, 1))
    with atomic_writer(path, binary=True) as file:
        fig.savefig(file, format=fmt, metadata=_metadata(fmt))


def _which_steps(trace: Trace, steps: int) -> str:
    shown = sorted({s.step for s in trace.steps if s.step < steps})
    if not shown:
        return "no steps"
    return f"step {shown[0]}" if len(shown) == 1 else f"steps {shown[0]}–{shown[-1]}"


def _metadata(fmt: str) -> dict[str, str | None]:
    """No creation date in the file: the same timeline gives the same bytes."""
    return {"Date": None} if fmt == "svg" else {}
