"""[llm] What xclaw.yaml says about the model: the provider chain, each call's limits, the retry
schedule, the context window and prices (docs/llm-providers.md)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from xclaw.config.section import Default, Number, Section, Whole, Wording
from xclaw.llm.base import DEFAULT_MAX_TOKENS
from xclaw.llm.prices import Price
from xclaw.llm.provider import ProviderEntry

DEFAULT_MAX_ITERATIONS = 10
DEFAULT_CONTEXT_WINDOW_TOKENS = 150_000
DEFAULT_COMPACT_AT = 0.8
DEFAULT_LLM_TIMEOUT_S = 120.0


def _false_is_none(value: Any) -> Any:
    return None if value is False else value


class LlmSettings(Section):
    # Tried in order; the next one takes over when one fails for good. Read by the settings
    # reader with the environment (XCLAW_MODEL, the providers' key variables): registry.py.
    providers: Annotated[
        tuple[ProviderEntry, ...], Default("from the keys in the environment")
    ] = ()
    # LLM calls per turn before the session goes Failed.
    max_iterations: Annotated[Whole, Field(ge=1)] = DEFAULT_MAX_ITERATIONS
    max_tokens: Annotated[Whole, Field(ge=1)] = DEFAULT_MAX_TOKENS
    temperature: Annotated[Annotated[Number, Field(ge=0)] | None, Default("the provider's")] = None
    context_window_tokens: Annotated[Whole, Field(ge=1)] = DEFAULT_CONTEXT_WINDOW_TOKENS
    # Summarise the conversation when it fills this share of the window (None: trim only).
    compact_at: Annotated[
        Annotated[Number, Field(ge=0.1, le=1)] | None,
        BeforeValidator(_false_is_none),
        Wording(
            "a share of the context window between 0.1 and 1 (or false to trim the oldest "
            "turns instead)",
            bounds=False,
        ),
    ] = DEFAULT_COMPACT_AT
    # Extra attempts of a failed call, and the backoff between them (seconds).
    llm_retries: Annotated[Whole, Field(ge=0)] = 3
    llm_timeout_s: Annotated[Number, Field(gt=0)] = DEFAULT_LLM_TIMEOUT_S
    llm_retry_base_delay: Annotated[Number, Field(ge=0)] = 0.5
    llm_retry_max_delay: Annotated[Number, Field(ge=0)] = 8.0
    llm_retry_after_max: Annotated[Number, Field(ge=0)] = 30.0
    # A model server still starting (connection refused, 503 "loading") is waited for this
    # long, apart from the retries (seconds; 0: not at all).
    llm_startup_wait_s: Annotated[Number, Field(ge=0)] = 120.0
    # Over the providers' own prices (dollars per million tokens).
    prices: Annotated[dict[str, Price], Default("the providers' tables")] = Field(
        default_factory=dict
    )
