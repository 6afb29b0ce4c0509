"""The two findings of an outside crash campaign, fixed (docs/reliability.md): what the client was
told survives a kill, and interrupted file tools are settled by looking at the workspace. Real
`xclaw run` processes killed with SIGKILL."""

from __future__ import annotations

import json
import select
import subprocess
import time
from pathlib import Path

import pytest

from tests.runtime.test_crash import Scenario, kill, sh

pytestmark = pytest.mark.slow


def _read_until(proc: subprocess.Popen[str], marker: str, timeout: float = 60) -> str:
    """Lines of the process's output up to and including the first containing `marker`."""
    assert proc.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.5)
        if not ready:
            continue
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line)
        if marker in line:
            return "".join(seen)
    raise AssertionError(f"never saw {marker!r}; output so far:\n{''.join(seen)}")


def test_a_result_the_client_saw_is_committed_when_the_kill_lands(tmp_path: Path) -> None:
    """Killed the moment the terminal shows a tool's result, several times over: the record
    always holds that step as completed (before the fix the frame went out ~2 ms before the
    commit, and the step came back `interrupted`)."""
    steps = 12
    turns = [
        {"text": "", "tool_calls": [sh(f"echo out{i:02d}; echo e{i:02d} >> effects.log")]}
        for i in range(steps)
    ]
    sc = Scenario(tmp_path, [*turns, {"text": "all done"}])
    sc.env["PYTHONUNBUFFERED"] = "1"
    proc = sc.start("--approval", "yolo", "do the task")
    for i in range(0, steps, 3):  # kill at the result of steps 0, 3, 6, 9
        _read_until(proc, f"↳ out{i:02d}")
        kill(proc)
        rows = sc.query(
            "SELECT status FROM traces WHERE step_type='tool_call' "
            f"AND input_data LIKE '%echo out{i:02d};%'"
        )
        assert ("completed",) in rows, f"step {i} was shown completed but is recorded as {rows}"
        proc = sc.start("--approval", "yolo", "--session", sc.session_id())
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    assert "all done" in out
    effects = sc.effects()
    assert len(effects) == len(set(effects))  # none repeated
    # A step the next one raced past the kill may be interrupted (and not re-issued by the
    # script), its effect left or not as the kill fell; every completed one left exactly its
    # effect.
    assert {f"e{i:02d}" for i in range(0, steps, 3)} <= set(effects)
    sc.check_record(interrupted_may_have_run=True)


def _many_files() -> dict[str, object]:
    # Enough files that the workspace snapshot before the next side effect takes a while: a
    # window in which the kill lands after the write-ahead row and before the tool's effect.
    return sh(
        "mkdir -p many && cd many && for i in $(seq 1 6000); do echo $i$RANDOM > f$i; done; echo many >> ../effects.log"
    )


def _file_task(call: dict[str, object]) -> list[dict[str, object]]:
    return [
        {
            "text": "",
            "tool_calls": [
                sh("printf 'alpha\\nbeta\\n' > notes.txt; echo notes >> effects.log"),
                _many_files(),
            ],
        },
        {"text": "", "tool_calls": [call]},
        {"text": "all done"},
    ]


def _kill_while_running(sc: Scenario, tool: str) -> None:
    proc = sc.start("--approval", "yolo", "do the task")
    sc.wait_for(f"SELECT 1 FROM traces WHERE name='{tool}' AND status='running'", timeout=60)
    kill(proc)


def tmp_path_ws(sc: Scenario) -> Path:
    return sc.tmp / "workspaces" / sc.session_id()


WRITE = {"name": "write_file", "input": {"path": "report.md", "content": "# Report\nall good\n"}}
EDIT = {
    "name": "edit_file",
    "input": {"path": "notes.txt", "old_text": "beta", "new_text": "gamma"},
}


@pytest.mark.parametrize(
    ("call", "effect"),
    [
        (WRITE, lambda ws: (ws / "report.md").write_text("# Report\nall good\n")),
        (EDIT, lambda ws: (ws / "notes.txt").write_text("alpha\ngamma\n")),
    ],
    ids=["write_file", "edit_file"],
)
def test_an_interrupted_file_tool_whose_effect_is_there_is_settled_by_looking(
    tmp_path: Path, call: dict[str, object], effect
) -> None:
    """The kill lands while the call is `running`; the workspace is then made to hold the
    call's effect, as when the kill hits between the file's rename and the completion commit.
    On resume the call is recorded as completed from the workspace, and the model is told its
    result, not "may or may not have run"."""
    sc = Scenario(tmp_path, _file_task(call))
    _kill_while_running(sc, call["name"])
    effect(tmp_path_ws(sc))
    out = sc.resume()
    assert "may or may not have run" not in out
    assert "the workspace shows it ran" in out
    assert "all done" in out
    rows = sc.query(
        f"SELECT status, error_message, output_data FROM traces WHERE name='{call['name']}' ORDER BY seq"
    )
    assert [r[:2] for r in rows] == [
        ("failed", "interrupted"),
        ("completed", None),
    ]  # the attempt is kept
    assert "checked after an interruption" in json.loads(rows[1][2])
    alert = sc.query("SELECT input_data FROM traces WHERE name='resume'")
    assert json.loads(alert[0][0])["mayHaveRun"] == []
    sc.check_record()


def test_an_interrupted_file_tool_whose_effect_is_missing_is_still_reported(tmp_path: Path) -> None:
    """Without the effect in the workspace nothing is guessed: the model hears that the call
    may or may not have run (it did not: the kill landed before the write)."""
    sc = Scenario(tmp_path, _file_task(WRITE))
    _kill_while_running(sc, "write_file")
    assert not (tmp_path_ws(sc) / "report.md").exists()
    out = sc.resume()
    assert "may or may not have run" in out
    rows = sc.query("SELECT status, error_message FROM traces WHERE name='write_file' ORDER BY seq")
    assert rows == [("failed", "interrupted")]
    sc.check_record()


def test_check_effect_refuses_what_it_cannot_tell(tmp_path: Path) -> None:
    """Edits that keep their old text, missing files and paths outside the workspace are never
    taken for done."""
    from xclaw.tools.base import ToolContext
    from xclaw.tools.files import EditFileTool, WriteFileTool

    ctx = ToolContext(workspace=tmp_path, session_id="s")
    (tmp_path / "a.txt").write_text("x = 1\nx = 2\n")
    edit, write = EditFileTool(), WriteFileTool()
    assert (
        edit.check_effect({"path": "a.txt", "old_text": "x = 1", "new_text": "x = 1\ny"}, ctx)
        is None
    )
    assert edit.check_effect({"path": "nope.txt", "old_text": "a", "new_text": "b"}, ctx) is None
    assert (
        edit.check_effect({"path": "a.txt", "old_text": "x = 3", "new_text": "x = 2"}, ctx)
        is not None
    )
    assert write.check_effect({"path": "a.txt", "content": "x = 1\n"}, ctx) is None
    assert write.check_effect({"path": "../../etc/passwd", "content": ""}, ctx) is None
    assert write.check_effect({"path": "a.txt", "content": "x = 1\nx = 2\n"}, ctx) is not None
