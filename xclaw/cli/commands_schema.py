"""[cli] `xclaw schema`: the wire's declarations as JSON Schema, for code generators and checks."""

from __future__ import annotations

import json

import click


def register(cli: click.Group) -> None:
    @cli.command("schema")
    @click.argument("what", type=click.Choice(["frames", "openapi"]))
    def schema_cmd(what: str) -> None:
        """Print a schema of the wire (docs/protocol.md).

        \b
        xclaw schema frames     every WebSocket frame, both ways (JSON Schema 2020-12);
                                docs/frames.schema.json holds the same
        xclaw schema openapi    the HTTP API's OpenAPI 3.1 document (/api/openapi.json)
        """
        from xclaw import __version__
        from xclaw.config.settings import load_settings

        # As every subcommand: a bad configuration is said (exit 2) before anything is done.
        load_settings()
        if what == "frames":
            from xclaw.wire.protocol import frames_schema

            doc = frames_schema()
        else:
            from xclaw.gateway.openapi import openapi_spec

            doc = openapi_spec(__version__)
        click.echo(json.dumps(doc, indent=2, ensure_ascii=False))
