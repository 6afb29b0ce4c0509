"""[gateway] What a reverse proxy in front of the gateway may tell it, and from where that is
believed.

A request comes from the socket's peer: uvicorn's own rewriting of the client address from
`X-Forwarded-For` is off (server.py), because it believes the header from any loopback
connection, so any local process could claim to be a trusted proxy. A proxy's headers are
believed only from the addresses the deployment lists (docs/teams.md):

- `teams.trusted_proxies`: its sign-on header names the person (xclaw/gateway/identity.py),
  and its client-address header the client;
- `teams.client_address_from`: its client-address header names the client (the throttle and
  the logs count per client behind a load balancer) and nothing else.

`X-Forwarded-Proto` from those addresses and from loopback (a TLS proxy on the same host, as
uvicorn believed it) says whether the page was served over https; it only decides which
Origin is the page's own (auth.origin_allowed), and a client that fakes it gains nothing a
client sending no Origin does not have.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
LOOPBACK = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128"))


class Addresses:
    """A set of addresses and networks (`10.0.0.5`, `10.0.0.0/24`) a peer is looked up in."""

    def __init__(self, entries: Iterable[str | Network] = ()) -> None:
        self.networks: tuple[Network, ...] = tuple(
            e if isinstance(e, Network) else ipaddress.ip_network(e, strict=False) for e in entries
        )

    def __bool__(self) -> bool:
        return bool(self.networks)

    def __or__(self, other: Addresses) -> Addresses:
        return Addresses((*self.networks, *other.networks))

    def holds(self, peer: str | None) -> bool:
        if peer is None or not self.networks:
            return False
        try:
            address = ipaddress.ip_address(peer)
        except ValueError:
            return False
        return any(address in net for net in self.networks)


def header_values(headers: Mapping[str, str], name: str) -> list[str]:
    """Every value of header `name`, in order (a header sent twice has two: one may be the
    client's own, passed through by a proxy that added its own after it)."""
    if isinstance(headers, Headers):
        return headers.getlist(name)
    value = headers.get(name.lower())
    return [] if value is None else [value]


def last_address(values: list[str]) -> str | None:
    """The last address of a client-address header (`X-Forwarded-For: client, proxy1`, also
    sent as several headers): the one the nearest proxy saw, the only one it vouches for
    (what comes before is what the client sent). None when it is not an IP address."""
    if not values:
        return None
    last = ",".join(values).split(",")[-1].strip()
    try:
        return str(ipaddress.ip_address(last))
    except ValueError:
        return None


class ForwardedScheme:
    """ASGI middleware: the scheme (`https`/`wss`) a listed proxy, or one on loopback, says
    the client used; the client address (`scope["client"]`) is left as the socket's peer."""

    def __init__(self, app: ASGIApp, proxies: Addresses) -> None:
        self.app = app
        self.proxies = proxies | Addresses(LOOPBACK)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            client = scope.get("client")
            if client and self.proxies.holds(client[0]):
                proto = Headers(scope=scope).get("x-forwarded-proto", "").strip().lower()
                if proto in ("http", "https"):
                    websocket = scope["type"] == "websocket"
                    scope["scheme"] = proto.replace("http", "ws") if websocket else proto
        await self.app(scope, receive, send)
