"""[store/postgres] Messages between workers on one PostgreSQL database: LISTEN/NOTIFY on one
channel per xclaw schema. The frames a worker's runs emit reach clients attached to other workers,
and approval answers or cancels reach the worker that drives the session.

A payload is `KEY\nJSON`: the message's key (a session id, or empty for messages every
worker reads) and its JSON, or `{"ref": id}` pointing at a row of `bus_payloads` when it is
larger than NOTIFY allows (8000 bytes). A listener drops messages whose key it does not want
before decoding (or fetching) them: a worker spends nothing on sessions nobody watches there. Delivery is at most once and in order per
publishing worker; a listener that loses its connection reconnects, and clients recover
anything missed from the record (a reconnect sends the history).
"""

from __future__ import annotations

import hashlib
import json
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import sql

from xclaw.store.postgres.conn import PgTarget, connect
from xclaw.store.postgres.rows import NOW_MS

log = logging.getLogger("xclaw.bus")

MAX_INLINE_BYTES = 7900  # NOTIFY's limit is 8000 bytes
_BATCH = 256
_KEEP_PAYLOADS_MS = 120_000
_RECONNECT_S = 1.0

Handler = Callable[[dict[str, Any]], None]
Wants = Callable[[str], bool]


def channel_for(schema: str) -> str:
    """One channel per schema; an identifier is at most 63 bytes."""
    name = f"xclaw:{schema}"
    if len(name.encode()) > 63:
        name = "xclaw:" + hashlib.sha256(schema.encode()).hexdigest()[:40]
    return name


class PgBus:
    """A listener thread and a publisher thread, each on a connection of its own."""

    def __init__(
        self, target: PgTarget, schema: str, on_message: Handler, wants: Wants | None = None
    ) -> None:
        self.target = target
        self.channel = channel_for(schema)
        self.on_message = on_message
        self.wants = wants  # called on the listener thread with a message's key
        self._out: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._closed = threading.Event()
        self._listen = self._listen_conn()  # fail now, in words, if the database is away
        self._publish_conn = connect(target)
        self._published = 0
        self._threads = [
            threading.Thread(target=self._listen_loop, name="xclaw-bus-listen", daemon=True),
            threading.Thread(target=self._publish_loop, name="xclaw-bus-publish", daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _listen_conn(self) -> psycopg.Connection:
        conn = connect(self.target)
        conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
        return conn

    # --- publishing -------------------------------------------------------------------------
    def publish(self, message: dict[str, Any], key: str = "") -> None:
        """Queue a message (never blocks, never raises); `key` lets listeners skip it."""
        if not self._closed.is_set():
            self._out.put(key + "\n" + json.dumps(message, ensure_ascii=False, default=str))

    def _publish_loop(self) -> None:
        while not self._closed.is_set():
            first = self._out.get()
            if first is None:
                return
            batch = [first]
            while len(batch) < _BATCH:
                try:
                    item = self._out.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    self._closed.set()
                    break
                batch.append(item)
            try:
                self._send(batch)
            except psycopg.Error as e:
                log.warning(
                    "event=bus_publish_failed dropped=%s error=%r", len(batch), str(e)[:200]
                )
                self._reconnect_publisher()

    def _send(self, batch: list[str]) -> None:
        conn = self._publish_conn
        payloads: list[tuple[str, str]] = []
        with conn.transaction():
            for text in batch:
                if len(text.encode()) > MAX_INLINE_BYTES:
                    key, _, body = text.partition("\n")
                    row = conn.execute(
                        f"INSERT INTO bus_payloads (payload, created_at) VALUES (%s, {NOW_MS}) "
                        "RETURNING id",
                        (body,),
                    ).fetchone()
                    text = key + "\n" + json.dumps({"ref": row[0]})  # type: ignore[index]
                    self._published += 1
                    if self._published % 100 == 0:
                        conn.execute(
                            f"DELETE FROM bus_payloads WHERE created_at < {NOW_MS} - %s",
                            (_KEEP_PAYLOADS_MS,),
                        )
                payloads.append((self.channel, text))
            with conn.cursor() as cur:
                cur.executemany("SELECT pg_notify(%s, %s)", payloads)

    def _reconnect_publisher(self) -> None:
        while not self._closed.is_set():
            try:
                self._publish_conn.close()
                self._publish_conn = connect(self.target)
                return
            except Exception:  # noqa: BLE001 - retried until the database is back
                time.sleep(_RECONNECT_S)

    # --- listening --------------------------------------------------------------------------
    def _listen_loop(self) -> None:
        while not self._closed.is_set():
            try:
                got = [n.payload for n in self._listen.notifies(timeout=0.2, stop_after=_BATCH)]
                for payload in got:
                    self._deliver(payload)
            except psycopg.Error as e:
                if self._closed.is_set():
                    return
                log.warning("event=bus_listen_lost error=%r", str(e)[:200])
                self._relisten()

    def _deliver(self, payload: str) -> None:
        key, _, body = payload.partition("\n")
        if key and self.wants is not None and not self.wants(key):
            return
        try:
            data = json.loads(body)
            if isinstance(data, dict) and set(data) == {"ref"}:
                row = self._listen.execute(
                    "SELECT payload FROM bus_payloads WHERE id = %s", (data["ref"],)
                ).fetchone()
                if row is None:
                    return  # collected already: the client recovers it from the record
                data = json.loads(row[0])
        except (ValueError, TypeError):
            log.warning("event=bus_bad_payload payload=%r", payload[:200])
            return
        try:
            self.on_message(data)
        except Exception:  # a bug in one handler must not stop the listener
            log.exception("event=bus_handler_failed")

    def _relisten(self) -> None:
        while not self._closed.is_set():
            try:
                self._listen.close()
                self._listen = self._listen_conn()
                log.info("event=bus_listening_again channel=%s", self.channel)
                return
            except Exception:  # noqa: BLE001 - retried until the database is back
                time.sleep(_RECONNECT_S)

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._out.put(None)  # the publisher sends what was queued before, then stops
        self._threads[1].join(5)
        self._closed.set()
        self._threads[0].join(5)
        self._listen.close()
        self._publish_conn.close()
