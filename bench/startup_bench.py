"""What a start of each `xclaw` process costs: CPU seconds (user + system, the child's own
rusage from wait4) of `xclaw --help`, `xclaw serve` to its banner then SIGTERM, a one-shot
`xclaw run` on the scripted model, `xclaw mcp` and `xclaw acp` with their stdin closed (the
host went away: start, then a clean end), and the ops commands `xclaw sessions` and `xclaw
steps` on a small database — beside two floors, `python -c pass` and `python -c "import
xclaw"`, run alternately in the same rounds so a change of the machine's load hits all alike.
The suite starts hundreds of these processes (docs/testing.md), and a user waits for each.

    .venv/bin/python bench/startup_bench.py [--rounds 8] [--code DIR ...]

Every command runs as `python -m xclaw` with this interpreter, as the tests start them.
`--code DIR` (repeatable) puts DIR first on PYTHONPATH: the same venv running another checkout
of xclaw (e.g. `git archive <old commit> | tar -x -C /tmp/old`), measured alternately with the
others in every round, so before and after are side by side. Bytecode is written under a
prefix of its own (PYTHONPYCACHEPREFIX) and one unmeasured round warms it: the environment's
PYTHONDONTWRITEBYTECODE would otherwise make every start compile xclaw from source.

Printed: per code and command, the median CPU-s of the rounds (min-max), its ratio to the
`python -c pass` floor, and — with more than one --code — its ratio to the first code's.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# How long a `xclaw serve` may take to print its banner on a loaded machine.
BANNER_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Start:
    """One kind of process start: its name and how to run it once in `work`."""

    name: str
    run: Callable[[list[str], dict[str, str], Path], float]


def _cpu(proc: subprocess.Popen[bytes]) -> float:
    """Wait for `proc` and return its own user + system CPU seconds."""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime


def _once(args: list[str], env: dict[str, str], cwd: Path) -> float:
    # Pipes, as a host starts `xclaw mcp`/`acp` (asyncio's stdio transports refuse a file, and
    # /dev/null cannot be polled); stdin closed at once.
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            args, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err
        )
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.close()
        proc.stdout.read()
        cpu = _cpu(proc)
        if proc.returncode != 0:
            err.seek(0)
            raise SystemExit(
                f"{args} exited {proc.returncode}:\n{err.read().decode(errors='replace')}"
            )
    return cpu


def command(*argv: str) -> Callable[[list[str], dict[str, str], Path], float]:
    """A start that runs `xclaw ARGV` to its end (stdin closed)."""

    def run(xclaw: list[str], env: dict[str, str], work: Path) -> float:
        return _once([*xclaw, *(a.format(work=work) for a in argv)], env, work)

    return run


def python(code: str) -> Callable[[list[str], dict[str, str], Path], float]:
    def run(xclaw: list[str], env: dict[str, str], work: Path) -> float:
        return _once([xclaw[0], "-c", code], env, work)

    return run


def serve(xclaw: list[str], env: dict[str, str], work: Path) -> float:
    """`xclaw serve` on any free port until its banner is printed, then SIGTERM."""
    proc = subprocess.Popen(
        [*xclaw, "serve", "--port", "0", "--db", str(work / "serve.db")],
        cwd=work,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + BANNER_TIMEOUT_S
    seen = b""
    while b"Ctrl+C stops" not in seen:
        line = proc.stdout.readline()
        if not line or time.monotonic() > deadline:
            proc.kill()
            _cpu(proc)
            raise SystemExit(f"xclaw serve printed no banner:\n{seen.decode(errors='replace')}")
        seen += line
    proc.send_signal(signal.SIGTERM)
    proc.stdout.read()
    return _cpu(proc)


STARTS = [
    Start("python -c pass", python("pass")),
    Start("python -c 'import xclaw'", python("import xclaw")),
    Start("xclaw --help", command("--help")),
    Start("xclaw serve (banner, SIGTERM)", serve),
    Start("xclaw run (scripted, one turn)", command("run", "--db", "{work}/run.db", "hello")),
    Start("xclaw mcp (stdin closed)", command("mcp", "--db", "{work}/mcp.db")),
    Start("xclaw acp (stdin closed)", command("acp", "--db", "{work}/acp.db")),
    Start("xclaw sessions", command("sessions", "--db", "{work}/small.db")),
    Start("xclaw steps", command()),  # its session's id filled in by main (_steps)
]


def environment(code: Path, work: Path, pycache: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "OPENAI_", "XCLAW_", "PYTHON"))
    }
    script = work / "script.json"
    script.write_text(json.dumps({"turns": [{"text": "Done: hello."}]}))
    config = work / "xclaw.yaml"
    config.write_text("approval:\n  mode: yolo\n")
    env.update(
        PYTHONPATH=str(code),
        PYTHONPYCACHEPREFIX=str(pycache),
        XCLAW_HOME=str(work / "home"),
        XCLAW_CONFIG=str(config),
        XCLAW_MODEL=f"script:{script}",
        NO_COLOR="1",
    )
    return env


def small_database(xclaw: list[str], env: dict[str, str], work: Path) -> str:
    """A database of three one-turn sessions; the id of the last."""
    for n in range(3):
        _once([*xclaw, "run", "--db", str(work / "small.db"), f"task {n}"], env, work)
    out = subprocess.run(
        [*xclaw, "sessions", "--db", str(work / "small.db"), "--json"],
        env=env,
        cwd=work,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return str(json.loads(out)[0]["sessionId"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--code", type=Path, action="append", help="a checkout (default: this one)")
    parser.add_argument("--only", action="append", help="measure only starts whose name has this")
    opts = parser.parse_args()
    codes = [c.resolve() for c in opts.code or [ROOT]]
    starts = [
        s
        for s in STARTS
        if not opts.only or s.name.startswith("python") or any(o in s.name for o in opts.only)
    ]
    with tempfile.TemporaryDirectory(prefix="xclaw-startup-") as tmp:
        pycache = Path(tmp) / "pyc"
        works: list[Path] = []
        envs: list[dict[str, str]] = []
        per_code_starts: list[list[Start]] = []
        for i, code in enumerate(codes):
            work = Path(tmp) / f"code{i}"
            work.mkdir()
            env = environment(code, work, pycache)
            session = small_database([sys.executable, "-m", "xclaw"], env, work)
            works.append(work)
            envs.append(env)
            per_code_starts.append(
                [Start(s.name, _steps(session)) if s.name == "xclaw steps" else s for s in starts]
            )
        xclaw = [sys.executable, "-m", "xclaw"]
        cpu: dict[tuple[int, str], list[float]] = {}
        load = [os.getloadavg()[0]]
        for r in range(opts.rounds + 1):  # round 0 warms the bytecode, unmeasured
            # Alternate the order of the codes each round: neither always runs first.
            order = list(range(len(codes)))
            if r % 2:
                order.reverse()
            for s_index in range(len(starts)):
                for i in order:
                    start = per_code_starts[i][s_index]
                    took = start.run(xclaw, envs[i], works[i])
                    if r:
                        cpu.setdefault((i, start.name), []).append(took)
            load.append(os.getloadavg()[0])
            print(f"round {r}/{opts.rounds} done, load {load[-1]:.1f}", file=sys.stderr)
    report(codes, starts, cpu, load, opts.rounds)


def _steps(session: str) -> Callable[[list[str], dict[str, str], Path], float]:
    def run(xclaw: list[str], env: dict[str, str], work: Path) -> float:
        return _once([*xclaw, "steps", session, "--db", str(work / "small.db")], env, work)

    return run


def report(
    codes: list[Path],
    starts: list[Start],
    cpu: dict[tuple[int, str], list[float]],
    load: list[float],
    rounds: int,
) -> None:
    print(
        f"{rounds} alternated rounds, {time.strftime('%Y-%m-%d %H:%M %Z')}, Python "
        f"{sys.version.split()[0]}, load (1 min) {min(load):.1f}-{max(load):.1f}"
    )
    for i, code in enumerate(codes):
        print(f"code {i}: {code}")
    head = f"{'start':32} " + "  ".join(
        f"{'code ' + str(i) + ' CPU-s (min-max)':>26} {'/floor':>6}" for i in range(len(codes))
    )
    if len(codes) > 1:
        head += "  " + "  ".join(f"{f'{i}/0':>6}" for i in range(1, len(codes)))
    print(head)
    for start in starts:
        row = f"{start.name:32} "
        medians = []
        for i in range(len(codes)):
            values = cpu[(i, start.name)]
            floor = statistics.median(cpu[(i, "python -c pass")])
            med = statistics.median(values)
            medians.append(med)
            cell = f"{med:.3f} ({min(values):.3f}-{max(values):.3f})"
            row += f"{cell:>26} {med / floor:>5.1f}x  "
        if len(codes) > 1:
            row += "  ".join(f"{m / medians[0]:>6.2f}" for m in medians[1:])
        print(row.rstrip())


if __name__ == "__main__":
    main()
