"""The context window an OpenAI-compatible server reports, asked the way each server
answers (payloads as those servers send them; over real HTTP on loopback)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.ports import free_port
from xclaw.llm.openai import OpenAIModel
from xclaw.llm.retry import FallbackChain, RetryingModel
from xclaw.llm.server_info import reported_context_window

# (method, path) -> JSON body; anything else is a 404, as on the real servers.
VLLM = {
    ("GET", "/v1/models"): {
        "object": "list",
        "data": [{"id": "Qwen/Qwen2.5-7B-Instruct", "object": "model", "max_model_len": 32768}],
    }
}
LLAMA_SERVER = {
    ("GET", "/v1/models"): {
        "object": "list",
        "data": [{"id": "qwen.gguf", "object": "model", "meta": {"n_ctx_train": 131072}}],
    },
    ("GET", "/props"): {"default_generation_settings": {"n_ctx": 8192}, "total_slots": 1},
}
LM_STUDIO = {
    ("GET", "/v1/models"): {"object": "list", "data": [{"id": "qwen2.5-7b", "object": "model"}]},
    ("GET", "/api/v0/models/qwen2.5-7b"): {
        "id": "qwen2.5-7b",
        "state": "loaded",
        "max_context_length": 32768,
        "loaded_context_length": 4096,
    },
}
OLLAMA = {
    ("GET", "/v1/models"): {"object": "list", "data": [{"id": "llama3.1:8b", "object": "model"}]},
    ("POST", "/api/show"): {
        "parameters": 'stop "<|eot_id|>"\nnum_ctx 16384',
        "model_info": {"general.architecture": "llama", "llama.context_length": 131072},
    },
}
LLAMA_CPP_PYTHON = {  # reports nothing about its --n_ctx
    ("GET", "/v1/models"): {
        "object": "list",
        "data": [{"id": "/models/gemma.gguf", "object": "model", "owned_by": "me"}],
    }
}


@contextmanager
def serving(routes: dict[tuple[str, str], Any], port: int = 0) -> Iterator[str]:
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a: Any) -> None:
            pass

        def _answer(self, method: str) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            asked.append(f"{method} {self.path}")
            body = routes.get((method, self.path))
            data = json.dumps(body if body is not None else {"detail": "Not Found"}).encode()
            self.send_response(200 if body is not None else 404)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._answer("GET")

        def do_POST(self) -> None:
            self._answer("POST")

    httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.mark.parametrize(
    ("routes", "model", "window"),
    [
        (VLLM, "Qwen/Qwen2.5-7B-Instruct", 32768),  # max_model_len
        (LLAMA_SERVER, "qwen.gguf", 8192),  # /props n_ctx, not the training length
        (LM_STUDIO, "qwen2.5-7b", 4096),  # the loaded length, not the maximum
        (OLLAMA, "llama3.1:8b", 16384),  # num_ctx, not the training length
        (LLAMA_CPP_PYTHON, "gemma", None),
    ],
    ids=["vllm", "llama-server", "lm-studio", "ollama", "llama-cpp-python"],
)
async def test_each_servers_window_is_read_where_it_reports_it(
    routes: dict[tuple[str, str], Any], model: str, window: int | None
) -> None:
    with serving(routes) as root:
        assert await reported_context_window(f"{root}/v1", model) == window


async def test_the_model_asks_once_and_wrappers_pass_it_on() -> None:
    with serving(VLLM) as root:
        m = OpenAIModel("Qwen/Qwen2.5-7B-Instruct", base_url=f"{root}/v1")
        assert await RetryingModel(m).context_window() == 32768
    # Asked once: the server is gone now, the answer stays.
    assert await m.context_window() == 32768
    with serving(LLAMA_SERVER) as root:
        small = OpenAIModel("qwen.gguf", base_url=f"{root}/v1")
        chain = FallbackChain([RetryingModel(m), RetryingModel(small)])
        assert await chain.context_window() == 8192  # the smallest a reply may come from
    assert await OpenAIModel("gpt-4o").context_window() is None  # the hosted API: not asked


async def test_a_server_that_is_down_is_asked_again_later() -> None:
    port = free_port()
    m = OpenAIModel("Qwen/Qwen2.5-7B-Instruct", base_url=f"http://127.0.0.1:{port}/v1")
    assert await m.context_window() is None  # not up yet: not an answer to keep
    with serving(VLLM, port=port):
        assert await m.context_window() == 32768
