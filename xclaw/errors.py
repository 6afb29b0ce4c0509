"""The small exception tree that carries control flow and user-facing errors.

Every error a user can meet has a stable machine-readable `code` (the wire protocol's error
codes), a human message, and the exit status a command ends with when it meets it
(`exit_code`: the one rule every `xclaw` subcommand follows, docs/cli.md "Exit status").
"""

from __future__ import annotations

# What went wrong was what the command was given — arguments, configuration (xclaw.yaml,
# .env, the environment), a database it may not use as it is, an unknown session or step,
# an input file — and nothing was done: fix the input and run it again.
EXIT_USAGE = 2
# The command started on valid input and failed (or found what it checks broken: fsck's
# findings, replay's divergences).
EXIT_FAILED = 1


class XclawError(Exception):
    code = "error"
    exit_code = EXIT_FAILED

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class IllegalTransition(XclawError):
    code = "illegal_transition"

    def __init__(self, current: str, target: str) -> None:
        super().__init__(f"illegal session state change {current} -> {target}")
        self.current = current
        self.target = target


class SessionNotFound(XclawError):
    code = "unknown_session"
    exit_code = EXIT_USAGE

    def __init__(self, session_id: str) -> None:
        super().__init__(f"no session with id {session_id!r}")
        self.session_id = session_id


class AmbiguousSession(SessionNotFound):
    """A session id prefix that matches more than one session (as git refuses `git show ab`)."""

    code = "ambiguous_session"

    def __init__(self, prefix: str, matches: list[str]) -> None:
        XclawError.__init__(
            self,
            f"session id prefix {prefix!r} matches {len(matches)} sessions "
            f"({', '.join(matches[:5])}{', …' if len(matches) > 5 else ''}); type more of it",
        )
        self.session_id = prefix
        self.matches = matches


class StepNotFound(XclawError):
    code = "bad_step"
    exit_code = EXIT_USAGE

    def __init__(self, ref: str, session_id: str, *, foreign: bool = False) -> None:
        why = "belongs to another session" if foreign else "is not a step of this session"
        super().__init__(
            f"step {ref!r} {why} (session {session_id}); use an id shown by /steps, e.g. s0005"
        )
        self.ref = ref
        self.session_id = session_id


class StepNotRunning(XclawError):
    """Completing or failing a step that is not `running` (already finished or interrupted)."""

    code = "step_not_running"


class LeaseLost(XclawError):
    """A write of a driven session carried a stale fencing token: another worker owns it."""

    code = "lease_lost"


class SessionBusy(XclawError):
    code = "busy"


class ConfigMismatch(XclawError):
    """This worker cannot drive the session with the configuration it runs with (its model
    chain), and another worker can (xclaw/runtime/agreement.py)."""

    code = "config_mismatch"


class StoreError(XclawError):
    code = "store_error"


class DiskFull(StoreError):
    """The database's disk (or quota) is full: the transaction was rolled back whole."""

    code = "disk_full"


class DatabaseRefused(StoreError):
    """A database a command may not use as it is, found before anything was written: none
    at the path (for a command that only reads or changes one), not SQLite, another
    program's, or at a schema version this xclaw cannot read without upgrading it."""

    code = "database_refused"
    exit_code = EXIT_USAGE


class SchemaTooNew(DatabaseRefused):
    code = "schema_too_new"


class MissingBlobs(StoreError):
    """A snapshot names file contents the store does not hold (never stored, or collected
    meanwhile): the snapshotter stores them and saves again."""

    code = "missing_blobs"

    def __init__(self, hashes: set[str]) -> None:
        super().__init__(f"{len(hashes)} file content(s) of the snapshot are not stored")
        self.hashes = frozenset(hashes)


class WorkspaceError(XclawError):
    """A workspace could not be captured or restored (the message says which and why)."""

    code = "workspace_error"


# --- agent control flow -------------------------------------------------------------------


class Cancelled(XclawError):
    code = "cancelled"

    def __init__(self, message: str = "run cancelled by the user") -> None:
        super().__init__(message)


class LimitsExceeded(XclawError):
    code = "max_iterations"


class LLMError(XclawError):
    """A provider call failed for good (after retries and fallbacks)."""

    code = "llm_error"

    def __init__(
        self, message: str, *, retryable: bool = False, provider: str = "", request_id: str = ""
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.provider = provider
        # The provider's id of the (last) HTTP request, when it sent one: for support tickets.
        self.request_id = request_id


class ToolError(XclawError):
    """A tool failed in a way the model should hear about (returned as the tool result)."""

    code = "tool_error"


class PathEscape(ToolError):
    code = "path_escape"


class ConfigError(XclawError):
    code = "config_error"
    exit_code = EXIT_USAGE


class CannotListen(XclawError):
    """`xclaw serve` could not bind its address (port taken, no such interface, no permission):
    found before anything is opened or registered, so nothing is left behind."""

    code = "cannot_listen"
    exit_code = EXIT_USAGE
