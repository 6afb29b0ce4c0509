"""[gateway] What the gateway listens on and whom it lets in (docs/security.md, docs/teams.md)."""

from __future__ import annotations

import ipaddress
from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from xclaw.config.section import (
    Env,
    Flag,
    NotInYaml,
    Number,
    Section,
    Strings,
    Text,
    Whole,
    Wording,
)
from xclaw.wire.busy import BusyPolicy


def _networks(value: Any) -> Any:
    """Each entry an address or a network (`10.0.0.0/8`), checked when the file is read."""
    if isinstance(value, (list, tuple)):
        for item in value:
            try:
                ipaddress.ip_network(str(item), strict=False)
            except ValueError:
                raise ValueError(f"{item!r} is not an IP address or network") from None
    return value


class TeamSettings(Section):
    """A server shared by a team (docs/teams.md): sign-on through a reverse proxy that has
    already authenticated the person, and whom failed sign-ins are counted against behind a
    load balancer. A proxy's headers are believed only from the addresses listed here
    (xclaw/gateway/forwarded.py)."""

    # The header the proxy names the signed-in person in; trusted only from `trusted_proxies`.
    proxy_user_header: Text = "X-Forwarded-User"
    # Addresses (or networks) of the reverse proxies whose header is believed. Empty: none.
    trusted_proxies: Annotated[Strings, BeforeValidator(_networks)] = ()
    # A name the proxy vouches for that is no user yet becomes a member (else: refused).
    proxy_adds_users: Flag = False
    # Addresses (or networks) of load balancers whose client-address header names the client
    # (failed sign-ins are counted per client, the logs name it); their sign-on header is not
    # believed (that is `trusted_proxies`). `trusted_proxies` name the client too.
    client_address_from: Annotated[Strings, BeforeValidator(_networks)] = ()
    # The header such a balancer names the client in; its last address is the one used.
    client_address_header: Text = "X-Forwarded-For"


class ScheduleSettings(Section):
    """Schedules and webhooks (docs/schedules.md): how each `xclaw serve` checks them."""

    # Whether this server fires schedules and delivers pending fires (webhooks are taken
    # either way; another worker on the database delivers what this one does not).
    enabled: Flag = True
    # The longest wait between two checks (sooner when a tick is due sooner), in seconds.
    poll_s: Annotated[Number, Field(gt=0, le=60)] = 1.0
    # How late a tick may be found and still be on time, in seconds: older ones were missed
    # (no server ran) and the schedule's catch-up policy decides.
    grace_s: Annotated[Number, Field(ge=0)] = 60.0
    # How far a webhook's X-Xclaw-Timestamp may be from the server's clock, in seconds.
    hook_window_s: Annotated[Number, Field(gt=0)] = 300.0


class InputSettings(Section):
    """What a message does when it arrives while its session's run is busy (xclaw/wire/busy.py):
    the deployment's policy; a session's own and a message's own come before it."""

    busy: BusyPolicy = "reject"


class GatewaySettings(Section):
    port: Annotated[
        Whole, Field(ge=1, le=65535), Env("WEB_PORT"), Wording("a TCP port (1-65535)", False)
    ] = 3000
    host: Annotated[str, NotInYaml("the --host flag of xclaw serve")] = "127.0.0.1"
    # The access token (generated and kept in $XCLAW_HOME/token when unset).
    token: Annotated[str | None, Env("XCLAW_TOKEN"), NotInYaml("XCLAW_TOKEN")] = None
    # Origins allowed to call /api/ from a browser (CORS); "*" allows any.
    allowed_origins: Strings = ()
    teams: TeamSettings = TeamSettings()
    schedules: ScheduleSettings = ScheduleSettings()
    input: InputSettings = InputSettings()
