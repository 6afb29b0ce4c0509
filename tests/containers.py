"""Real podman for the container tests (docs/containers.md): whether it can run here, the test
image, and the containers a test made, found and removed.

The image is made from this machine's own files, since no registry is reachable: busybox
(Debian's busybox-static) with a link per applet, and bash with the libraries it loads, as a
rootfs tarball given to `podman import`. Made once per machine (podman's image store is the
cache, like .ci/run's other caches outside the checkout), under a file lock so that parallel
test workers make it once. Tests that need podman skip with the reason where it cannot run,
and fail instead when XCLAW_TEST_REQUIRE_PODMAN is set (.ci/run sets it and installs podman,
runc and busybox-static)."""

from __future__ import annotations

import fcntl
import io
import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from tests.caches import _root

TEST_IMAGE = "localhost/xclaw-test-env:1"


def podman_missing() -> str | None:
    """Why the container tests cannot run here; None when they can."""
    if shutil.which("podman") is None:
        return "podman is not installed (apt-get install podman runc)"
    if shutil.which("runc") is None:
        return "runc is not installed (apt-get install runc; crun refuses hybrid cgroups)"
    if os.geteuid() != 0:
        return "xclaw's containers need podman run as root"
    if not Path("/bin/busybox").exists() and shutil.which("busybox") is None:
        return "busybox is not installed (apt-get install busybox-static): the test image needs it"
    return None


def require_podman() -> None:
    why = podman_missing()
    if why is not None:
        if os.environ.get("XCLAW_TEST_REQUIRE_PODMAN"):
            pytest.fail(f"XCLAW_TEST_REQUIRE_PODMAN is set but {why}")
        pytest.skip(why)


def _rootfs_tar() -> bytes:
    """busybox with its applets, bash and its libraries, a passwd: a tar in memory."""
    busybox = shutil.which("busybox") or "/bin/busybox"
    bash = shutil.which("bash") or "/bin/bash"
    applets = subprocess.run([busybox, "--list"], capture_output=True, text=True, check=True)
    libs = subprocess.run(["ldd", bash], capture_output=True, text=True, check=True).stdout
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:

        def add_dir(name: str, mode: int = 0o755) -> None:
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, mode
            tar.addfile(info)

        def add_file(name: str, data: bytes, mode: int = 0o644) -> None:
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))

        for d in (
            "bin",
            "etc",
            "root",
            "opt",
            "usr",
            "usr/bin",
            "usr/local",
            "usr/local/bin",
            "workspace",
            "lib",
            "lib64",
            "lib/x86_64-linux-gnu",
            "var",
            "home",
        ):
            add_dir(d)
        add_dir("tmp", 0o1777)
        add_file("bin/busybox", Path(busybox).read_bytes(), 0o755)
        for applet in applets.stdout.split():
            if applet in ("busybox", "bash"):
                continue
            info = tarfile.TarInfo(f"bin/{applet}")
            info.type, info.linkname = tarfile.SYMTYPE, "busybox"
            tar.addfile(info)
        add_file("bin/bash", Path(bash).read_bytes(), 0o755)
        for word in libs.split():
            if word.startswith("/") and Path(word).exists():
                add_file(word.lstrip("/"), Path(word).resolve().read_bytes(), 0o755)
        add_file("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n")
        add_file("etc/group", b"root:x:0:\n")
    return buf.getvalue()


def test_image() -> str:
    """The test image's name, made first if podman does not have it."""
    require_podman()
    lock_path = _root() / "podman-image.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        exists = subprocess.run(["podman", "image", "exists", TEST_IMAGE], check=False)
        if exists.returncode != 0:
            subprocess.run(
                ["podman", "import", "-", TEST_IMAGE],
                input=_rootfs_tar(),
                check=True,
                capture_output=True,
            )
    return TEST_IMAGE


test_image.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test


def containers_of(root: Path) -> list[dict[str, object]]:
    """The containers (any state) labelled with this workspace root."""
    done = subprocess.run(
        [
            "podman",
            "ps",
            "-a",
            "--filter",
            f"label=xclaw.root={Path(root).resolve()}",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return list(json.loads(done.stdout or "[]"))


def remove_containers(root: Path) -> int:
    """Remove what a test left under `root` (containers and the mount points); how many."""
    found = containers_of(root)
    for c in found:
        subprocess.run(
            ["podman", "rm", "-f", "-t", "0", str(c["Id"])], capture_output=True, check=False
        )
    mounts_dir = Path(root) / ".containers"
    if mounts_dir.is_dir():
        for point in mounts_dir.iterdir():
            while (
                subprocess.run(
                    ["umount", "-l", str(point)], capture_output=True, check=False
                ).returncode
                == 0
            ):
                pass
    return len(found)
