"""[sandbox] No sockets for a confined command: a seccomp filter that refuses `socket()`, any
family.

A network namespace (bubblewrap) or Landlock's TCP rules keep a confined command off the
network, but not off *pathname* Unix sockets: they are files, and connecting to one on a
read-only mount still works. On a typical machine that reaches PostgreSQL
(`/run/postgresql/.s.PGSQL.5432`, often with `trust` for local users), MySQL, D-Bus or Docker
— as good as the network, or better. And Landlock has rules for TCP only: UDP (a DNS query to
anywhere) would still carry data out. A command run without asking needs no socket at all, so
it gets this filter too: `socket()` fails with EACCES whatever the family (AF_UNIX, AF_INET
UDP…; `socketpair` stays), and so does `io_uring_setup` (io_uring could open and connect
sockets without passing through the `socket` system call). System calls of a foreign ABI
(i386 `socketcall`, x32) are refused whole.

The launcher (`python -m xclaw.sandbox.socket_filter -- ARGV…`) installs the filter, then
executes the command, which keeps it, as do all its children (with no_new_privs). Only x86_64
and aarch64 have a filter; elsewhere `program()` is None and docs/security.md says what
that leaves.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
import sys

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_X32_BIT = 0x40000000
_IO_URING_SETUP = 425  # the same number on every architecture since 5.1
# machine: (AUDIT_ARCH_*, __NR_socket)
_ARCHES = {"x86_64": (0xC000003E, 41), "aarch64": (0xC00000B7, 198)}


def _ins(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def program() -> bytes | None:
    """The BPF program for this machine, or None where xclaw has none."""
    arch = _ARCHES.get(platform.machine())
    if arch is None:
        return None
    audit_arch, nr_socket = arch
    ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    deny = _RET_ERRNO | errno.EACCES
    return b"".join(
        [
            _ins(ld, 0, 0, 4),  # 0: seccomp_data.arch
            _ins(jeq, 0, 5, audit_arch),  # 1: a foreign ABI -> 7 (deny)
            _ins(ld, 0, 0, 0),  # 2: seccomp_data.nr
            _ins(jge, 3, 0, _X32_BIT),  # 3: x32 -> 7
            _ins(jeq, 2, 0, _IO_URING_SETUP),  # 4: io_uring_setup -> 7
            _ins(jeq, 1, 0, nr_socket),  # 5: socket, any family -> 7
            _ins(ret, 0, 0, _RET_ALLOW),  # 6
            _ins(ret, 0, 0, deny),  # 7
        ]
    )


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install() -> bool:
    """Install the filter on this process (and what it executes); False where there is none
    for this architecture. OSError if the kernel refuses it."""
    prog = program()
    if prog is None:
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(prog, len(prog))
    fprog = _Fprog(len(prog) // 8, ctypes.cast(buf, ctypes.c_void_p))
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")
    return True


def confine_argv(argv: list[str]) -> list[str]:
    """`argv` run under the launcher (unchanged where this machine has no filter)."""
    if program() is None:
        return argv
    return [sys.executable, "-m", "xclaw.sandbox.socket_filter", "--", *argv]


def launcher_paths() -> list[str]:
    """What the launcher needs to start: the interpreter's installation (a venv and the Python
    it was made from) and the directory that holds the xclaw package (an editable install's
    checkout). A sandbox that hides a directory holding one of them (bubblewrap's private
    /tmp, say, with xclaw installed in a venv under /tmp) must show it again, read-only."""
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    found: list[str] = []
    for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(sys.executable), here):
        for q in (os.path.abspath(p), os.path.realpath(p)):
            if q not in found:
                found.append(q)
    return found


def main(args: list[str]) -> int:
    if len(args) < 2 or args[0] != "--":
        print("usage: python -m xclaw.sandbox.socket_filter -- COMMAND…", file=sys.stderr)
        return 2
    argv = args[1:]
    try:
        install()
    except OSError as e:
        # Never run the command without it: it was allowed only on that condition.
        print(f"xclaw: cannot filter the command's sockets: {e}", file=sys.stderr)
        return 126
    try:
        os.execvp(argv[0], argv)
    except OSError as e:
        print(f"xclaw: cannot run {argv[0]!r}: {e}", file=sys.stderr)
        return 127
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
