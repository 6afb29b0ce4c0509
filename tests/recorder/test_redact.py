"""The Redactor: whole texts, data, ids, encoded frames, and streams of deltas."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from xclaw.recorder.redact import MASK, Redactor

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
