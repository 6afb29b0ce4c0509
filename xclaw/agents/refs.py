"""[agents] Python objects named by import path (`module:function`), as xclaw.yaml names a tool, a
hook or an output type, and the path of a function given as an object: what the record and
a definition's digest name it by."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from xclaw.errors import ConfigError


def function_ref(fn: Callable[..., Any]) -> str:
    """`module:qualname` of a function (or class)."""
    return f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', repr(fn))}"


def import_ref(
    ref: Any, where: str, *, what: str = "function", cwd: Path | None = None
) -> Callable[..., Any]:
    """Import `module:attribute` (from the working directory too); ConfigError naming the
    entry (`xclaw.yaml: <where>: …`) when it cannot be used."""
    if not isinstance(ref, str) or ":" not in ref:
        raise ConfigError(f"xclaw.yaml: {where}: entries are 'module:{what}', got {ref!r}")
    base = str((cwd or Path.cwd()).resolve())
    if base not in sys.path:
        sys.path.insert(0, base)  # importable from the working directory
    module_name, _, attr = ref.partition(":")
    try:
        module = importlib.import_module(module_name)
    except SystemExit as e:  # a script-style module (argparse at top level) exits on import
        raise ConfigError(
            f"xclaw.yaml: {where}: {ref!r}: cannot import {module_name!r}: it called "
            f"sys.exit({e.code!r}) while being imported"
        ) from None
    except Exception as e:
        raise ConfigError(
            f"xclaw.yaml: {where}: {ref!r}: cannot import {module_name!r}: {type(e).__name__}: {e}"
        ) from e
    found: Any = module
    for part in attr.split("."):
        found = getattr(found, part, None)
    if not callable(found):
        raise ConfigError(f"xclaw.yaml: {where}: {ref!r}: {module_name} has no {what} {attr!r}")
    return found  # type: ignore[no-any-return]
