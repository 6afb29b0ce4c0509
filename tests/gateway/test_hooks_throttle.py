"""Refused webhook requests are braked per client, over real HTTP against `xclaw serve`: after
30 refusals from one address in a minute, a request from it that cannot be good (no signature
of the form, a stale timestamp) is answered 429 unchecked, while one that may be good is still
checked — the sender's good delivery goes through, once — and the API's sign-ins from the same
address are not braked by the hooks' count (docs/schedules.md, "Webhooks")."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from tests.gateway.conftest import ServerFactory
from xclaw.gateway.identity import MAX_FAILURES
from xclaw.schedules.signing import sign

pytestmark = pytest.mark.slow


def _headers(secret: str, body: bytes, delivery: str, ts: int | None = None) -> dict[str, str]:
    stamp = str(int(time.time()) if ts is None else ts)
    return {
        "X-Xclaw-Timestamp": stamp,
        "X-Xclaw-Delivery": delivery,
        "X-Xclaw-Signature": sign(secret, stamp, body),
    }


def test_refusals_are_braked_and_a_good_delivery_still_runs_once(
    server_factory: ServerFactory,
) -> None:
    server = server_factory([{"text": "seen"}] * 4, approval="yolo")
    api = httpx.Client(
        base_url=f"{server.http}/api",
        headers={"Authorization": f"Bearer {server.token}"},
        timeout=30,
    )
    with api:
        sid = api.post("/sessions", json={"title": "ci"}).json()["sessionId"]
        made = api.post("/hooks", json={"name": "ci", "sessionId": sid, "template": "{status}"})
        assert made.status_code == 201, made.text
        secret = made.json()["secret"]
        body = json.dumps({"status": "green"}).encode()
        url = f"{server.http}/hooks/ci"
        with httpx.Client(timeout=30) as http:
            # An attacker on the sender's address: wrong secrets, an unknown name.
            for i in range(MAX_FAILURES):
                wrong = _headers("whsec_" + "1" * 48, body, f"forged-{i}")
                target = url if i % 2 else f"{server.http}/hooks/nosuch"
                r = http.post(target, content=body, headers=wrong)
                assert r.status_code == 401, (i, r.text)
            # Braked: what cannot be good is refused unchecked, and says when to come back.
            unsigned = http.post(url, content=body, headers={"X-Xclaw-Delivery": "x"})
            assert unsigned.status_code == 429, unsigned.text
            assert unsigned.json()["code"] == "too_many_attempts"
            assert unsigned.headers["Retry-After"] == "60"
            stale = _headers(secret, body, "stale", ts=int(time.time()) - 3600)
            assert http.post(url, content=body, headers=stale).status_code == 429
            garbled = {**_headers(secret, body, "g"), "X-Xclaw-Signature": "sha256=zz"}
            assert http.post(url, content=body, headers=garbled).status_code == 429
            # A signature of the form is still checked: a wrong one is 401, not run.
            forged = _headers("whsec_" + "2" * 48, body, "forged-more")
            assert http.post(url, content=body, headers=forged).status_code == 401
            # The sender's good delivery goes through, and its retry runs nothing again.
            good = _headers(secret, body, "build-7")
            r = http.post(url, content=body, headers=good)
            assert r.status_code == 202, r.text
            fire = r.json()["fire"]
            assert fire["id"] == "hook.ci.build-7" and fire["state"] == "delivered"
            again = http.post(url, content=body, headers=good)
            assert again.status_code == 200 and again.json()["duplicate"] is True
            # Sign-ins from the same address are counted apart: a wrong token is 401, not 429.
            wrong_token = http.get(
                f"{server.http}/api/sessions", headers={"Authorization": "Bearer nope"}
            )
            assert wrong_token.status_code == 401, wrong_token.text
        steps = api.get(f"/sessions/{sid}/steps").json()["steps"]
        inputs = [s for s in steps if s["type"] == "user_input"]
        assert [s["id"] for s in inputs] == [fire["step"]]
    logs = server.logs()
    assert logs.count("event=hook_throttled") == 1, logs
    assert logs.count("event=hook_refused") == MAX_FAILURES, logs
    assert secret not in logs
