"""[wire] The wire: what crosses between the gateway and its clients (docs/protocol.md).

`frames` declares every server frame as a typed class, `http_bodies` the HTTP API's
bodies, `protocol` what both sides import besides (client frames, the objects server
frames carry, slash-command syntax, the token file).

`shapes` declares each server frame as a TypedDict mirroring its class in xclaw/wire/frames.py
(what mypy checks a builder's keys against, at no cost at run time); `build` is the one place
a server frame is made.
"""
