__version__ = "0.1.0"


def __getattr__(
    name: str,
) -> object:  # `import xclaw; @xclaw.tool(...)` without importing tools eagerly
    if name == "tool":
        from xclaw.tools.python_tools import tool

        return tool
    raise AttributeError(f"module 'xclaw' has no attribute {name!r}")
