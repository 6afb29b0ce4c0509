"""What a run of a session drives with on a worker (xclaw/runtime/agreement.py): the rule
alone, every branch."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.runtime.harness import Harness, sh
from xclaw.runtime.agreement import RunConfig, agree, disagreeing, recorded_config, with_config

A = RunConfig(("script:/a.json",), "yolo")
B = RunConfig(("script:/b.json",), "ask")
BOTH = RunConfig(("script:/b.json", "script:/a.json"), "ask")


def test_a_new_session_records_this_workers_configuration() -> None:
    got = agree(None, A, available=A.models, explicit=True)
    assert (got.kind, got.use, got.record) == ("first", A, A)
    assert got.notice() is None and got.alert() is None


def test_the_same_configuration_drives_silently() -> None:
    got = agree(A, A, available=A.models, explicit=False)
    assert (got.kind, got.use, got.record, got.notice()) == ("same", A, None, None)


def test_a_worker_that_has_the_sessions_models_drives_with_them_and_never_looser() -> None:
    got = agree(A, BOTH, available=BOTH.models, explicit=False, worker="w2")
    # a's chain, and ask: the stricter of the session's yolo and this worker's ask
    assert got.kind == "adopted" and got.use == RunConfig(A.models, "ask")
    assert got.record is None  # the session keeps its recorded configuration
    notice = got.notice()
    assert notice is not None and "script:/a.json" in notice and "w2" in notice
    assert got.alert() == {
        "decision": "adopted",
        "session": A.to_json(),
        "worker": {"id": "w2", **BOTH.to_json()},
        "used": {"models": ["script:/a.json"], "approval": "ask"},
        "waitingFor": None,
    }
    # A stricter session on a looser worker keeps its own mode.
    tight = RunConfig(A.models, "ask")
    loose = RunConfig(A.models, "yolo")
    assert agree(tight, loose, available=loose.models, explicit=True).use == tight


def test_a_takeover_without_the_sessions_models_is_refused() -> None:
    got = agree(A, B, available=B.models, explicit=False, worker="w2")
    assert got.refused and got.kind == "refused" and got.holder is None
    notice = got.notice()
    assert notice is not None and "does not drive it" in notice and "send a message" in notice
    assert got.alert()["decision"] == "refused"  # type: ignore[index]


def test_a_message_is_refused_while_a_live_worker_has_the_sessions_models() -> None:
    got = agree(A, B, available=B.models, explicit=True, live=[("w1", A)], worker="w2")
    assert got.refused and got.holder == "w1"
    # one whose chain has the session's models among others' can run it too
    assert agree(A, B, available=B.models, explicit=True, live=[("w3", BOTH)]).holder == "w3"
    assert "worker w1 has that model" in (got.notice() or "")


def test_a_message_nobody_else_can_run_continues_here_recorded() -> None:
    got = agree(A, B, available=B.models, explicit=True, live=[("w3", B)])
    assert got.kind == "changed" and got.use == RunConfig(B.models, "ask")
    assert got.record == got.use  # the session now runs with this worker's chain


def test_an_explicit_approval_mode_is_used_and_recorded() -> None:
    got = agree(B, A, available=A.models + B.models, explicit=True, explicit_approval=True)
    assert got.use == RunConfig(B.models, "yolo") and got.record == got.use


def test_configurations_read_from_the_record_are_checked() -> None:
    assert recorded_config(with_config({"keep": 1}, A)) == A
    assert with_config({"keep": 1}, A)["keep"] == 1
    for bad in (
        None,
        [],
        {"models": "x", "approval": "ask"},
        {"models": [], "approval": "ask"},
        {"models": ["m"], "approval": "sometimes"},
        {"models": [1], "approval": "ask"},
    ):
        assert RunConfig.from_json(bad) is None


def test_a_serve_start_warns_of_live_workers_that_disagree() -> None:
    workers = [
        ("me", True, A.to_json()),
        ("same", True, A.to_json()),
        ("other", True, B.to_json()),
        ("dead", False, B.to_json()),
        ("old", True, {"port": 3000}),
    ]
    (warning,) = disagreeing(workers, "me", A)
    assert "other" in warning and "script:/b.json" in warning and "script:/a.json" in warning


async def test_a_session_keeps_its_stricter_mode_and_says_so_once(tmp_path: Path) -> None:
    """A session started under `ask`, continued by a worker configured `yolo` (same model):
    its calls are still asked; the decision is said once, not at every turn."""
    turns = [
        {"text": "first"},
        {"text": "", "tool_calls": [sh("echo hi > f")]},
        {"text": "second"},
        {"text": "third"},
    ]
    strict = Harness(tmp_path, turns, approval="ask")
    sid = await strict.session()
    await strict.turn(sid, "one")
    await strict.close()

    loose = Harness(tmp_path, turns, approval="yolo")
    try:
        await loose.session(sid)
        await loose.runtime.send(sid, "two")
        ask = await loose.first("approval_request", timeout=20)  # ask, not yolo's "run"
        loose.runtime.answer_approval(sid, ask["stepId"], True)
        await asyncio.wait_for(loose.runtime.wait_idle(sid), 30)
        await loose.turn(sid, "three")
        alerts = [s for s in loose.store.record.steps(sid) if s.name == "session_config"]
        assert [a.input_data["decision"] for a in alerts] == ["adopted"]
        assert alerts[0].input_data["used"]["approval"] == "ask"
        notices = [f["content"] for f in loose.of("notice") if f["content"].startswith("[worker]")]
        assert len(notices) == 1 and "approval ask" in notices[0]
        assert loose.store.record.get_session(sid).metadata["config"]["approval"] == "ask"
    finally:
        await loose.close()
