"""The Redactor: whole texts, data, ids, encoded frames, and streams of deltas."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from xclaw.people.teams import new_token
from xclaw.recorder.redact import MASK, Redactor
from xclaw.security.credentials import SERVER_TOKEN_PREFIX, issue_token

KEY = "sk-ant-0123456789"
ODD = 'pa"ss\\word-9'


def stream_of(r: Redactor, chunks: list[str]) -> list[str]:
    s = r.stream()
    out = [s.feed(c) for c in chunks]
    out.append(s.flush())
    return out


def test_a_secret_split_at_every_position_never_leaves_whole() -> None:
    r = Redactor([KEY])
    text = f"my key is {KEY}, see"
    for cut in range(len(text) + 1):
        out = stream_of(r, [text[:cut], text[cut:]])
        assert "".join(out) == f"my key is {MASK}, see"
        assert all(KEY not in piece for piece in out)
    # one character per delta, as a provider's sub-word tokens may come
    out = stream_of(r, list(text))
    assert "".join(out) == r.text(text) and not any(KEY[:2] in p for p in out)


def test_only_a_tail_that_could_start_a_secret_is_held_back() -> None:
    r = Redactor([KEY])
    s = r.stream()
    assert s.feed("Hello world") == "Hello world"  # nothing a secret starts with
    assert s.feed(" ask sk") == " ask "  # `sk` may begin the key: held
    assert s.feed("y is blue") == "sky is blue"  # it did not
    assert s.feed(" sk-ant-01") == " "
    assert s.feed("2") == ""  # still the key's beginning
    assert s.feed("X") == "sk-ant-012X"
    assert s.flush() == ""
    s2 = r.stream()
    assert s2.feed("end: sk-an") == "end: "
    assert s2.flush() == "sk-an"  # the stream ended: a prefix alone is no secret


def test_a_secret_inside_another_is_masked_whole_in_a_stream_too() -> None:
    short, long = "abcdef", "abcdefghij"
    r = Redactor([short, long])
    for text in ("x abcdefghij y", "x abcdefg y", "abcdef", "abcdefghi", "abcabcdefghijk"):
        for cut in range(len(text) + 1):
            assert "".join(stream_of(r, [text[:cut], text[cut:]])) == r.text(text), (text, cut)


@settings(max_examples=300, deadline=None)
@given(
    secrets=st.lists(st.text("abc-", min_size=6, max_size=9), min_size=1, max_size=4),
    text=st.text("abc- x", max_size=40),
    cuts=st.lists(st.integers(0, 40), max_size=6),
)
def test_the_joined_stream_is_the_redacted_whole(
    secrets: list[str], text: str, cuts: list[int]
) -> None:
    """Whatever the secrets (overlapping, prefixes of each other) and wherever the stream is
    cut, the deltas join to exactly what redacting the whole text gives."""
    r = Redactor(secrets)
    points = sorted({min(c, len(text)) for c in cuts})
    chunks = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    out = stream_of(r, chunks)
    whole = r.text(text)
    assert "".join(out) == whole
    sent = ""
    for piece in out:  # at every moment, what a client joined begins the redacted whole
        sent += piece
        assert whole.startswith(sent)


def test_many_secrets_and_secrets_added_mid_stream() -> None:
    many = [f"tok-{i:03d}-{'x' * (i % 7)}secret" for i in range(200)]
    r = Redactor(many)
    text = " ".join(f"use {m} now" for m in many[::17])
    for cut in range(0, len(text), 7):
        assert "".join(stream_of(r, [text[:cut], text[cut:]])) == r.text(text)
    assert all(m not in r.text(text) for m in many)
    s = r.stream()
    assert s.feed("late-secret-") == "late-secret-"  # not a secret yet: sent
    r.add(["late-secret-value"])
    assert s.feed("value and late-sec") == "value and "  # from now on
    assert s.feed("ret-value!") == f"{MASK}!"


def test_written_forms_of_a_secret_are_masked() -> None:
    r = Redactor([ODD])
    for form in (json.dumps(ODD)[1:-1], repr(ODD)[1:-1], ODD):
        assert r.text(f"x {form} y") == f"x {MASK} y"
    quoted = json.dumps({"content": f"a {ODD} b"})  # a tool printing a JSON file
    assert ODD not in quoted and r.text(quoted) == '{"content": "a [REDACTED] b"}'


def test_ids_with_a_secret_get_distinct_portable_stand_ins() -> None:
    r = Redactor([KEY, "another-secret-1"])
    assert r.ident("call_1_0") == "call_1_0"
    a, b = r.ident(KEY), r.ident("another-secret-1")
    assert a != b and a == r.ident(KEY)
    assert a.startswith("redacted_") and a.replace("_", "").isalnum()
    assert KEY not in a


def test_whole_texts_with_few_and_many_secrets() -> None:
    """One or two values: the regex alone; more: a substring search per value first."""
    for n in (1, 2, 5, 50):
        r = Redactor([f"secret-number-{i:03d}" for i in range(n)])
        last = f"secret-number-{n - 1:03d}"
        assert r.text(f"x {last} y {last}") == f"x {MASK} y {MASK}"
        assert r.text("x secret-number-999 y") == "x secret-number-999 y"
    assert Redactor().text("anything at all") == "anything at all"


def test_every_token_xclaw_issues_is_masked_by_its_form_though_nobody_told_it() -> None:
    """A user's token is known to the server only by its hash, another server's not at all:
    their form is enough, whole, cut, quoted, in data and in ids."""
    member, server = new_token(), issue_token(SERVER_TOKEN_PREFIX)
    for r in (Redactor(), Redactor([KEY])):
        for token in (member, server, member[:30]):
            assert r.text(f"use {token}, now") == f"use {MASK}, now"
            assert r.text(json.dumps({"t": token})) == json.dumps({"t": MASK})
            assert r({"k": [f"a {token}"], token: 1}) == {"k": [f"a {MASK}"], MASK: 1}
            assert token not in r.ident(token) and r.ident(token).startswith("redacted_")
        assert r.text(f"{member}{server}") == MASK  # one run of token characters
        # Shorter than the form, or not a prefix of ours: left alone.
        for plain in ("xcu_short", "the xcs_ prefix", "abc_" + "a" * 40, "XCU_" + "a" * 40):
            assert r.text(plain) == plain
    assert Redactor([KEY]).text(f"{KEY} {member}") == f"{MASK} {MASK}"


def test_an_issued_token_split_at_every_position_never_leaves_whole() -> None:
    r = Redactor([KEY])
    token = new_token()
    text = f"my token is {token}, see {KEY}x"
    for cut in range(len(text) + 1):
        out = stream_of(r, [text[:cut], text[cut:]])
        assert "".join(out) == f"my token is {MASK}, see {MASK}x" == r.text(text)
        assert not any(token[:24] in piece for piece in out)
    out = stream_of(r, list(text))  # one character per delta
    assert "".join(out) == r.text(text)
    assert max(map(len, out)) <= len(MASK) + 1 and not any(token[:24] in p for p in out)
    # At the end of the stream: a token running to the end is masked, a prefix alone is not.
    assert "".join(stream_of(r, ["end: ", token[:10], token[10:]])) == f"end: {MASK}"
    assert "".join(stream_of(r, ["end: xc", "u_abc"])) == "end: xcu_abc"


def test_a_long_run_after_a_prefix_is_swallowed_as_it_comes() -> None:
    """Once the form is met the mask goes out; the run's characters that follow are dropped
    as they arrive (nothing held grows with them)."""
    s = Redactor().stream()
    assert s.feed("ok xcu_" + "a" * 19) == "ok "
    assert s.feed("b") == MASK
    assert all(s.feed("c" * 1000) == "" for _ in range(100))
    assert s.feed("d. done") == ". done"
    assert s.flush() == ""


@settings(max_examples=400, deadline=None)
@given(
    secrets=st.lists(st.text("xcu_s-", min_size=6, max_size=9), max_size=3),
    text=st.text("xcus_a- ", max_size=60),
    cuts=st.lists(st.integers(0, 60), max_size=8),
)
def test_with_tokens_too_the_joined_stream_is_the_redacted_whole(
    secrets: list[str], text: str, cuts: list[int]
) -> None:
    """Secrets made of the tokens' own characters, texts dense with their prefixes: the
    deltas still join to exactly what redacting the whole gives, at every moment a beginning
    of it."""
    r = Redactor(secrets)
    points = sorted({min(c, len(text)) for c in cuts})
    chunks = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    out = stream_of(r, chunks)
    whole = r.text(text)
    assert "".join(out) == whole
    sent = ""
    for piece in out:
        sent += piece
        assert whole.startswith(sent)
