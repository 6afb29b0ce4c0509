"""From settings to one Model: each configured provider wrapped in retries, several of them
in a fallback chain (primary first)."""

from __future__ import annotations

from pathlib import Path

from xclaw.config import ProviderConfig, Settings
from xclaw.errors import ConfigError
from xclaw.llm.base import Model
from xclaw.llm.retry import FallbackChain, RetryingModel

HOW_TO_CONFIGURE = (
    "no LLM provider is configured. Set ANTHROPIC_API_KEY (and optionally ANTHROPIC_MODEL) "
    "or OPENAI_API_KEY (and optionally OPENAI_MODEL, OPENAI_API_BASE_URL for Ollama, vLLM, "
    "llama.cpp, DeepSeek...) in the environment or in .env, or set "
    "XCLAW_MODEL=script:<path to a script.json> to run offline with the scripted model."
)


def build_provider(p: ProviderConfig, settings: Settings) -> Model:
    """One bare provider (no retries) for one `kind:model` spec."""
    if p.kind == "anthropic":
        if not p.api_key:
            raise ConfigError(f"{p.spec}: ANTHROPIC_API_KEY is not set (environment or .env)")
        from xclaw.llm.anthropic import AnthropicModel

        return AnthropicModel(
            p.model,
            api_key=p.api_key,
            base_url=p.base_url,
            timeout_s=settings.llm_timeout_s,
            thinking_budget=p.thinking_budget,
            cache=p.cache,
        )
    if p.kind == "openai":
        if not p.api_key and not p.base_url:
            raise ConfigError(
                f"{p.spec}: set OPENAI_API_KEY, or OPENAI_API_BASE_URL for a local "
                "OpenAI-compatible server that needs no key"
            )
        from xclaw.llm.openai import OpenAIModel

        return OpenAIModel(
            p.model,
            api_key=p.api_key,
            base_url=p.base_url,
            timeout_s=settings.llm_timeout_s,
            first_tool_choice=p.first_tool_choice,
        )
    if p.kind == "script":
        from xclaw.llm.scripted import ScriptedModel

        # Named by file, not full path: the name lands in every llm_call row and tree line.
        return ScriptedModel(p.model, name=f"script:{Path(p.model).name}")
    raise ConfigError(
        f"model {p.spec!r}: expected anthropic:<model>, openai:<model> or script:<path>"
    )


def build_model(settings: Settings) -> Model:
    """The model the runtime talks to. Raises ConfigError, in plain words, when there is none."""
    if not settings.providers:
        raise ConfigError(HOW_TO_CONFIGURE)
    # xclaw.yaml knobs; tests and crash drills use tiny delays.
    base_delay = settings.llm_retry_base_delay
    max_delay = settings.llm_retry_max_delay
    # The longest Retry-After / retry-after-ms a server may impose on one wait.
    max_retry_after = settings.llm_retry_after_max
    models: list[Model] = [
        RetryingModel(
            build_provider(p, settings),
            retries=settings.llm_retries,
            base_delay=base_delay,
            max_delay=max_delay,
            max_retry_after=max_retry_after,
            startup_wait=settings.llm_startup_wait_s,
        )
        for p in settings.providers
    ]
    return models[0] if len(models) == 1 else FallbackChain(models)
