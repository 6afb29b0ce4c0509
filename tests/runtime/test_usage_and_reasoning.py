"""Cache and reasoning token accounting, and OpenAI-compatible reasoning, through the whole
runtime and the real SDKs against the loopback fakes."""

from __future__ import annotations

from pathlib import Path

from bench.cache_bench import run_session
from tests.llm.fakes import FakeAnthropicServer, FakeCall, FakeOpenAIServer, Reply
from tests.runtime.test_real_sdks import run_task
from xclaw.store.steps.model import StepType
from xclaw.views.record import session_cost


async def test_cache_breakpoints_keep_most_input_in_the_cache() -> None:
    """Ten calls of a growing agent session: from the second call on, at least 80 % of the
    input is read from the cache the fake computes as Anthropic does (longest cached prefix up
    to a breakpoint); every request passed validation (at most four breakpoints)."""
    result = await run_session(10)
    assert result.usages[0].cache_read_tokens == 0 and result.usages[0].cache_write_tokens > 0
    assert all(u.cache_read_tokens > 0 for u in result.usages[1:])
    assert result.read_share(1) >= 0.8
    uncached = await run_session(10, cache=False)
    assert uncached.read_share() == 0


async def test_anthropic_cache_tokens_are_recorded_on_every_llm_call(tmp_path: Path) -> None:
    with FakeAnthropicServer(cache_accounting=True) as srv:
        srv.push(
            Reply(
                text="Listing.", tool_calls=[FakeCall.of("list_dir", {"path": "."}, id="toolu_1")]
            ),
            Reply(text="Nothing there."),
        )
        runtime, sid, _ = await run_task(tmp_path, "anthropic", srv, "what is here?")
        assert not srv.rejections, srv.rejections
        llm = [s for s in runtime.store.record.steps(sid) if s.step_type is StepType.LLM_CALL]
        first, second = (s.output_data["usage"] for s in llm)
        assert first["cache_read"] == 0 and first["cache_write"] > 0
        assert second["cache_read"] >= first["cache_write"]  # the first call's prefix
        for s in llm:  # the prompt column counts every input token, cached or not
            assert s.token_usage_prompt == s.output_data["usage"]["input"]
        totals = session_cost(runtime.store.record.steps(sid), runtime.prices)
        assert totals.usage.cache_read_tokens == second["cache_read"] and totals.calls == 2
        await runtime.shutdown()
        runtime.store.close()


async def test_openai_reasoning_content_cached_and_reasoning_tokens(tmp_path: Path) -> None:
    with FakeOpenAIServer() as srv:
        srv.push(
            Reply(
                thinking=["The user greets me; a short answer will do."],
                text="Hello!",
                usage=(500, 40),
                cache_read_tokens=384,
                reasoning_tokens=25,
            ),
            Reply(text="Still here."),
        )
        runtime, sid, frames = await run_task(tmp_path, "openai", srv, "hi")
        (thinking,) = [f for f in frames if f["type"] == "thinking"]
        assert thinking["content"] == "The user greets me; a short answer will do."
        # Shown before the answer streamed.
        kinds = [f["type"] for f in frames]
        assert kinds.index("thinking") < kinds.index("delta")
        (llm,) = [s for s in runtime.store.record.steps(sid) if s.step_type is StepType.LLM_CALL]
        assert llm.output_data["usage"] == {
            "input": 500,
            "output": 40,
            "cache_read": 384,
            "cache_write": 0,
            "reasoning": 25,
        }
        assert llm.output_data["thinking"] == [
            {"type": "reasoning", "thinking": "The user greets me; a short answer will do."}
        ]
        await runtime.shutdown()
        runtime.store.close()
        # The next turn's request (rebuilt from the record) does not send reasoning back:
        # DeepSeek rejects reasoning_content in input messages.
        runtime, _, _ = await run_task(tmp_path, "openai", srv, "again", sid=sid)
        assert "reasoning" not in str(srv.requests[-1]["messages"])
        assert "Hello!" in str(srv.requests[-1]["messages"])
        await runtime.shutdown()
        runtime.store.close()


async def test_the_cache_read_share_stays_high_across_a_compaction() -> None:
    """bench/cache_bench.py's second half, smaller: the agent loop fills a 24k window, the
    conversation is summarised once, and the calls after it read most input from cache."""
    from bench.cache_bench import _share, run_compacting_session

    log = await run_compacting_session(50)
    (at,) = [i for i, (summary, _) in enumerate(log) if summary]
    assert _share([log[at][1]]) >= 0.8  # the summary request is the cached prefix + 1 block
    after = [u for _, u in log[at + 1 :]]
    assert len(after) >= 5 and _share(after) >= 0.8
    assert _share([u for _, u in log[1:]]) >= 0.8


async def test_a_local_server_without_usage_records_unknown_tokens_and_no_price(
    tmp_path: Path,
) -> None:
    """A local server named like a hosted model (`openai:gpt-4o` at a loopback base URL) that
    streams no usage: the token columns hold NULL (unknown), output_data.usage holds xclaw's
    estimate flagged `estimated`, and no view prices it at OpenAI's rates or shows a 0."""
    import sqlite3

    from xclaw.config.settings import Settings
    from xclaw.llm.registry import entry
    from xclaw.runtime.runtime import Runtime
    from xclaw.store import open_store
    from xclaw.views.record import format_sessions, format_steps, format_tree
    from xclaw.wire.protocol import step_json

    with FakeOpenAIServer() as srv:
        srv.push(
            Reply(text="Hello from a small local model.", usage=None),
            Reply(text="Counted this time.", usage=(100, 20)),
        )
        settings = Settings(
            home=tmp_path,
            database=str(tmp_path / "x.db"),
            workspace_root=tmp_path / "ws",
            providers=(entry("openai:gpt-4o", {"base_url": srv.url}),),
            llm_retries=0,
        )
        runtime = Runtime(open_store(settings.database), settings)
        session, _ = await runtime.open(None)
        sid = session.session_id
        for text in ("hi", "again"):
            await runtime.send(sid, text)
            await runtime.wait_idle(sid)
        steps = runtime.store.record.steps(sid)
        sessions = runtime.store.record.list_sessions()
        tree = runtime.store.record.step_tree(sid)
        table = runtime.prices
        await runtime.shutdown()
        runtime.store.close()

    first, second = (s for s in steps if s.step_type is StepType.LLM_CALL)
    assert (first.token_usage_prompt, first.token_usage_completion) == (None, None)
    with sqlite3.connect(tmp_path / "x.db") as db:
        rows = db.execute(
            "SELECT token_usage_prompt, token_usage_completion FROM traces "
            "WHERE step_type = 'llm_call' ORDER BY seq"
        ).fetchall()
    assert rows == [(None, None), (100, 20)]
    usage = first.output_data["usage"]
    assert usage["estimated"] is True and usage["input"] > 0 and usage["output"] > 0
    assert first.output_data["endpoint"] == srv.url
    assert "estimated" not in second.output_data["usage"]

    frame = step_json(first, table)
    assert frame["tokens"] == {"prompt": None, "completion": None}
    assert frame["usage"]["estimated"] is True and frame["cost"] is None
    assert step_json(second, table)["cost"] is None  # counted, but a local server has no price

    totals = session_cost(steps, table)
    assert totals.cost is None and totals.unpriced == 2 and totals.usage.estimated
    assert totals.to_json()["usage"]["estimated"] is True
    listing = format_steps(steps, sid, table)
    assert f"~{usage['input']} in → ~{usage['output']} out (estimated)" in listing
    assert "$" not in listing
    assert "~" in format_sessions(sessions, costs={sid: totals})
    assert f"~{usage['input']}+~{usage['output']} tok" in format_tree(tree, table)
