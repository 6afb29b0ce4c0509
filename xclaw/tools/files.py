"""[tools] File tools: read_file, view_file (read_file that also shows images), write_file,
edit_file, list_dir.

Every path goes through resolve_in_workspace, so a tool can only see and change the session's
workspace. The blocking file work runs in a worker thread: the event loop never waits on a disk.
Failures come back as error results the model can act on, never as exceptions.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from xclaw.errors import ToolError
from xclaw.llm.messages import ImageBlock
from xclaw.sandbox.paths import resolve_in_workspace
from xclaw.sandbox.settings import SANDBOX_DEFAULTS
from xclaw.threads import run_blocking
from xclaw.tools.base import Tool, ToolContext, ToolResult
from xclaw.tools.effects import EffectClass
from xclaw.tools.schema import check_args

# A NUL byte among the first bytes is how `grep` and `git` tell binary from text, too.
_SNIFF_BYTES = 8192
# Directories list_dir shows but does not descend into: large, generated, rarely useful.
_NOT_EXPANDED = frozenset({".git", "node_modules", "__pycache__", ".venv", "venv", ".mypy_cache"})


def _os_message(e: OSError, shown: str) -> str:
    reasons = {
        FileNotFoundError: "no such file or directory",
        PermissionError: "permission denied",
        IsADirectoryError: "is a directory",
        NotADirectoryError: "a parent of it is not a directory",
    }
    why = next((m for t, m in reasons.items() if isinstance(e, t)), e.strerror or str(e))
    return f"{shown!r}: {why}"


async def _guarded(work: Callable[[], ToolResult], shown: Callable[[], str]) -> ToolResult:
    """Run blocking work in a thread; ToolError and OSError become error results."""
    try:
        return await run_blocking(work)
    except ToolError as e:
        return ToolResult(e.message, is_error=True)
    except OSError as e:
        return ToolResult(_os_message(e, shown()), is_error=True)


# What both providers accept as image input, and their size limit (Anthropic: 5 MB an image).
IMAGE_MAX_BYTES = 5 * 1024 * 1024
_OTHER_IMAGE_SUFFIXES = frozenset(
    {".bmp", ".tif", ".tiff", ".ico", ".heic", ".heif", ".avif", ".svg", ".psd"}
)


def image_type(head: bytes) -> str | None:
    """The media type of a PNG, JPEG, GIF or WebP file from its first bytes, else None."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def _looks_binary(head: bytes) -> bool:
    return b"\0" in head


def _human_size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    size = float(n)
    for unit in ("KB", "MB", "GB", "TB"):
        size /= 1024
        if size < 1024 or unit == "TB":
            return f"{size:.1f} {unit}"
    raise AssertionError("unreachable")


def _atomic_write(path: Path, data: bytes) -> None:
    """Replace `path` with `data` all at once: a crash leaves the old file or the new one.

    An existing file keeps its permission bits; a new one gets 0644 (the workspace is 0700).
    """
    try:
        mode = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o644
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".xclaw-tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _read_text_file(path: Path, shown: str, tool: str) -> str:
    """The whole file as text, refusing directories, binary files and invalid UTF-8."""
    if path.is_dir():
        raise ToolError(f"{shown!r} is a directory, not a file")
    if not path.exists():
        raise ToolError(f"{shown!r} does not exist")
    if not path.is_file():  # a FIFO or device would block the read forever
        raise ToolError(f"{shown!r} is not a regular file")
    data = path.read_bytes()
    if _looks_binary(data[:_SNIFF_BYTES]):
        raise ToolError(f"{shown!r} looks like a binary file; {tool} works on text files only")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ToolError(
            f"{shown!r} is not valid UTF-8 (byte {e.start}); {tool} cannot change it safely"
        ) from e


class ReadFileTool(Tool):
    """Shows a text file with line numbers, a window of it at a time. Read-only."""

    read_only = True
    effect = EffectClass.READ_ONLY
    parallel_safe = False

    def __init__(
        self,
        name: str = "read_file",
        max_lines: int = 2000,
        max_line_chars: int = 2000,
        output_cap: int = SANDBOX_DEFAULTS.output_cap,
        *,
        images: bool = False,
    ) -> None:
        self.name = name
        self.max_lines = max_lines
        self.max_line_chars = max_line_chars
        self.output_cap = output_cap
        # view_file also shows PNG, JPEG, GIF and WebP files to the model as images.
        self.images = images
        self.description = (
            "Read a text file in the workspace. Lines are numbered like `cat -n`. "
            f"Shows up to {max_lines} lines from `offset` (1-based line number); "
            "use offset/limit to page through big files."
        )
        if images:
            self.description += (
                " A PNG, JPEG, GIF or WebP image (up to 5 MB) is shown to you as an image."
            )
        self.input_schema: dict[str, Any] = {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path relative to the workspace."},
                "offset": {"type": "integer", "minimum": 1, "description": "First line (1-based)."},
                "limit": {"type": "integer", "minimum": 1, "description": "Number of lines."},
            },
            "required": ["path"],
        }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        try:
            clean = check_args(self.name, self.input_schema, args)
        except ToolError as e:
            return ToolResult(e.message, is_error=True)
        shown = clean["path"]
        return await _guarded(lambda: self._read(ctx.workspace, clean), lambda: shown)

    def _read(self, workspace: Path, args: dict[str, Any]) -> ToolResult:
        shown = args["path"]
        path = resolve_in_workspace(workspace, shown)
        if path.is_dir():
            raise ToolError(f"{shown!r} is a directory; use list_dir to see what it contains")
        if not path.exists():
            raise ToolError(f"{shown!r} does not exist")
        if not path.is_file():  # a FIFO or device would block the read forever
            raise ToolError(f"{shown!r} is not a regular file")
        offset = args.get("offset", 1)
        limit = min(args.get("limit", self.max_lines), self.max_lines)
        size = path.stat().st_size
        out: list[str] = []
        used = 0
        last = offset - 1
        seen = 0
        more = False
        with open(path, "rb") as f:
            head = f.read(_SNIFF_BYTES)
            media = image_type(head)
            if media is not None and self.images:
                return self._image(f, shown, media, size)
            if media is not None or (self.images and path.suffix.lower() in _OTHER_IMAGE_SUFFIXES):
                raise ToolError(
                    f"{shown!r} is an image ({media or path.suffix.lower()}, "
                    f"{_human_size(size)}); "
                    + (
                        "use view_file to see it"
                        if media is not None
                        else "view_file shows PNG, JPEG, GIF and WebP images only"
                    )
                )
            if _looks_binary(head):
                raise ToolError(
                    f"{shown!r} looks like a binary file ({_human_size(size)}); "
                    "read_file shows text only"
                )
            f.seek(0)
            for number, raw in enumerate(f, start=1):
                seen = number
                if number < offset:
                    continue
                if len(out) >= limit or used >= self.output_cap:
                    more = True
                    break
                line = raw.rstrip(b"\r\n").decode("utf-8", errors="replace")
                if len(line) > self.max_line_chars:
                    cut = len(line) - self.max_line_chars
                    line = f"{line[: self.max_line_chars]} [... line cut: {cut} more chars]"
                text = f"{number:6}\t{line}"
                out.append(text)
                used += len(text) + 1
                last = number
        if not out:
            if size == 0:
                return ToolResult(f"{shown!r} is empty", data={"bytes": 0})
            raise ToolError(f"{shown!r} has {seen} lines; offset {offset} is past the end")
        if more:
            out.append(
                f"[... more lines follow; showing lines {offset}-{last}; "
                f"continue with offset={last + 1}]"
            )
        return ToolResult("\n".join(out), data={"bytes": size, "first": offset, "last": last})

    def _image(self, f: Any, shown: str, media: str, size: int) -> ToolResult:
        if size > IMAGE_MAX_BYTES:
            raise ToolError(
                f"{shown!r} is an image of {_human_size(size)}; view_file shows images up to "
                f"{_human_size(IMAGE_MAX_BYTES)} (make a smaller copy first)"
            )
        f.seek(0)
        data = f.read(IMAGE_MAX_BYTES + 1)
        if len(data) > IMAGE_MAX_BYTES:  # it grew while we looked
            raise ToolError(f"{shown!r} grew beyond {_human_size(IMAGE_MAX_BYTES)} while read")
        return ToolResult(
            f"[image {shown}: {media}, {_human_size(len(data))}]",
            data={"bytes": len(data), "media_type": media},
            images=(ImageBlock(media_type=media, data=data),),
        )


class WriteFileTool(Tool):
    """Writes a whole file, creating parent directories.

    read_only stays False although writing the same content twice is harmless: after an
    interruption the content the model wanted may have changed its mind, so a repeat is asked.
    """

    name = "write_file"
    description = (
        "Create or overwrite a file in the workspace with the given content (UTF-8). "
        "Parent directories are created. For small changes to an existing file use edit_file."
    )
    read_only = False
    effect = EffectClass.WORKSPACE
    idempotent = True  # same args, same result; informative only, not used to skip approval
    parallel_safe = False

    def __init__(self) -> None:
        self.input_schema: dict[str, Any] = {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path relative to the workspace."},
                "content": {"type": "string", "description": "The complete new file content."},
            },
            "required": ["path", "content"],
        }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        try:
            clean = check_args(self.name, self.input_schema, args)
        except ToolError as e:
            return ToolResult(e.message, is_error=True)
        shown = clean["path"]
        return await _guarded(lambda: self._write(ctx.workspace, clean), lambda: shown)

    @staticmethod
    def _write(workspace: Path, args: dict[str, Any]) -> ToolResult:
        shown = args["path"]
        path = resolve_in_workspace(workspace, shown)
        if path.is_dir():
            raise ToolError(f"{shown!r} is a directory; give a file path")
        existed = path.exists()
        old_size = path.stat().st_size if existed else 0
        data = args["content"].encode("utf-8")
        path.parent.mkdir(parents=True, exist_ok=True)
        _atomic_write(path, data)
        how = f"replaced {old_size} bytes" if existed else "new file"
        return ToolResult(
            f"wrote {len(data)} bytes to {shown!r} ({how})",
            data={"bytes": len(data), "created": not existed},
        )

    def check_effect(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult | None:
        """After an interruption: the file already holds exactly this content (the write is
        atomic, so it either fully happened or not at all)."""
        try:
            clean = check_args(self.name, self.input_schema, args)
            path = resolve_in_workspace(ctx.workspace, clean["path"])
            data = clean["content"].encode("utf-8")
            if not path.is_file() or path.stat().st_size != len(data) or path.read_bytes() != data:
                return None
        except (ToolError, OSError):
            return None
        return ToolResult(
            f"wrote {len(data)} bytes to {clean['path']!r} (checked after an interruption: "
            "the file holds this content)",
            data={"bytes": len(data), "checked": True},
        )


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def _occurrences(text: str, needle: str) -> list[int]:
    found, start = [], 0
    while (i := text.find(needle, start)) != -1:
        found.append(i)
        start = i + len(needle)
    return found


def _squash(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()


class EditFileTool(Tool):
    """Replaces an exact passage of a file; refuses when the passage is missing or ambiguous."""

    name = "edit_file"
    description = (
        "Edit a text file by replacing an exact passage: `old_text` must occur exactly once "
        "(include enough surrounding lines to make it unique) unless `replace_all` is true. "
        "Whitespace and indentation must match the file exactly."
    )
    read_only = False
    effect = EffectClass.WORKSPACE
    parallel_safe = False

    def __init__(self) -> None:
        self.input_schema: dict[str, Any] = {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path relative to the workspace."},
                "old_text": {"type": "string", "description": "The exact text to replace."},
                "new_text": {"type": "string", "description": "The replacement text."},
                "replace_all": {
                    "type": "boolean",
                    "description": "Replace every occurrence instead of requiring exactly one.",
                },
            },
            "required": ["path", "old_text", "new_text"],
        }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        try:
            clean = check_args(self.name, self.input_schema, args)
            if clean["old_text"] == "":
                raise ToolError(
                    "edit_file needs a non-empty 'old_text'; to create a file use write_file"
                )
            if clean["old_text"] == clean["new_text"]:
                raise ToolError("old_text and new_text are identical; there is nothing to change")
        except ToolError as e:
            return ToolResult(e.message, is_error=True)
        shown = clean["path"]
        return await _guarded(lambda: self._edit(ctx.workspace, clean), lambda: shown)

    @staticmethod
    def _edit(workspace: Path, args: dict[str, Any]) -> ToolResult:
        shown = args["path"]
        path = resolve_in_workspace(workspace, shown)
        text = _read_text_file(path, shown, "edit_file")
        old, new = args["old_text"], args["new_text"]
        hits = _occurrences(text, old)
        if not hits and "\r\n" in text and "\n" in old and "\r\n" not in old:
            # The model writes \n; a Windows-style file has \r\n. Match in the file's own style.
            old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
            hits = _occurrences(text, old)
        if not hits:
            hint = "read the file again and copy the exact text"
            if _squash(old) and _squash(old) in _squash(text):
                hint = (
                    "a passage differing only in whitespace or indentation exists; "
                    "copy the exact text from read_file"
                )
            raise ToolError(f"old_text was not found in {shown!r}; {hint}")
        lines = [_line_of(text, i) for i in hits]
        if len(hits) > 1 and not args.get("replace_all", False):
            where = ", ".join(map(str, lines[:10])) + (", ..." if len(lines) > 10 else "")
            raise ToolError(
                f"old_text occurs {len(hits)} times in {shown!r} (lines {where}); add "
                "surrounding lines to old_text to make it unique, or set replace_all to true"
            )
        updated = text.replace(old, new) if len(hits) > 1 else text.replace(old, new, 1)
        _atomic_write(path, updated.encode("utf-8"))
        if len(hits) == 1:
            summary = f"edited {shown!r}: replaced 1 occurrence at line {lines[0]}"
        else:
            summary = f"edited {shown!r}: replaced {len(hits)} occurrences (lines {', '.join(map(str, lines))})"
        return ToolResult(
            summary + "\n" + _excerpt(updated, lines[0], new),
            data={"replacements": len(hits), "lines": lines},
        )

    def check_effect(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult | None:
        """After an interruption: the old text is gone and the new text is there."""
        try:
            clean = check_args(self.name, self.input_schema, args)
            old, new = clean["old_text"], clean["new_text"]
            if not old or old == new or old in new:
                return None  # an edit that keeps its old text cannot be told from one not made
            text = _read_text_file(
                resolve_in_workspace(ctx.workspace, clean["path"]), clean["path"], self.name
            )
        except (ToolError, OSError):
            return None
        variants = [(old, new)]
        if "\n" in old and "\r\n" not in old:
            variants.append((old.replace("\n", "\r\n"), new.replace("\n", "\r\n")))
        for o, n in variants:
            if o not in text and n in text:
                return ToolResult(
                    f"edited {clean['path']!r} (checked after an interruption: old_text is "
                    "gone and new_text is there)",
                    data={"checked": True},
                )
        return None


def _excerpt(text: str, first_line: int, new: str, context: int = 3, cap: int = 40) -> str:
    """Numbered lines around the first replacement, so the model sees the result."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the file's final newline does not start another line
    start = max(first_line - 1 - context, 0)
    end = min(first_line - 1 + new.count("\n") + 1 + context, len(lines), start + cap)
    return "\n".join(f"{n + 1:6}\t{lines[n].rstrip(chr(13))}" for n in range(start, end))


class ListDirTool(Tool):
    """Lists a directory as an indented tree, sorted, with sizes. Read-only."""

    name = "list_dir"
    read_only = True
    effect = EffectClass.READ_ONLY
    parallel_safe = False

    def __init__(self, max_entries: int = 500, max_depth: int = 5) -> None:
        self.max_entries = max_entries
        self.max_depth = max_depth
        self.description = (
            "List a workspace directory: entries sorted by name, directories marked with /, "
            f"file sizes shown. `depth` > 1 descends into subdirectories (at most {max_depth})."
        )
        self.input_schema: dict[str, Any] = {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Directory, default '.'."},
                "depth": {"type": "integer", "minimum": 1, "description": "Levels, default 1."},
            },
        }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        try:
            clean = check_args(self.name, self.input_schema, args)
        except ToolError as e:
            return ToolResult(e.message, is_error=True)
        shown = clean.get("path", ".")
        return await _guarded(lambda: self._list(ctx.workspace, clean), lambda: shown)

    def _list(self, workspace: Path, args: dict[str, Any]) -> ToolResult:
        shown = args.get("path", ".")
        path = resolve_in_workspace(workspace, shown)
        try:
            mode = path.stat().st_mode  # one stat, not exists() then is_dir()
        except (FileNotFoundError, NotADirectoryError):
            raise ToolError(f"{shown!r} does not exist") from None
        if not stat.S_ISDIR(mode):
            raise ToolError(f"{shown!r} is a file; use read_file to read it")
        depth = min(args.get("depth", 1), self.max_depth)
        out: list[str] = []
        complete = self._walk(path, depth, 0, out)
        if not out:
            return ToolResult(f"{shown!r} is empty", data={"entries": 0})
        if not complete:
            out.append(
                f"[... stopped at {self.max_entries} entries; list a subdirectory or use a "
                "smaller depth]"
            )
        return ToolResult("\n".join(out), data={"entries": min(len(out), self.max_entries)})

    def _walk(self, directory: Path, depth: int, level: int, out: list[str]) -> bool:
        """Appends entries; False when the entry cap cut the listing short."""
        with os.scandir(directory) as it:
            entries = sorted(it, key=lambda e: e.name)
        pad = "  " * level
        for entry in entries:
            if len(out) >= self.max_entries:
                return False
            if entry.is_symlink():
                out.append(f"{pad}{entry.name} -> {os.readlink(entry.path)}")
            elif entry.is_dir():
                note = ""
                if level + 1 < depth and entry.name in _NOT_EXPANDED:
                    note = "  (not expanded)"
                out.append(f"{pad}{entry.name}/{note}")
                if level + 1 < depth and not note:
                    try:
                        if not self._walk(Path(entry.path), depth, level + 1, out):
                            return False
                    except PermissionError:
                        out.append(f"{pad}  (unreadable)")
            else:
                try:
                    size = _human_size(entry.stat().st_size)
                except OSError:
                    size = "?"
                out.append(f"{pad}{entry.name}  ({size})")
        return True
