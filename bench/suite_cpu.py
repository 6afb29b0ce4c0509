"""Where a command's CPU goes, by kind of process: the test suite's, by default.

The suite is CPU-bound on two CPUs (docs/testing.md), and the per-test profile
(`XCLAW_TEST_PROFILE`) sees only the processes a test reaps: not Chromium, PostgreSQL's
backends, podman, a server killed rather than waited for. This counts them all. The kernel's
process accounting (acct(2), called here through ctypes: no package needed) writes a record as each
process exits — its own user and system CPU, pid and command name — and a sampler reads each
new pid's command line from /proc every 50 ms, so a record can be named by what ran
(`xclaw serve`, a pytest worker, a crash test's child, Chromium's renderer) rather than
`python`. Processes alive when the command ends (PostgreSQL's server, a leaked one) are not
counted; a process that lives under 50 ms may go unnamed (it is then counted by its command
name).

    sudo .venv/bin/python bench/suite_cpu.py [--out DIR] [-- COMMAND ...]

Without a command it runs the README's test command with the environment `.ci/run` sets (run
it from a checkout `.ci/run` prepared: its venv, and the caches of the llama and Phoenix
tiers). Needs root (CAP_SYS_PACCT) and a kernel built
with BSD process accounting (/proc/sys/kernel/acct exists). Printed: CPU-s, share and count
per kind, largest first, and the command's wall time; `--out` keeps the raw accounting file
and the command lines.
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import ctypes.util
import os
import re
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# struct acct_v3 (linux/acct.h): flag, version, tty, exitcode, uid, gid, pid, ppid, btime,
# etime (float), utime, stime, mem, io, rw, minflt, majflt, swaps (comp_t), comm[16].
ACCT_V3 = struct.Struct("=BBHIIIIIIf8H16s")
AHZ = 100  # the ticks acct's times count


@dataclass(frozen=True)
class Exited:
    pid: int
    ppid: int
    comm: str
    cpu_s: float
    started: float  # epoch seconds (whole: acct's resolution)
    lived_s: float


def comp_t(v: int) -> int:
    """acct's 16-bit float: a 13-bit mantissa and a 3-bit base-8 exponent."""
    return (v & 0x1FFF) << (3 * (v >> 13))


def read_records(path: Path) -> list[Exited]:
    data = path.read_bytes()
    out = []
    for off in range(0, len(data) - ACCT_V3.size + 1, ACCT_V3.size):
        f = ACCT_V3.unpack_from(data, off)
        if f[1] != 3:
            raise SystemExit(f"{path}: not version 3 accounting records (version {f[1]})")
        utime, stime = comp_t(f[10]), comp_t(f[11])
        comm = f[18].split(b"\0", 1)[0].decode(errors="replace")
        out.append(
            Exited(
                pid=f[6],
                ppid=f[7],
                comm=comm,
                cpu_s=(utime + stime) / AHZ,
                started=float(f[8]),
                lived_s=f[9] / AHZ,
            )
        )
    return out


def set_accounting(path: Path | None) -> None:
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    arg = None if path is None else os.fsencode(path)
    if libc.acct(arg) != 0:
        err = ctypes.get_errno()
        raise SystemExit(
            f"acct({path}): {os.strerror(err)} — process accounting needs root and a kernel "
            "with BSD process accounting (/proc/sys/kernel/acct)"
        )


class CommandLines(threading.Thread):
    """Each pid's command lines as seen every 50 ms, with when each was first seen: a new
    pid, an exec, or the pid taken again by a later process (pids wrap at pid_max, 32,768
    here, and a suite starts ~20,000 processes)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.seen: dict[int, list[tuple[float, str]]] = collections.defaultdict(list)
        self.stopped = threading.Event()

    def run(self) -> None:
        live: dict[int, str] = {}
        while not self.stopped.wait(0.05):
            now = time.time()
            current: dict[int, str] = {}
            for name in os.listdir("/proc"):
                if not name.isdigit():
                    continue
                try:
                    with open(f"/proc/{name}/cmdline", "rb") as f:
                        cmd = f.read(400).replace(b"\0", b" ").decode(errors="replace").strip()
                except OSError:
                    continue
                if not cmd:
                    continue
                pid = int(name)
                current[pid] = cmd
                if live.get(pid) != cmd:
                    self.seen[pid].append((now, cmd))
            live = current

    def named(self, rec: Exited) -> str | None:
        """The last command line its pid showed while `rec`'s process lived."""
        start, end = rec.started - 1.0, rec.started + rec.lived_s + 1.0
        during = [cmd for at, cmd in self.seen.get(rec.pid, ()) if start <= at <= end]
        return during[-1] if during else None


# A kind of process by its command line (first match), else by its command name.
KINDS: tuple[tuple[str, str], ...] = (
    (r"exec\(eval\(sys\.stdin\.readline", "pytest workers (the tests' own code)"),
    (r"-m pytest\b", "pytest controller"),
    (r"-m xclaw serve\b", "xclaw serve"),
    (r"(-m xclaw|bin/xclaw) \w", "xclaw, other commands"),
    (r"-m mypy\b", "mypy"),
    (r"llama_cpp", "llama server"),
    (r"^/usr/bin/bwrap|xclaw\.sandbox\.", "sandbox (bwrap, landlock, socket filter)"),
    (r"/chromium", "chromium"),
    (r"playwright/driver", "playwright's driver (node)"),
    (r"-m pip\b|bin/pip\b", "pip (the README's install, tested)"),
    (r"phoenix", "phoenix"),
    (r"\bweed\b", "seaweedfs"),
    (r"^postgres|postgres:", "postgresql"),
    (r"\bnode\b|mcp-server|npm", "node (npm MCP, AG-UI, ACP)"),
    (r"podman|conmon|runc|catatonit", "podman, runc"),
    (r"child\.py|mcp_servers/|torture", "test helpers (crash children, MCP test servers)"),
)
COMMS: tuple[tuple[str, str], ...] = (
    (
        r"^(chromium|HangWatcher|ThreadPool|SignalInspector|PerfettoTrace|sandbox_ipc|Chrome_)",
        "chromium",
    ),
    (r"^postgres", "postgresql"),
    (r"^(podman|conmon|runc|catatonit)", "podman, runc"),
    (r"^(node|libuv-worker|mcp-server)", "node (npm MCP, AG-UI, ACP)"),
    (r"^(bash|sh|dash)$", "shells"),
)


def kind_of(rec: Exited, cmd: str | None) -> str:
    if cmd is not None:
        for pattern, kind in KINDS:
            if re.search(pattern, cmd):
                return kind
    for pattern, kind in COMMS:
        if re.search(pattern, rec.comm):
            return kind
    return (
        f"other: {rec.comm}"
        if cmd is None
        else f"other {rec.comm}: {' '.join(cmd.split()[:2])[:60]}"
    )


def suite_command() -> tuple[list[str], dict[str, str]]:
    """The README's test command with CI's switches (.ci/run's environment)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "xclaw-ci"
    env = dict(os.environ)
    env.setdefault("XCLAW_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
    for need in (
        "PG",
        "BROWSER",
        "BWRAP",
        "NGINX",
        "S3",
        "PHOENIX",
        "LLAMA",
        "PODMAN",
        "NPM_MCP",
        "NPM_AGUI",
        "NPM_ACP",
    ):
        env.setdefault(f"XCLAW_TEST_REQUIRE_{need}", "1")
    env.setdefault("XCLAW_TEST_PHOENIX", str(cache / "venv-phoenix/bin/phoenix"))
    env.setdefault("XCLAW_TEST_LLAMA", str(cache / "venv-llama/bin/python"))
    return [str(ROOT / ".venv/bin/python"), "-m", "pytest"], env


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="keep the accounting file and command lines here")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="after --: what to run")
    args = ap.parse_args()
    command = [c for c in args.command if c != "--"] or None
    env = dict(os.environ)
    if command is None:
        command, env = suite_command()
    out = args.out or Path(tempfile.mkdtemp(prefix="suite-cpu-"))
    out.mkdir(parents=True, exist_ok=True)
    pacct = out / "pacct"
    pacct.write_bytes(b"")
    lines = CommandLines()
    lines.start()
    set_accounting(pacct)
    started = time.monotonic()
    try:
        rc = subprocess.call(command, env=env, cwd=ROOT)
    finally:
        wall = time.monotonic() - started
        set_accounting(None)
        lines.stopped.set()
        lines.join()
    records = read_records(pacct)
    (out / "cmdlines.tsv").write_text(
        "".join(
            f"{pid}\t{at:.2f}\t{cmd}\n"
            for pid, seen in sorted(lines.seen.items())
            for at, cmd in seen
        )
    )
    cpu: dict[str, float] = collections.defaultdict(float)
    count: collections.Counter[str] = collections.Counter()
    for rec in records:
        k = kind_of(rec, lines.named(rec))
        cpu[k] += rec.cpu_s
        count[k] += 1
    total = sum(cpu.values())
    print(
        f"\n{' '.join(command)}: exit {rc}, {wall:.0f} s wall, {total:.0f} CPU-s in "
        f"{len(records)} processes that exited ({os.cpu_count()} CPUs: "
        f"{100 * total / (wall * (os.cpu_count() or 1)):.0f} % of the machine)"
    )
    print(f"{'CPU-s':>8} {'share':>6} {'procs':>6}  kind")
    for k, v in sorted(cpu.items(), key=lambda kv: -kv[1]):
        if v >= 0.005 * total:
            print(f"{v:8.1f} {100 * v / total:5.1f}% {count[k]:6d}  {k}")
    rest = sum(v for v in cpu.values() if v < 0.005 * total)
    print(f"{rest:8.1f} {100 * rest / total:5.1f}%          (kinds under 0.5 % each)")
    print(f"raw records and command lines: {out}")
    sys.exit(rc)


if __name__ == "__main__":
    main()
