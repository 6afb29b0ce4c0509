"""What `sandbox.isolation: container` needs, found and said with the fix
(xclaw/sandbox/container/podman.py, docs/containers.md "What it needs"): podman, a runtime
that works on this machine's cgroups (runc; crun refuses hybrid v1 hierarchies), root, an
image. Fake podman/runc programs on PATH: these run anywhere."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from xclaw.config.settings import Settings
from xclaw.errors import ConfigError
from xclaw.sandbox.container import podman as podman_mod
from xclaw.sandbox.isolation import isolation_from_settings, sandbox_mode
from xclaw.sandbox.setup import SandboxSetup


@pytest.fixture
def bindir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty PATH of our own (plus the shell the fakes need); find_podman's cache
    cleared before and after."""
    d = tmp_path / "bin"
    d.mkdir()
    monkeypatch.setenv("PATH", f"{d}:/usr/bin/env-only-none")
    podman_mod.find_podman.cache_clear()
    yield d
    podman_mod.find_podman.cache_clear()


def fake(bindir: Path, name: str, info: dict[str, object] | None = None) -> None:
    body = "#!/bin/sh\n"
    if info is not None:
        body += f"echo '{json.dumps(info)}'\n"  # a builtin: PATH holds only the fakes
    (bindir / name).write_text(body)
    (bindir / name).chmod(0o755)


def info(cgroups: str, runtime: str, rootless: bool = False) -> dict[str, object]:
    return {
        "host": {
            "cgroupVersion": cgroups,
            "ociRuntime": {"name": runtime},
            "security": {"rootless": rootless},
        }
    }


def settings(tmp: Path, image: str | None = "img:1") -> SandboxSetup:
    return Settings(
        home=tmp / "home",
        database=str(tmp / "home" / "x.db"),
        workspace_root=tmp / "home" / "ws",
        sandbox={"isolation": "container", "image": image},
    ).sandbox_setup()


def test_without_podman_the_error_names_the_packages(bindir: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"podman is not installed \(on Debian: apt-get install podman runc\)"
    ):
        podman_mod.find_podman()


def test_crun_alone_on_hybrid_cgroups_is_refused_naming_runc(bindir: Path) -> None:
    fake(bindir, "podman", info("v1", "crun"))
    with pytest.raises(ConfigError) as e:
        podman_mod.find_podman()
    assert "crun" in e.value.message and "cgroup v1" in e.value.message
    assert "apt-get install runc" in e.value.message


def test_runc_is_used_whenever_it_is_installed(bindir: Path) -> None:
    fake(bindir, "podman", info("v1", "crun"))
    fake(bindir, "runc")
    found = podman_mod.find_podman()
    assert found.runtime == "runc"
    assert found.argv("ps")[1:3] == ["--runtime", "runc"]
    assert "--ulimit" in found.ulimits  # explicit: containers.conf's may exceed the hard limits


def test_rootless_podman_is_refused(bindir: Path) -> None:
    fake(bindir, "podman", info("v2", "crun", rootless=True))
    with pytest.raises(ConfigError, match="rootless"):
        podman_mod.find_podman()


def test_no_image_is_refused_before_podman_is_asked(bindir: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"sandbox\.image names no image"):
        isolation_from_settings(settings(tmp_path, image=None))


def test_the_banner_says_why_not(bindir: Path, tmp_path: Path) -> None:
    assert sandbox_mode(settings(tmp_path)) == (
        "error: sandbox.isolation is container, but podman is not installed "
        "(on Debian: apt-get install podman runc)"
    )


def test_a_container_isolation_confines_nothing_so_commands_are_asked(
    bindir: Path, tmp_path: Path
) -> None:
    fake(bindir, "podman", info("v2", "crun"))
    iso = isolation_from_settings(settings(tmp_path))
    assert iso.container is not None and not iso.can_confine and not iso.active
    assert iso.exit_status(137) == -9  # podman exec reports a signal as 128+N
