"""read_file / view_file, write_file, edit_file and list_dir in a real temporary workspace."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

import pytest

from xclaw.tools.base import Tool, ToolContext
from xclaw.tools.files import EditFileTool, ListDirTool, ReadFileTool, WriteFileTool


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("top secret\n")
    return root


@pytest.fixture
def ctx(ws: Path) -> ToolContext:
    return ToolContext(workspace=ws, session_id="s1")


# --- read_file ------------------------------------------------------------------------------


async def test_read_numbers_lines_like_cat_n(ws: Path, ctx: ToolContext) -> None:
    (ws / "a.txt").write_text("alpha\nbeta\r\ngamma")
    result = await ReadFileTool().run({"path": "a.txt"}, ctx)
    assert not result.is_error
    assert result.content == "     1\talpha\n     2\tbeta\n     3\tgamma"


async def test_view_file_is_the_same_tool_under_another_name(ws: Path, ctx: ToolContext) -> None:
    (ws / "a.txt").write_text("x\n")
    tool = ReadFileTool("view_file")
    assert tool.name == "view_file" and tool.read_only
    assert (await tool.run({"path": "a.txt"}, ctx)).content == "     1\tx"


async def test_read_window_with_offset_and_limit(ws: Path, ctx: ToolContext) -> None:
    (ws / "n.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    result = await ReadFileTool().run({"path": "n.txt", "offset": 4, "limit": 2}, ctx)
    assert result.content == (
        "     4\tline 4\n     5\tline 5\n"
        "[... more lines follow; showing lines 4-5; continue with offset=6]"
    )
    end = await ReadFileTool().run({"path": "n.txt", "offset": 9}, ctx)
    assert end.content == "     9\tline 9\n    10\tline 10"


async def test_read_offset_past_the_end_is_an_error(ws: Path, ctx: ToolContext) -> None:
    (ws / "n.txt").write_text("a\nb\n")
    result = await ReadFileTool().run({"path": "n.txt", "offset": 7}, ctx)
    assert result.is_error
    assert result.content == "'n.txt' has 2 lines; offset 7 is past the end"


async def test_read_caps_big_files(ws: Path, ctx: ToolContext) -> None:
    (ws / "big.txt").write_text("".join(f"{i}\n" for i in range(100_000)))
    (ws / "wide.txt").write_text("x" * 5000 + "\n")
    tool = ReadFileTool(max_lines=50, max_line_chars=100, output_cap=10_000)
    result = await tool.run({"path": "big.txt", "limit": 1000}, ctx)
    assert result.content.count("\n") == 50  # 50 lines and the continuation note
    assert result.content.endswith("continue with offset=51]")
    wide = await tool.run({"path": "wide.txt"}, ctx)
    assert wide.content == "     1\t" + "x" * 100 + " [... line cut: 4900 more chars]"
    by_size = await ReadFileTool(output_cap=200).run({"path": "big.txt"}, ctx)
    assert len(by_size.content) < 400
    assert "more lines follow" in by_size.content


async def test_read_refuses_binary_files(ws: Path, ctx: ToolContext) -> None:
    (ws / "blob.bin").write_bytes(b"\x7fELF\0\0\0\rIHDR" + bytes(104))
    result = await ReadFileTool().run({"path": "blob.bin"}, ctx)
    assert result.is_error
    assert (
        result.content == "'blob.bin' looks like a binary file (116 B); read_file shows text only"
    )
    # An image is named as one: view_file shows it to the model.
    (ws / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + bytes(100))
    result = await ReadFileTool().run({"path": "img.png"}, ctx)
    assert result.is_error
    assert result.content == "'img.png' is an image (image/png, 116 B); use view_file to see it"


async def test_read_shows_invalid_utf8_replaced(ws: Path, ctx: ToolContext) -> None:
    (ws / "latin.txt").write_bytes(b"caf\xe9\n")
    assert (await ReadFileTool().run({"path": "latin.txt"}, ctx)).content == "     1\tcaf\ufffd"


async def test_read_errors(ws: Path, ctx: ToolContext) -> None:
    (ws / "d").mkdir()
    (ws / "empty.txt").write_text("")
    cases = {
        "missing.txt": "'missing.txt' does not exist",
        "d": "'d' is a directory; use list_dir to see what it contains",
    }
    for path, message in cases.items():
        result = await ReadFileTool().run({"path": path}, ctx)
        assert (result.is_error, result.content) == (True, message)
    empty = await ReadFileTool().run({"path": "empty.txt"}, ctx)
    assert (empty.is_error, empty.content) == (False, "'empty.txt' is empty")


async def test_read_and_edit_refuse_fifos_instead_of_blocking(ws: Path, ctx: ToolContext) -> None:
    os.mkfifo(ws / "pipe")
    read = await ReadFileTool().run({"path": "pipe"}, ctx)
    edit = await EditFileTool().run({"path": "pipe", "old_text": "a", "new_text": "b"}, ctx)
    for result in (read, edit):
        assert (result.is_error, result.content) == (True, "'pipe' is not a regular file")


# --- write_file -----------------------------------------------------------------------------


async def test_write_creates_parents_and_reports_bytes(ws: Path, ctx: ToolContext) -> None:
    result = await WriteFileTool().run({"path": "src/pkg/mod.py", "content": "print('é')\n"}, ctx)
    assert not result.is_error
    assert result.content == "wrote 12 bytes to 'src/pkg/mod.py' (new file)"
    assert (ws / "src" / "pkg" / "mod.py").read_text() == "print('é')\n"


async def test_write_overwrites_and_keeps_the_file_mode(ws: Path, ctx: ToolContext) -> None:
    script = ws / "run.sh"
    script.write_text("old")
    os.chmod(script, 0o755)
    result = await WriteFileTool().run({"path": "run.sh", "content": "#!/bin/sh\n"}, ctx)
    assert result.content == "wrote 10 bytes to 'run.sh' (replaced 3 bytes)"
    assert script.read_text() == "#!/bin/sh\n"
    assert stat.S_IMODE(script.stat().st_mode) == 0o755
    left = await asyncio.to_thread(lambda: [p.name for p in ws.iterdir()])
    assert left == ["run.sh"]  # no temporary file left behind


async def test_write_keeps_line_endings_exactly(ws: Path, ctx: ToolContext) -> None:
    await WriteFileTool().run({"path": "w.txt", "content": "a\r\nb\n"}, ctx)
    assert (ws / "w.txt").read_bytes() == b"a\r\nb\n"


async def test_write_refuses_a_directory(ws: Path, ctx: ToolContext) -> None:
    (ws / "d").mkdir()
    result = await WriteFileTool().run({"path": "d", "content": "x"}, ctx)
    assert (result.is_error, result.content) == (True, "'d' is a directory; give a file path")


async def test_write_flags() -> None:
    tool = WriteFileTool()
    assert tool.read_only is False and tool.idempotent is True and tool.parallel_safe is False


@pytest.mark.parametrize(
    "args",
    [
        {},
        {"path": "a"},
        {"content": "x"},
        {"path": 1, "content": "x"},
        {"path": "a", "content": None},
    ],
)
async def test_write_bad_input_says_what_it_needs(
    ctx: ToolContext, args: dict[str, object]
) -> None:
    result = await WriteFileTool().run(args, ctx)
    assert result.is_error
    assert result.content.startswith("write_file needs 'path' (string) and 'content' (string); ")


# --- edit_file ------------------------------------------------------------------------------


async def test_edit_replaces_a_unique_passage(ws: Path, ctx: ToolContext) -> None:
    (ws / "m.py").write_text("def f():\n    return 1\n\ndef g():\n    return 2\n")
    args = {"path": "m.py", "old_text": "    return 2", "new_text": "    return 3"}
    result = await EditFileTool().run(args, ctx)
    assert not result.is_error
    assert result.content.splitlines()[0] == "edited 'm.py': replaced 1 occurrence at line 5"
    assert "     5\t    return 3" in result.content
    assert (ws / "m.py").read_text() == "def f():\n    return 1\n\ndef g():\n    return 3\n"


async def test_edit_not_found_is_a_clear_error(ws: Path, ctx: ToolContext) -> None:
    (ws / "m.py").write_text("x = 1\n")
    args = {"path": "m.py", "old_text": "y = 1", "new_text": "y = 2"}
    result = await EditFileTool().run(args, ctx)
    assert result.is_error
    assert result.content == (
        "old_text was not found in 'm.py'; read the file again and copy the exact text"
    )
    assert (ws / "m.py").read_text() == "x = 1\n"


async def test_edit_not_found_hints_at_whitespace(ws: Path, ctx: ToolContext) -> None:
    (ws / "m.py").write_text("if x:\n        go()\n")
    args = {"path": "m.py", "old_text": "if x:\n    go()", "new_text": "if y:\n    go()"}
    result = await EditFileTool().run(args, ctx)
    assert result.is_error
    assert "differing only in whitespace or indentation" in result.content


async def test_edit_not_unique_says_how_often_and_where(ws: Path, ctx: ToolContext) -> None:
    (ws / "m.py").write_text("a = 0\nb = 0\nc = 0\n")
    args = {"path": "m.py", "old_text": "= 0", "new_text": "= 1"}
    result = await EditFileTool().run(args, ctx)
    assert result.is_error
    assert result.content == (
        "old_text occurs 3 times in 'm.py' (lines 1, 2, 3); add surrounding lines to old_text "
        "to make it unique, or set replace_all to true"
    )
    assert (ws / "m.py").read_text() == "a = 0\nb = 0\nc = 0\n"


async def test_edit_replace_all(ws: Path, ctx: ToolContext) -> None:
    (ws / "m.py").write_text("a = 0\nb = 0\n")
    args = {"path": "m.py", "old_text": "= 0", "new_text": "= 1", "replace_all": True}
    result = await EditFileTool().run(args, ctx)
    assert result.content.splitlines()[0] == "edited 'm.py': replaced 2 occurrences (lines 1, 2)"
    assert (ws / "m.py").read_text() == "a = 1\nb = 1\n"


async def test_edit_matches_crlf_files(ws: Path, ctx: ToolContext) -> None:
    (ws / "w.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    args = {"path": "w.txt", "old_text": "one\ntwo", "new_text": "1\n2"}
    result = await EditFileTool().run(args, ctx)
    assert not result.is_error
    assert (ws / "w.txt").read_bytes() == b"1\r\n2\r\nthree\r\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"path": "m.py", "old_text": "", "new_text": "x"}, "non-empty 'old_text'"),
        ({"path": "m.py", "old_text": "a", "new_text": "a"}, "nothing to change"),
        ({"path": "nope.py", "old_text": "a", "new_text": "b"}, "'nope.py' does not exist"),
        ({"path": "m.py", "old_text": "a"}, "edit_file needs 'path' (string) and 'old_text'"),
        ({"path": "bin", "old_text": "a", "new_text": "b"}, "looks like a binary file"),
        ({"path": "latin", "old_text": "a", "new_text": "b"}, "is not valid UTF-8"),
        (
            {"path": "m.py", "old_text": "a", "new_text": "b", "replace_all": "yes"},
            "'replace_all' must be boolean, got string",
        ),
    ],
)
async def test_edit_errors(
    ws: Path, ctx: ToolContext, args: dict[str, object], message: str
) -> None:
    (ws / "m.py").write_text("a\n")
    (ws / "bin").write_bytes(b"a\0b")
    (ws / "latin").write_bytes(b"a caf\xe9")
    result = await EditFileTool().run(args, ctx)
    assert result.is_error
    assert message in result.content


# --- list_dir -------------------------------------------------------------------------------


async def test_list_is_sorted_with_dirs_marked_and_sizes(ws: Path, ctx: ToolContext) -> None:
    (ws / "b.txt").write_text("12345")
    (ws / "a").mkdir()
    (ws / "a" / "inner.txt").write_bytes(b"x" * 2048)
    (ws / "c.bin").write_bytes(b"")
    (ws / "link").symlink_to("b.txt")
    flat = await ListDirTool().run({}, ctx)
    assert flat.content == "a/\nb.txt  (5 B)\nc.bin  (0 B)\nlink -> b.txt"
    deep = await ListDirTool().run({"path": ".", "depth": 2}, ctx)
    assert deep.content == "a/\n  inner.txt  (2.0 KB)\nb.txt  (5 B)\nc.bin  (0 B)\nlink -> b.txt"
    sub = await ListDirTool().run({"path": "a"}, ctx)
    assert sub.content == "inner.txt  (2.0 KB)"


async def test_list_does_not_expand_bulky_dirs(ws: Path, ctx: ToolContext) -> None:
    (ws / ".git" / "objects").mkdir(parents=True)
    (ws / "src").mkdir()
    result = await ListDirTool().run({"depth": 3}, ctx)
    assert result.content == ".git/  (not expanded)\nsrc/"


async def test_list_caps_entries(ws: Path, ctx: ToolContext) -> None:
    for i in range(30):
        (ws / f"f{i:02}").write_text("")
    result = await ListDirTool(max_entries=10).run({}, ctx)
    lines = result.content.splitlines()
    assert lines[:10] == [f"f{i:02}  (0 B)" for i in range(10)]
    assert lines[10].startswith("[... stopped at 10 entries;")
    assert len(lines) == 11


async def test_list_errors(ws: Path, ctx: ToolContext) -> None:
    (ws / "f.txt").write_text("x")
    (ws / "empty").mkdir()
    cases = {
        "f.txt": "'f.txt' is a file; use read_file to read it",
        "nope": "'nope' does not exist",
    }
    for path, message in cases.items():
        result = await ListDirTool().run({"path": path}, ctx)
        assert (result.is_error, result.content) == (True, message)
    empty = await ListDirTool().run({"path": "empty"}, ctx)
    assert (empty.is_error, empty.content) == (False, "'empty' is empty")


# --- confinement, for every file tool -------------------------------------------------------

TOOLS_AND_ARGS: list[tuple[Tool, dict[str, object]]] = [
    (ReadFileTool(), {}),
    (WriteFileTool(), {"content": "pwned"}),
    (EditFileTool(), {"old_text": "top", "new_text": "pwned"}),
    (ListDirTool(), {}),
]


@pytest.mark.parametrize(("tool", "extra"), TOOLS_AND_ARGS, ids=lambda v: getattr(v, "name", ""))
@pytest.mark.parametrize(
    ("setup", "path", "message"),
    [
        (None, "../outside/secret.txt", "'../outside/secret.txt' leaves the workspace"),
        (None, "/etc/hostname", "absolute paths are not allowed"),
        ("file", "link", "'link' is a symlink pointing outside the workspace"),
        ("dir", "link/secret.txt", "'link' is a symlink pointing outside the workspace"),
        ("dangling", "link", "'link' is a symlink pointing outside the workspace"),
    ],
)
async def test_every_file_tool_refuses_escapes(
    ws: Path,
    ctx: ToolContext,
    tool: Tool,
    extra: dict[str, object],
    setup: str | None,
    path: str,
    message: str,
) -> None:
    outside = ws.parent / "outside"
    if setup == "file":
        (ws / "link").symlink_to(outside / "secret.txt")
    elif setup == "dir":
        (ws / "link").symlink_to(outside)
    elif setup == "dangling":
        (ws / "link").symlink_to(outside / "not-there.txt")
    result = await tool.run({"path": path, **extra}, ctx)
    assert result.is_error
    assert message in result.content
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "top secret\n"
