"""`a2a:` of xclaw.yaml (docs/a2a.md, docs/configuration.md): the remote agents' credentials
are secrets to the redactor, and a bad entry is a ConfigError naming it."""

from __future__ import annotations

import pytest

from xclaw.config.settings import read_settings
from xclaw.errors import ConfigError
from xclaw.tools.a2a_call import A2aCallTool
from xclaw.tools.registry import default_tools

AGENTS = {
    "a2a": {
        "agents": {
            "reviewer": {
                "card_url": "https://review.example/.well-known/agent-card.json",
                "token": "tok-literal-123456",
                "headers": {"X-Key": "${REVIEW_KEY}"},
            }
        }
    }
}


def test_tokens_and_substituted_values_are_secrets() -> None:
    settings = read_settings(AGENTS, {"REVIEW_KEY": "from-the-env-987654"})
    secrets = settings.secret_values()
    assert "tok-literal-123456" in secrets and "from-the-env-987654" in secrets
    assert settings.a2a.agents["reviewer"].headers == {"X-Key": "from-the-env-987654"}


def test_a2a_call_is_a_tool_only_when_agents_are_named() -> None:
    assert "a2a_call" not in default_tools(read_settings({}, {}).tool_setup())
    tool = default_tools(read_settings(AGENTS, {"REVIEW_KEY": "k"}).tool_setup())["a2a_call"]
    assert isinstance(tool, A2aCallTool) and tool.input_schema["properties"]["agent"]["enum"] == [
        "reviewer"
    ]


@pytest.mark.parametrize(
    ("conf", "words"),
    [
        ({"a2a": {"agents": {"bad name": {"card_url": "x"}}}}, "agent name"),
        ({"a2a": {"agents": {"r": {}}}}, "card_url"),
        ({"a2a": {"agents": {"r": {"card_url": "x", "timeout_s": 0}}}}, "timeout_s"),
        ({"a2a": {"agents": {"r": {"card_url": "${NOPE}"}}}}, "NOPE"),
        ({"a2a": {"agent": {}}}, "did you mean 'agents'"),
    ],
)
def test_a_bad_entry_is_refused_naming_it(conf: dict[str, object], words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        read_settings(conf, {})
