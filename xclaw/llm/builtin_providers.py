"""[llm] The providers xclaw ships: Anthropic, any OpenAI-compatible server, the scripted model.
Declared here, without their SDKs (imported when a model is built), so that reading the
settings stays light."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

from pydantic import BeforeValidator, Field

from xclaw.config.section import Flag, Section, Whole, Wording, WrongType
from xclaw.errors import ConfigError
from xclaw.llm.base import Model
from xclaw.llm.prices import Price
from xclaw.llm.provider import KeyedEntry, Provider, ProviderEntry

if TYPE_CHECKING:
    from xclaw.llm.settings import LlmSettings

MIN_THINKING_BUDGET = 1024  # Anthropic's smallest budget_tokens


class Thinking(Section):
    """Anthropic extended thinking: `thinking: {budget_tokens: N}`."""

    budget_tokens: Annotated[Whole, Field(ge=MIN_THINKING_BUDGET)]


def _off_is_none(value: Any) -> Any:
    return None if value is False else value


class AnthropicEntry(KeyedEntry):
    # Extended thinking (None or `false`: off).
    thinking: Annotated[Thinking | None, BeforeValidator(_off_is_none)] = None
    # Prompt-cache breakpoints (docs/llm-providers.md).
    cache: Flag = True


def _tool_choice(value: Any) -> Any:
    """`required` or a tool's name (which tools a request offers is known only then: a name
    none of them has fails that call, xclaw.llm.openai.tool_choice)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise WrongType("not a string")
    if not value.strip() or value.strip() in ("auto", "none"):
        raise ValueError(
            "must be `required` (any tool) or the name of a tool (leave it out for the "
            f"server's default), got {value!r}"
        )
    return value.strip()


class OpenAIEntry(KeyedEntry):
    # The `tool_choice` of each turn's first call — `required` (any tool) or a tool's name —
    # for small local models that answer in words instead of acting (none: the server's
    # default, on every call).
    first_tool_choice: Annotated[
        str | None,
        BeforeValidator(_tool_choice),
        Wording("`required` (any tool) or the name of a tool", bounds=False),
    ] = None


class AnthropicProvider(Provider[AnthropicEntry]):
    kind = "anthropic"
    entry = AnthropicEntry
    key_variables = ("ANTHROPIC_API_KEY",)
    base_url_variables = ("ANTHROPIC_BASE_URL",)
    default_model = "claude-sonnet-4-5"
    model_variable = "ANTHROPIC_MODEL"
    setup_hint = "ANTHROPIC_API_KEY (and optionally ANTHROPIC_MODEL)"
    hosts = frozenset({"api.anthropic.com"})
    # List prices when this was written; check the provider's page.
    prices: ClassVar[Mapping[str, Price]] = {
        "claude-opus-4-5": Price(input=5.0, output=25.0, cache_read=0.5, cache_write=6.25),
        "claude-opus-4-1": Price(input=15.0, output=75.0, cache_read=1.5, cache_write=18.75),
        "claude-opus-4": Price(input=15.0, output=75.0, cache_read=1.5, cache_write=18.75),
        "claude-sonnet-4-5": Price(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75),
        "claude-sonnet-4": Price(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75),
        "claude-3-7-sonnet": Price(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75),
        "claude-3-5-sonnet": Price(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75),
        "claude-haiku-4-5": Price(input=1.0, output=5.0, cache_read=0.1, cache_write=1.25),
        "claude-3-5-haiku": Price(input=0.8, output=4.0, cache_read=0.08, cache_write=1.0),
    }

    def build(self, entry: AnthropicEntry, llm: LlmSettings) -> Model:
        if not entry.api_key:
            raise ConfigError(f"{entry.model}: ANTHROPIC_API_KEY is not set (environment or .env)")
        from xclaw.llm.anthropic import AnthropicModel

        return AnthropicModel(
            entry.model_name,
            api_key=entry.api_key,
            base_url=entry.base_url,
            timeout_s=llm.llm_timeout_s,
            thinking_budget=entry.thinking.budget_tokens if entry.thinking else None,
            cache=entry.cache,
        )


class OpenAIProvider(Provider[OpenAIEntry]):
    """OpenAI, and any server that speaks its chat completions (Ollama, vLLM, llama.cpp,
    DeepSeek): one with no key needs only its URL."""

    kind = "openai"
    entry = OpenAIEntry
    key_variables = ("OPENAI_API_KEY",)
    base_url_variables = ("OPENAI_API_BASE_URL", "OPENAI_BASE_URL")
    default_model = "gpt-4o-mini"
    model_variable = "OPENAI_MODEL"
    setup_hint = (
        "OPENAI_API_KEY (and optionally OPENAI_MODEL, and the server's URL in "
        "OPENAI_API_BASE_URL or OPENAI_BASE_URL for Ollama, vLLM, llama.cpp, DeepSeek...)"
    )
    # OpenAI's, and DeepSeek's (whose models are priced here too).
    hosts = frozenset({"api.openai.com", "api.deepseek.com"})
    prices: ClassVar[Mapping[str, Price]] = {
        "gpt-4o": Price(input=2.5, output=10.0, cache_read=1.25),
        "gpt-4o-mini": Price(input=0.15, output=0.6, cache_read=0.075),
        "gpt-4.1": Price(input=2.0, output=8.0, cache_read=0.5),
        "gpt-4.1-mini": Price(input=0.4, output=1.6, cache_read=0.1),
        "gpt-4.1-nano": Price(input=0.1, output=0.4, cache_read=0.025),
        "o4-mini": Price(input=1.1, output=4.4, cache_read=0.275),
        "deepseek-chat": Price(input=0.27, output=1.1, cache_read=0.07),
        "deepseek-reasoner": Price(input=0.55, output=2.19, cache_read=0.14),
    }

    def detect(self, env: Mapping[str, str]) -> str | None:
        """A key, or only a server's URL (a local server that needs no key)."""
        if not any(env.get(n) for n in (*self.key_variables, *self.base_url_variables)):
            return None
        chosen = env.get(self.model_variable) if self.model_variable else None
        return f"{self.kind}:{chosen or self.default_model}"

    def build(self, entry: OpenAIEntry, llm: LlmSettings) -> Model:
        if not entry.api_key and not entry.base_url:
            raise ConfigError(
                f"{entry.model}: set OPENAI_API_KEY, or the server's URL in "
                f"{' or '.join(self.base_url_variables)} for a local OpenAI-compatible server "
                "that needs no key"
            )
        from xclaw.llm.openai import OpenAIModel

        return OpenAIModel(
            entry.model_name,
            api_key=entry.api_key,
            base_url=entry.base_url,
            timeout_s=llm.llm_timeout_s,
            first_tool_choice=entry.first_tool_choice,
        )


class ScriptProvider(Provider[ProviderEntry]):
    """The scripted model (docs/scripted-model.md): `script:<path to a script.json>`."""

    kind = "script"
    entry = ProviderEntry
    spec_form = "script:<path>"
    setup_hint = "XCLAW_MODEL=script:<path to a script.json> to run offline with the scripted model"

    def build(self, entry: ProviderEntry, llm: LlmSettings) -> Model:
        from xclaw.llm.scripted import ScriptedModel

        # Named by file, not full path: the name lands in every llm_call row and tree line.
        return ScriptedModel(entry.model_name, name=f"script:{Path(entry.model_name).name}")


BUILTIN_PROVIDERS: tuple[Provider[Any], ...] = (
    AnthropicProvider(),
    OpenAIProvider(),
    ScriptProvider(),
)
