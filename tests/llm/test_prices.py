"""The price table: built-in list prices apply to the providers' own APIs only; a model
served elsewhere (a local server, a proxy) is priced only by xclaw.yaml's `prices:`."""

from __future__ import annotations

from xclaw.llm.builtin_providers import BUILTIN_PROVIDERS
from xclaw.llm.messages import Usage
from xclaw.llm.prices import Price, PriceTable

MILLION_IN = Usage(prompt_tokens=1_000_000)


def test_built_in_prices_apply_to_the_vendors_own_api() -> None:
    table = PriceTable.with_overrides(None)
    assert table.cost("openai:gpt-4o", MILLION_IN) == 2.5  # no endpoint recorded: the SDK's
    assert table.cost("openai:gpt-4o", MILLION_IN, endpoint="https://api.openai.com/v1") == 2.5
    assert (
        table.cost("openai:deepseek-chat", MILLION_IN, endpoint="https://api.deepseek.com") == 0.27
    )
    assert (
        table.cost("anthropic:claude-sonnet-4-5", MILLION_IN, endpoint="https://api.anthropic.com")
        == 3.0
    )


def test_a_local_server_is_not_priced_as_the_hosted_model_of_the_same_name() -> None:
    table = PriceTable.with_overrides(None)
    for endpoint in (
        "http://127.0.0.1:8080/v1",
        "http://localhost:11434/v1",
        "http://192.168.1.20:8000/v1",
        "https://llm-proxy.example.com/v1",
    ):
        assert table.cost("openai:gpt-4o", MILLION_IN, endpoint=endpoint) is None, endpoint


def test_xclaw_yaml_prices_apply_wherever_the_model_is_served() -> None:
    table = PriceTable.with_overrides(
        {"gpt-4o": Price(input=0, output=0), "gemma3": Price(input=0.1, output=0.2)}
    )
    assert table.cost("openai:gpt-4o", MILLION_IN, endpoint="http://127.0.0.1:8080/v1") == 0.0
    assert table.cost("openai:gemma3-270m", MILLION_IN, endpoint="http://127.0.0.1:1/v1") == 0.1
    assert table.cost("openai:gpt-4o", MILLION_IN) == 0.0  # the override wins everywhere


def test_a_providers_prices_hold_at_its_own_hosts_only() -> None:
    """The prices live with each provider, beside the hosts of its API: Anthropic's at
    api.anthropic.com, not at OpenAI's host (nor the other way round)."""
    table = PriceTable.with_overrides(None)
    assert table.cost("anthropic:claude-sonnet-4-5", MILLION_IN) == 3.0
    assert (
        table.cost("anthropic:claude-sonnet-4-5", MILLION_IN, endpoint="https://api.openai.com")
        is None
    )
    assert table.cost("openai:gpt-4o", MILLION_IN, endpoint="https://api.anthropic.com") is None
    for provider in BUILTIN_PROVIDERS:  # every provider that prices models names its hosts
        assert not provider.prices or provider.hosts, provider.kind


def test_a_table_of_prices_without_hosts_holds_everywhere() -> None:
    """Prices whose provider names no hosts (xclaw.yaml's, in effect) hold at any server."""
    table = PriceTable({"m": Price(input=1, output=1)}, {"n": frozenset({"api.example.com"})})
    assert table.cost("x:m", MILLION_IN, endpoint="http://127.0.0.1:1/v1") == 1.0
