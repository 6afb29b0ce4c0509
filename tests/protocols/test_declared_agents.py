"""A thread (AG-UI) or a context (A2A) started with a declared agent of xclaw.yaml's
`agents:` (docs/agents.md): AG-UI's `forwardedProps.agent` through the official client
(@ag-ui/client's HttpAgent), A2A's message `metadata.agent` through the official a2a-sdk
client. The session records the agent it runs; a name not declared is refused before
anything is written, naming the declared ones."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from a2a.types.a2a_pb2 import TaskState
from a2a.utils.errors import A2AError

from tests.gateway.harness import Server, write_script
from tests.protocols.harness import AguiClient
from tests.protocols.test_a2a_server import collect, last_state, message, open_client

pytestmark = pytest.mark.slow

AGENTS = "agents:\n  quiet:\n    instructions: Answer in one word.\n    builtin_tools: []\n"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """A server whose xclaw.yaml declares the agent `quiet`."""
    root = tmp_path / "srv"
    root.mkdir()
    script = write_script(root / "script.json", [{"text": "Fine."}])
    s = Server(root=root, script=script, approval="yolo", config_extra=AGENTS)
    s.start()
    yield s
    s.kill()


def agent_of(server: Server, sid: str) -> str | None:
    r = httpx.get(
        f"{server.http}/api/sessions/{sid}",
        headers={"Authorization": f"Bearer {server.token}"},
        timeout=30,
    )
    if r.status_code == 404:
        return None
    recorded = r.json()["metadata"].get("agent") or {}
    return recorded.get("name", "default")


async def test_agui_forwarded_props_name_the_agent(server: Server, tmp_path: Path) -> None:
    refused = AguiClient(server, "thread-loud", tmp_path / "loud.json")
    run = await refused.run({"say": "hi", "forwardedProps": {"agent": "loud"}})
    assert run.error is not None and run.outcome is None
    assert agent_of(server, "thread-loud") is None  # nothing written

    client = AguiClient(server, "thread-quiet", tmp_path / "quiet.json")
    run = await client.run({"say": "how are you?", "forwardedProps": {"agent": "quiet"}})
    assert run.error is None, run.error
    assert run.result == "Fine."
    assert agent_of(server, "thread-quiet") == "quiet"


async def test_a2a_metadata_names_the_agent(server: Server) -> None:
    client, http = await open_client(server)
    try:
        bad = message("hi", "m-loud", context="ctx-loud")
        bad.message.metadata.update({"agent": "loud"})
        with pytest.raises(A2AError) as refused:
            await collect(client.send_message(bad))
        assert "loud" in str(refused.value) and "quiet" in str(refused.value)
        assert agent_of(server, "ctx-loud") is None

        good = message("how are you?", "m-quiet", context="ctx-quiet")
        good.message.metadata.update({"agent": "quiet"})
        events = await collect(client.send_message(good))
        assert last_state(events) == TaskState.TASK_STATE_COMPLETED
    finally:
        await http.aclose()
    assert agent_of(server, "ctx-quiet") == "quiet"
