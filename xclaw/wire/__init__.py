"""The wire: what crosses between the gateway and its clients (docs/protocol.md).

`shapes` declares each server frame as a TypedDict mirroring its class in xclaw/frames.py
(what mypy checks a builder's keys against, at no cost at run time); `build` is the one place
a server frame is made.
"""
