"""Fixtures shared across test packages."""

# `make`: an in-process runtime on a real SQLite store with the scripted model.
pytest_plugins = ["tests.runtime.harness"]
