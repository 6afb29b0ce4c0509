"""xclaw.yaml → Settings: the keys this module reads and the errors bad values get."""

from __future__ import annotations

from pathlib import Path

import pytest

from xclaw.config import load_settings
from xclaw.errors import ConfigError


@pytest.fixture(autouse=True)
def _no_outside_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("XCLAW_CONFIG", "XCLAW_HOME", "XCLAW_DB"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XCLAW_HOME", str(tmp_path / "home"))


def settings_from(tmp_path: Path, yaml_text: str):
    (tmp_path / "xclaw.yaml").write_text(yaml_text)
    return load_settings(cwd=tmp_path)


def test_side_effects_of_parallel_sub_agents_take_turns_unless_configured(tmp_path: Path) -> None:
    assert load_settings(cwd=tmp_path).parallel_side_effects is False
    s = settings_from(tmp_path, "sandbox:\n  parallel_side_effects: true\n")
    assert s.parallel_side_effects is True


def test_a_flag_that_is_not_true_or_false_is_refused_in_words(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"sandbox\.parallel_side_effects must be true or false, got 'yes please'"):
        settings_from(tmp_path, "sandbox:\n  parallel_side_effects: yes please\n")


def test_the_otel_section_reaches_the_span_exporter(tmp_path: Path) -> None:
    from xclaw.telemetry.config import otel_config

    s = settings_from(
        tmp_path,
        "otel:\n  endpoint: http://127.0.0.1:4318\n  protocol: grpc\n  service_name: svc\n"
        "  headers: {authorization: Bearer x}\n  capture_message_content: true\n",
    )
    c = otel_config(s.extra, {})
    assert (c.enabled, c.endpoint, c.protocol, c.service_name, c.headers, c.capture_content) == (
        True, "http://127.0.0.1:4318", "grpc", "svc", {"authorization": "Bearer x"}, True)
