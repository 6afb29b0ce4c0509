"""A real OTLP receiver nobody here wrote: Arize Phoenix (`arize-phoenix` on PyPI), run as its
own process from its own virtualenv (it pins many packages; .ci/run builds one per machine).

`phoenix` is module-scoped: one Phoenix per test module, asked for spans over its REST API
(/v1/projects/default/spans). Where to find it: $XCLAW_TEST_PHOENIX (the `phoenix`
executable), else .venv-phoenix/bin/phoenix in the repository, else the one .ci/run built in
~/.cache/xclaw-ci/venv-phoenix ($XCLAW_CI_CACHE). Missing: the tests skip with
the reason, unless XCLAW_TEST_REQUIRE_PHOENIX is set (CI), where they fail.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 180.0


def _ci_cache() -> Path:
    """Where .ci/run builds Phoenix's virtualenv once per machine."""
    if os.environ.get("XCLAW_CI_CACHE"):
        return Path(os.environ["XCLAW_CI_CACHE"])
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "xclaw-ci"


def phoenix_command() -> str:
    path = os.environ.get("XCLAW_TEST_PHOENIX")
    if not path:
        candidates = [ROOT / ".venv-phoenix", _ci_cache() / "venv-phoenix"]
        found = [c for c in candidates if (c / "bin" / "phoenix").exists()]
        path = str((found or candidates)[0] / "bin" / "phoenix")
    if not Path(path).exists():
        why = f"Arize Phoenix not found at {path} (set XCLAW_TEST_PHOENIX or run .ci/run's setup)"
        if os.environ.get("XCLAW_TEST_REQUIRE_PHOENIX"):
            pytest.fail(why)
        pytest.skip(why)
    return path


@dataclass
class Phoenix:
    port: int
    grpc_port: int
    proc: subprocess.Popen[bytes]
    log: Path

    @property
    def endpoint(self) -> str:
        """The OTLP/HTTP base URL (what OTEL_EXPORTER_OTLP_ENDPOINT takes)."""
        return f"http://127.0.0.1:{self.port}"

    def spans(self, session_id: str | None = None) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            params: dict[str, Any] = {"limit": 1000}
            if cursor:
                params["cursor"] = cursor
            r = httpx.get(f"{self.endpoint}/v1/projects/default/spans", params=params, timeout=30)
            if r.status_code == 404:
                return []  # no project yet: nothing received
            r.raise_for_status()
            body = r.json()
            out.extend(body["data"])
            cursor = body.get("next_cursor")
            if not cursor:
                break
        if session_id is not None:
            out = [s for s in out if s["attributes"].get("gen_ai.conversation.id") == session_id]
        return out

    def wait_for(
        self, session_id: str, done: Callable[[list[dict[str, Any]]], bool], timeout: float = 60
    ) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        spans: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            spans = self.spans(session_id)
            if done(spans):
                return spans
            time.sleep(0.25)
        names = sorted(s["name"] for s in spans)
        raise AssertionError(
            f"Phoenix did not get the spans of {session_id} in {timeout}s: {names}"
        )


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Phoenix]:
    command = phoenix_command()
    work = tmp_path_factory.mktemp("phoenix")
    port, grpc_port = free_port(), free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("OTEL_")},
        "PHOENIX_WORKING_DIR": str(work),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(grpc_port),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    log = work / "phoenix.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [command, "serve"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=work,
        )
    ph = Phoenix(port, grpc_port, proc, log)
    deadline = time.monotonic() + START_TIMEOUT_S
    try:
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"Phoenix exited:\n{log.read_text(errors='replace')[-3000:]}")
            try:
                if httpx.get(f"{ph.endpoint}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"Phoenix not up in {START_TIMEOUT_S}s:\n"
                    f"{log.read_text(errors='replace')[-3000:]}"
                )
            time.sleep(0.25)
        yield ph
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
