"""Files simsync reads and writes, done safely: the one place for it.

Every output goes through :func:`atomic_writer`: the data is written to a temporary file with a
unique name in the target's own folder, flushed to disk, then renamed over the target. A reader
sees the old file or the new one, never a part of either; a failure (a full disk, Ctrl-C, a
``kill``) leaves the old file as it was and removes the temporary one (``kill -9`` cannot be
caught: it may leave the hidden temporary file, never a partial target). Two processes writing
the same target never share a temporary file.

A target that is a device or a FIFO (``/dev/null``, a named pipe) has nothing to replace: it is
written into, and never replaced by a file. Errors name the target, never the temporary file.

Every input goes through :func:`read_text`, which accepts regular files only (a FIFO, a device
or a folder is refused at once, never waited on), reads at most a given number of bytes, so a
huge file is refused instead of filling the memory, and drops a UTF-8 byte order mark. TOML and
JSON inputs go through :func:`read_toml` and :func:`read_json`, whose every problem is one
:class:`InputError`: one line naming the file, where in it (line and column, or the byte) and
what is wrong, the same for every input.

Read-modify-write cycles that two processes may run at once (the progress file, the cached
profile of this machine) hold :func:`locked` on a lock file beside their target.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import stat
import tempfile
import time
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from simsync.errors import UsageError, printable

try:
    import fcntl
except ImportError:  # not a POSIX system: writes still replace files atomically
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "MAX_INPUT_BYTES",
    "PACKAGE_FOLDER",
    "InputError",
    "InputTooLarge",
    "NotRegularFile",
    "atomic_writer",
    "folder_holding",
    "locked",
    "own_folders",
    "read_input",
    "read_json",
    "read_text",
    "read_toml",
    "refuse_overwriting_inputs",
    "refuse_writing_into_simsync",
    "same_file",
    "write_text",
]

#: Scenario files, profiles, answer files, lessons and the progress file are small text files.
MAX_INPUT_BYTES = 1_000_000


class InputTooLarge(ValueError):
    """A file larger than the reader accepts."""


class NotRegularFile(OSError):
    """An input that is not a regular file: a folder, a FIFO, a device, a socket. Its
    ``strerror`` says which (``a FIFO (named pipe), not a regular file``)."""


#: Opened without waiting for a FIFO's writer, and without taking a terminal as ours.
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)


def read_text(path: str | os.PathLike[str], limit: int = MAX_INPUT_BYTES) -> str:
    r"""The UTF-8 text of the regular file ``path`` (a leading byte order mark dropped), read
    without ever holding more than ``limit + 1`` bytes.

    Raises :class:`NotRegularFile` for a folder, a FIFO or a device (at once: a FIFO with no
    writer is not waited on), :class:`InputTooLarge` for a longer file, ``UnicodeDecodeError``
    for one that is not UTF-8, and ``OSError`` as ``open`` does.

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "a.toml")
    >>> write_text(path, "\ufeffx = 1\n")
    >>> read_text(path)
    'x = 1\n'
    >>> read_text(path, limit=3)
    Traceback (most recent call last):
    ...
    simsync.files.InputTooLarge: larger than 3 bytes
    >>> read_text(os.path.dirname(path))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    simsync.files.NotRegularFile: [Errno 21] a folder, not a file: '...'
    """
    with open(_open_regular(path), "rb") as file:
        data = file.read(limit + 1)
    if len(data) > limit:
        raise InputTooLarge(f"larger than {limit:,} bytes")
    return data.decode("utf-8-sig")


class InputError(UsageError):
    """An input that cannot be read as what it should hold, said in one line: the file's
    ``name``, then the ``problem``. ``reason`` is for callers that treat one case apart (no
    file yet is no progress yet): ``missing``, ``not_regular`` (a folder, a FIFO, a device),
    ``unreadable`` (what the system said, such as permission denied), ``too_large``,
    ``not_utf8`` or ``malformed`` (a syntax error, or nested too deeply)."""

    def __init__(self, name: str, problem: str, reason: str) -> None:
        super().__init__(f"{name}: {problem}")
        self.name, self.problem, self.reason = name, problem, reason


def read_toml(
    path: str | os.PathLike[str],
    what: str = "TOML file",
    *,
    name: str | None = None,
    limit: int = MAX_INPUT_BYTES,
) -> dict[str, Any]:
    r"""The TOML file ``path``, parsed; every problem is one :class:`InputError` naming the
    file (``name``, when the path itself is not for the reader's eyes), saying ``what`` it
    should be when it is missing or too large, and where a syntax error is.

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "s.toml")
    >>> write_text(path, "[run]\nsteps = 3\n")
    >>> read_toml(path, "scenario file")
    {'run': {'steps': 3}}
    >>> def said(read, *args, **options):
    ...     try:
    ...         read(*args, **options)
    ...     except InputError as error:
    ...         print(error.reason, "|", error)
    >>> write_text(path, "[run]\nsteps = \n")
    >>> said(read_toml, path, "scenario file", name="s.toml")
    malformed | s.toml: TOML syntax error: Invalid value (at line 2, column 9)
    >>> said(read_toml, path + ".missing", "scenario file", name="t.toml")
    missing | t.toml: no such scenario file
    >>> said(read_toml, path, "scenario file", name="s.toml", limit=5)
    too_large | s.toml: scenario file larger than 5 bytes
    >>> said(read_toml, os.path.dirname(path), name="folder")
    not_regular | folder: a folder, not a file
    """
    return _parsed(path, what, name, limit, "TOML")


def read_json(
    path: str | os.PathLike[str],
    what: str = "JSON file",
    *,
    name: str | None = None,
    limit: int = MAX_INPUT_BYTES,
) -> Any:
    r"""The JSON file ``path``, parsed; every problem is one :class:`InputError`, as for
    :func:`read_toml`.

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "p.json")
    >>> write_text(path, '{"ps": ["h:1"]}')
    >>> read_json(path)
    {'ps': ['h:1']}
    >>> write_text(path, '{"ps": ["h:1"]\n "worker": []}')
    >>> try:
    ...     read_json(path, "cluster file", name="p.json")
    ... except InputError as error:
    ...     print(error)
    p.json: JSON syntax error: Expecting ',' delimiter (at line 2, column 2)
    """
    return _parsed(path, what, name, limit, "JSON")


#: the most values (lists, tables, their items) a JSON text may hold: parsed, each costs
#: some 60 bytes, so a text of ``[],[],...`` costs 28 times its size
MAX_VALUES = 4_000_000


def loads_bounded(text: str | bytes, unique: bool = False) -> Any:
    """JSON ``text`` parsed, its values counted first (at most :data:`MAX_VALUES`): else
    ``ValueError`` saying why (not JSON, a number too long to read, nested too deep, too
    many values; with ``unique``, a key given twice in one table, which JSON leaves to the
    reader: a file a person wrote means one of them, and which one is not said).

    >>> loads_bounded(b'{"a": [1, 2]}')
    {'a': [1, 2]}
    >>> loads_bounded("[" + "[]," * MAX_VALUES + "[]]")
    Traceback (most recent call last):
    ...
    ValueError: more than 4,000,000 values
    >>> try:
    ...     loads_bounded('{"key": "a", "key": "b"}', unique=True)
    ... except ValueError as error:
    ...     print(error)
    holds the key 'key' twice in one table
    """
    raw = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    if raw.count(b",") + raw.count(b"[") + raw.count(b"{") > MAX_VALUES:
        raise ValueError(f"more than {MAX_VALUES:,} values")
    try:
        return json.loads(text, object_pairs_hook=_unique if unique else None)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except (json.JSONDecodeError, _Twice):
        raise
    except ValueError:  # Python's limit on the digits of an integer
        raise ValueError("holds a number too long to read") from None


class _Twice(ValueError):
    """A key given twice in one table."""


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    table: dict[str, Any] = {}
    for key, value in pairs:
        if key in table:
            raise _Twice(f"holds the key {printable(repr(key), one_line=True)} twice in one table")
        table[key] = value
    return table


def _parsed(
    path: str | os.PathLike[str], what: str, name: str | None, limit: int, language: str
) -> Any:
    """The input ``path`` parsed as ``language`` (TOML or JSON), or one :class:`InputError`."""
    shown = os.fspath(path) if name is None else name
    text = read_input(path, what, name=shown, limit=limit)
    try:
        return tomllib.loads(text) if language == "TOML" else loads_bounded(text, unique=True)
    except tomllib.TOMLDecodeError as error:
        problem = f"TOML syntax error: {error}"
    except json.JSONDecodeError as error:
        problem = f"JSON syntax error: {error.msg} (at line {error.lineno}, column {error.colno})"
    except RecursionError:
        problem = f"{language} nested too deeply"
    except ValueError as error:  # a number too long to read, too many values
        problem = f"{language} {error}"
    raise InputError(shown, problem, "malformed")


def read_input(
    path: str | os.PathLike[str],
    what: str = "file",
    *,
    name: str | None = None,
    limit: int = MAX_INPUT_BYTES,
) -> str:
    """The text of the input ``path`` (:func:`read_text`), its every problem one
    :class:`InputError`, as for :func:`read_toml`."""
    shown = os.fspath(path) if name is None else name
    try:
        return read_text(path, limit)
    except FileNotFoundError:
        raise InputError(shown, f"no such {what}", "missing") from None
    except NotRegularFile as error:
        raise InputError(shown, f"{error.strerror}", "not_regular") from None
    except OSError as error:
        raise InputError(shown, f"cannot read: {error.strerror or error}", "unreadable") from None
    except InputTooLarge:
        raise InputError(shown, f"{what} larger than {limit:,} bytes", "too_large") from None
    except UnicodeDecodeError as error:
        problem = f"not a UTF-8 text file (at byte {error.start + 1})"
        raise InputError(shown, problem, "not_utf8") from None


def _open_regular(path: str | os.PathLike[str]) -> int:
    """A descriptor open for reading ``path``, a regular file; :class:`NotRegularFile` else."""
    handle = os.open(path, _READ_FLAGS)
    kind = _kind(os.fstat(handle).st_mode)
    if kind is None:
        return handle
    os.close(handle)
    code, what = (
        (errno.EISDIR, "a file") if kind == "a folder" else (errno.EINVAL, "a regular file")
    )
    raise NotRegularFile(code, f"{kind}, not {what}", os.fspath(path))


def _kind(mode: int) -> str | None:
    """What a file of this mode is, unless it is a regular file (None)."""
    if stat.S_ISREG(mode):
        return None
    kinds = {
        stat.S_ISDIR: "a folder",
        stat.S_ISFIFO: "a FIFO (named pipe)",
        stat.S_ISCHR: "a character device",
        stat.S_ISBLK: "a block device",
        stat.S_ISSOCK: "a socket",
    }
    return next((name for test, name in kinds.items() if test(mode)), "not a file")


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike[str], *, binary: bool = False) -> Iterator[IO[Any]]:
    """A file object whose content replaces ``path`` as a whole when the block ends.

    The temporary file is ``.<name>.<pid>-<random>.tmp`` beside ``path`` (``.<hash of
    name>...`` where the name is too long to take the additions); it is flushed and synced
    before the rename, and removed if the block raises (any exception, Ctrl-C included). One
    left by a process killed with ``kill -9`` is removed by the next write of the same
    ``path``, once that process is gone and the file :data:`STALE_SECONDS` old. A ``path``
    that is a device or a FIFO (``/dev/null``, ``/dev/full``, a named pipe) has nothing to
    replace: it is written into, and stays what it is. A folder is refused. Every ``OSError``
    on the way becomes a :class:`UsageError` naming ``path``, never the temporary file. A new
    file gets the permissions ``open`` would give it; a replaced one keeps its own.

    >>> import tempfile, os
    >>> folder = tempfile.mkdtemp()
    >>> path = os.path.join(folder, "out.txt")
    >>> with atomic_writer(path) as out:
    ...     _ = out.write("whole")
    >>> open(path).read(), os.listdir(folder)
    ('whole', ['out.txt'])
    >>> try:
    ...     with atomic_writer(path) as out:
    ...         _ = out.write("half")
    ...         raise RuntimeError("stopped")
    ... except RuntimeError:
    ...     pass
    >>> open(path).read(), os.listdir(folder)
    ('whole', ['out.txt'])
    """
    target = Path(path)
    kind = _existing_kind(target)
    if kind == "a folder":
        raise UsageError(f"cannot write {target}: it is a folder")
    if kind is not None:
        with _written_into(target, binary) as file:
            yield file
        return
    with _naming(target):
        handle, temporary = tempfile.mkstemp(**_temporary_name(target))
    try:
        os.chmod(temporary, _mode_for(target))
        with os.fdopen(handle, "wb" if binary else "w", **_text_options(binary)) as file:
            yield file
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, target)
        _remove_stale(target)
    except BaseException as error:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        if isinstance(error, OSError):  # a full disk says only "No space left on device"
            raise _cannot_write(target, error) from error
        raise
    _sync_folder(target.parent)


@contextlib.contextmanager
def locked(lock: str | os.PathLike[str]) -> Iterator[None]:
    """Hold an exclusive lock on the file ``lock`` (created if absent) for the block: one
    process at a time. Closing the file releases it, also when the process dies."""
    with open(lock, "a+b") as handle:
        if fcntl is not None:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        yield


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8) atomically: see :func:`atomic_writer`."""
    with atomic_writer(path) as file:
        file.write(text)


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether two paths name one file (through links, ``..`` or a different spelling).

    >>> same_file("a/../b.toml", "b.toml"), same_file("a.toml", "b.toml")
    (True, False)
    """
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet): compare where they would be
        return os.path.realpath(a) == os.path.realpath(b)


#: simsync's own package folder, where no output is ever written
PACKAGE_FOLDER = Path(__file__).resolve().parent


def folder_holding(
    target: str | os.PathLike[str], folders: Mapping[str, str | os.PathLike[str]]
) -> tuple[str, str | os.PathLike[str]] | None:
    """The first of ``folders`` (what each is: where it is) that would hold the file
    ``target``, in it or below, through links and ``..``; None for none.

    >>> folder_holding("/a/b/out.json", {"the input": "/a", "simsync's own folder": "/c"})
    ('the input', '/a')
    >>> folder_holding("/a2/out.json", {"the input": "/a"}) is None
    True
    """
    inside = Path(target).absolute().parent.resolve()
    for what, folder in folders.items():
        held = Path(folder).resolve()
        if inside == held or held in inside.parents:
            return what, folder
    return None


def own_folders() -> dict[str, Path]:
    """simsync's own folders, where no output is ever written, by what each is: its code
    (:data:`PACKAGE_FOLDER`), and its lessons and assignments, which a checkout keeps beside
    it (the thirty-third attack found the lessons' folder unguarded there)."""
    import importlib.resources

    found = {"simsync's own folder": PACKAGE_FOLDER}
    for package, what in (("simsync.lessons", "lessons"), ("simsync.assignments", "assignments")):
        with contextlib.suppress(ImportError, TypeError):
            found[f"simsync's {what}"] = Path(str(importlib.resources.files(package)))
    return found


def refuse_writing_into_simsync(output: str | os.PathLike[str]) -> None:
    """Raise :class:`UsageError` when ``output`` would be written inside simsync's own folders
    (:func:`own_folders`: its code, its lessons, its assignments), through links and ``..``.

    >>> refuse_writing_into_simsync("/tmp/out.json")
    >>> try:
    ...     refuse_writing_into_simsync(PACKAGE_FOLDER / "lessons" / ".." / "x.json")
    ... except UsageError as error:
    ...     print(error)  # doctest: +ELLIPSIS
    cannot write .../x.json: it is inside simsync's own folder (...); write it elsewhere
    """
    inside = folder_holding(output, own_folders())
    if inside is not None:
        raise UsageError(
            f"cannot write {printable(str(output), one_line=True)}: it is inside {inside[0]} "
            f"({inside[1]}); write it elsewhere"
        )


def refuse_overwriting_inputs(
    output: str | os.PathLike[str] | None, inputs: list[str | os.PathLike[str] | None]
) -> None:
    """Raise :class:`UsageError` when ``output`` is one of the ``inputs``.

    >>> refuse_overwriting_inputs("out.json", ["s.toml", None])
    >>> try:
    ...     refuse_overwriting_inputs("./s.toml", ["s.toml"])
    ... except UsageError as error:
    ...     print(error)
    ./s.toml is also an input of this command: refusing to overwrite it
    """
    if output is None:
        return
    for source in inputs:
        if source is not None and same_file(output, source):
            raise UsageError(f"{output} is also an input of this command: refusing to overwrite it")


def _cannot_write(target: Path, error: OSError) -> UsageError:
    if error.errno == errno.ENXIO and target.is_fifo():
        return UsageError(f"cannot write {target}: a FIFO (named pipe) that no process reads")
    return UsageError(f"cannot write {target}: {error.strerror or error}")


@contextlib.contextmanager
def _naming(target: Path) -> Iterator[None]:
    """An ``OSError`` in the block becomes a :class:`UsageError` naming ``target``."""
    try:
        yield
    except OSError as error:
        raise _cannot_write(target, error) from error


def _existing_kind(target: Path) -> str | None:
    """What ``target`` (through links) is when it exists and is not a regular file."""
    try:
        return _kind(os.stat(target).st_mode)
    except (OSError, ValueError):  # absent, or a name the system refuses: said when written
        return None


@contextlib.contextmanager
def _written_into(target: Path, binary: bool) -> Iterator[IO[Any]]:
    """A device or a FIFO, opened for writing: at once, or refused when no process reads a
    FIFO (never a hang)."""
    flags = os.O_WRONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    with _naming(target):
        handle = os.open(target, flags)
        os.set_blocking(handle, True)
        with os.fdopen(handle, "wb" if binary else "w", **_text_options(binary)) as file:
            yield file
            file.flush()


#: mkstemp's additions to a name: the dots, a process id, a dash, 8 random characters and the
#: suffix.
_TEMPORARY_ADDS = len("..") + 10 + len("-") + 8 + len(".tmp")
#: a temporary file of a process that is gone is removed once it is this old (a process in
#: another PID namespace, whose id means nothing here, may still be writing a younger one)
STALE_SECONDS = 600.0


def _temporary_name(target: Path) -> dict[str, Any]:
    """``mkstemp``'s arguments for a temporary file beside ``target``: named after it,
    or after a hash of its name when that name is too long to take the additions, and after
    the process that writes it."""
    folder = target.parent if str(target.parent) else Path(".")
    return {"prefix": f"{_temporary_prefix(target, folder)}{os.getpid()}-", "suffix": ".tmp",
            "dir": folder}  # fmt: skip


def _temporary_prefix(target: Path, folder: Path) -> str:
    name = target.name
    if len(os.fsencode(name)) + _TEMPORARY_ADDS > _longest_name(folder):
        name = hashlib.sha256(os.fsencode(name)).hexdigest()[:16]
    return f".{name}."


def _remove_stale(target: Path) -> None:
    """Remove the temporary files of ``target`` that processes killed while writing it left
    (their process is gone, and they are :data:`STALE_SECONDS` old)."""
    folder = target.parent if str(target.parent) else Path(".")
    prefix = _temporary_prefix(target, folder)
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            name = entry.name
            if not (name.startswith(prefix) and name.endswith(".tmp")):
                continue
            pid = name[len(prefix) :].partition("-")[0]
            if pid.isdigit() and not _alive(int(pid)) and _age(entry) > STALE_SECONDS:
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's: alive
        return True
    return True


def _age(entry: os.DirEntry[str]) -> float:
    return time.time() - entry.stat(follow_symlinks=False).st_mtime


def _longest_name(folder: Path) -> int:
    """The longest file name ``folder``'s file system takes, in bytes (NAME_MAX)."""
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (AttributeError, OSError, ValueError):
        return 255


def _text_options(binary: bool) -> dict[str, Any]:
    return {} if binary else {"encoding": "utf-8", "newline": ""}


def _mode_for(target: Path) -> int:
    """The permissions of the file being replaced, or of a new file under the umask."""
    try:
        return target.stat().st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _sync_folder(folder: Path) -> None:
    """Make the rename itself durable (best effort: not every system can sync a folder)."""
    try:
        handle = os.open(folder if str(folder) else ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(handle)
    except OSError:
        pass
    finally:
        os.close(handle)
