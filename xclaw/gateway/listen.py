"""[gateway] The gateway's listening sockets, bound before anything else happens.

`xclaw serve` binds first and only then opens the database, registers as a worker and starts
the app: a port already in use (or an address this machine does not have) is then one clear
error, with nothing registered, opened or logged before it.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
from collections.abc import Sequence

from xclaw.errors import CannotListen

_WHY = {
    errno.EADDRINUSE: "the port is already in use (another xclaw serve, or another program); "
    "pick another with --port (0: any free port)",
    errno.EADDRNOTAVAIL: "this machine has no such address; check --host",
    errno.EACCES: "permission denied (ports below 1024 need privileges); pick another with --port",
}


def _where(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def bind_listeners(host: str, port: int) -> list[socket.socket]:
    """Bound (not yet listening) TCP sockets for every address HOST names, as uvicorn's own
    bind would make them (SO_REUSEADDR; IPv6 sockets IPv6 only), but not inheritable: xclaw
    serves in one process, and a child it starts (an MCP server, a shell command) must not
    keep the port open after the server dies, or a restart on that port fails. Raises
    CannotListen."""
    where = _where(host, port)
    try:
        infos = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as e:
        raise CannotListen(f"cannot listen on {where}: unknown host ({e.strerror})") from None
    bound: list[socket.socket] = []
    seen: set[tuple[int, object]] = set()
    try:
        for family, kind, proto, _, address in infos:
            if (family, address) in seen:
                continue
            seen.add((family, address))
            sock = socket.socket(family, kind, proto)
            bound.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            if port == 0 and bound[1:]:  # any free port: the same one on every address
                address = (address[0], bound[0].getsockname()[1], *address[2:])
            try:
                sock.bind(address)
            except OSError as e:
                why = _WHY.get(e.errno or 0, e.strerror or str(e))
                raise CannotListen(f"cannot listen on {where}: {why}") from None
    except BaseException:
        for sock in bound:
            sock.close()
        raise
    return bound


def link_host(host: str, sockets: Sequence[socket.socket]) -> str:
    """The host of a link to this server that works from this machine (the banner's): the
    name or address asked for, or, for every address of a family (`0.0.0.0`, `::`, none),
    the loopback address of a family it listens on — `::` binds IPv6 only, where
    127.0.0.1 is refused."""
    addresses = [ipaddress.ip_address(str(s.getsockname()[0]).split("%", 1)[0]) for s in sockets]
    if addresses and all(a.is_unspecified for a in addresses):
        return "127.0.0.1" if any(a.version == 4 for a in addresses) else "[::1]"
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host  # a name: it resolved to the addresses bound
    return f"[{host}]" if address.version == 6 else host
