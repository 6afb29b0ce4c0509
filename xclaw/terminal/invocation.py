"""[terminal] How to type `xclaw` in another terminal, for the hints that send people there.

A fresh shell has `xclaw` on its PATH only once the virtual environment is activated (or
xclaw is installed for the user): a hint that says `xclaw chat` when only
`.venv/bin/xclaw` exists sends people to "command not found".
"""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path


def xclaw_command() -> str:
    """`xclaw` when that name on the PATH is this very program; else the absolute path of the
    `xclaw` script this process was started as; else `python -m xclaw` with this Python."""
    started = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    on_path = shutil.which("xclaw")
    if started is not None and started.name == "xclaw":
        script = started.resolve()
        if on_path is not None and Path(on_path).resolve() == script:
            return "xclaw"
        return shlex.quote(str(script))
    if on_path is not None and Path(on_path).resolve().parent == Path(sys.executable).parent:
        return "xclaw"  # `python -m xclaw` from an environment whose scripts are on the PATH
    return f"{shlex.quote(sys.executable)} -m xclaw"
