"""A clean copy of a submission: regular files only, within limits, read without following
anything the student planted.

The grader copies a submission once, before any of it runs, and grades the copy; the
student's folder is never written. A link (to ``/``, to the solution, to ``/dev/zero``), a
FIFO, a device or a socket is left out and named in the report; a folder too deep, too many
files or too many bytes refuse the whole submission in one line. Each file is opened with
``O_NOFOLLOW | O_NONBLOCK`` and checked to be a regular file on the open descriptor, so
nothing swapped in between the listing and the read can block the grader or lead it outside.

>>> import tempfile, os
>>> folder = tempfile.mkdtemp()
>>> _ = open(os.path.join(folder, "towers.py"), "w").write("x = 1\\n")
>>> os.symlink("/", os.path.join(folder, "root"))
>>> copy = copy_submission(folder, tempfile.mkdtemp())
>>> sorted(os.listdir(copy.folder)), copy.left_out
(['towers.py'], ['root (a link)'])
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from simsync.errors import UsageError

__all__ = ["IGNORED", "Copy", "SubmissionLimits", "SubmissionRefused", "copy_submission"]

#: names never copied nor reported (tools' own folders)
IGNORED = frozenset({"__pycache__", ".git", ".venv", ".ipynb_checkpoints", ".DS_Store"})


@dataclass(frozen=True)
class SubmissionLimits:
    #: files, folders and anything else in the submission, together
    files: int = 200
    total_bytes: int = 16 * 2**20
    depth: int = 8


class SubmissionRefused(UsageError):
    """A submission over the limits, or one that cannot be read: one line."""


@dataclass
class Copy:
    """Where the copy is, and what was left out of it (each with the reason)."""

    folder: Path
    left_out: list[str] = field(default_factory=list)


def copy_submission(
    source: str | os.PathLike[str],
    target: str | os.PathLike[str],
    limits: SubmissionLimits = SubmissionLimits(),
) -> Copy:
    """Copy the regular files of ``source`` under ``target`` (an existing empty folder)."""
    copy = Copy(Path(target))
    budget = [limits.files, limits.total_bytes]
    try:  # the folder named may be a link (the grader's choice); nothing inside it may
        top = os.open(os.path.realpath(source), os.O_RDONLY | os.O_DIRECTORY)
    except OSError as error:
        raise SubmissionRefused(f"{source}: cannot read the submission: {error.strerror}") from None
    try:
        _copy_folder(top, Path(target), "", copy, budget, limits, 0)
    except OSError as error:  # removed or changed while it was copied
        why = error.strerror or str(error)
        raise SubmissionRefused(f"the submission could not be copied: {why}") from None
    finally:
        os.close(top)
    return copy


def _copy_folder(
    folder: int,
    target: Path,
    prefix: str,
    copy: Copy,
    budget: list[int],
    limits: SubmissionLimits,
    depth: int,
) -> None:
    if depth > limits.depth:
        raise SubmissionRefused(f"{prefix}: folders nested more than {limits.depth} deep")
    entries = []
    with os.scandir(folder) as listing:  # counted as they come: a folder of a million is
        for item in listing:  # refused at the limit, not listed whole first
            if item.name not in IGNORED:
                _count(budget, limits)  # every entry counts: files, folders, links alike
                entries.append(item.name)
    for entry in sorted(entries):
        name = f"{prefix}{entry}"
        kind = stat.S_IFMT(os.stat(entry, dir_fd=folder, follow_symlinks=False).st_mode)
        if kind == stat.S_IFDIR:
            inner = os.open(entry, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=folder)
            try:
                (target / entry).mkdir()
                _copy_folder(inner, target / entry, f"{name}/", copy, budget, limits, depth + 1)
            finally:
                os.close(inner)
        elif kind == stat.S_IFREG:
            _copy_file(folder, entry, name, target / entry, budget, limits)
        else:
            copy.left_out.append(f"{name} ({_KINDS.get(kind, 'not a regular file')})")


_KINDS = {
    stat.S_IFLNK: "a link",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a device",
    stat.S_IFBLK: "a device",
    stat.S_IFSOCK: "a socket",
}


def _copy_file(
    folder: int, entry: str, name: str, target: Path, budget: list[int], limits: SubmissionLimits
) -> None:
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
    handle = os.open(entry, flags, dir_fd=folder)
    try:
        if not stat.S_ISREG(os.fstat(handle).st_mode):  # swapped since it was listed
            raise SubmissionRefused(f"{name}: changed while it was being copied")
        data = _read(handle, budget[1] + 1)
    finally:
        os.close(handle)
    budget[1] -= len(data)
    if budget[1] < 0:
        mib = limits.total_bytes / 2**20
        raise SubmissionRefused(f"the submission is larger than {mib:g} MiB ({name} and before)")
    target.write_bytes(data)


def _count(budget: list[int], limits: SubmissionLimits) -> None:
    budget[0] -= 1
    if budget[0] < 0:
        most = limits.files
        raise SubmissionRefused(f"more than {most} files and folders; at most {most} are graded")


def _read(handle: int, most: int) -> bytes:
    chunks, size = [], 0
    while size < most:
        chunk = os.read(handle, min(1 << 20, most - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)
