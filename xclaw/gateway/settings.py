"""What the gateway listens on and whom it lets in (docs/security.md)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from xclaw.section import Env, NotInYaml, Section, Strings, Whole, Wording


class GatewaySettings(Section):
    port: Annotated[
        Whole, Field(ge=1, le=65535), Env("WEB_PORT"), Wording("a TCP port (1-65535)", False)
    ] = 3000
    host: Annotated[str, NotInYaml("the --host flag of xclaw serve")] = "127.0.0.1"
    # The access token (generated and kept in $XCLAW_HOME/token when unset).
    token: Annotated[str | None, Env("XCLAW_TOKEN"), NotInYaml("XCLAW_TOKEN")] = None
    # Origins allowed to call /api/ from a browser (CORS); "*" allows any.
    allowed_origins: Strings = ()
