"""[llm] The `openai` SDK's client as xclaw/llm/openai.py uses it, in a module of its own so the
SDK (over 1 s of CPU to import) is loaded by the first request, not by every import of the
provider."""

from __future__ import annotations

from typing import Any

from openai import AsyncOpenAI, DefaultAsyncHttpxClient

from xclaw.llm.faults import DoneMarkerSpy

__all__ = ["Client", "DefaultAsyncHttpxClient"]


class Client(AsyncOpenAI):
    """The SDK's client, watching for the stream's `data: [DONE]` (see DoneMarkerSpy)."""

    _spy: DoneMarkerSpy | None = None

    def _make_sse_decoder(self) -> Any:
        self._spy = DoneMarkerSpy(super()._make_sse_decoder())
        return self._spy

    def saw_done(self) -> bool:
        return self._spy is not None and self._spy.done
