"""Benchmark of session containers (docs/containers.md) beside today's bubblewrap path.

    python bench/container_bench.py             # the full run (~1-2 min; root, podman, runc)
    python bench/container_bench.py --quick     # fewer rounds, a 10 MB install: a smoke test
    python bench/container_bench.py --shell-only  # only the per-command figures (any checkout)

Prints (goals in bench/README.md):
  1. per-command cost of the shell tool running `true`: a plain process, bubblewrap, and a
     session's container (`podman exec`), the median of N calls each, through ShellTool.run
     as a step runs it (lifeline, step processes, output reading);
  2. container start with a warm image (the image in podman's store): a session's container
     made and started (`Containers.ensure`), the median of N (goal <= 1.5 s);
  3. capture of a step that changed nothing outside the workspace: the container layer's
     walk with its stat cache, storing nothing (goal <= 10 ms), after a layer of 200 files;
  4. capture of an install of 10, 25 and 50 MB (random bytes, 1 MB files, so compression
     cannot flatter them) into the SQLite store: seconds and MB/s, to show time proportional
     to bytes.
The image is the test image (tests/containers.py), made first if podman lacks it.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from xclaw.sandbox.isolation import Isolation, probe_bwrap
from xclaw.tools.base import ToolContext
from xclaw.tools.shell import ShellTool


def per_command(shell: ShellTool, ctx: ToolContext, rounds: int) -> float:
    """Median ms of `true` through the shell tool."""

    async def go() -> list[float]:
        times = []
        await shell.run({"command": "true"}, ctx)  # warm: imports, first exec
        for _ in range(rounds):
            started = time.perf_counter()
            result = await shell.run({"command": "true"}, ctx)
            times.append((time.perf_counter() - started) * 1000)
            assert not result.is_error, result.content
        return times

    return statistics.median(asyncio.run(go()))


def shell_figures(tmp: Path, rounds: int, containers: object | None) -> None:
    ws = tmp / "ws" / "bench"
    ws.mkdir(parents=True)
    ctx = ToolContext(ws, "bench")
    plain = per_command(ShellTool(isolation=Isolation("none", "bench")), ctx, rounds)
    print(f"per command, plain process:      {plain:7.1f} ms (median of {rounds})")
    bwrap = shutil.which("bwrap")
    if bwrap is not None and probe_bwrap(bwrap) is None:
        iso = Isolation("bwrap", "bench", bwrap=bwrap)
        figure = per_command(ShellTool(isolation=iso), ctx, rounds)
        print(f"per command, bubblewrap:         {figure:7.1f} ms (+{figure - plain:.1f} ms)")
    else:
        print("per command, bubblewrap:         (bwrap cannot run here)")
    if containers is not None:
        iso = Isolation("container", "bench", container=containers)  # type: ignore[arg-type]
        figure = per_command(ShellTool(isolation=iso), ctx, rounds)
        print(f"per command, container (exec):   {figure:7.1f} ms (+{figure - plain:.1f} ms)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--shell-only", action="store_true")
    args = parser.parse_args()
    rounds = 5 if args.quick else 30
    tmp = Path(tempfile.mkdtemp(prefix="xclaw-container-bench-"))
    try:
        if args.shell_only:
            shell_figures(tmp, rounds, None)
            return
        container_figures(tmp, rounds, args.quick)
    finally:
        subprocess.run(["umount", "-R", "-l", str(tmp)], capture_output=True, check=False)
        shutil.rmtree(tmp, ignore_errors=True)


def container_figures(tmp: Path, rounds: int, quick: bool) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.containers import remove_containers, test_image
    from xclaw.sandbox.container.lifecycle import Containers
    from xclaw.sandbox.container.podman import find_podman
    from xclaw.sandbox.container.policy import SandboxPolicy
    from xclaw.store.sqlite.store import SQLiteStore
    from xclaw.workspace.env_layer import EnvLayer

    root = (tmp / "ws").resolve()
    policy = SandboxPolicy("container", test_image(), 1024, 2.0, 256, False)
    containers = Containers(find_podman(), policy, root)
    try:
        shell_figures(tmp, rounds, containers)
        # 2. container start, warm image: made and started, a new session each time.
        starts = []
        for i in range(3 if quick else 10):
            sid = f"start{i}"
            (root / sid).mkdir(parents=True)
            started = time.perf_counter()
            containers.ensure(sid, root / sid, 1)
            starts.append(time.perf_counter() - started)
            containers.remove(sid)
        print(
            f"container start (warm image):    {statistics.median(starts):7.2f} s "
            f"(median of {len(starts)}, goal <= 1.5 s)"
        )

        # 3. capture when nothing changed outside the workspace.
        store = SQLiteStore(tmp / "bench.db")
        sid = "bench"
        info = containers.ensure(sid, root / sid, 1).info
        name = containers.name(sid)
        subprocess.run(
            [
                "podman",
                "exec",
                name,
                "sh",
                "-c",
                "mkdir -p /opt/pkg && for i in $(seq 200); do echo $i > /opt/pkg/f$i; done",
            ],
            check=True,
        )
        layer = EnvLayer(50 << 20, 500 << 20)
        layer.capture(store.snapshots, info.upper)  # the first: everything hashed and stored
        times = []
        for _ in range(rounds * 2):
            started = time.perf_counter()
            _, added = layer.capture(store.snapshots, info.upper)
            times.append((time.perf_counter() - started) * 1000)
            assert added == 0 and layer.last_read == 0
        print(
            f"capture, nothing changed (200 files in the layer): "
            f"{statistics.median(times):6.2f} ms (median of {len(times)}, goal <= 10 ms)"
        )

        # 4. installs of growing size: time proportional to bytes.
        for mb in (10,) if quick else (10, 25, 50):
            subprocess.run(
                [
                    "podman",
                    "exec",
                    name,
                    "sh",
                    "-c",
                    f"mkdir -p /opt/i{mb} && for i in $(seq {mb}); do "
                    f"head -c 1048576 /dev/urandom > /opt/i{mb}/f$i; done",
                ],
                check=True,
            )
            started = time.perf_counter()
            _, added = layer.capture(store.snapshots, info.upper)
            took = time.perf_counter() - started
            print(
                f"capture, {mb} MB installed:        {took:7.2f} s, {added / 1e6:5.1f} MB "
                f"stored ({added / 1e6 / took:5.0f} MB/s)"
            )
        store.close()
    finally:
        remove_containers(root)


if __name__ == "__main__":
    main()
