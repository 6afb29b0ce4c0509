"""[sandbox] Confinement with Landlock, where bubblewrap is missing: a command run without asking
may write only beneath a scratch directory (and to /dev/null), may not bind or connect TCP sockets,
and may not signal processes outside its own domain.

Landlock (Linux >= 5.13, network rules >= 6.7 = ABI 4, scoping >= 6.12 = ABI 6) needs no
privileges: the launcher below (`python -m xclaw.sandbox.landlock SCRATCH -- ARGV…`)
restricts itself, then executes the command, which keeps the restriction, as do all its
children. It also gives up every capability (run by root, a command could otherwise set the
clock or remount). Less than bubblewrap: reading is not restricted (xclaw's home and `.env` stay
readable), UDP is blocked only by the socket filter (socket_filter.py: no socket at all), and
there is no PID namespace. Used only when bubblewrap
cannot run, and only where ABI >= 4 (else no network rule: nothing is confined, so nothing
runs unasked).
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import struct
import sys

from xclaw.sandbox import socket_filter

MIN_ABI = 4  # TCP bind/connect rules: without them a confined command could reach the network

# Syscall numbers are the same on x86_64 and aarch64 (and every arch since 5.13).
_SYS_CREATE_RULESET = 444
_SYS_ADD_RULE = 445
_SYS_RESTRICT_SELF = 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

# Filesystem rights that change something (reading and executing stay unrestricted).
_WRITE_FILE = 1 << 1
_FS_WRITES_V1 = sum(1 << b for b in (1, 4, 5, 6, 7, 8, 9, 10, 11, 12))
_REFER = 1 << 13  # ABI 2
_TRUNCATE = 1 << 14  # ABI 3
_IOCTL_DEV = 1 << 15  # ABI 5
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


@functools.lru_cache(maxsize=1)
def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is absent or disabled."""
    if platform.system() != "Linux":
        return 0
    try:
        version = _libc().syscall(_SYS_CREATE_RULESET, None, 0, _CREATE_RULESET_VERSION)
    except (OSError, AttributeError):
        return 0
    return max(int(version), 0)


def available() -> bool:
    return landlock_abi() >= MIN_ABI


def confine_argv(argv: list[str], scratch: str) -> list[str]:
    """`argv` run under the launcher: Landlock first, then the command."""
    return [sys.executable, "-m", "xclaw.sandbox.landlock", scratch, "--", *argv]


def _rights(abi: int) -> tuple[int, int, int]:
    fs = _FS_WRITES_V1
    if abi >= 2:
        fs |= _REFER
    if abi >= 3:
        fs |= _TRUNCATE
    if abi >= 5:
        fs |= _IOCTL_DEV
    net = _NET_BIND_TCP | _NET_CONNECT_TCP if abi >= 4 else 0
    scoped = _SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL if abi >= 6 else 0
    return fs, net, scoped


def restrict_self(scratch: str) -> None:
    """Restrict this process (and what it executes) to writing beneath `scratch`."""
    abi = landlock_abi()
    if abi < MIN_ABI:
        raise OSError(f"Landlock ABI {abi} is too old (need {MIN_ABI})")
    libc = _libc()
    fs, net, scoped = _rights(abi)
    attr = struct.pack("QQQ", fs, net, scoped) if abi >= 6 else struct.pack("QQ", fs, net)
    buf = ctypes.create_string_buffer(attr, len(attr))
    fd = libc.syscall(_SYS_CREATE_RULESET, buf, len(attr), 0)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
    try:
        file_rights = _WRITE_FILE | (_TRUNCATE if abi >= 3 else 0) | (_IOCTL_DEV if abi >= 5 else 0)
        for path, rights in ((scratch, fs), ("/dev/null", file_rights)):
            pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                rule = struct.pack("=Qi", rights, pfd)  # packed: u64 allowed_access, s32 fd
                rbuf = ctypes.create_string_buffer(rule, len(rule))
                if libc.syscall(_SYS_ADD_RULE, fd, _RULE_PATH_BENEATH, rbuf, 0) != 0:
                    raise OSError(ctypes.get_errno(), f"landlock_add_rule {path}")
            finally:
                os.close(pfd)
        _drop_capabilities(libc)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.syscall(_SYS_RESTRICT_SELF, fd, 0) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
        socket_filter.install()  # Landlock leaves UDP and pathname Unix sockets reachable
    finally:
        os.close(fd)


_PR_CAPBSET_DROP = 24
_PR_SET_SECUREBITS = 28
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
# NOROOT, NO_SETUID_FIXUP and KEEP_CAPS off, each locked: root gains nothing on exec.
_SECUREBITS_LOCKED_NOROOT = 0b101111


def _drop_capabilities(libc: ctypes.CDLL) -> None:
    """Landlock restricts file and network access, not capabilities: run by root, a command
    could still set the clock (`date -s`), load modules, or remount. So, when we hold any,
    the command gets none: the bounding set is emptied, and with SECBIT_NOROOT locked the
    executed command starts with no capabilities even as uid 0."""
    if os.geteuid() != 0 and not _has_capabilities():
        return
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    for cap in range(64):
        libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)  # EINVAL past the last capability
    if libc.prctl(_PR_SET_SECUREBITS, _SECUREBITS_LOCKED_NOROOT, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECUREBITS)")


def _has_capabilities() -> bool:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(("CapPrm:", "CapAmb:")) and int(line.split()[1], 16):
                    return True
    except OSError:
        return True
    return False


def main(args: list[str]) -> int:
    if len(args) < 3 or args[1] != "--":
        print("usage: python -m xclaw.sandbox.landlock SCRATCH -- COMMAND…", file=sys.stderr)
        return 2
    scratch, argv = args[0], args[2:]
    try:
        restrict_self(scratch)
    except OSError as e:
        # Never run the command unconfined: it was allowed only on that condition.
        print(f"xclaw: cannot confine the command with Landlock: {e}", file=sys.stderr)
        return 126
    os.environ["TMPDIR"] = scratch
    try:
        os.execvp(argv[0], argv)
    except OSError as e:
        print(f"xclaw: cannot run {argv[0]!r}: {e}", file=sys.stderr)
        return 127
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
