"""xclaw.yaml → Settings: the keys this module reads and the errors bad values get."""

from __future__ import annotations

from pathlib import Path

import pytest

from xclaw.config.settings import load_settings
from xclaw.errors import ConfigError
from xclaw.llm.builtin_providers import AnthropicEntry, Thinking
from xclaw.llm.prices import Price


@pytest.fixture(autouse=True)
def _no_outside_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("XCLAW_CONFIG", "XCLAW_HOME", "XCLAW_DB"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XCLAW_HOME", str(tmp_path / "home"))


def settings_from(tmp_path: Path, yaml_text: str):
    (tmp_path / "xclaw.yaml").write_text(yaml_text)
    return load_settings(cwd=tmp_path)


def test_side_effects_of_parallel_sub_agents_take_turns_unless_configured(tmp_path: Path) -> None:
    assert load_settings(cwd=tmp_path).sandbox.parallel_side_effects is False
    s = settings_from(tmp_path, "sandbox:\n  parallel_side_effects: true\n")
    assert s.sandbox.parallel_side_effects is True


def test_a_flag_that_is_not_true_or_false_is_refused_in_words(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"sandbox\.parallel_side_effects must be true or false, got 'yes please'"
    ):
        settings_from(tmp_path, "sandbox:\n  parallel_side_effects: yes please\n")


def test_the_otel_section_reaches_the_span_exporter(tmp_path: Path) -> None:
    s = settings_from(
        tmp_path,
        "otel:\n  endpoint: http://127.0.0.1:4318\n  protocol: grpc\n  service_name: svc\n"
        "  headers: {authorization: Bearer x}\n  capture_message_content: true\n",
    )
    c = s.otel
    assert (
        c.enabled,
        c.endpoint,
        c.protocol,
        c.service_name,
        c.headers,
        c.capture_message_content,
    ) == (
        True,
        "http://127.0.0.1:4318",
        "grpc",
        "svc",
        {"authorization": "Bearer x"},
        True,
    )


def test_a_misspelled_key_is_refused_with_did_you_mean(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"unknown key 'mcp_server'; did you mean 'mcp_servers'\?"
    ):
        settings_from(tmp_path, "mcp_server:\n  time: {command: mcp-server-time}\n")
    with pytest.raises(
        ConfigError, match=r"unknown key 'max_iteration'; did you mean 'max_iterations'\?"
    ):
        settings_from(tmp_path, "max_iteration: 3\n")
    with pytest.raises(
        ConfigError, match=r"unknown key sandbox\.shell_timout_s; did you mean 'shell_timeout_s'\?"
    ):
        settings_from(tmp_path, "sandbox:\n  shell_timout_s: 3\n")
    with pytest.raises(
        ConfigError, match=r"unknown key mcp_servers\.time\.comand; did you mean 'command'\?"
    ):
        settings_from(tmp_path, "mcp_servers:\n  time: {comand: mcp-server-time}\n")
    with pytest.raises(ConfigError, match=r"unknown key 'zzz' \(known keys: .*approval.*\)"):
        settings_from(tmp_path, "zzz: 1\n")
    with pytest.raises(ConfigError, match=r"unknown key 'aproval'; did you mean 'approval'\?"):
        settings_from(tmp_path, "aproval:\n  mode: yolo\n")


@pytest.mark.parametrize(
    ("yaml_text", "message"),
    [
        (
            "providers:\n  - {model: 'openai:m', base_ur: 'http://h/v1'}\n",
            r"unknown key providers\[openai:m\]\.base_ur; did you mean 'base_url'\?",
        ),
        (
            "providers:\n  - {model: 'anthropic:m', thinking: {budget_token: 2048}}\n",
            r"unknown key providers\[anthropic:m\]\.thinking\.budget_token; did you mean 'budget_tokens'\?",
        ),
        (
            "prices:\n  mine: {inptu: 1, output: 2}\n",
            r"unknown key prices\.mine\.inptu; did you mean 'input'\?",
        ),
        (
            "tool_policies:\n  notify: {aproval: allow}\n",
            r"unknown key tool_policies\.notify\.aproval; did you mean 'approval'\?",
        ),
        (
            "otel:\n  endpont: http://h:4318\n",
            r"unknown key otel\.endpont; did you mean 'endpoint'\?",
        ),
        (
            "sandbox:\n  isolaton: none\n",
            r"unknown key sandbox\.isolaton; did you mean 'isolation'\?",
        ),
        (
            "mcp_servers:\n  time: {command: mcp-server-time, timout_s: 3}\n",
            r"unknown key mcp_servers\.time\.timout_s; did you mean 'timeout_s'\?",
        ),
    ],
)
def test_unknown_keys_at_nested_levels_are_refused_with_did_you_mean(
    tmp_path: Path, yaml_text: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        settings_from(tmp_path, yaml_text)


@pytest.mark.parametrize(
    ("yaml_text", "message"),
    [
        (
            "max_iterations: ten\n",
            r"xclaw\.yaml: max_iterations must be a whole number >= 1, got 'ten'",
        ),
        ("max_iterations: 0\n", r"max_iterations must be a whole number >= 1, got 0"),
        ("max_tokens: 1.5\n", r"max_tokens must be a whole number >= 1, got 1\.5"),
        ("llm_timeout_s: soon\n", r"llm_timeout_s must be a number > 0, got 'soon'"),
        ("llm_retries: -1\n", r"llm_retries must be a whole number >= 0, got -1"),
        ("llm_retry_base_delay: fast\n", r"llm_retry_base_delay must be a number >= 0, got 'fast'"),
        ("port: 70000\n", r"port must be a TCP port \(1-65535\), got 70000"),
        ("lease_ttl_s: 0.1\n", r"xclaw\.yaml: lease_ttl_s must be a number >= 0\.5, got 0\.1"),
        ("sweep_every_s: 0\n", r"sweep_every_s must be a number > 0, got 0"),
        ("sweep_grace_s: later\n", r"sweep_grace_s must be a number >= 0, got 'later'"),
        (
            "approval:\n  mode: sometimes\n",
            r"approval\.mode 'sometimes': expected ask, auto-edits, yolo",
        ),
        ("approval:\n  timeout_s: -5\n", r"approval\.timeout_s must be a number > 0, got -5"),
        (
            "approval:\n  safe_commands: ls\n",
            r"approval\.safe_commands must be a list of strings, got 'ls'",
        ),
        (
            "approval:\n  deny: ['rm (']\n",
            r"approval\.deny holds 'rm \(', which is not a regular expression",
        ),
        (
            "sandbox:\n  isolation: docker\n",
            r"sandbox\.isolation 'docker': expected auto, bwrap, none",
        ),
        (
            "sandbox:\n  network: yes please\n",
            r"sandbox\.network must be true or false, got 'yes please'",
        ),
        (
            "sandbox:\n  output_cap: lots\n",
            r"sandbox\.output_cap must be a whole number >= 1, got 'lots'",
        ),
        ("secret_env: MY_PASSWORD\n", r"secret_env must be a list of strings, got 'MY_PASSWORD'"),
        ("tools: 'mod:fn'\n", r"tools must be a list of strings, got 'mod:fn'"),
        ("temperature: hot\n", r"temperature must be a number >= 0, got 'hot'"),
        ("max_iterations: true\n", r"max_iterations must be a whole number >= 1, got True"),
        ("workspace_root: ''\n", r"workspace_root must be a path, got ''"),
        ("sandbox: 5\n", r"sandbox must be a mapping, got 5"),
        (
            "approval:\n  safe_commands: [ls, 1]\n",
            r"approval\.safe_commands must be a list of strings, got 1 in it",
        ),
        ("prices:\n  m: {input: 1}\n", r"prices\.m\.output is required"),
        (
            "providers:\n  - {model: anthropic:x, thinking: {budget_tokens: 10}}\n",
            r"providers\[anthropic:x\]\.thinking\.budget_tokens must be a whole number >= 1024",
        ),
        (
            "providers:\n  - {model: openai:x, thinking: {budget_tokens: 2048}}\n",
            r"unknown key providers\[openai:x\]\.thinking: thinking is an option of anthropic: "
            "providers only",
        ),
        (
            "providers:\n  - {model: anthropic:x, cache: maybe}\n",
            r"providers\[anthropic:x\]\.cache must be true or false, got 'maybe'",
        ),
        ("providers:\n  - 'foo:bar'\n", r"model 'foo:bar': expected anthropic:<model>"),
        (
            "tool_policies:\n  t: {approval: sometimes}\n",
            r"tool_policies\.t\.approval 'sometimes': expected ask, allow",
        ),
        ("compact_at: 5\n", r"compact_at must be a share of the context window"),
        (
            "prices:\n  m: {input: 1, output: 2, cached: 1}\n",
            r"unknown key prices\.m\.cached",
        ),
    ],
)
def test_a_bad_value_is_refused_naming_the_key_and_the_value(
    tmp_path: Path, yaml_text: str, message: str
) -> None:
    """No silent fallback to a default: the key and the value are named."""
    with pytest.raises(ConfigError, match=message):
        settings_from(tmp_path, yaml_text)


def test_lease_and_sweep_timing_come_from_the_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("XCLAW_LEASE_TTL_S", "XCLAW_SWEEP_GRACE_S", "XCLAW_SWEEP_EVERY_S"):
        monkeypatch.delenv(name, raising=False)
    s = load_settings(cwd=tmp_path)
    assert (s.lease_ttl_s, s.sweep_grace_s, s.sweep_every_s) == (15.0, None, None)
    s = settings_from(tmp_path, "lease_ttl_s: 4\nsweep_grace_s: 0\nsweep_every_s: 2.5\n")
    assert (s.lease_ttl_s, s.sweep_grace_s, s.sweep_every_s) == (4.0, 0.0, 2.5)
    # The variables win over xclaw.yaml (multi-worker tests and operators set them).
    monkeypatch.setenv("XCLAW_LEASE_TTL_S", "1")
    monkeypatch.setenv("XCLAW_SWEEP_EVERY_S", "0.5")
    s = load_settings(cwd=tmp_path)
    assert (s.lease_ttl_s, s.sweep_grace_s, s.sweep_every_s) == (1.0, 0.0, 0.5)
    monkeypatch.setenv("XCLAW_LEASE_TTL_S", "soon")
    with pytest.raises(
        ConfigError, match=r"XCLAW_LEASE_TTL_S must be a number >= 0\.5, got 'soon'"
    ):
        load_settings(cwd=tmp_path)
    monkeypatch.setenv("XCLAW_LEASE_TTL_S", "1")
    monkeypatch.setenv("XCLAW_SWEEP_GRACE_S", "-3")
    with pytest.raises(ConfigError, match=r"XCLAW_SWEEP_GRACE_S must be a number >= 0, got '-3'"):
        load_settings(cwd=tmp_path)


def test_web_port_from_the_environment_is_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WEB_PORT", "3001")
    assert load_settings(cwd=tmp_path).port == 3001
    monkeypatch.setenv("WEB_PORT", "http")
    with pytest.raises(ConfigError, match=r"WEB_PORT must be a TCP port \(1-65535\), got 'http'"):
        load_settings(cwd=tmp_path)


def test_the_declared_fields_hold_what_xclaw_yaml_said(tmp_path: Path) -> None:
    s = settings_from(
        tmp_path,
        "llm_retry_base_delay: 0.1\nllm_retry_max_delay: 2\nllm_retry_after_max: 9\n"
        "tools: ['m:f']\ntool_policies:\n  f: {approval: allow, resume: retry}\n"
        "sandbox: {isolation: none, network: true, snapshots: false, ignore: [dist/],"
        " max_file_mb: 2, max_snapshot_mb: 20}\n",
    )
    assert (s.llm_retry_base_delay, s.llm_retry_max_delay, s.llm_retry_after_max) == (0.1, 2.0, 9.0)
    assert s.tools == ("m:f",)
    assert (s.tool_policies["f"].approval, s.tool_policies["f"].resume) == ("allow", "retry")
    sandbox = s.sandbox
    assert (sandbox.isolation, sandbox.network, sandbox.snapshots, sandbox.ignore) == (
        "none",
        True,
        False,
        ("dist/",),
    )
    assert (sandbox.max_file_mb, sandbox.max_snapshot_mb) == (2.0, 20.0)
    assert not hasattr(s, "extra")  # no raw YAML kept beside the declared fields


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
    git, web = s.mcp_servers.values()
    assert git.args == ("--repository", "/srv/repo") and git.trusted and git.transport == "stdio"
    assert web.headers == {"Authorization": "Bearer tok-123456789"} and web.timeout_s == 5
    assert "tok-123456789" in s.secret_values()
    with pytest.raises(
        ConfigError, match=r"mcp_servers\.x\.env\.K uses \$\{XCLAW_T_UNSET\}, which is not set"
    ):
        settings_from(tmp_path, "mcp_servers:\n  x: {command: c, env: {K: '${XCLAW_T_UNSET}'}}\n")
    with pytest.raises(ConfigError, match=r"mcp_servers\.x needs either `command`.*or `url`"):
        settings_from(tmp_path, "mcp_servers:\n  x: {args: [a]}\n")
    with pytest.raises(ConfigError, match=r"MCP server name 'a__b'"):
        settings_from(tmp_path, "mcp_servers:\n  a__b: {command: c}\n")


def test_thinking_cache_compaction_and_prices(tmp_path: Path) -> None:
    s = settings_from(
        tmp_path,
        (
            "providers:\n"
            "  - {model: anthropic:claude-x, api_key: k, thinking: {budget_tokens: 4096}, cache: false}\n"
            "  - anthropic:claude-y\n"
            "compact_at: 0.7\n"
            "prices:\n  my-model: {input: 1, output: 2.5, cache_read: 0.1}\n"
        ),
    )
    (x, y) = s.providers
    assert isinstance(x, AnthropicEntry) and isinstance(y, AnthropicEntry)
    assert (x.thinking, x.cache, y.thinking, y.cache) == (
        Thinking(budget_tokens=4096),
        False,
        None,
        True,
    )
    assert s.compact_at == 0.7 and s.prices == {
        "my-model": Price(input=1.0, output=2.5, cache_read=0.1)
    }
    assert settings_from(tmp_path, "compact_at: false\n").compact_at is None
    assert load_settings(cwd=tmp_path / "none").compact_at == 0.8


def test_a_variable_form_not_understood_is_refused_and_defaults_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`${TOKEN:-}` (Claude Code's default form) used to pass as the literal text `${TOKEN:-}`,
    a silent wrong header; it now takes its default, and any other `${...}` is refused."""
    monkeypatch.setenv("XCLAW_T_SET", "from-env-42")
    monkeypatch.delenv("XCLAW_T_UNSET", raising=False)
    s = settings_from(
        tmp_path,
        "mcp_servers:\n  x: {command: c, env: {A: '${XCLAW_T_SET:-no}', B: '${XCLAW_T_UNSET:-fallback}', C: '${XCLAW_T_UNSET:-}'}}\n",
    )
    [x] = s.mcp_servers.values()
    assert x.env == {"A": "from-env-42", "B": "fallback", "C": ""}
    assert "from-env-42" in s.secret_values()
    for bad in ("${}", "${1BAD}", "${XCLAW_T_SET:x}", "${XCLAW_T_SET"):
        with pytest.raises(
            ConfigError, match=r"mcp_servers\.x\.env\.K holds .*, which is not a variable reference"
        ):
            settings_from(tmp_path, f"mcp_servers:\n  x: {{command: c, env: {{K: '{bad}'}}}}\n")


def test_first_tool_choice_is_an_openai_provider_option(tmp_path: Path) -> None:
    """A small local model that chats instead of acting can be made to start each turn with a
    tool call: `required` (any tool) or a tool's name, on an openai: provider entry."""
    s = settings_from(
        tmp_path,
        "providers:\n"
        "  - {model: openai:gemma, base_url: 'http://127.0.0.1:8080/v1', first_tool_choice: shell}\n"
        "  - {model: openai:qwen, base_url: 'http://127.0.0.1:8081/v1', first_tool_choice: required}\n"
        "  - openai:other\n",
    )
    assert [p.first_tool_choice for p in s.providers] == ["shell", "required", None]
    for bad, words in (
        ("providers:\n  - {model: anthropic:x, first_tool_choice: shell}\n", "openai: provider"),
        ("providers:\n  - {model: openai:x, first_tool_choice: ''}\n", "first_tool_choice"),
        ("providers:\n  - {model: openai:x, first_tool_choice: [shell]}\n", "first_tool_choice"),
        ("providers:\n  - {model: openai:x, first_tool_choice: none}\n", "first_tool_choice"),
        ("providers:\n  - {model: openai:x, first_tool_choise: shell}\n", "first_tool_choice"),
    ):
        with pytest.raises(ConfigError, match=words):
            settings_from(tmp_path, bad)


# Modules that touch the process environment for something that is no setting, and why.
ENVIRONMENT_USERS = {
    "config/settings.py": "reads the settings (the one place that does)",
    "security/credentials.py": "removes credentials from the process environment once they are read",
    "tools/shell.py": "a shell command's environment is the process's, credentials removed",
    "sandbox/landlock.py": "sets TMPDIR in the confined child it is about to exec",
    "sandbox/isolation.py": "$HOME: where the owner's credential files are, to hide them",
    "demo/walkthrough.py": "the demo's server process gets this one's environment",
    "demo/ledger.py": "the demo's ledger tool (a Python tool: it gets no settings) finds its file",
    "store/blobs/s3.py": "AWS_REGION: an AWS variable boto3 does not read itself (the others it does)",
}


def test_no_module_reads_a_setting_from_the_environment_itself() -> None:
    """A setting comes from Settings; a module reading os.environ or os.getenv for one would
    bypass .env, xclaw.yaml, the precedence and the checks."""
    import ast

    root = Path(__file__).resolve().parents[1] / "xclaw"
    found = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in ("environ", "getenv", "environb")
                and isinstance(node.value, ast.Name)
                and node.value.id == "os"
            ):
                found.add(str(path.relative_to(root)))
    assert found - set(ENVIRONMENT_USERS) == set()
    assert set(ENVIRONMENT_USERS) - found == set(), "an allowance no longer needed"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("s3://bucket/../x", r"blob_store .*'\.\.'"),
        ("s3://bucket/a/./b", r"blob_store .*'\.'"),
        ("s3://bucket/a//b", r"blob_store .*empty segment"),
        ("s3://bucket/" + "p" * 1100, r"blob_store .*1100 characters.* at most 512"),
        ("s3://bucket/a b", r"blob_store .*' '"),
        ("s3://bucket/a?b", r"blob_store .*'\?'"),
        ("s3://bucket/caf\u00e9", r"blob_store .*'\u00e9'"),
        ("s3://bu cket/x", r"blob_store .*bucket 'bu cket'"),
        ("s3:///x", r"blob_store .*names no bucket"),
        ("file:///tmp/x", r"blob_store .*s3://BUCKET/PREFIX"),
    ],
)
def test_a_blob_store_that_names_no_place_in_a_bucket_is_refused_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str, message: str
) -> None:
    """Refused when the settings are read, in words: not accepted and then waited for as an
    object store that never answers."""
    monkeypatch.delenv("XCLAW_BLOB_STORE", raising=False)
    with pytest.raises(ConfigError, match=message):
        settings_from(tmp_path, f"blob_store: {url!r}\n")
    monkeypatch.setenv("XCLAW_BLOB_STORE", url)
    with pytest.raises(ConfigError, match=message.replace("blob_store", "XCLAW_BLOB_STORE")):
        load_settings(cwd=tmp_path)


@pytest.mark.parametrize(
    "url",
    [
        "s3://bucket",
        "s3://bucket/",
        "s3://my.bucket-1/xclaw",
        "s3://bucket/team-a/xclaw_prod/2026.06/env=prod",
        "s3://bucket/" + "p" * 512,
    ],
)
def test_a_blob_store_that_names_a_place_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    monkeypatch.delenv("XCLAW_BLOB_STORE", raising=False)
    assert settings_from(tmp_path, f"blob_store: {url!r}\n").blob_store == url
