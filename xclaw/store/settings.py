"""[store] What xclaw.yaml says about the database (docs/storage.md) and the leases several workers
share it by (docs/postgres.md)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator

from xclaw.config.section import Default, Env, Number, Section, Text
from xclaw.store.blobs.s3 import location_problem


class StoreSettings(Section):
    # A SQLite path or a postgresql:// URL (its default, under home, is filled in by Settings).
    database: Annotated[Text, Env("XCLAW_DB"), Default("`$XCLAW_HOME/xclaw.db`")]
    # How long a silent worker keeps its sessions' leases (renewed every third of it).
    lease_ttl_s: Annotated[Number, Field(ge=0.5), Env("XCLAW_LEASE_TTL_S")] = 15.0
    # The sweep of sessions left Running by a dead worker: how long they wait for a client,
    # how often each worker looks (None: the lease TTL).
    sweep_grace_s: Annotated[
        Annotated[Number, Field(ge=0)] | None, Env("XCLAW_SWEEP_GRACE_S"), Default("the lease TTL")
    ] = None
    sweep_every_s: Annotated[
        Annotated[Number, Field(gt=0)] | None, Env("XCLAW_SWEEP_EVERY_S"), Default("the lease TTL")
    ] = None
    # Where file contents (workspace snapshots, tool images) live: s3://BUCKET/PREFIX for an
    # S3-compatible object store (endpoint and credentials from the AWS_* variables), None for
    # the database (docs/deploy.md).
    blob_store: Annotated[Text | None, Env("XCLAW_BLOB_STORE"), Default("the database")] = None
    # How long an uploaded content's mark keeps the sweep off it before a snapshot names it.
    blob_grace_s: Annotated[Number, Field(gt=0), Env("XCLAW_BLOB_GRACE_S")] = 3600.0

    @field_validator("blob_store")
    @classmethod
    def _a_place_in_a_bucket(cls, url: str | None) -> str | None:
        """Refused at start, in words: never waited for as a store that does not answer."""
        problem = None if url is None else location_problem(url)
        if problem is not None:
            raise ValueError(f"{url!r} {problem}")
        return url
