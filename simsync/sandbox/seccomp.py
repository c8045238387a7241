"""The seccomp filter of the grading sandbox: no new processes, no new namespaces or mounts.

bubblewrap loads it (``--add-seccomp-fd``) just before it starts the grader's child; it then
holds for that process and every thread it makes, and nothing can remove it. What it refuses:

* **new processes**: ``fork``, ``vfork``, and ``clone`` without ``CLONE_THREAD`` fail with
  ``EPERM``; ``clone3``, whose flags a filter cannot read, fails with ``ENOSYS``, so the C
  library falls back to ``clone``. Threads still start where they are allowed (the process
  that runs TensorFlow, and no student code); the one that runs a student's code gets no
  ``clone`` at all, so it stays one thread, whatever it calls;
* **memory no limit counts**: ``memfd_create``, ``memfd_secret`` and System V shared memory,
  message queues and semaphores;
* **ways around the sandbox**: namespaces (``unshare``, ``setns``), mounts, ``ptrace``,
  ``io_uring``, ``bpf``, ``perf_event_open``, ``userfaultfd``, the kernel keyring, modules;
* **any other architecture's calls** (a 32-bit call on a 64-bit kernel): the process is
  killed.

It is a classic BPF program written out here, as bubblewrap reads it; the kernel's format is
``struct sock_filter`` (``linux/filter.h``) over ``struct seccomp_data`` (``linux/seccomp.h``).
On an architecture not listed in :data:`ARCHITECTURES` there is no filter (:func:`program`
returns None) and the report says so.

>>> code = program("x86_64")
>>> len(code) % 8, len(code) // 8 > 20
(0, True)
>>> program("sparc") is None
True
"""

from __future__ import annotations

import errno
import platform
import struct
from dataclasses import dataclass

__all__ = ["ARCHITECTURES", "REFUSED", "Architecture", "program"]

# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]
NR, ARCH, ARG0_LOW = 0, 4, 16  # offsets; the low half of args[0] (little-endian)
# classic BPF opcodes
LOAD_WORD = 0x20  # BPF_LD | BPF_W | BPF_ABS
JUMP_EQUAL = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
JUMP_AT_LEAST = 0x35  # BPF_JMP | BPF_JGE | BPF_K
JUMP_ANY_BIT = 0x45  # BPF_JMP | BPF_JSET | BPF_K
RETURN = 0x06  # BPF_RET | BPF_K
# seccomp's answers
ALLOW = 0x7FFF0000
KILL_PROCESS = 0x80000000
ERRNO = 0x00050000
CLONE_THREAD = 0x00010000


@dataclass(frozen=True)
class Architecture:
    """An architecture's audit number, its ``clone`` and the calls refused (numbers)."""

    audit: int
    clone: int
    refused: tuple[int, ...]
    #: calls numbered from here on belong to another ABI (x32 on x86_64)
    foreign_from: int | None = None


CLONE3 = 435  # the same number on every architecture since Linux 5.3

#: the calls refused on every architecture, with their numbers there (x86_64, aarch64);
#: aarch64 has no fork or vfork (its C library uses clone)
REFUSED: dict[str, tuple[int | None, int | None]] = {
    "fork": (57, None),
    "vfork": (58, None),
    "ptrace": (101, 117),
    "mount": (165, 40),
    "umount2": (166, 39),
    "pivot_root": (155, 41),
    "chroot": (161, 51),
    "unshare": (272, 97),
    "setns": (308, 268),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "keyctl": (250, 219),
    "bpf": (321, 280),
    "perf_event_open": (298, 241),
    "userfaultfd": (323, 282),
    "kexec_load": (246, 104),
    "init_module": (175, 105),
    "finit_module": (313, 273),
    "delete_module": (176, 106),
    "process_vm_writev": (311, 271),
    # memory no limit counts (RLIMIT_AS sees it only while it is mapped)
    "memfd_create": (319, 279),
    "memfd_secret": (447, 447),
    "shmget": (29, 194),
    "shmat": (30, 196),
    "shmctl": (31, 195),
    "shmdt": (67, 197),
    "msgget": (68, 186),
    "semget": (64, 190),
    # numbered alike everywhere since Linux 5.1
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "open_tree": (428, 428),
    "move_mount": (429, 429),
    "fsopen": (430, 430),
    "fsconfig": (431, 431),
    "fsmount": (432, 432),
    "fspick": (433, 433),
    "mount_setattr": (442, 442),
}


def _numbers(column: int) -> tuple[int, ...]:
    return tuple(n for numbers in REFUSED.values() if (n := numbers[column]) is not None)


ARCHITECTURES: dict[str, Architecture] = {
    "x86_64": Architecture(
        audit=0xC000003E, clone=56, refused=_numbers(0), foreign_from=0x40000000
    ),
    "aarch64": Architecture(audit=0xC00000B7, clone=220, refused=_numbers(1)),
}


def program(machine: str | None = None, *, threads: bool = True) -> bytes | None:
    """The filter for ``machine`` (default: this one, ``platform.machine()``) as the bytes
    bubblewrap reads, or None where no filter is written for it. Without ``threads``, no
    ``clone`` at all: a process that cannot start threads either (a student's code needs
    none, and nothing else bounds their number where the grader runs as root)."""
    arch = ARCHITECTURES.get(machine or platform.machine())
    if arch is None:
        return None
    # Each entry: (opcode, value, jump-if-true label, jump-if-false label); None: next.
    code: list[tuple[int, int, str | None, str | None]] = [
        (LOAD_WORD, ARCH, None, None),
        (JUMP_EQUAL, arch.audit, None, "kill"),
        (LOAD_WORD, NR, None, None),
    ]
    if arch.foreign_from is not None:
        code.append((JUMP_AT_LEAST, arch.foreign_from, "kill", None))
    code.append((JUMP_EQUAL, arch.clone, "clone", None))
    code.append((JUMP_EQUAL, CLONE3, "enosys", None))
    code += [(JUMP_EQUAL, number, "refuse", None) for number in arch.refused]
    code.append((RETURN, ALLOW, None, None))
    labels = {"clone": len(code)}
    code += [(LOAD_WORD, ARG0_LOW, None, None)]
    code += [(JUMP_ANY_BIT, CLONE_THREAD if threads else 0, "allow", "refuse")]
    for label, answer in (
        ("allow", ALLOW),
        ("refuse", ERRNO | errno.EPERM),
        ("enosys", ERRNO | errno.ENOSYS),
        ("kill", KILL_PROCESS),
    ):
        labels[label] = len(code)
        code.append((RETURN, answer, None, None))
    return b"".join(_encode(i, entry, labels) for i, entry in enumerate(code))


def _encode(
    index: int, entry: tuple[int, int, str | None, str | None], labels: dict[str, int]
) -> bytes:
    """One ``struct sock_filter``: u16 code, u8 jt, u8 jf, u32 k; jumps relative to the next."""
    opcode, value, if_true, if_false = entry

    def offset(label: str | None) -> int:
        return 0 if label is None else labels[label] - index - 1

    return struct.pack("=HBBI", opcode, offset(if_true), offset(if_false), value)
