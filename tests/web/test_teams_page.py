"""Two people on one server, each in their own browser (docs/teams.md): the page says who is
signed in and lists only their sessions; a session shared from the page with `/share` opens
for the other person, who answers its approval; the record — the trace on both pages — names
who approved and who sent; what the other may not do is refused with `forbidden`."""

from __future__ import annotations

import json

from playwright.sync_api import expect

from tests.gateway.teams_harness import SCRIPT, Nginx, ProxiedServer, add_user, nginx_binary, xclaw
from tests.web.app_page import App


def test_two_people_share_a_session_and_the_record_names_who_approved(serve, new_page, shot):
    server = serve([])
    server.kill()
    assert server.script is not None
    server.script.write_text(json.dumps(SCRIPT))  # "hello" answers; "write" asks first
    server.start()
    alice_token = add_user(server, "alice")
    bob_token = add_user(server, "bob")

    alice = App(new_page(), server).open(alice_token)
    expect(alice.page.locator("#whoami")).to_have_text("signed in as alice · member")
    alice.send_and_wait("hello", "hi there")
    sid = alice.session_id()
    alice.send("/share bob approver")
    expect(alice.messages).to_contain_text("this session is shared with bob as approver")
    alice.send("write f")
    expect(alice.dialog()).to_be_visible()
    alice.page.keyboard.press("Escape")  # not now: Bob answers it

    # Bob's own session first: his sidebar lists it and Alice's shared one, nothing else.
    bob = App(new_page(), server).open(bob_token)
    expect(bob.page.locator("#whoami")).to_have_text("signed in as bob · member")
    bob.page.goto(f"{server.http}/?session={sid}")
    bob.wait_connected()
    expect(bob.page.locator("#session-id")).to_have_text(sid)
    expect(bob.dialog()).to_be_visible()  # the approval waiting in her session
    shot(bob.page, "teams-bob-asked")
    bob.dialog().get_by_role("button", name="Approve").click()
    expect(alice.page.locator("#messages .msg.assistant.final").last).to_have_text("done")
    alice.wait_idle()

    # The record, on both pages: Bob approved, Alice sent.
    for app in (alice, bob):
        expect(app.step("s0005").locator(".step-summary")).to_have_text(
            "shell — approved by bob (web page)"
        )
    detail = alice.open_step("s0003")
    expect(detail).to_contain_text("sent by")
    expect(detail).to_contain_text("alice · ")
    expect(bob.step("s0003").locator(":scope > .trace-row .step-name")).to_have_text("alice")
    shot(alice.page, "teams-alice-record")

    # An approver sends no messages: refused, said on his page.
    bob.send("hello from bob")
    expect(bob.messages).to_contain_text("you may not send messages")
    expect(bob.page.locator("#messages .error-line .error-code").last).to_have_text("forbidden")
    # His sidebar lists the session shared with him, and none other of hers.
    alice.page.locator("#new-session").click()
    alice.send("a private matter")
    expect(alice.dialog()).to_be_visible()  # her second session, not shared
    alice.dialog().get_by_role("button", name="Deny").click()
    expect(alice.page.locator("#session-list")).to_contain_text("a private matter")
    listed = bob.page.evaluate(
        "fetch('/api/sessions', {headers: {Authorization: 'Bearer ' + "
        "localStorage.getItem('xclaw_token')}}).then(r => r.json())"
        ".then(d => d.sessions.map(s => s.sessionId))"
    )
    assert listed == [sid]
    expect(bob.page.locator("#session-list")).to_contain_text("hello")
    shot(bob.page, "teams-bob-refused")


def test_the_page_behind_a_sign_on_proxy_needs_no_token(browser, tmp_path, shot):
    """Behind a real nginx that signs the person in (docs/teams.md): the page opens without
    any token, says who is signed in, and its socket (upgraded through nginx) runs a turn."""
    nginx_binary()
    script = tmp_path / "xclaw" / "script.json"
    script.parent.mkdir()
    script.write_text(json.dumps(SCRIPT))
    server = ProxiedServer(root=tmp_path / "xclaw", script=script, approval="ask").start()
    proxy = None
    ctx = None
    try:
        add_user(server, "alice")
        proxy = Nginx(tmp_path / "nginx", server.port)
        ctx = browser.new_context(
            viewport={"width": 1280, "height": 800},
            http_credentials={"username": "alice", "password": "alice-pw"},
        )
        page = ctx.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(f"{proxy.http}/")
        expect(page.locator("#app")).to_be_visible()
        expect(page.locator("#whoami")).to_have_text("signed in as alice · member")
        expect(page.locator("#conn")).to_have_attribute("data-state", "open")
        box = page.locator("#input")
        box.fill("hello")
        box.press("Enter")
        expect(page.locator("#messages .msg.assistant.final").last).to_have_text("hi there")
        sid = str(page.evaluate("localStorage.getItem('xclaw_session_id')"))
        assert page.evaluate("localStorage.getItem('xclaw_token')") is None
        steps = json.loads(xclaw(server, "steps", sid, "--json").stdout)
        assert steps[0]["output"]["by"]["user"] == "alice"
        shot(page, "teams-behind-proxy")
        assert errors == []
    finally:
        if ctx is not None:
            ctx.close()
        if proxy is not None:
            proxy.stop()
        server.kill()
