"""The package boundaries of docs/architecture.md, read from the source's import statements
(every import, lazy ones inside functions too), so a leak comes back only as a failing test."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

XCLAW = Path(__file__).resolve().parents[1] / "xclaw"


def imports_of(paths: list[Path]) -> dict[str, set[str]]:
    """file (relative to xclaw/) -> the xclaw modules it imports."""
    found: dict[str, set[str]] = {}
    for path in paths:
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
                names |= {f"{node.module}.{a.name}" for a in node.names}
        found[str(path.relative_to(XCLAW))] = {n for n in names if n.startswith("xclaw")}
    return found


def files(*parts: str) -> list[Path]:
    out: list[Path] = []
    for part in parts:
        target = XCLAW / part
        out += sorted(target.rglob("*.py")) if target.is_dir() else sorted(XCLAW.glob(part))
    assert out, parts
    return out


def offenders(paths: list[Path], *forbidden: str) -> list[str]:
    return sorted(
        f"{file} imports {name}"
        for file, names in imports_of(paths).items()
        for name in names
        if any(name == f or name.startswith(f + ".") for f in forbidden)
    )


@pytest.mark.parametrize(
    ("where", "forbidden"),
    [
        # The recorder emits typed events; frames are the runtime's business.
        (
            ["recorder"],
            ["xclaw.wire.protocol", "xclaw.gateway", "xclaw.runtime.runtime", "xclaw.agent.loop"],
        ),
        # The loop knows nothing of storage or of who watches it.
        (["agent"], ["xclaw.store", "xclaw.recorder", "xclaw.wire.protocol", "xclaw.gateway"]),
        # The terminal client talks to the gateway through the shared contract only.
        (["cli/chat*.py"], ["xclaw.gateway"]),
        (["cli/commands_chat.py"], ["xclaw.gateway"]),
        # cli starts the demo; the demo and the shared terminal code never import cli.
        (["demo", "terminal"], ["xclaw.cli"]),
        # The protocol adapters (AG-UI, A2A) stand on the gateway's seams: the runtime only
        # through GatewayRuntime, never its internals, nor the recorder's or the loop's.
        (
            ["agui", "a2a"],
            ["xclaw.runtime", "xclaw.recorder", "xclaw.agent", "xclaw.store.sqlite"],
        ),
        # The tools' file-system side knows nothing of the store-backed time travel.
        (["sandbox"], ["xclaw.store", "xclaw.workspace"]),
        (["tools"], ["xclaw.workspace"]),
        # The contract both sides import leans on neither side.
        (["wire/protocol.py"], ["xclaw.gateway", "xclaw.cli", "xclaw.runtime", "xclaw.recorder"]),
        # The typed frames and HTTP bodies are the contract itself: they lean on nothing of
        # xclaw's (a client may import them without the server's code).
        (
            ["wire/frames.py", "wire/http_bodies.py"],
            [
                "xclaw.gateway",
                "xclaw.cli",
                "xclaw.runtime",
                "xclaw.recorder",
                "xclaw.store",
                "xclaw.agent",
                "xclaw.llm",
                "xclaw.tools",
                "xclaw.wire.protocol",
                "xclaw.views",
                "xclaw.config.settings",
            ],
        ),
        # The record knows nothing of how it is shown or sent: export lines come from the
        # rows' own declarations (store/steps/columns.py), prices from whoever shows a cost.
        (["store"], ["xclaw.wire.protocol", "xclaw.wire.frames", "xclaw.wire", "xclaw.views"]),
        # The builders of server frames make them from values: no store access, no runtime.
        (["wire"], ["xclaw.gateway", "xclaw.runtime", "xclaw.recorder", "xclaw.store.base"]),
        # The components receive their own setup or settings section (the sandbox's and the
        # tools' setups are made from Settings in xclaw/config/settings.py), never the whole Settings:
        # none of them reaches up into the configuration.
        (
            ["tools", "sandbox", "workspace", "llm", "agent", "recorder", "telemetry"],
            ["xclaw.config.settings"],
        ),
    ],
)
def test_layer_boundaries(where: list[str], forbidden: list[str]) -> None:
    assert offenders(files(*where), *forbidden) == []


# The Python API (xclaw/api) sits above the runtime and the gateway's client side, beside
# cli: it drives sessions through the Runtime and reads through the Store protocol the
# gateway reads with, never through the store's or the recorder's internals (which change
# under it), and it is no part of the server.
API_MAY_USE_OF_THE_STORE = {"xclaw.store", "xclaw.store.steps.model", "xclaw.store.base"}


def test_the_python_api_keeps_to_the_runtime_and_the_contract() -> None:
    found = imports_of(files("api"))
    assert (
        offenders(
            files("api"),
            "xclaw.gateway",
            "xclaw.cli",
            "xclaw.recorder",
            "xclaw.agent",
            "xclaw.workspace",
            "xclaw.sandbox",
        )
        == []
    )
    modules = {
        "xclaw." + ".".join(p.relative_to(XCLAW).with_suffix("").parts).removesuffix(".__init__")
        for p in (XCLAW / "store").rglob("*.py")
    }
    store = sorted(
        f"{file} imports {name}"
        for file, names in found.items()
        for name in names
        if (name in modules or name.rsplit(".", 1)[0] in modules)
        and name not in API_MAY_USE_OF_THE_STORE
        and name.rsplit(".", 1)[0] not in API_MAY_USE_OF_THE_STORE
    )
    assert store == []
    assert "xclaw.store.sqlite" in modules  # (the check sees the store's modules)
    # Nothing below it imports it: it is a client of the layers, not one of them.
    below = [p for p in XCLAW.rglob("*.py") if "api" not in p.relative_to(XCLAW).parts[:1]]
    below = [p for p in below if p.name != "__init__.py" or p.parent != XCLAW]
    above = set(files(*ABOVE_THE_API))
    assert offenders([p for p in below if p not in above], "xclaw.api") == []


# The protocol adapters are clients of the Python API, as a program using xclaw is: they
# reach sessions through it (one code path in process and through a gateway), never through
# the runtime, the store, the recorder or the gateway. The terminal client stands on the
# API's reconnect loop (xclaw/api/connection.py): one loop, one set of constants.
ABOVE_THE_API = [
    "acp",
    "cli/commands_acp.py",
    "cli/commands_mcp.py",
    "mcp_server/over_api.py",
    "cli/chat.py",
]


def test_the_protocol_adapters_stand_on_the_python_api() -> None:
    assert (
        offenders(
            files("acp", "mcp_server"),
            "xclaw.runtime",
            "xclaw.store.sqlite",
            "xclaw.store.postgres",
            "xclaw.recorder",
            "xclaw.agent",
            "xclaw.workspace",
            "xclaw.gateway",
        )
        == []
    )
    # The MCP tools themselves lean on no way in: the API's implementation is one of them.
    assert offenders(files("mcp_server/tools.py"), "xclaw.api") == []


def test_the_check_sees_lazy_imports() -> None:
    """A boundary check that missed imports inside functions would pass vacuously."""
    probe = XCLAW / "cli" / "commands_demo.py"
    assert offenders([probe], "xclaw.demo") != []


# Callers take the role of the store they need (store/base.py: RecordReader, StepWriter,
# RecordStore, SnapshotStore, LeaseStore, or a protocol of their own made of them), not the
# whole Store: only what wires the layers together (the runtime facade, the gateway, the
# commands that open a database) holds that.
ROLE_TAKERS = [
    "recorder",
    "workspace",
    "telemetry",
    "runtime/drive.py",
    "runtime/leases.py",
    "runtime/cluster.py",
    "runtime/rebuild.py",
    "runtime/opening.py",
    "runtime/outcomes.py",
    "store/transfer/format.py",
    "store/leases.py",
]


def test_callers_take_a_role_of_the_store_not_the_whole_store() -> None:
    assert offenders(files(*ROLE_TAKERS), "xclaw.store.base.Store", "xclaw.store.Store") == []


# What `open_store` returns is the roles (store/roles.py), each an object of its own over the
# backend's connection layer; only these modules hold it — they open a database or wire the
# layers — and each hands every other part only the roles it uses.
HOLD_THE_WHOLE_STORE = {
    "api/local.py",  # the Python API opens the database its runtime runs on, and closes it
    "gateway/app.py",
    "gateway/context.py",
    "ops/fsck.py",  # the whole database, row by row
    "ops/replay.py",  # runs a Runtime of its own
    "runtime/runtime.py",
    "store/__init__.py",
    "store/fsck_rows.py",
    *(f"cli/{p.name}" for p in (XCLAW / "cli").glob("commands_*.py")),
}


def role_methods() -> set[str]:
    """Every method and property of the store's role protocols (store/base.py)."""
    from xclaw.store import base

    roles = [
        base.RecordReader,
        base.StepWriter,
        base.RecordStore,
        base.Record,
        base.SnapshotStore,
        base.LeaseStore,
        base.TeamStore,
        base.BudgetStore,
        base.ScheduleStore,
    ]
    return {n for r in roles for n in vars(r) if not n.startswith("_")}


def flat_calls(paths: list[Path]) -> list[str]:
    """`store.<a role's method>`, where `store` is the whole store (a name or attribute
    `store`, in a module that holds it): a call that skips the role."""
    roles = {"record", "snapshots", "leases", "teams", "budgets", "schedules", "db"}
    flat = role_methods() - roles - {"url"}
    out = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.Attribute) and node.attr in flat):
                continue
            held = node.value
            name = held.attr if isinstance(held, ast.Attribute) else getattr(held, "id", "")
            if name == "store":
                out.append(f"{path.relative_to(XCLAW)}:{node.lineno} store.{node.attr}")
    return sorted(out)


def test_only_the_assembly_holds_the_whole_store() -> None:
    found = imports_of(sorted(XCLAW.rglob("*.py")))
    holders = {
        f for f, names in found.items() if names & {"xclaw.store.base.Store", "xclaw.store.Store"}
    }
    assert holders - HOLD_THE_WHOLE_STORE == set()
    assert "runtime/runtime.py" in holders  # (the check sees who holds it)


def test_the_whole_store_is_asked_through_its_roles() -> None:
    holders = [XCLAW / f for f in sorted(HOLD_THE_WHOLE_STORE)]
    assert flat_calls(holders) == []


def test_the_flat_call_check_sees_a_call_that_skips_the_role(tmp_path: Path) -> None:
    # Not vacuous: a module calling a role's method on the whole store is named.
    bad = XCLAW / "runtime" / "_flat_probe.py"
    bad.write_text("def f(store):\n    return store.get_session('x'), store.record.steps('x')\n")
    try:
        assert flat_calls([bad]) == ["runtime/_flat_probe.py:2 store.get_session"]
    finally:
        bad.unlink()


ROLE_PROTOCOLS = {
    "RecordReader",
    "StepWriter",
    "RecordStore",
    "Record",
    "SnapshotStore",
    "LeaseStore",
    "TeamStore",
    "BudgetStore",
    "ScheduleStore",
}


def test_nothing_asks_whether_the_store_is_a_role() -> None:
    """Every store has every role, as an attribute: `isinstance(store, TeamStore)` is always
    False of what open_store returns (it once silently turned the teams off)."""
    found = []
    for path in sorted(XCLAW.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", None) == "isinstance"
                and len(node.args) == 2
                and getattr(node.args[1], "id", None) in ROLE_PROTOCOLS
            ):
                found.append(f"{path.relative_to(XCLAW)}:{node.lineno}")
    assert found == []


def test_the_role_check_sees_a_whole_store_taken() -> None:
    # Not vacuous: the runtime facade, which wires the layers, does take the whole Store.
    assert offenders(files("runtime/runtime.py"), "xclaw.store.base.Store") == [
        "runtime/runtime.py imports xclaw.store.base.Store"
    ]


def test_only_the_assembly_imports_the_runtime_facade() -> None:
    """The runtime's parts receive what they use (their `*Parts` values), never the facade
    that wires them (xclaw/runtime/runtime.py): no part reaches back into the hub."""
    parts = [p for p in files("runtime") if p.name != "runtime.py"]
    assert offenders(parts, "xclaw.runtime.runtime") == []


def runtime_cycles() -> list[list[str]]:
    """Import cycles among the runtime package's modules (every import, lazy and
    TYPE_CHECKING ones too)."""
    graph: dict[str, set[str]] = {}
    for file, names in imports_of(files("runtime")).items():
        module = "xclaw." + file.removesuffix(".py").replace("/", ".")
        graph[module] = {n for n in names if n.startswith("xclaw.runtime.")}
    graph = {m: {n for n in deps if n in graph and n != m} for m, deps in graph.items()}
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        path.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                cycles.append([*path[path.index(n) :], n])
            elif n not in state:
                visit(n)
        path.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
    return cycles


def test_the_runtime_package_has_no_import_cycle() -> None:
    assert runtime_cycles() == []


def test_the_model_seam_passes_its_events_not_context_variables() -> None:
    """A model call's events go through the one sink `complete(request, on_event)` is given
    (xclaw/llm/events.py): nothing of the model seam or the loop is found through the task's
    context."""
    found = []
    for path in files("llm", "agent"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            found += [f"{path.relative_to(XCLAW)} imports {n}" for n in names if n == "contextvars"]
    assert found == []


def test_the_terminal_client_reconnects_with_the_python_apis_loop() -> None:
    """One reconnect loop for the clients: the terminal client and the Python API's sessions
    both run xclaw/api/connection.py's, and neither opens a WebSocket of its own."""
    for where in ("cli/chat.py", "api/remote.py"):
        assert "xclaw.api.connection.Reconnecting" in imports_of(files(where))[where], where
        tree = ast.parse((XCLAW / where).read_text())
        connects = [
            a.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module == "websockets.asyncio.client"
            for a in node.names
            if a.name == "connect"
        ]
        assert connects == [], where
        assert "BACKOFF_" not in (XCLAW / where).read_text(), where
