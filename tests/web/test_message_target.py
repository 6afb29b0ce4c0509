"""A message goes where its sender meant: to the session the page shows when Enter is
pressed, however slow the gateway is to confirm a switch. Each test holds the gateway's frames
back (tests/web/frame_gate.py) right after the person switches — New session, a click in the
list, `/switch` typed — types at once, then lets the frames go; the record says where the
message landed."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.gateway.harness import Server
from tests.gateway.teams_harness import SCRIPT, add_user, share, xclaw
from tests.web.app_page import App
from tests.web.frame_gate import FrameGate

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# A session id the page makes itself: 128 random bits, URL-safe base64, as the server's.
CLIENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{21}")


def inputs_of(server: Server, session_id: str) -> list[str]:
    """The user messages a session's record holds, in order."""
    headers = {"Authorization": f"Bearer {server.token}"}
    steps: list[dict[str, Any]] = httpx.get(
        f"{server.http}/api/sessions/{session_id}/steps?n=0", headers=headers
    ).json()["steps"]
    return [st["input"] for st in steps if st["type"] == "user_input"]


def said_in(server: Server, text: str) -> list[str]:
    """The sessions whose record holds a user message `text` (each as often as it is there)."""
    headers = {"Authorization": f"Bearer {server.token}"}
    listed = httpx.get(f"{server.http}/api/sessions", headers=headers).json()["sessions"]
    return [
        s["sessionId"] for s in listed for said in inputs_of(server, s["sessionId"]) if said == text
    ]


def lands(gate: FrameGate, server: Server, text: str) -> list[str]:
    gate.wait_for(f"{text!r} in the record", lambda: bool(said_in(server, text)))
    return said_in(server, text)


def test_new_session_then_typing_at_once_writes_to_the_new_session(serve, new_page):
    server = serve([{"text": "Done."}, {"text": "Done again."}])
    page = new_page()
    gate = FrameGate(page)
    app = App(page, server).open()
    app.send_and_wait("alpha task", "Done.")
    alpha = app.session_id()

    gate.hold()  # the gateway is slow to answer from here on
    page.get_by_role("button", name="New session").click()
    app.send("beta task")
    gate.wait_for(
        "the gateway's answer to New session",
        lambda: any(f["type"] == "session" and f["sessionId"] != alpha for f in gate.held_frames()),
    )
    # Nothing of what was typed went to the session left behind.
    assert [m for m in gate.sent_messages() if m.get("sessionId") in (alpha, None)] == []
    # The page is on the new session already: its own id (as random as the server's), its
    # empty conversation, the message shown there.
    beta = app.session_id()
    assert beta != alpha and CLIENT_ID.fullmatch(beta), beta
    expect(page.locator("#session-id")).to_have_text(beta)
    expect(page.locator("#session-title")).to_have_text("New session")
    expect(app.messages).not_to_contain_text("alpha task")
    expect(app.messages).to_contain_text("beta task")

    gate.release()
    assert lands(gate, server, "beta task") == [beta]
    expect(page.locator("#messages .msg.assistant.final").last).to_have_text("Done.")
    expect(app.messages).to_contain_text("beta task")  # still shown after the history came
    assert said_in(server, "alpha task") == [alpha]
    assert app.session_id() == beta
    expect(page.locator(".session-item.active")).to_have_attribute("data-session", beta)

    # The ids the page makes are valid ones, each its own (one in 32 base64 strings starts
    # with - or _, which the server refuses as a session id).
    ids = page.evaluate(
        "import('/static/api.js').then(m => Array.from({length: 2000}, () => m.newSessionId()))"
    )
    assert len(set(ids)) == 2000 and all(CLIENT_ID.fullmatch(i) for i in ids)

    # Again: each new session has an id of its own.
    gate.hold()
    page.get_by_role("button", name="New session").click()
    gamma = app.session_id()
    assert CLIENT_ID.fullmatch(gamma) and gamma not in (alpha, beta)
    gate.release()
    app.wait_connected()


def test_a_click_in_the_list_then_typing_at_once_writes_to_the_clicked_session(serve, new_page):
    server = serve([{"text": "Done."}, {"text": "Done again."}])
    page = new_page()
    gate = FrameGate(page)
    app = App(page, server).open()
    app.send_and_wait("alpha task", "Done.")
    alpha = app.session_id()
    page.get_by_role("button", name="New session").click()
    expect(page.locator(".empty-state")).to_be_visible()
    app.send_and_wait("beta task", "Done.")
    beta = app.session_id()
    expect(page.locator(".session-item")).to_have_count(2)

    gate.hold()
    page.locator(f'.session-item[data-session="{alpha}"] .session-main').click()
    app.send("second alpha task")
    gate.wait_for(
        "the gateway's answer to the switch",
        lambda: any(f["type"] == "session" and f["sessionId"] == alpha for f in gate.held_frames()),
    )
    assert [m for m in gate.sent_messages() if m.get("sessionId") in (beta, None)] == []
    expect(page.locator("#session-id")).to_have_text(alpha)
    expect(page.locator("#session-title")).to_have_text("alpha task")
    gate.release()
    assert lands(gate, server, "second alpha task") == [alpha]
    expect(page.locator("#messages .msg.assistant.final").last).to_have_text("Done again.")
    # The history came in under the message typed before it, not over it.
    expect(app.messages).to_contain_text("alpha task")
    expect(page.locator("#messages .msg.user").last).to_have_text("second alpha task")
    assert said_in(server, "beta task") == [beta]


def test_switch_typed_then_a_message_at_once_goes_where_switch_leads(serve, new_page):
    server = serve([{"text": "Done."}, {"text": "Done again."}])
    page = new_page()
    gate = FrameGate(page)
    app = App(page, server).open()
    app.send_and_wait("alpha task", "Done.")
    alpha = app.session_id()
    page.get_by_role("button", name="New session").click()
    expect(page.locator(".empty-state")).to_be_visible()
    app.send_and_wait("beta task", "Done.")
    beta = app.session_id()

    gate.hold()
    app.send(f"/switch {alpha[:10]}")  # the gateway finds the session; the page learns late
    app.send("second alpha task")
    gate.wait_for(
        "the gateway's answer to /switch",
        lambda: any(f["type"] == "session" and f["sessionId"] == alpha for f in gate.held_frames()),
    )
    assert [m["content"] for m in gate.sent_messages()][-1].startswith("/switch")
    gate.release()
    assert lands(gate, server, "second alpha task") == [alpha]
    expect(page.locator("#session-id")).to_have_text(alpha)
    expect(page.locator("#messages .msg.assistant.final").last).to_have_text("Done again.")
    assert said_in(server, "beta task") == [beta]

    # A switch that fails sends nothing anywhere: the text comes back to the box.
    gate.hold()
    app.send("/switch nosuchsession")
    app.send("third task")
    gate.wait_for(
        "the gateway's refusal",
        lambda: any(f.get("code") == "unknown_session" for f in gate.held_frames()),
    )
    gate.release()
    expect(app.messages.locator(".error-line").last).to_contain_text("nosuchsession")
    expect(page.locator("#input")).to_have_value("third task")
    assert said_in(server, "third task") == []
    expect(page.locator("#session-id")).to_have_text(alpha)


def test_a_refused_switch_sends_nothing_and_the_page_goes_back(serve, new_page):
    """Bob clicks a session Alice stopped sharing a moment ago (his list still shows it): the
    gateway refuses the switch, his message is sent nowhere and comes back to the box, and
    the page returns to his own session."""
    server = serve([])
    server.kill()
    assert server.script is not None
    server.script.write_text(json.dumps(SCRIPT))
    server.start()
    alice_token = add_user(server, "alice")
    bob_token = add_user(server, "bob")
    made = httpx.post(
        f"{server.http}/api/sessions",
        headers={"Authorization": f"Bearer {alice_token}"},
        json={"title": "alice's plans"},
    )
    theirs = made.json()["sessionId"]
    share(server, theirs, "bob", "collaborator")

    page = new_page()
    gate = FrameGate(page)
    bob = App(page, server).open(bob_token)
    bob.send_and_wait("hello", "hi there")
    his = bob.session_id()
    item = page.locator(f'.session-item[data-session="{theirs}"] .session-main')
    expect(item).to_be_visible()
    xclaw(server, "share", theirs, "bob", "--remove")

    gate.hold()
    item.click()
    bob.send("hello again")
    gate.wait_for(
        "the gateway's refusal",
        lambda: any(f.get("code") == "unknown_session" for f in gate.held_frames()),
    )
    gate.release()
    expect(page.locator("#input")).to_have_value("hello again")
    expect(page.locator("#session-id")).to_have_text(his)
    expect(page.locator(".toast")).to_contain_text("Could not open session")
    expect(bob.messages).to_contain_text("hi there")  # his own conversation, back
    assert said_in(server, "hello again") == []
    assert [m for m in gate.sent if m.get("content") == "hello again"] == []


def test_a_message_typed_before_the_gateway_answers_the_page_is_sent_once_it_does(serve, new_page):
    """The page attaches to its session as it opens: what is typed before the gateway has
    answered everything the attach sent waits (shown, marked waiting) and then goes — it is
    not put back in the box, nor is the composer left locked. Typed before the attach's
    `session` frame, on a new session; and, on the written session after a reload, typed
    after its `session`, `history` and `status` frames (busy: false) and before the `pong`
    that ends the attach — where the page once took the lock of its own waiting message for
    a run in flight."""
    server = serve([{"text": "Done."}, {"text": "Done again."}])
    page = new_page()
    gate = FrameGate(page)
    app = App(page, server)

    def attach_then_type(text: str, *, after_session_frame: bool) -> None:
        gate.hold()  # from the socket's first frame: the gateway's answers wait here
        if page.url.startswith(server.http):
            page.reload()
        else:
            page.goto(f"{server.http}/?token={server.token}")
        expect(page.locator("#conn")).to_have_attribute("data-state", "open")
        gate.wait_for(
            "the attach's ping", lambda: any(f["type"] == "ping" for f in gate.sent[gate.since :])
        )
        gate.wait_for(
            "the gateway's answer", lambda: any(f["type"] == "pong" for f in gate.held_frames())
        )
        if after_session_frame:
            while gate.held_frames()[0]["type"] != "pong":
                gate.release_one()
        app.send(text)
        expect(page.locator("#messages .msg.user.waiting")).to_have_text(text)
        gate.release()

    attach_then_type("typed at once", after_session_frame=False)
    expect(page.locator("#messages .msg.assistant.final")).to_have_text("Done.")
    expect(page.locator("#input")).to_have_value("")
    app.wait_idle()
    sid = app.session_id()
    assert said_in(server, "typed at once") == [sid]

    attach_then_type("typed after the session frame", after_session_frame=True)
    expect(page.locator("#messages .msg.assistant.final").last).to_have_text("Done again.")
    expect(page.locator("#input")).to_have_value("")
    app.wait_idle()
    assert said_in(server, "typed after the session frame") == [sid]


def test_queue_pressed_while_the_page_attaches_waits_behind_the_message_typed_before(
    serve, new_page
):
    """A message typed while the page attaches waits, and the composer offers Queue
    (Alt+Enter) meanwhile: a message queued then goes after the waiting one — queued behind
    its run — not ahead of it, where it would start first and the waiting one be refused as
    busy."""
    server = serve([{"text": "First done."}, {"text": "Second done."}])
    page = new_page()
    gate = FrameGate(page)
    app = App(page, server)
    gate.hold()
    page.goto(f"{server.http}/?token={server.token}")
    expect(page.locator("#conn")).to_have_attribute("data-state", "open")
    gate.wait_for(
        "the gateway's answer", lambda: any(f["type"] == "pong" for f in gate.held_frames())
    )
    app.send("first")
    expect(page.locator("#messages .msg.user.waiting")).to_have_text("first")
    box = page.locator("#input")
    box.fill("second")
    box.press("Alt+Enter")
    expect(box).to_have_value("")
    # Nothing went ahead of the attach's answer.
    assert [f for f in gate.sent if f.get("type") == "message"] == []
    gate.release()

    expect(page.locator("#messages .msg.assistant.final")).to_have_count(2)
    expect(page.locator("#messages .msg.assistant.final").first).to_have_text("First done.")
    expect(page.locator("#messages .msg.assistant.final").last).to_have_text("Second done.")
    sent = [f for f in gate.sent if f.get("type") == "message"]
    assert [(f["content"], f.get("busy")) for f in sent] == [("first", None), ("second", "queue")]
    assert inputs_of(server, app.session_id()) == ["first", "second"]
    assert not [f for f in gate.received if f.get("type") == "error"]
