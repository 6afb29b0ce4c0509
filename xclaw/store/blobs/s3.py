"""[store/blobs] An S3-compatible bucket through boto3 (the `s3` extra): the object store's few
calls.

Configured the standard way: `s3://BUCKET/PREFIX` names where, and AWS_ENDPOINT_URL,
AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_REGION (boto3 reads them itself) say
which server and who. Objects are written once, conditionally (If-None-Match: "*"); a 412
means the object is there already, which is success for content-addressed keys. Every
failure to reach the server becomes BlobStoreUnavailable, in words.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from xclaw.errors import BlobStoreUnavailable, StoreError

# Parallel requests: a takeover fetches thousands of small objects, each a round trip.
_THREADS = 16
_DELETE_BATCH = 1000  # DeleteObjects takes at most this many keys


# A bucket name as boto3 itself accepts one (new buckets are stricter: lowercase, 3-63).
_BUCKET = re.compile(r"[A-Za-z0-9._-]{1,255}")
# The characters of a prefix: S3's "safe" ones (letters, digits, ! - _ . * ' ( )) and those
# that need no escaping in a key or in the s3:// URL (= + , @ : ; & $). Others — a space,
# ? and # (a URL's query and fragment), %, \, quotes, braces, non-ASCII — are what S3's
# guidelines say to avoid, and some S3-compatible servers refuse them.
_PREFIX_CHARS = "A-Za-z0-9!_.*'()=+,@:;&$-"
_PREFIX_CHAR = re.compile(f"[{_PREFIX_CHARS}]")
# A key is at most 1024 bytes; the pack's own part is 71 (`/packs/` and 64 hex digits).
MAX_PREFIX = 512


def location_problem(url: str) -> str | None:
    """Why `url` names no place in a bucket (None: it does), found before anything reaches
    the store: a key with `..` or `//` in it, or one too long, is refused or rewritten by some
    servers, and the store would then look unavailable for ever."""
    text = url.strip()
    if not text.startswith("s3://"):
        return "is not an s3:// URL: use s3://BUCKET/PREFIX"
    bucket, _, prefix = text[len("s3://") :].partition("/")
    if not bucket:
        return "names no bucket: use s3://BUCKET/PREFIX"
    if not _BUCKET.fullmatch(bucket):
        return f"names the bucket {bucket!r}: a bucket is 1-255 of A-Z a-z 0-9 . _ -"
    prefix = prefix.strip("/")
    if len(prefix) > MAX_PREFIX:
        return f"has a prefix of {len(prefix)} characters: at most {MAX_PREFIX}"
    for segment in prefix.split("/") if prefix else ():
        if not segment:
            return f"has an empty segment in its prefix {prefix!r} (two slashes in a row)"
        if segment in (".", ".."):
            return (
                f"has a {segment!r} segment in its prefix {prefix!r}: S3 keys are not paths, "
                "and some servers refuse or rewrite them"
            )
        bad = next((c for c in segment if not _PREFIX_CHAR.fullmatch(c)), None)
        if bad is not None:
            return (
                f"has {bad!r} in its prefix {prefix!r}: use letters, digits, / between "
                "names and ! - _ . * ' ( ) = + , @ : ; & $"
            )
    return None


@dataclass(frozen=True)
class Location:
    """s3://BUCKET/PREFIX, parsed."""

    bucket: str
    prefix: str

    @classmethod
    def parse(cls, url: str) -> Location:
        problem = location_problem(url)
        if problem is not None:
            raise StoreError(f"blob_store {url!r} {problem}")
        bucket, _, prefix = url.strip()[len("s3://") :].partition("/")
        return cls(bucket, prefix.strip("/"))

    def key(self, digest: str) -> str:
        """The object key of a pack: under `packs/`, named by the sha256 of its bytes."""
        return f"{self.prefix}/packs/{digest}" if self.prefix else f"packs/{digest}"

    @property
    def packs(self) -> str:
        return f"{self.prefix}/packs/" if self.prefix else "packs/"

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"


def _client(connect_timeout_s: float, read_timeout_s: float) -> Any:
    try:
        import boto3
        from botocore.config import Config
    except ImportError as e:  # boto3 is the optional extra `s3`
        raise StoreError(
            f"blob_store s3:// needs boto3: pip install 'xclaw[s3]' ({e.name or e} is missing)"
        ) from e
    config = Config(
        connect_timeout=connect_timeout_s,
        read_timeout=read_timeout_s,
        retries={"max_attempts": 3, "mode": "standard"},
        max_pool_connections=_THREADS * 2,
        # Checksums only when an operation needs one: S3-compatible servers differ.
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    # boto3 itself reads AWS_DEFAULT_REGION only; AWS_REGION is the name the other AWS SDKs
    # and most S3-compatible servers' docs use. S3-compatible servers ignore the region.
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    return boto3.session.Session().client("s3", region_name=region, config=config)


class Bucket:
    """The calls ObjectBlobs makes, each in words when the server cannot be reached."""

    def __init__(
        self, location: Location, *, connect_timeout_s: float = 5.0, read_timeout_s: float = 30.0
    ) -> None:
        self.location = location
        self._s3 = _client(connect_timeout_s, read_timeout_s)
        self._pool = ThreadPoolExecutor(_THREADS, thread_name_prefix="xclaw-s3")
        from botocore.exceptions import BotoCoreError, ClientError

        self._client_error = ClientError
        self._errors: tuple[type[BaseException], ...] = (BotoCoreError, ClientError)

    def _fail(self, what: str, e: BaseException) -> BlobStoreUnavailable:
        return BlobStoreUnavailable(
            f"the object store {self.location} could not {what}: {e} "
            "(nothing was referenced; the session goes on once the store answers)"
        )

    def _status(self, e: BaseException) -> int:
        if isinstance(e, self._client_error):
            status: int = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
            return status
        return 0

    def put_if_absent(self, digest: str, data: bytes) -> bool:
        """Write the object unless it exists; True if this wrote it."""
        try:
            self._s3.put_object(
                Bucket=self.location.bucket,
                Key=self.location.key(digest),
                Body=data,
                IfNoneMatch="*",
            )
        except self._errors as e:
            if self._status(e) == 412:
                return False  # already there: content-addressed, so the same bytes
            raise self._fail(f"store {digest[:12]}...", e) from e
        return True

    def get(self, digest: str, first: int = 0, last: int | None = None) -> bytes | None:
        """The object's bytes (`first`..`last` inclusive when `last` is given); None if
        there is no such object."""
        extra = {} if last is None else {"Range": f"bytes={first}-{last}"}
        try:
            got = self._s3.get_object(
                Bucket=self.location.bucket, Key=self.location.key(digest), **extra
            )
            data: bytes = got["Body"].read()
        except self._errors as e:
            if self._status(e) == 404:
                return None
            raise self._fail(f"read {digest[:12]}...", e) from e
        return data

    def put_many(self, objects: dict[str, bytes]) -> int:
        """Every object written (in parallel); the bytes actually sent as new objects."""
        sizes = {h: len(b) for h, b in objects.items()}
        done = self._pool.map(lambda h: (h, self.put_if_absent(h, objects[h])), list(objects))
        return sum(sizes[h] for h, wrote in done if wrote)

    def get_ranges(
        self, ranges: Sequence[tuple[str, int, int]]
    ) -> list[tuple[str, int, bytes | None]]:
        """(pack, first, bytes or None) of each (pack, first, last) range, in parallel."""
        return list(self._pool.map(lambda r: (r[0], r[1], self.get(r[0], r[1], r[2])), ranges))

    def delete_many(self, digests: Sequence[str]) -> None:
        keys = [{"Key": self.location.key(h)} for h in digests]
        for i in range(0, len(keys), _DELETE_BATCH):
            try:
                answer = self._s3.delete_objects(
                    Bucket=self.location.bucket,
                    Delete={"Objects": keys[i : i + _DELETE_BATCH], "Quiet": True},
                )
            except self._errors as e:
                raise self._fail("delete unreferenced objects", e) from e
            errors = [x for x in answer.get("Errors", []) if x.get("Code") != "NoSuchKey"]
            if errors:
                raise BlobStoreUnavailable(
                    f"the object store {self.location} refused to delete "
                    f"{len(errors)} object(s): {errors[0].get('Message', errors[0])}"
                )

    def listing(self) -> Iterator[tuple[str, float]]:
        """(pack name, last modified as a Unix time) of every pack under the prefix."""
        pages = self._s3.get_paginator("list_objects_v2").paginate(
            Bucket=self.location.bucket, Prefix=self.location.packs
        )
        try:
            for page in pages:
                for item in page.get("Contents", []):
                    name = str(item["Key"]).rsplit("/", 1)[-1]
                    yield name, item["LastModified"].timestamp()
        except self._errors as e:
            raise self._fail("list its objects", e) from e

    def close(self) -> None:
        self._pool.shutdown(wait=False)
        self._s3.close()
