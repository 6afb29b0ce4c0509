"""[recorder] Calling the synchronous store from async code without blocking the event loop."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, ParamSpec, TypeVar

from xclaw.threads import BlockingCalls, run_blocking

T = TypeVar("T")
P = ParamSpec("P")
# The role of the store the caller holds (store/base.py): a reader, a run's step writer, ...
S = TypeVar("S", covariant=True)


class StoreCaller(Generic[S]):
    """Runs store calls on a worker thread (conventions: never block the loop): the given
    pool's, or the process's shared one. `store` is the role its holder needs."""

    def __init__(self, store: S, threads: BlockingCalls | None = None) -> None:
        self.store = store
        self._threads = threads

    async def __call__(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """fn(*args, **kwargs) on a worker thread; mypy checks the arguments against fn's."""
        if self._threads is None:
            return await run_blocking(fn, *args, **kwargs)
        return await self._threads.call(fn, *args, **kwargs)
