"""Calling the synchronous store from async code without blocking the event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Executor
from functools import partial
from typing import Any, TypeVar

from xclaw.store.base import Store

T = TypeVar("T")


class StoreCaller:
    """Runs store calls in a worker thread (conventions: never block the loop)."""

    def __init__(self, store: Store, executor: Executor | None = None) -> None:
        self.store = store
        self._executor = executor

    async def __call__(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, partial(fn, *args, **kwargs))
