"""Import a TensorFlow program: run and captured by TensorFlow's side
(:func:`~simsync.tf_backend.program.load.capture_program`, in the sandbox), then its traced
costs fitted to its untraced step here, by simulating it (:mod:`simsync.simulation.fit`).

The fit is kept beside the program's costs in simsync's cache, with what it was found on (its
``basis``: the untraced steps, the cores and their efficiency, the fit's form), and found
again there on the same basis: a fit simulates the graph, seconds for a large one.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from simsync.errors import SimsyncError
from simsync.simulation.fit import FIT_FORM, apply_fit, fit_costs
from simsync.tf_backend.program import cost_cache
from simsync.tf_backend.program.load import Imported, ProgramError, capture_program

__all__ = ["fitted", "import_program"]


def import_program(path: str | os.PathLike[str], **options: Any) -> Imported:
    """The program at ``path`` imported (:func:`~simsync.tf_backend.program.load.capture_program`,
    whose keyword ``options`` these are), its costs fitted to its untraced step
    (:func:`fitted`). A program that cannot be imported raises :class:`ProgramError` with
    one line."""
    return fitted(capture_program(path, **options))


def fitted(imported: Imported) -> Imported:
    """``imported`` with its graph's costs fitted to its untraced step
    (:func:`~simsync.simulation.fit.fit_costs`; the fit is its report's ``fit``), by the fit
    kept in the cache on the same basis when there is one, else found now and kept there."""
    basis = fit_basis(imported)
    known = imported.profile.get("fit")
    folder = imported.kept_in
    try:
        if folder is not None and isinstance(known, dict) and known.get("basis") == basis:
            fit = dict(known.get("report") or {})
            graph = apply_fit(imported.graph, fit)
        else:
            graph, fit = fit_costs(imported.graph, basis["walls"], bool(basis["together"]))
            if folder is not None:
                profile = imported.profile
                profile["fit"] = {"basis": basis, "report": fit}  # type: ignore[typeddict-item]
                cost_cache.save_costs(imported.key, imported.machine, profile, folder)
    except SimsyncError as error:
        raise ProgramError(
            f"{imported.report['source']}: its costs could not be fitted: {error}"
        ) from None
    return replace(imported, graph=graph, report={**imported.report, "fit": fit})


def fit_basis(imported: Imported) -> dict[str, Any]:
    """What a fit of ``imported`` is found on: each client's untraced step, whether they were
    timed together (workers of SyncReplicasOptimizer), this machine's cores and their
    efficiency, and the fit's form; a fit kept on another basis is found again."""
    profile, data = imported.profile, imported.data
    timed = profile.get("clients", {})
    walls = {
        client["name"]: timed[client["thread"]].get("wall", 0.0)
        for client in data["clients"]
        if client["thread"] in timed
    }
    return {
        "walls": walls,
        "together": bool(timed) and all(c.get("together") for c in timed.values()),
        "efficiency": imported.efficiency,
        "cores": data.get("cores"),
        "logical_devices": data.get("logical_devices"),
        "form": FIT_FORM,
    }
