"""[llm] What an OpenAI-compatible server says about the model it serves: its context window.

The chat completions API has no field for it, so each server family is asked where it
reports it, by what the answer contains (never by guessing the server from its name):

- vLLM: `GET /v1/models` -> `max_model_len` of the model;
- llama.cpp's llama-server: `GET /props` -> `default_generation_settings.n_ctx` (the
  serving window; `/v1/models` only has the training length);
- LM Studio: `GET /api/v0/models/<id>` -> `loaded_context_length` (else `max_context_length`);
- Ollama: `POST /api/show` -> `num_ctx` in the model's parameters, when set (otherwise it
  serves with its default, which it does not report);
- llama-cpp-python's server reports none.

Any failure is "not reported": the configured `context_window_tokens` stands.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import httpx

from xclaw.llm.wire import tls_context

log = logging.getLogger("xclaw.llm")

PROBE_TIMEOUT_S = 3.0


class ServerDown(Exception):
    """Nothing answered at all: ask again later rather than keep "not reported"."""


def _whole(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _root(base_url: str) -> str:
    """`http://host:8000/v1` -> `http://host:8000`: the server's own endpoints live there."""
    base = base_url.rstrip("/")
    return base[: -len("/v1")] if base.endswith("/v1") else base


def _from_models(body: Any, model: str) -> int | None:
    """vLLM (and OpenRouter-style lists): the window on the model's entry."""
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        return None
    entries = [e for e in data if isinstance(e, dict)]
    mine = [e for e in entries if e.get("id") == model] or (entries if len(entries) == 1 else [])
    for entry in mine:
        for key in ("max_model_len", "context_length", "max_context_length"):
            found = _whole(entry.get(key))
            if found:
                return found
    return None


def _from_props(body: Any) -> int | None:
    """llama-server: the slots' window."""
    if not isinstance(body, dict):
        return None
    settings = body.get("default_generation_settings")
    if isinstance(settings, dict) and _whole(settings.get("n_ctx")):
        return _whole(settings.get("n_ctx"))
    return _whole(body.get("n_ctx"))


def _from_lm_studio(body: Any) -> int | None:
    if not isinstance(body, dict):
        return None
    return _whole(body.get("loaded_context_length")) or _whole(body.get("max_context_length"))


_NUM_CTX = re.compile(r"^\s*num_ctx\s+(\d+)\s*$", re.MULTILINE)


def _from_ollama(body: Any) -> int | None:
    """Ollama: the model's `num_ctx` parameter. Its `model_info.*.context_length` is the
    training length, not what the server uses, so it is not taken."""
    if not isinstance(body, dict):
        return None
    params = body.get("parameters")
    found = _NUM_CTX.search(params) if isinstance(params, str) else None
    return int(found.group(1)) if found else None


async def reported_context_window(
    base_url: str, model: str, *, api_key: str | None = None, timeout_s: float = PROBE_TIMEOUT_S
) -> int | None:
    """The window the server at `base_url` reports for `model`, or None. Raises ServerDown
    when not one of the probes got an HTTP answer."""
    root = _root(base_url)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    probes: list[tuple[str, str, dict[str, Any] | None, Any]] = [
        ("GET", f"{base_url.rstrip('/')}/models", None, lambda b: _from_models(b, model)),
        ("GET", f"{root}/props", None, _from_props),
        ("GET", f"{root}/api/v0/models/{model}", None, _from_lm_studio),
        ("POST", f"{root}/api/show", {"model": model}, _from_ollama),
    ]
    answered = False
    async with httpx.AsyncClient(
        timeout=timeout_s, headers=headers, verify=tls_context()
    ) as client:
        for method, url, body, read in probes:
            try:
                r = await client.request(method, url, json=body)
            except httpx.HTTPError:
                continue
            answered = True
            if r.status_code != 200:
                continue
            try:
                found = read(r.json())
            except ValueError:
                continue
            if found:
                log.info("%s: context window %d tokens, as the server reports", model, found)
                return int(found)
    if not answered:
        raise ServerDown(base_url)
    return None
