"""[cli] `xclaw demo`: the offline walkthrough (crash, resume, rollback, fork) in one command."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import click


def register(cli: click.Group) -> None:
    @cli.command("demo")
    @click.option(
        "--model",
        default=None,
        metavar="SPEC",
        help="Run the walk against a real model, e.g. anthropic:claude-sonnet-4-5 (needs its "
        "API key) or openai:qwen2.5 with OPENAI_BASE_URL for a local server "
        "(docs/local-models.md). Default: the bundled scripted model, offline.",
    )
    @click.option(
        "--home",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        help="Where the demo's database and workspaces go (default: a new temp dir).",
    )
    def demo_cmd(model: str | None, home: Path | None) -> None:
        """Show crash, resume, rollback and fork on a real server, in under a minute.

        Starts `xclaw serve`, gives it a multi-step task, kills it with SIGKILL in the middle
        of a tool call (with --model: while the model's first call is in flight), restarts it,
        resumes the session without repeating any completed side effect, then shows /steps,
        the trace tree, /rollback and /fork. Every stage checks what xclaw does, never what a
        real model chose to say. Exits non-zero, saying which stage misbehaved, if anything
        does not work as described.
        """
        from xclaw.demo.process import ServerRefused
        from xclaw.demo.walkthrough import DemoFailure, Options, Walkthrough

        walk = Walkthrough(Options(model=model, home=home))
        try:
            asyncio.run(walk.run())
        except ServerRefused as e:  # e.g. a bad --model or environment value: its own words
            click.secho(f"\nerror: {e.message}", fg="red", err=True)
            sys.exit(e.exit_code)
        except DemoFailure as e:
            click.secho(f"\ndemo FAILED at stage {walk.stage}: {e}", fg="red", err=True)
            click.echo(f"server log: {walk.home}/serve-*.log", err=True)
            sys.exit(1)
        except (RuntimeError, TimeoutError, OSError) as e:
            click.secho(
                f"\ndemo FAILED at stage {walk.stage}: {type(e).__name__}: {e}", fg="red", err=True
            )
            click.echo(f"server log: {walk.home}/serve-*.log", err=True)
            sys.exit(1)
        finally:
            walk.cleanup()
