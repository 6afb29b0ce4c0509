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
    c = s.otel
    assert (c.enabled, c.endpoint, c.protocol, c.service_name, c.headers, c.capture_content) == (
        True, "http://127.0.0.1:4318", "grpc", "svc", {"authorization": "Bearer x"}, True)


def test_a_misspelled_key_is_refused_with_did_you_mean(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown key 'mcp_server'; did you mean 'mcp_servers'\?"):
        settings_from(tmp_path, "mcp_server:\n  time: {command: mcp-server-time}\n")
    with pytest.raises(ConfigError, match=r"unknown key 'max_iteration'; did you mean 'max_iterations'\?"):
        settings_from(tmp_path, "max_iteration: 3\n")
    with pytest.raises(ConfigError, match=r"unknown key sandbox\.shell_timout_s; did you mean 'shell_timeout_s'\?"):
        settings_from(tmp_path, "sandbox:\n  shell_timout_s: 3\n")
    with pytest.raises(ConfigError, match=r"unknown key mcp_servers\.time\.comand; did you mean 'command'\?"):
        settings_from(tmp_path, "mcp_servers:\n  time: {comand: mcp-server-time}\n")
    with pytest.raises(ConfigError, match=r"unknown key 'zzz' \(known keys: .*approval.*\)"):
        settings_from(tmp_path, "zzz: 1\n")


def test_every_key_the_readme_shows_is_known(tmp_path: Path) -> None:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    block = readme.split("An optional `xclaw.yaml`", 1)[1].split("```yaml", 1)[1].split("```", 1)[0]
    settings_from(tmp_path, block)  # no ConfigError


def test_mcp_servers_expand_variables_and_their_values_become_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XCLAW_T_TOKEN", "tok-123456789")
    (tmp_path / ".env").write_text("XCLAW_T_DIR=/srv/repo\n")
    s = settings_from(
        tmp_path,
        "mcp_servers:\n"
        "  git: {command: mcp-server-git, args: [--repository, '${XCLAW_T_DIR}'], trusted: true}\n"
        "  web: {url: 'https://mcp.example/mcp', headers: {Authorization: 'Bearer ${XCLAW_T_TOKEN}'}, timeout_s: 5}\n",
    )
    git, web = s.mcp_servers
    assert git.args == ("--repository", "/srv/repo") and git.trusted and git.transport == "stdio"
    assert web.headers == {"Authorization": "Bearer tok-123456789"} and web.timeout_s == 5
    assert "tok-123456789" in s.secret_values()
    with pytest.raises(ConfigError, match=r"mcp_servers\.x\.env\.K uses \$\{XCLAW_T_UNSET\}, which is not set"):
        settings_from(tmp_path, "mcp_servers:\n  x: {command: c, env: {K: '${XCLAW_T_UNSET}'}}\n")
    with pytest.raises(ConfigError, match=r"mcp_servers\.x needs either `command`.*or `url`"):
        settings_from(tmp_path, "mcp_servers:\n  x: {args: [a]}\n")
    with pytest.raises(ConfigError, match=r"MCP server name 'a__b'"):
        settings_from(tmp_path, "mcp_servers:\n  a__b: {command: c}\n")
    with pytest.raises(ConfigError, match=r"tool_policies\.t\.approval must be ask or allow"):
        from xclaw.tools.traits import parse_policies

        parse_policies({"t": {"approval": "sometimes"}})


def test_thinking_cache_compaction_and_prices(tmp_path: Path) -> None:
    s = settings_from(tmp_path, (
        "providers:\n"
        "  - {model: anthropic:claude-x, api_key: k, thinking: {budget_tokens: 4096}, cache: false}\n"
        "  - anthropic:claude-y\n"
        "compact_at: 0.7\n"
        "prices:\n  my-model: {input: 1, output: 2.5, cache_read: 0.1}\n"
    ))
    (x, y) = s.providers
    assert (x.thinking_budget, x.cache, y.thinking_budget, y.cache) == (4096, False, None, True)
    assert s.compact_at == 0.7 and s.prices == {"my-model": {"input": 1.0, "output": 2.5, "cache_read": 0.1}}
    assert settings_from(tmp_path, "compact_at: false\n").compact_at is None
    assert load_settings(cwd=tmp_path / "none").compact_at == 0.8
    for bad, words in (
        ("providers:\n  - {model: anthropic:x, thinking: {budget_tokens: 10}}\n", "N >= 1024"),
        ("providers:\n  - {model: openai:x, thinking: {budget_tokens: 2048}}\n", "on an anthropic: provider"),
        ("providers:\n  - {model: anthropic:x, cache: maybe}\n", "cache must be true or false"),
        ("compact_at: 5\n", "compact_at must be a share"),
        ("prices:\n  m: {input: 1}\n", "needs at least input and output"),
        ("prices:\n  m: {input: 1, output: 2, cached: 1}\n", "prices.m.cached"),
    ):
        with pytest.raises(ConfigError, match=words):
            settings_from(tmp_path, bad)
