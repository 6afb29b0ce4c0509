"""Messages between workers on PostgreSQL (LISTEN/NOTIFY): in order, large ones by reference,
one channel per schema."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.store.conftest import PostgresBackend, postgres_url

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg() -> Iterator[PostgresBackend]:
    backend = PostgresBackend(postgres_url())
    yield backend
    backend.drop()


class Inbox:
    def __init__(self) -> None:
        self.got: list[dict[str, Any]] = []
        self.cond = threading.Condition()

    def __call__(self, message: dict[str, Any]) -> None:
        with self.cond:
            self.got.append(message)
            self.cond.notify_all()

    def wait(self, n: int, timeout: float = 10) -> list[dict[str, Any]]:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.got) >= n, timeout), self.got
            return list(self.got)


def test_messages_cross_in_order_and_large_ones_by_reference(pg: PostgresBackend) -> None:
    a_store, b_store = pg.open(), pg.open()
    a_in, b_in = Inbox(), Inbox()
    a_bus, b_bus = a_store.open_bus(a_in), b_store.open_bus(b_in)  # type: ignore[attr-defined]
    try:
        big = "x" * 50_000 + "日本"
        for i in range(200):
            a_bus.publish({"i": i, "text": big if i % 50 == 7 else "small"})
        got = b_in.wait(200)
        assert [m["i"] for m in got] == list(range(200))
        assert [m["text"] for m in got if m["i"] % 50 == 7] == [big] * 4
        assert len(a_in.wait(200)) == 200  # the publisher hears itself too (filtered above)
        assert pg.query("SELECT count(*) FROM bus_payloads") == [(4,)]
    finally:
        a_bus.close()
        b_bus.close()
        a_store.close()
        b_store.close()


def test_schemas_do_not_hear_each_other(pg: PostgresBackend) -> None:
    other = PostgresBackend(postgres_url())
    stores = [pg.open(), other.open()]
    inboxes = [Inbox(), Inbox()]
    buses = [s.open_bus(i) for s, i in zip(stores, inboxes, strict=True)]  # type: ignore[attr-defined]
    try:
        buses[0].publish({"to": "first"})
        buses[1].publish({"to": "second"})
        assert inboxes[0].wait(1) == [{"to": "first"}]
        assert inboxes[1].wait(1) == [{"to": "second"}]
        time.sleep(0.3)  # nothing more comes: an absence, waited for a while
        assert len(inboxes[0].got) == len(inboxes[1].got) == 1
    finally:
        for bus in buses:
            bus.close()
        for s in stores:
            s.close()
        other.drop()


def test_a_listener_skips_keys_it_does_not_want(pg: PostgresBackend) -> None:
    store = pg.open()
    inbox = Inbox()
    watched = {"mine"}
    bus = store.open_bus(inbox, watched.__contains__)  # type: ignore[attr-defined]
    try:
        bus.publish({"n": 1}, key="other")
        bus.publish({"n": 2, "big": "y" * 9000}, key="other")  # not even fetched
        bus.publish({"n": 3}, key="mine")
        bus.publish({"n": 4})  # no key: for everyone
        assert [m["n"] for m in inbox.wait(2)] == [3, 4]
        time.sleep(0.3)  # nothing more comes: an absence, waited for a while
        assert len(inbox.got) == 2
    finally:
        bus.close()
        store.close()
