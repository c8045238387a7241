"""``simsync assignments pack N -o autograder.zip``: a Gradescope autograder for assignment N.

The zip holds, at its root (Gradescope's autograder specification):

* ``setup.sh``: installs bubblewrap (the sandbox) when it is missing, makes a venv and
  installs simsync from the wheel in the zip (``--find-links`` the zip's folder); simsync's
  dependencies (TensorFlow, SimPy, ...) come from PyPI;
* ``run_autograder``: grades ``/autograder/submission`` with every check, hidden ones
  included, and writes ``/autograder/results/results.json``; if the grader itself fails, it
  still writes a results.json that says so;
* the wheel of this simsync, built here with ``pip wheel --no-deps`` (offline);
* ``assignments/NN-slug/``: the assignment itself (run_autograder points
  ``SIMSYNC_ASSIGNMENTS`` at it), so an assignment of your own packs as well as a built-in one.

``AUTOGRADER_ROOT`` (default ``/autograder``) moves the whole layout, for trying it locally.
"""

from __future__ import annotations

import io
import subprocess
import sys
import tempfile
import zipfile
from importlib.metadata import version
from pathlib import Path

from simsync.errors import UsageError, printable
from simsync.files import atomic_writer, folder_holding, own_folders
from simsync.grading.assignment import find_assignment

__all__ = ["pack", "project_root"]

SETUP = """\
#!/usr/bin/env bash
# Gradescope runs this once, when it builds the autograder's image.
set -euo pipefail
unset PYTHONPATH PYTHONHOME  # the venv's own packages, not whatever the environment adds
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
PYTHON="${{SIMSYNC_PYTHON:-python3}}"
# the sandbox student code runs in (bubblewrap, Debian/Ubuntu's package); grading refuses
# to run without it
if ! command -v bwrap >/dev/null; then
    apt-get update -qq && apt-get install -y -qq bubblewrap
fi
"$PYTHON" -m venv "$ROOT/venv"
# simsync from the wheel in this zip; its dependencies from PyPI (SIMSYNC_PIP_OPTIONS adds
# options, e.g. --no-index --no-deps to try it offline against dependencies already present)
"$ROOT/venv/bin/pip" install --quiet ${{SIMSYNC_PIP_OPTIONS:-}} \\
    --find-links "$ROOT/source" "simsync=={version}"
"""

RUN = """\
#!/usr/bin/env bash
# Gradescope runs this for every submission: the submission is in $ROOT/submission, the
# results go to $ROOT/results/results.json.
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
unset PYTHONPATH PYTHONHOME  # the simsync packed in this zip, never another on the path
export SIMSYNC_ASSIGNMENTS="$ROOT/source/assignments"   # the assignment packed with this zip
mkdir -p "$ROOT/results"
cd "$ROOT"
if ! "$ROOT/venv/bin/simsync" grade "$ROOT/submission" --assignment {number} --hidden \\
        --gradescope "$ROOT/results/results.json" 2> "$ROOT/results/grader.err"; then
    # the grader's own one-line reason (e.g. the sandbox cannot start) for the instructor
    "$ROOT/venv/bin/python" -I -c '
import json, sys
why = open(sys.argv[1], errors="replace").read().strip().splitlines()[-1:]
json.dump({{"score": 0, "tests": [], "output": "The grader could not run on this "
    "submission: please tell your instructor." + ("\\n" + why[0] if why else "")}},
    open(sys.argv[2], "w"))' "$ROOT/results/grader.err" "$ROOT/results/results.json"
fi
"""


def project_root() -> Path:
    """simsync's source tree (where pyproject.toml is): packing builds a wheel from it."""
    root = Path(__file__).resolve().parents[2]
    if not (root / "pyproject.toml").is_file():
        raise UsageError("pack needs simsync's source tree (an editable install); none found")
    return root


def pack(number: int, output: Path) -> int:
    assignment = find_assignment(number)
    if not output.parent.is_dir():
        raise UsageError(f"cannot write {output}: no folder {output.parent}")
    if output.suffix != ".zip":
        raise UsageError(f"{output}: the autograder must be a .zip")
    holder = folder_holding(
        output,
        {
            "the assignments' folder, which it packs": assignment.folder.parent,
            **own_folders(),
        },
    )
    if holder is not None:
        what, folder = holder
        raise UsageError(
            f"cannot write {output}: it is inside {what} ({folder}): the next pack would "
            "hold this one; write it outside"
        )
    name, wheel = _wheel(project_root())
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        _add(archive, "setup.sh", SETUP.format(version=version("simsync")).encode(), 0o755)
        _add(archive, "run_autograder", RUN.format(number=number).encode(), 0o755)
        _add(archive, name, wheel, 0o644)
        for path in sorted(assignment.folder.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                relative = path.relative_to(assignment.folder.parent)
                _add(archive, f"assignments/{relative.as_posix()}", path.read_bytes(), 0o644)
    with atomic_writer(output, binary=True) as out:
        out.write(buffer.getvalue())
    size = output.stat().st_size
    shown = printable(str(output), one_line=True)
    print(f"wrote {shown} ({size / 1024:.0f} KiB): assignment {number}, {assignment.title}")
    return 0


def _wheel(root: Path) -> tuple[str, bytes]:
    """simsync's wheel, built offline from the source tree: its file name and bytes."""
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    with tempfile.TemporaryDirectory(prefix="simsync-wheel-") as folder:
        done = subprocess.run(
            [*command, "--quiet", "--wheel-dir", folder, str(root)],
            capture_output=True,
            text=True,
        )
        wheels = sorted(Path(folder).glob("simsync-*.whl"))
        if done.returncode != 0 or not wheels:
            last = (done.stderr.strip().splitlines() or ["no wheel"])[-1]
            raise UsageError(f"could not build simsync's wheel: {last}")
        return wheels[0].name, wheels[0].read_bytes()


def _add(archive: zipfile.ZipFile, name: str, data: bytes, mode: int) -> None:
    info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
    info.external_attr = (0o100000 | mode) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    archive.writestr(info, data)
