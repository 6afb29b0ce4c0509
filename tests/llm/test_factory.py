"""build_model: from settings to a retrying provider or a fallback chain."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.llm.fakes import FakeOpenAIServer, Reply
from xclaw.config.settings import Settings
from xclaw.errors import ConfigError
from xclaw.llm.anthropic import AnthropicModel
from xclaw.llm.base import LLMRequest, Model
from xclaw.llm.factory import build_model
from xclaw.llm.messages import UserMessage
from xclaw.llm.openai import OpenAIModel
from xclaw.llm.provider import ProviderEntry
from xclaw.llm.registry import entry
from xclaw.llm.retry import FallbackChain, RetryingModel
from xclaw.llm.scripted import ScriptedModel


def settings(tmp_path: Path, *providers: ProviderEntry, **kw: object) -> Settings:
    return Settings(
        home=tmp_path,
        database=str(tmp_path / "x.db"),
        workspace_root=tmp_path / "ws",
        providers=providers,
        **kw,
    )  # type: ignore[arg-type]


def test_no_provider_says_how_to_configure_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as e:
        build_model(settings(tmp_path))
    for hint in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", ".env", "XCLAW_MODEL=script:"):
        assert hint in e.value.message


def test_single_provider_is_wrapped_in_retries(tmp_path: Path) -> None:
    m = build_model(
        settings(
            tmp_path,
            entry(
                "anthropic:claude-test", {"api_key": "sk-ant-x", "base_url": "http://127.0.0.1:9"}
            ),
            llm_retries=5,
            llm_timeout_s=7.5,
        )
    )
    assert isinstance(m, RetryingModel) and isinstance(m, Model)
    assert m.retries == 5 and m.name == "anthropic:claude-test"
    assert isinstance(m.inner, AnthropicModel) and m.inner._timeout_s == 7.5


def test_several_providers_make_a_fallback_chain(tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"turns": [{"text": "hi"}]}))
    m = build_model(
        settings(
            tmp_path,
            entry("openai:gpt-test", {"api_key": "sk-x"}),
            entry(f"script:{script}"),
        )
    )
    assert isinstance(m, FallbackChain)
    inners = [x.inner for x in m.models if isinstance(x, RetryingModel)]
    assert [type(x) for x in inners] == [OpenAIModel, ScriptedModel]
    assert m.name == f"openai:gpt-test,script:{script.name}"  # scripts are named by file


def test_missing_keys_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        build_model(settings(tmp_path, entry("anthropic:claude-test")))
    with pytest.raises(ConfigError, match="OPENAI_API_BASE_URL"):
        build_model(settings(tmp_path, entry("openai:gpt-test")))


def test_bad_script_is_reported_at_build_time(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.json: file not found"):
        build_model(settings(tmp_path, entry(f"script:{tmp_path / 'nope.json'}")))


async def test_built_model_talks_to_a_compatible_server(
    tmp_path: Path, openai_server: FakeOpenAIServer
) -> None:
    openai_server.push(Reply.fail(502, "bad gateway"), Reply(text="served"))
    m = build_model(
        settings(
            tmp_path,
            entry("openai:qwen", {"base_url": openai_server.url}),
            llm_retry_base_delay=0.01,
            llm_retry_max_delay=0.01,
        )
    )
    r = await m.complete(LLMRequest(system="", messages=(UserMessage("hi"),)))
    assert r.text == "served" and r.model == "openai:qwen" and len(openai_server.requests) == 2


def test_retry_knobs_come_from_xclaw_yaml(tmp_path: Path) -> None:
    m = build_model(
        settings(
            tmp_path,
            entry("openai:qwen", {"base_url": "http://127.0.0.1:9/v1"}),
            llm_retry_base_delay=0.2,
            llm_retry_max_delay=3,
            llm_retry_after_max=7,
        )
    )
    assert isinstance(m, RetryingModel)
    assert (m.base_delay, m.max_delay, m.max_retry_after) == (0.2, 3.0, 7.0)
