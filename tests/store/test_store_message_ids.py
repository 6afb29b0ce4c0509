"""A message's client-made id in the record (docs/protocol.md "Sending a message exactly
once"), on both backends: the write that opens a turn keeps it in the user_input step's output,
`message_step` finds it again, and that write refuses an id the session's last message holds
(MessageRecorded), writing nothing — not even the lease it took."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.store.builders import user
from xclaw.errors import MessageRecorded
from xclaw.store.base import Store
from xclaw.store.steps.writes import OpenTurn


def _open(store: Store, sid: str, text: str, mid: str | None, **kw: Any) -> Any:
    w = OpenTurn(
        session_id=sid,
        message=user(text),
        worker_id="w1",
        ttl_s=30,
        create=False,
        message_id=mid,
        **kw,
    )

    async def put() -> Any:
        return await store.record.write_stream().put(w)

    return asyncio.run(put())


def test_the_id_is_recorded_found_and_a_resend_writes_nothing(store: Store) -> None:
    sid = store.record.create_session().session_id
    lease, _, step = _open(store, sid, "hello", "m-1")
    assert step.input_data == "hello" and step.output_data == {"messageId": "m-1"}
    store.leases.release_lease(lease)
    found = store.record.message_step(sid, "m-1")
    assert found is not None and found.seq == step.seq
    assert store.record.message_step(sid, "m-2") is None
    assert store.record.message_step(sid, "m") is None  # an id is compared whole
    assert store.record.message_step("no-such-session", "m-1") is None

    before = store.leases.lease_info(sid)
    with pytest.raises(MessageRecorded) as again:
        _open(store, sid, "hello", "m-1")
    assert again.value.seq == step.seq
    assert [s.seq for s in store.record.steps(sid)] == [step.seq]
    after = store.leases.lease_info(sid)  # the lease it took went back with the rest
    assert (after.token, after.expires_at) == (before.token, before.expires_at)

    lease, _, other = _open(store, sid, "next", "m-2")
    assert other.seq == step.seq + 1
    store.leases.release_lease(lease)
    _, _, plain = _open(store, sid, "no id", None)
    assert plain.output_data is None  # a message without an id is as before


def test_a_team_member_s_message_keeps_who_sent_it_beside_the_id(store: Store) -> None:
    sid = store.record.create_session().session_id
    by = {"by": {"kind": "person", "via": "websocket", "user": "dave"}}
    _, _, step = _open(store, sid, "hello", "m-1", sent_by=by)
    assert step.output_data == {**by, "messageId": "m-1"}
    found = store.record.message_step(sid, "m-1")
    assert found is not None and found.output_data == step.output_data
