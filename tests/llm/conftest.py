from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.llm.fakes import FakeAnthropicServer, FakeOpenAIServer
from tests.llm.samples import Deltas


@pytest.fixture
def openai_server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as srv:
        yield srv


@pytest.fixture
def anthropic_server() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as srv:
        yield srv


@pytest.fixture
def deltas() -> Deltas:
    return Deltas()
