"""[llm] From settings to one Model: each configured provider (found in the registry by its kind)
wrapped in retries, several of them in a fallback chain (primary first)."""

from __future__ import annotations

from xclaw.errors import ConfigError
from xclaw.llm import registry
from xclaw.llm.base import Model
from xclaw.llm.legacy import event_model
from xclaw.llm.provider import ProviderEntry
from xclaw.llm.retry import FallbackChain, RetryingModel
from xclaw.llm.settings import LlmSettings


def build_provider(entry: ProviderEntry, llm: LlmSettings) -> Model:
    """One bare provider (no retries) for one link of the chain (a provider package's model
    of the earlier seam adapted: xclaw/llm/legacy.py)."""
    provider = registry.provider(entry.kind)
    if provider is None:  # an entry made by hand, not read by the settings
        raise ConfigError(f"model {entry.model!r}: no provider of kind {entry.kind!r}")
    return event_model(provider.build(entry, llm))


def build_model(llm: LlmSettings) -> Model:
    """The model the runtime talks to. Raises ConfigError, in plain words, when there is none."""
    if not llm.providers:
        raise ConfigError(registry.how_to_configure())
    models: list[Model] = [
        RetryingModel(
            build_provider(p, llm),
            retries=llm.llm_retries,
            base_delay=llm.llm_retry_base_delay,
            max_delay=llm.llm_retry_max_delay,
            # The longest Retry-After / retry-after-ms a server may impose on one wait.
            max_retry_after=llm.llm_retry_after_max,
            startup_wait=llm.llm_startup_wait_s,
        )
        for p in llm.providers
    ]
    return models[0] if len(models) == 1 else FallbackChain(models)
