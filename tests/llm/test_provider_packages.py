"""A provider from a package of its own: built from a pyproject.toml in a temporary directory,
installed with pip, found through its `xclaw.providers` entry point (importlib.metadata), and
used by `xclaw run` as a user would — its kind in XCLAW_MODEL or xclaw.yaml, its own entry
keys checked with a "did you mean", its key variable and its prices."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# One pytest-xdist worker runs them all: the package is built once (tests/conftest.py).
pytestmark = pytest.mark.slow

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "xclaw-echo-provider"
version = "0.1.0"

[project.entry-points."xclaw.providers"]
echo = "xclaw_echo:EchoProvider"
"""

# The package's code: what docs/llm-providers.md showed a provider package writing before the
# event sink — its model streams plain strings through `on_delta` — kept so, to show that
# such a package still works unchanged (xclaw/llm/legacy.py adapts its model).
MODULE = '''\
"""echo:<voice>: answers with the user's last message."""

from __future__ import annotations

from typing import Any, ClassVar

from xclaw.errors import ConfigError
from xclaw.llm.base import DeltaSink, LLMRequest, LLMResponse, Model
from xclaw.llm.prices import Price
from xclaw.llm.provider import KeyedEntry, Provider
from xclaw.llm.messages import Usage, UserMessage


class EchoEntry(KeyedEntry):
    shout: bool = False


class EchoModel:
    def __init__(self, name: str, shout: bool) -> None:
        self.name = name
        self.shout = shout

    async def complete(
        self, request: LLMRequest, on_delta: DeltaSink | None = None
    ) -> LLMResponse:
        said = next(m.text for m in reversed(request.messages) if isinstance(m, UserMessage))
        text = "echo: " + (said.upper() if self.shout else said)
        if on_delta is not None:
            await on_delta(text)
        usage = Usage(prompt_tokens=1000, completion_tokens=10)
        return LLMResponse(text, usage=usage, model=self.name, stop_reason="end_turn")


class EchoProvider(Provider[EchoEntry]):
    kind = "echo"
    entry = EchoEntry
    key_variables = ("ECHO_API_KEY",)
    prices: ClassVar[dict[str, Price]] = {"loud": Price(input=2.0, output=4.0)}

    def build(self, entry: EchoEntry, llm: Any) -> Model:
        if not entry.api_key:
            raise ConfigError(f"{entry.model}: ECHO_API_KEY is not set")
        return EchoModel(entry.model, entry.shout)
'''


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package built and installed by pip into a directory of its own (put on the
    path of the processes that should see it)."""
    root = tmp_path_factory.mktemp("echo")
    source = root / "xclaw-echo-provider"
    (source / "xclaw_echo").mkdir(parents=True)
    (source / "pyproject.toml").write_text(PYPROJECT)
    (source / "xclaw_echo" / "__init__.py").write_text(MODULE)
    site = root / "site"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(site),
            str(source),
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert (site / "xclaw_echo_provider-0.1.0.dist-info" / "entry_points.txt").is_file()
    return site


def xclaw(
    tmp: Path, *args: str, site: Path | None, **env_extra: str
) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith("_API_KEY") and k not in ("XCLAW_MODEL", "PYTHONPATH")
    }
    env.update({"XCLAW_HOME": str(tmp / "home"), "NO_COLOR": "1", **env_extra})
    if site is not None:
        env["PYTHONPATH"] = str(site)
    return subprocess.run(
        [sys.executable, "-m", "xclaw", *args],
        check=False,
        cwd=tmp,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_an_installed_provider_runs_a_session_by_its_kind(tmp_path: Path, installed: Path) -> None:
    r = xclaw(
        tmp_path, "run", "hello there", site=installed, XCLAW_MODEL="echo:loud", ECHO_API_KEY="k1"
    )
    assert r.returncode == 0, r.stderr
    assert "echo: hello there" in r.stdout
    # Its prices are in the table every view prices steps with.
    listed = xclaw(tmp_path, "sessions", "--json", site=installed)
    [session] = json.loads(listed.stdout)
    assert session["llmCalls"] == 1 and session["cost"] == pytest.approx(0.00204)


def test_its_entry_keys_come_from_xclaw_yaml_and_are_checked(
    tmp_path: Path, installed: Path
) -> None:
    (tmp_path / "xclaw.yaml").write_text("providers:\n  - {model: 'echo:loud', shout: true}\n")
    r = xclaw(tmp_path, "run", "hello", site=installed, ECHO_API_KEY="k1")
    assert r.returncode == 0 and "echo: HELLO" in r.stdout, r.stderr
    (tmp_path / "xclaw.yaml").write_text("providers:\n  - {model: 'echo:loud', shuot: true}\n")
    r = xclaw(tmp_path, "run", "hello", site=installed, ECHO_API_KEY="k1")
    assert r.returncode == 2
    assert "unknown key providers[echo:loud].shuot; did you mean 'shout'?" in r.stderr


def test_its_key_variable_is_asked_for_and_its_kind_is_unknown_without_it(
    tmp_path: Path, installed: Path
) -> None:
    r = xclaw(tmp_path, "run", "hello", site=installed, XCLAW_MODEL="echo:loud")
    assert r.returncode == 2 and "echo:loud: ECHO_API_KEY is not set" in r.stderr
    r = xclaw(tmp_path, "run", "hello", site=None, XCLAW_MODEL="echo:loud", ECHO_API_KEY="k1")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "model 'echo:loud': expected anthropic:<model>" in r.stderr


def test_a_package_that_cannot_be_loaded_is_named(tmp_path: Path, installed: Path) -> None:
    """An entry point whose module fails on import is one error naming the package."""
    broken = tmp_path / "broken"
    dist = broken / "xclaw_broken-0.1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: xclaw-broken\nVersion: 0.1.0\n")
    (dist / "entry_points.txt").write_text("[xclaw.providers]\nbroken = xclaw_broken:Nothing\n")
    (broken / "xclaw_broken.py").write_text("raise RuntimeError('half-installed')\n")
    r = xclaw(tmp_path, "run", "hello", site=broken, XCLAW_MODEL="broken:m", ECHO_API_KEY="k1")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "provider package 'xclaw-broken'" in r.stderr and "half-installed" in r.stderr
