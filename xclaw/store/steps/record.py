"""[store/steps] RecordRole: `store.record`, sessions and their steps read and written, the
queue of messages waiting for a session's run, imports and retention — one role of the store
over its connection layer (store/role.py). Each backend adds its step write bodies
(SqliteRecord, PgRecord)."""

from __future__ import annotations

from xclaw.store.common import StoreBase
from xclaw.store.queue.sql import QueueMethods
from xclaw.store.steps.sql import SessionMethods
from xclaw.store.transfer.sql import TransferMethods


class RecordRole(SessionMethods, QueueMethods, TransferMethods, StoreBase):
    """The record of both backends: base.Record (RecordStore and StepWriter)."""
