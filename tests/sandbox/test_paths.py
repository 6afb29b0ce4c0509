"""Workspace confinement against real directories and symlinks."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from xclaw.errors import PathEscape, ToolError
from xclaw.sandbox.paths import resolve_in_workspace, workspace_dir


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "sub" / "deep").mkdir(parents=True)
    (root / "sub" / "f.txt").write_text("inside")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("secret")
    return root


def test_plain_relative_paths_resolve_inside(ws: Path) -> None:
    real = ws.resolve()
    assert resolve_in_workspace(ws, "sub/f.txt") == real / "sub" / "f.txt"
    assert resolve_in_workspace(ws, ".") == real
    assert resolve_in_workspace(ws, "./sub/./deep/") == real / "sub" / "deep"
    assert resolve_in_workspace(ws, "new/dir/file.txt") == real / "new" / "dir" / "file.txt"


def test_dotdot_that_stays_inside_is_fine(ws: Path) -> None:
    assert resolve_in_workspace(ws, "sub/deep/../f.txt") == ws.resolve() / "sub" / "f.txt"
    assert resolve_in_workspace(ws, "sub/..") == ws.resolve()


@pytest.mark.parametrize("path", ["..", "../x", "sub/../../x", "sub/deep/../../../outside"])
def test_dotdot_escapes_are_refused(ws: Path, path: str) -> None:
    with pytest.raises(PathEscape) as e:
        resolve_in_workspace(ws, path)
    assert e.value.message == f"{path!r} leaves the workspace"


def test_absolute_paths_are_refused_with_a_hint(ws: Path, tmp_path: Path) -> None:
    with pytest.raises(PathEscape) as e:
        resolve_in_workspace(ws, "/etc/passwd")
    assert e.value.message == "absolute paths are not allowed; use a path relative to the workspace"
    with pytest.raises(PathEscape) as e:
        resolve_in_workspace(ws, str(ws.resolve() / "sub" / "f.txt"))
    assert "use a path relative to the workspace (here: 'sub/f.txt')" in e.value.message


def test_tilde_is_refused(ws: Path) -> None:
    with pytest.raises(PathEscape, match="'~' is not expanded"):
        resolve_in_workspace(ws, "~/.ssh/id_rsa")


def test_symlinked_file_outside_is_refused(ws: Path, tmp_path: Path) -> None:
    (ws / "link").symlink_to(tmp_path / "outside" / "secret.txt")
    with pytest.raises(PathEscape) as e:
        resolve_in_workspace(ws, "link")
    assert e.value.message == "'link' is a symlink pointing outside the workspace"


def test_symlinked_dir_outside_is_refused_midway(ws: Path, tmp_path: Path) -> None:
    (ws / "sub" / "out").symlink_to(tmp_path / "outside")
    with pytest.raises(PathEscape) as e:
        resolve_in_workspace(ws, "sub/out/secret.txt")
    assert e.value.message == "'sub/out' is a symlink pointing outside the workspace"


def test_relative_symlink_climbing_out_is_refused(ws: Path) -> None:
    (ws / "sub" / "up").symlink_to("../../outside")
    with pytest.raises(PathEscape, match="'sub/up' is a symlink pointing outside"):
        resolve_in_workspace(ws, "sub/up/new.txt")


def test_dangling_symlink_outside_is_refused(ws: Path, tmp_path: Path) -> None:
    (ws / "dangling").symlink_to(tmp_path / "outside" / "does-not-exist")
    with pytest.raises(PathEscape, match="'dangling' is a symlink pointing outside"):
        resolve_in_workspace(ws, "dangling")


def test_chained_symlinks_ending_outside_are_refused(ws: Path, tmp_path: Path) -> None:
    (ws / "hop2").symlink_to(tmp_path / "outside")
    (ws / "hop1").symlink_to("hop2")
    with pytest.raises(PathEscape, match="'hop1' is a symlink pointing outside"):
        resolve_in_workspace(ws, "hop1/secret.txt")


def test_symlinks_inside_resolve_to_their_target(ws: Path) -> None:
    (ws / "alias").symlink_to("sub")
    (ws / "dangling-in").symlink_to("sub/not-yet.txt")
    real = ws.resolve()
    assert resolve_in_workspace(ws, "alias/f.txt") == real / "sub" / "f.txt"
    assert resolve_in_workspace(ws, "dangling-in") == real / "sub" / "not-yet.txt"


def test_dotdot_after_a_symlink_follows_the_kernel(ws: Path) -> None:
    # alias -> sub/deep, so alias/.. is sub (physically), not the workspace root.
    (ws / "alias").symlink_to("sub/deep")
    assert resolve_in_workspace(ws, "alias/../f.txt") == ws.resolve() / "sub" / "f.txt"


def test_workspace_root_reached_through_a_symlink(tmp_path: Path, ws: Path) -> None:
    via = tmp_path / "via"
    via.symlink_to(ws)
    assert resolve_in_workspace(via, "sub/f.txt") == ws.resolve() / "sub" / "f.txt"


def test_symlink_loop_is_a_clear_error(ws: Path) -> None:
    (ws / "a").symlink_to("b")
    (ws / "b").symlink_to("a")
    with pytest.raises(ToolError, match="cannot follow symlink"):
        resolve_in_workspace(ws, "a/x")


@pytest.mark.parametrize("bad", ["", "a\0b"])
def test_empty_or_nul_paths_are_errors(ws: Path, bad: str) -> None:
    with pytest.raises(ToolError):
        resolve_in_workspace(ws, bad)


def test_workspace_dir_is_created_private(tmp_path: Path) -> None:
    root = tmp_path / "workspaces"
    path = workspace_dir(root, "abc123")
    assert path == root / "abc123"
    assert path.is_dir()
    assert stat.S_IMODE(path.stat().st_mode) == 0o700
    (path / "keep.txt").write_text("x")
    assert workspace_dir(root, "abc123") == path  # idempotent, keeps contents
    assert (path / "keep.txt").read_text() == "x"


def test_workspace_dir_tightens_an_existing_directory(tmp_path: Path) -> None:
    (tmp_path / "s1").mkdir(mode=0o755)
    os.chmod(tmp_path / "s1", 0o755)
    assert stat.S_IMODE(workspace_dir(tmp_path, "s1").stat().st_mode) == 0o700


@pytest.mark.parametrize("bad", ["", ".", "..", "a/b", "../x"])
def test_workspace_dir_refuses_ids_that_are_not_one_name(tmp_path: Path, bad: str) -> None:
    with pytest.raises(PathEscape):
        workspace_dir(tmp_path, bad)
