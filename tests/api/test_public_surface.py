"""What xclaw promises its users as a library: the names of `xclaw.__all__` (and the frames of
`xclaw.frames`) are the public surface, each documented; `import xclaw` stays light; the
package is typed (`py.typed`); the errors are the wire's codes."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

import xclaw
import xclaw.frames
from tests.caches import mypy_cache
from xclaw import errors

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "python-api.md").read_text()
PROTOCOL = (ROOT / "docs" / "protocol.md").read_text()


def test_every_public_name_resolves_and_is_documented() -> None:
    assert sorted(xclaw.__all__) == xclaw.__all__ == sorted(xclaw._WHERE)
    for name in xclaw.__all__:
        value = getattr(xclaw, name)
        if name in ("Event", "Approve"):
            continue  # type aliases
        assert inspect.getdoc(value), f"xclaw.{name} has no docstring"
        assert f"`{name}" in DOC or f".{name}" in DOC, f"docs/python-api.md misses {name}"


@pytest.mark.parametrize("cls", ["Agent", "Session", "Events", "SyncAgent", "SyncSession"])
def test_every_public_method_has_a_docstring(cls: str) -> None:
    kind = getattr(xclaw, cls)
    for name, member in inspect.getmembers(kind):
        if name.startswith("_") or not callable(member):
            continue
        assert inspect.getdoc(member), f"{cls}.{name} has no docstring"


def test_the_frames_are_public_and_documented() -> None:
    for name in xclaw.frames.__all__:
        assert getattr(xclaw.frames, name) is not None
    for name in ("ReplyFrame", "ApprovalRequestFrame", "ToolFrame", "StepFrame", "DeltaFrame"):
        assert name in DOC


def test_import_xclaw_is_light() -> None:
    """The command line imports `xclaw` first: the API, the runtime and the SDKs load only
    when a name is used."""
    code = "import sys, xclaw; print(sorted(m for m in sys.modules if m.startswith('xclaw')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['xclaw']"


def test_the_package_is_typed() -> None:
    assert (Path(xclaw.__file__).parent / "py.typed").exists()
    assert '"py.typed"' in (ROOT / "pyproject.toml").read_text()


def _codes() -> list[str]:
    """The error codes of docs/protocol.md's Errors table (and the HTTP API's bad_request)."""
    section = PROTOCOL[PROTOCOL.index("\n## Errors\n") :]
    section = section[: section.index("\n## ", 1)]
    codes = re.findall(r"^\| ((?:`[a-z_]+`(?:, )?)+) \|", section, re.M)
    return sorted({c for row in codes for c in re.findall(r"`([a-z_]+)`", row)} | {"bad_request"})


@pytest.mark.parametrize("code", _codes())
def test_every_wire_error_code_is_an_error_class_named_after_it(code: str) -> None:
    name = "".join(part.capitalize() for part in code.split("_"))
    cls = getattr(errors, name)
    assert cls.code == code
    assert name in xclaw.__all__ or code in ("illegal_transition",), name
    made = errors.from_code(code, "words", session_id="S")
    assert type(made) is cls and made.message == "words" and str(made) == "words"
    assert f"`{name}`" in DOC and f"`{code}`" in DOC


def test_an_unknown_code_is_still_an_error_with_it() -> None:
    made = errors.from_code("from_the_future", "new")
    assert type(made) is errors.XclawError and made.code == "from_the_future"


def test_the_old_names_are_the_same_classes() -> None:
    assert errors.SessionNotFound is errors.UnknownSession
    assert errors.StepNotFound is errors.BadStep
    assert errors.SessionBusy is errors.Busy
    assert errors.LLMError is errors.LlmError
    assert errors.LimitsExceeded is errors.MaxIterations


def _error_table() -> dict[str, str]:
    """class -> code, from the rows of docs/python-api.md's Errors table."""
    section = DOC[DOC.index("\n## Errors\n") :]
    section = section[: section.index("\n## ", 1)]
    rows = re.findall(r"^\| ((?:`\w+`(?:, )?)+) \| ((?:`\w+`(?:, )?)+) \|", section, re.M)
    table: dict[str, str] = {}
    for names, codes in rows:
        table.update(zip(re.findall(r"`(\w+)`", names), re.findall(r"`(\w+)`", codes), strict=True))
    return table


def test_every_error_the_api_raises_is_public_and_in_the_table() -> None:
    table = _error_table()
    for name, code in table.items():
        cls = getattr(xclaw, name)
        assert issubclass(cls, xclaw.XclawError) and cls.code == code, name
    public = {n for n in xclaw.__all__ if isinstance(getattr(xclaw, n), type)}
    raised = {n for n in public if issubclass(getattr(xclaw, n), xclaw.XclawError)}
    assert raised - {"XclawError"} == set(table)
    for name in ("GatewayUnavailable", "Timeout", "AgentClosed", "DatabaseRefused"):
        assert name in table, name
    assert issubclass(xclaw.Timeout, TimeoutError)
    assert issubclass(xclaw.DatabaseRefused, xclaw.StoreError)


def test_a_run_s_events_are_typed_by_the_word_asked_for(tmp_path: Path) -> None:
    """`result.of_type("tool")` is a list[ToolFrame] to a type checker, as at run time."""
    program = tmp_path / "typed.py"
    program.write_text(
        "import xclaw\n"
        "from xclaw.frames import ToolFrame\n\n\n"
        "def names(result: xclaw.RunResult) -> list[str]:\n"
        "    tools = [t.name for t in result.of_type('tool')]\n"
        "    return tools + [s.step.id for s in result.of_type('step')]\n\n\n"
        "def by_class(result: xclaw.RunResult) -> list[ToolFrame]:\n"
        "    return result.of_type(ToolFrame)\n"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--cache-dir",
            mypy_cache("examples"),
            str(program),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(("sync", "base"), [("SyncSession", "Session"), ("SyncAgent", "Agent")])
def test_the_sync_facade_takes_every_argument_the_async_api_takes(sync: str, base: str) -> None:
    """An argument added to the async API reaches plain code too: same names, kinds and
    defaults, method by method."""

    def shape(method: object) -> list[tuple[str, object, object]]:
        return [(p.name, p.kind, p.default) for p in inspect.signature(method).parameters.values()]

    facade, api = getattr(xclaw, sync), getattr(xclaw, base)
    for name, member in vars(facade).items():
        if name.startswith("_") or not callable(member) or not hasattr(api, name):
            continue  # `run`: the sync facade's own
        assert shape(member) == shape(getattr(api, name)), f"{sync}.{name}"
