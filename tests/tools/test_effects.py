"""Effect classes, compensations and settle checks as tools declare them (xclaw/tools/
effects.py): built-ins classified, Python tools through `@xclaw.tool(...)`, MCP tools through
`tool_policies` — against a real MCP server — and hostile declarations refused or contained."""

from __future__ import annotations

import os
import sqlite3
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from tests.tools.mcp_servers.servers import ROOT
from xclaw.config.settings import load_settings
from xclaw.errors import ConfigError
from xclaw.runtime.wiring import default_toolbox
from xclaw.tools.base import ToolContext
from xclaw.tools.effects import (
    Compensation,
    CompensationUnavailable,
    EffectClass,
    Outcome,
    effect_of,
    fill_template,
    recorded_output,
)
from xclaw.tools.mcp.config import parse_servers
from xclaw.tools.mcp.hub import McpHub
from xclaw.tools.python_tools import load_python_tools
from xclaw.tools.registry import default_tools
from xclaw.tools.traits import ToolPolicy

MODULE = '''
import time
import xclaw

DONE = set()


def undo(input, output):
    DONE.discard(input["ref"])
    return f"undid {input['ref']} (id {output['id']})"


def check(input):
    return input["ref"] in DONE


@xclaw.tool(compensate=undo, settle=check)
def pay(ref: str, amount: int) -> dict:
    """Record a payment."""
    DONE.add(ref)
    return {"id": 7, "ref": ref}


@xclaw.tool(effect="irreversible")
def mail(to: str) -> str:
    """Send a mail."""
    return "sent"


@xclaw.tool(effect="workspace")
def scratch(name: str) -> str:
    """Writes in the workspace only."""
    return name


@xclaw.tool
def plain(x: int) -> int:
    """Undeclared: not read-only."""
    return x


@xclaw.tool(read_only=True)
def peek(x: int) -> int:
    """Reads."""
    return x


@xclaw.tool(idempotency_key="key")
def keyed(item: str, key: str) -> str:
    """Sends the key along."""
    return key


def raising(input):
    raise RuntimeError("the lookup service is down")


def hanging(input, output=None):
    time.sleep(2)


def shrug(input):
    return "perhaps"


def broken_undo(input, output):
    raise RuntimeError("cannot delete: foreign key")


@xclaw.tool(settle=raising, compensate=broken_undo)
def hostile_a(ref: str) -> str:
    """Its check raises, its compensation too."""
    return ref


@xclaw.tool(settle=hanging, compensate=hanging)
def hostile_b(ref: str) -> str:
    """Its check and compensation hang."""
    return ref


@xclaw.tool(settle=shrug)
def hostile_c(ref: str) -> str:
    """Its check answers nonsense."""
    return ref
'''


@pytest.fixture
def mod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    name = f"xclaw_effects_{abs(hash(tmp_path)) % 10**8}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(MODULE))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("XCLAW_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XCLAW_CONFIG", raising=False)
    return name


def tools_of(tmp: Path, mod: str, *fns: str, **policies: ToolPolicy) -> dict[str, Any]:
    return {
        t.name: t
        for t in load_python_tools([f"{mod}:{f}" for f in fns], policies=policies, cwd=tmp)
    }


def test_built_in_tools_are_classified() -> None:
    classes = {name: effect_of(t) for name, t in default_tools().items()}
    assert classes == {
        "shell": EffectClass.WORKSPACE,
        "read_file": EffectClass.READ_ONLY,
        "view_file": EffectClass.READ_ONLY,
        "write_file": EffectClass.WORKSPACE,
        "edit_file": EffectClass.WORKSPACE,
        "list_dir": EffectClass.READ_ONLY,
        "spawn_agent": EffectClass.WORKSPACE,
    }
    assert not any(c.outside for c in classes.values())


def test_python_tools_declare_their_class_with_the_decorator(tmp_path: Path, mod: str) -> None:
    tools = tools_of(tmp_path, mod, "pay", "mail", "scratch", "plain", "peek", "keyed")
    classes = {n: effect_of(t) for n, t in tools.items()}
    assert classes == {
        "pay": EffectClass.COMPENSABLE,
        "mail": EffectClass.IRREVERSIBLE,
        "scratch": EffectClass.WORKSPACE,
        "plain": EffectClass.IRREVERSIBLE,  # undeclared and not read-only: nothing undoes it
        "peek": EffectClass.READ_ONLY,
        "keyed": EffectClass.IRREVERSIBLE,
    }
    assert [n for n, t in tools.items() if t.outside_effects] == ["pay", "mail", "plain", "keyed"]
    assert tools["pay"].traits.as_json()["effect"] == "compensable"
    assert tools["pay"].traits.as_json()["settleCheck"] is True
    # A policy names another class: the user's word, as for approval and resume.
    overridden = tools_of(tmp_path, mod, "plain", plain=ToolPolicy(effect="workspace"))
    assert effect_of(overridden["plain"]) is EffectClass.WORKSPACE


@pytest.mark.parametrize(
    ("decorator", "words"),
    [
        ('effect="sideways"', "is not one of read_only, workspace, compensable, irreversible"),
        ('effect="compensable"', "needs a compensation"),
        ('compensate="undo"', "is not a function"),
        ("compensate=lambda x: x", "cannot be called as (input, output)"),
        ("settle=lambda a, b: a", "cannot be called as (input)"),
        (
            'effect="irreversible", compensate=lambda i, o: 1',
            "makes it compensable, not irreversible",
        ),
        ("read_only=True, compensate=lambda i, o: 1", "a read-only tool has nothing to compensate"),
        ('idempotency_key="token"', "names no parameter"),
    ],
)
def test_a_bad_declaration_is_refused_naming_the_tool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, decorator: str, words: str
) -> None:
    name = f"xclaw_bad_{abs(hash((tmp_path, decorator))) % 10**8}"
    (tmp_path / f"{name}.py").write_text(
        f"import xclaw\n\n@xclaw.tool({decorator})\ndef f(ref: str) -> str:\n    return ref\n"
    )
    monkeypatch.setattr(sys, "path", list(sys.path))
    with pytest.raises(ConfigError, match="f'") as e:
        load_python_tools([f"{name}:f"], cwd=tmp_path)
    assert words in e.value.message


def test_compensate_and_settle_policies_are_for_mcp_tools(tmp_path: Path, mod: str) -> None:
    policy = ToolPolicy.model_validate({"compensate": {"tool": "x"}})
    with pytest.raises(ConfigError, match="compensate and settle policies are for MCP tools"):
        tools_of(tmp_path, mod, "plain", plain=policy)


async def test_a_python_tools_settle_check_and_compensation_run_as_declared(
    tmp_path: Path, mod: str
) -> None:
    tools = tools_of(tmp_path, mod, "pay")
    pay = tools["pay"]
    ctx = ToolContext(workspace=tmp_path, session_id="s")
    args = {"ref": "INV-1", "amount": 5}
    assert (await pay.find_outcome(args, ctx)).outcome is Outcome.NOT_DONE
    result = await pay.run(args, ctx)
    assert not result.is_error
    found = await pay.find_outcome(args, ctx)
    assert found.outcome is Outcome.DONE and "check says done" in found.detail
    assert found.result and "it ran" in found.result
    output = recorded_output(result.content)
    comp = pay.compensation(args, output)
    assert comp is not None and comp.action.endswith(".undo")
    assert comp.args == {"input": args, "output": {"id": 7, "ref": "INV-1"}}
    undone = await pay.compensate(comp, args, output, ctx)
    assert undone.content == "undid INV-1 (id 7)" and not undone.is_error
    assert (await pay.find_outcome(args, ctx)).outcome is Outcome.NOT_DONE


async def test_hostile_checks_and_compensations_are_contained(tmp_path: Path, mod: str) -> None:
    """A check that raises, hangs or answers nonsense knows nothing (unknown); a compensation
    that raises or hangs is a failed one, in words — nothing crashes, nothing waits forever."""
    quick = ToolPolicy(effect_timeout_s=0.5)
    tools = tools_of(tmp_path, mod, "hostile_a", "hostile_b", "hostile_c", hostile_b=quick)
    ctx = ToolContext(workspace=tmp_path, session_id="s")
    args = {"ref": "r"}
    a = await tools["hostile_a"].find_outcome(args, ctx)
    assert a.outcome is Outcome.UNKNOWN and "RuntimeError: the lookup service is down" in a.detail
    began = time.monotonic()
    b = await tools["hostile_b"].find_outcome(args, ctx)
    assert b.outcome is Outcome.UNKNOWN and "did not answer within 0.5 s" in b.detail
    assert time.monotonic() - began < 10
    c = await tools["hostile_c"].find_outcome(args, ctx)
    assert c.outcome is Outcome.UNKNOWN and "answered 'perhaps'" in c.detail
    comp_a = tools["hostile_a"].compensation(args, "r")
    failed = await tools["hostile_a"].compensate(comp_a, args, "r", ctx)
    assert failed.is_error and "RuntimeError: cannot delete: foreign key" in failed.content
    comp_b = tools["hostile_b"].compensation(args, "r")
    hung = await tools["hostile_b"].compensate(comp_b, args, "r", ctx)
    assert hung.is_error and "did not finish within 0.5 s" in hung.content


async def test_an_idempotency_key_is_hidden_from_the_model_and_stable_per_call(
    tmp_path: Path, mod: str
) -> None:
    from xclaw.tools.base import CURRENT_CALL

    keyed = tools_of(tmp_path, mod, "keyed")["keyed"]
    assert list(keyed.input_schema["properties"]) == ["item"]
    assert keyed.retry_on_resume  # the remote side deduplicates: run again after a crash
    ctx = ToolContext(workspace=tmp_path, session_id="sess")
    token = CURRENT_CALL.set("call_3_0")
    try:
        first = (await keyed.run({"item": "a"}, ctx)).content
        again = (await keyed.run({"item": "a"}, ctx)).content
    finally:
        CURRENT_CALL.reset(token)
    assert first == again == "xclaw-sess-call_3_0"


def test_templates_take_values_from_the_recorded_call() -> None:
    call_in = {"table": "payments", "rows": [{"ref": "A"}]}
    call_out = {"id": 42}
    assert fill_template(
        {"id": "{output.id}", "where": "ref={input.rows.0.ref}", "n": 3}, call_in, call_out
    ) == {"id": 42, "where": "ref=A", "n": 3}
    with pytest.raises(KeyError, match=r"output\.missing"):
        fill_template("{output.missing}", call_in, call_out)
    assert recorded_output('{"id": 1}') == {"id": 1}
    assert recorded_output("42") == "42"  # a scalar stays the text the tool returned
    assert Compensation.from_json(Compensation("undo", {"a": 1}, True).as_json()) == Compensation(
        "undo", {"a": 1}, True
    )


# --- MCP tools (a real server: tests/tools/mcp_servers/ledger_server.py) ---------------------

LEDGER = ROOT / "tests" / "tools" / "mcp_servers" / "ledger_server.py"


def ledger_servers(tmp: Path) -> Any:
    env = {**os.environ, "LEDGER_DB": str(tmp / "ledger.db")}
    return parse_servers(
        {
            "ledger": {
                "command": sys.executable,
                "args": [str(LEDGER)],
                "env": {"LEDGER_DB": str(tmp / "ledger.db")},
            }
        },
        env,
    )


def ledger_rows(tmp: Path) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(tmp / "ledger.db")
    try:
        return conn.execute("SELECT id, ref FROM payments ORDER BY id").fetchall()
    finally:
        conn.close()


async def test_mcp_tools_are_irreversible_unless_configured_and_compensate_through_the_server(
    tmp_path: Path,
) -> None:
    policies = {
        "mcp__ledger__record_payment": ToolPolicy.model_validate(
            {
                "compensate": {"tool": "delete_payment", "args": {"id": "{output.id}"}},
                "settle": {
                    "tool": "find_payment",
                    "args": {"ref": "{input.ref}"},
                    "done_field": "found",
                },
            }
        ),
        "mcp__ledger__find_payment": ToolPolicy(effect="read_only"),
    }
    hub = McpHub(ledger_servers(tmp_path), policies)
    try:
        assert await hub.start() == {}
        tools = {t.name: t for t in hub.tools()}
        assert effect_of(tools["mcp__ledger__record_payment"]) is EffectClass.COMPENSABLE
        assert effect_of(tools["mcp__ledger__delete_payment"]) is EffectClass.IRREVERSIBLE
        assert effect_of(tools["mcp__ledger__find_payment"]) is EffectClass.READ_ONLY
        assert hub.unmatched_policies() == []
        pay = tools["mcp__ledger__record_payment"]
        ctx = ToolContext(workspace=tmp_path, session_id="s")
        args = {"ref": "INV-9", "amount": 12}
        assert (await pay.find_outcome(args, ctx)).outcome is Outcome.NOT_DONE
        result = await pay.run(args, ctx)
        assert not result.is_error, result.content
        found = await pay.find_outcome(args, ctx)
        assert (
            found.outcome is Outcome.DONE and "find_payment on MCP server 'ledger'" in found.detail
        )
        output = recorded_output(result.content)
        comp = pay.compensation(args, output)
        assert comp == Compensation("delete_payment", {"id": output["id"]}, False)
        with pytest.raises(CompensationUnavailable, match=r"output\.id"):
            pay.compensation(args, "not json")
        assert ledger_rows(tmp_path) == [(output["id"], "INV-9")]
        undone = await pay.compensate(comp, args, output, ctx)
        assert not undone.is_error and "deleted 1" in undone.content
        assert ledger_rows(tmp_path) == []
    finally:
        await hub.close()


async def test_a_compensation_or_lookup_the_server_lacks_is_reported(tmp_path: Path) -> None:
    policies = {
        "mcp__ledger__record_payment": ToolPolicy.model_validate(
            {"compensate": {"tool": "remove_payment"}, "settle": {"tool": "find_payment"}}
        )
    }
    hub = McpHub(ledger_servers(tmp_path), policies)
    try:
        await hub.start()
        (warning,) = hub.unmatched_policies()
        assert warning.startswith(
            "tool_policies.mcp__ledger__record_payment.compensate.tool: MCP server 'ledger' "
            "has no tool 'remove_payment'"
        )
    finally:
        await hub.close()


def test_an_mcp_tool_declared_compensable_without_a_compensation_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "xclaw.yaml").write_text(
        "mcp_servers:\n  ledger: {command: python}\n"
        "tool_policies:\n  mcp__ledger__record_payment: {effect: compensable}\n"
    )
    with pytest.raises(ConfigError, match="effect compensable needs a `compensate"):
        default_toolbox(load_settings(cwd=tmp_path))
