"""docs/agents.md against what it shows: its programs are the examples the tests run
(tests/api/test_examples.py runs and type-checks examples/), and its xclaw.yaml declares the
same definition as the Python program does — the same digest."""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

import pytest
import yaml

from xclaw.agents.catalog import declared_agents
from xclaw.config.settings import read_settings

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "agents.md").read_text()


@pytest.mark.parametrize("name", ["support_bot", "reviewer", "deny_hook"])
def test_the_pages_programs_are_the_examples(name: str) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC, re.S)
    assert (ROOT / "examples" / f"{name}.py").read_text() in blocks


def test_the_yaml_declares_what_the_program_declares(monkeypatch: pytest.MonkeyPatch) -> None:
    (block,) = re.findall(r"```yaml\n(.*?)```", DOC, re.S)
    monkeypatch.chdir(ROOT)
    monkeypatch.syspath_prepend(str(ROOT))
    settings = read_settings(yaml.safe_load(block), {}, source="docs/agents.md")
    declared = {d.name: d for d in declared_agents(settings.agents)}
    program = importlib.import_module("examples.support_bot")
    try:
        assert declared["support"].digest == program.support.digest
        assert declared["careful"].hooks.describe()["before_tool"] == [
            "examples.deny_hook:no_deletes"
        ]
    finally:
        for module in ("examples.support_bot", "examples.deny_hook"):
            sys.modules.pop(module, None)
