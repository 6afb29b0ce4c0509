"""The house you can see: the package's folders are its architecture
(docs/architecture.md, "Where things live"), so the top level and the store keep to their
rooms, and every module says which room it is in."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
XCLAW = ROOT / "xclaw"

# The top level: the package, `python -m xclaw`, the exception tree and the blocking-call
# pool every layer uses, and the two documented import paths that only re-export.
TOP_LEVEL = {"__init__.py", "__main__.py", "errors.py", "threads.py", "frames.py", "messages.py"}
SHIMS = {"frames.py": "xclaw.wire.frames", "messages.py": "xclaw.llm.messages"}
# store/ itself: the protocol, what both backends share, and what its roles stand on (role.py)
# and make up (roles.py); the rest is in rooms.
STORE_ROOT = {
    "__init__.py",
    "access.py",
    "base.py",
    "common.py",
    "dialect.py",
    "fsck_rows.py",
    "leases.py",
    "migrations.py",
    "role.py",
    "roles.py",
    "settings.py",
}
STORE_ROOMS = {
    "blobs",
    "budgets",
    "postgres",
    "queue",
    "schedules",
    "snapshots",
    "sqlite",
    "steps",
    "teams",
    "transfer",
}


def room(path: Path) -> str:
    rel = path.relative_to(XCLAW)
    if rel.name == "__init__.py" and len(rel.parts) > 1:
        return "/".join(rel.parts[:-1])
    return "/".join(rel.parts[:-1]) or "xclaw"


def test_the_top_level_holds_no_loose_module() -> None:
    assert {p.name for p in XCLAW.glob("*.py")} == TOP_LEVEL


def test_the_public_paths_only_re_export() -> None:
    for name, module in SHIMS.items():
        tree = ast.parse((XCLAW / name).read_text())
        kinds = {type(node).__name__ for node in tree.body}
        assert kinds <= {"Expr", "ImportFrom", "Assign"}, name
        assert {n.module for n in tree.body if isinstance(n, ast.ImportFrom)} == {module}


def test_the_store_keeps_its_rooms() -> None:
    store = XCLAW / "store"
    assert {p.name for p in store.glob("*.py")} == STORE_ROOT
    assert {p.name for p in store.iterdir() if p.is_dir() and p.name != "__pycache__"} == (
        STORE_ROOMS
    )


def test_every_module_names_its_room_first() -> None:
    wrong = []
    for path in sorted(XCLAW.rglob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text()), clean=False)
        first = (doc or "").split("\n", 1)[0]
        if not first.startswith(f"[{room(path)}] "):
            wrong.append(f"{path.relative_to(XCLAW)}: {first[:60]!r}")
    assert wrong == []


def test_the_room_check_can_fail(tmp_path: Path) -> None:
    assert room(XCLAW / "store" / "sqlite" / "store.py") == "store/sqlite"
    assert room(XCLAW / "store" / "sqlite" / "__init__.py") == "store/sqlite"
    assert room(XCLAW / "errors.py") == "xclaw"


TRACKER = re.compile(r"\b(?:issue|ticket|tracker)\s*#?\d+\b|(?<![&\w])#\d{2,}\b", re.I)


def test_no_tracker_numbers() -> None:
    """The repository explains itself: no issue or tracker numbers in code or docs."""
    found = []
    for top in ("xclaw", "tests", "bench", "examples", "docs"):
        for path in sorted((ROOT / top).rglob("*")):
            if path.suffix not in {".py", ".md", ".toml", ".yaml"}:
                continue
            if "vendor" in path.parts or "node_modules" in path.parts:
                continue
            for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                if TRACKER.search(line) and path != Path(__file__):
                    found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:80]}")
    assert found == []
