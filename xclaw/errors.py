"""[xclaw] The small exception tree that carries control flow and user-facing errors.

Every error a user can meet has a stable machine-readable `code` (the wire protocol's error
codes), a human message, and the exit status a command ends with when it meets it
(`exit_code`: the one rule every `xclaw` subcommand follows, docs/cli.md "Exit status").

An error that a client can meet on the wire is a class named after its code, in CamelCase
(`unknown_session` → `UnknownSession`): the Python API raises these same classes, in process
and through a gateway (`from_code` makes one of an `error` frame or an HTTP error answer;
docs/python-api.md, Errors). The names the code used before (`SessionNotFound`,
`StepNotFound`, `SessionBusy`, `LLMError`, `LimitsExceeded`) name the same classes.
"""

from __future__ import annotations

from typing import Any

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


class UnknownSession(XclawError):
    """No session has this id (or, for a prefix, no session's id starts with it)."""

    code = "unknown_session"
    exit_code = EXIT_USAGE

    def __init__(self, session_id: str) -> None:
        super().__init__(f"no session with id {session_id!r}")
        self.session_id = session_id


SessionNotFound = UnknownSession


class AmbiguousSession(UnknownSession):
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


class BadStep(XclawError):
    """A step reference that is not a step of the session (or, for an approval, a step no
    approval is waiting for)."""

    code = "bad_step"
    exit_code = EXIT_USAGE

    def __init__(self, ref: str, session_id: str, *, foreign: bool = False) -> None:
        why = "belongs to another session" if foreign else "is not a step of this session"
        super().__init__(
            f"step {ref!r} {why} (session {session_id}); use an id shown by /steps, e.g. s0005"
        )
        self.ref = ref
        self.session_id = session_id

    @classmethod
    def not_waiting(cls, ref: str, session_id: str) -> BadStep:
        """An approval answer for a step no approval is waiting for."""
        error = cls(ref, session_id)
        XclawError.__init__(
            error, f"no approval is waiting for step {ref!r} in session {session_id}"
        )
        return error


StepNotFound = BadStep


class StepNotRunning(XclawError):
    """Completing or failing a step that is not `running` (already finished or interrupted)."""

    code = "step_not_running"


class LeaseLost(XclawError):
    """A write of a driven session carried a stale fencing token: another worker owns it."""

    code = "lease_lost"


class Busy(XclawError):
    """A run is in flight for the session (one driver): wait for it, or cancel it."""

    code = "busy"


SessionBusy = Busy


class IrreversibleEffects(XclawError):
    """A rollback past outside effects nothing undoes, not accepted explicitly: nothing was
    done. `effects` is the rollback's preview (what would be undone, what would not)."""

    code = "irreversible_effects"
    exit_code = EXIT_USAGE

    def __init__(self, message: str, effects: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.effects: dict[str, Any] = effects or {}


class CompensationFailed(XclawError):
    """A rollback stopped: a compensation failed, or one cut short by a crash may have run.
    The session waits, memory and files not rewound, until the rollback is retried, carried
    on with the rest accepted as done, or abandoned (the message says how)."""

    code = "compensation_failed"


class RollbackPending(XclawError):
    """The session has a rollback stopped half-way: finish it or abandon it first."""

    code = "rollback_pending"


class ConfigMismatch(XclawError):
    """This worker cannot drive the session with the configuration it runs with (its model
    chain), and another worker can (xclaw/runtime/agreement.py)."""

    code = "config_mismatch"


class UnknownAgent(XclawError):
    """No agent of that name is declared here (xclaw.yaml's `agents:`, or given to
    `xclaw.open`)."""

    code = "unknown_agent"
    exit_code = EXIT_USAGE


class AgentMismatch(XclawError):
    """A session's unfinished turn was run by another definition of its agent than this
    process has (or by an agent it does not know): resumed or taken over, it would run
    something else (xclaw/runtime/agent_choice.py)."""

    code = "agent_mismatch"


class AgentNotOpen(XclawError):
    """A session method of an `xclaw.Agent` that is only a definition: open it first."""

    code = "agent_not_open"
    exit_code = EXIT_USAGE


class StoreError(XclawError):
    code = "store_error"


class UnknownSchedule(StoreError):
    """No schedule by that id, or no webhook by that name (docs/schedules.md)."""

    code = "unknown_schedule"
    exit_code = EXIT_USAGE


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


class BlobStoreUnavailable(StoreError):
    """The object store holding file contents (blob_store: s3://...) did not answer, or
    refused: nothing was referenced, the session waits and goes on once it is back."""

    code = "blob_store_unavailable"


class BlobStoreLost(MissingBlobs):
    """File contents the record names are gone from the object store (blob_store: s3://...):
    deleted outside xclaw, or blob_store points at another bucket or prefix than the one that
    stored them. The record is intact; what needs those contents fails, in words, until
    they are back."""

    code = "blob_store_lost"

    def __init__(self, hashes: set[str], where: str = "the object store") -> None:
        XclawError.__init__(
            self,
            f"{where} no longer holds {len(hashes)} file content(s) the record names: they "
            "were deleted outside xclaw (a lifecycle or expiry rule on the bucket, by hand), "
            "or blob_store points at another bucket or prefix than the one that stored them. "
            "The record itself is intact: restore the objects (bucket versioning, a backup) "
            "or point blob_store back at them, then try again",
        )
        self.hashes = frozenset(hashes)
        self.where = where

    def during(self, doing: str) -> BlobStoreLost:
        """The same loss, said as what it stopped: `doing: <this message>`."""
        lost = BlobStoreLost(set(self.hashes), self.where)
        XclawError.__init__(lost, f"{doing}: {self.message}")
        return lost


class WorkspaceError(XclawError):
    """A workspace could not be captured or restored (the message says which and why)."""

    code = "workspace_error"


# --- agent control flow -------------------------------------------------------------------


class Cancelled(XclawError):
    code = "cancelled"

    def __init__(self, message: str = "run cancelled by the user") -> None:
        super().__init__(message)


class MaxIterations(XclawError):
    """The turn made `max_iterations` LLM calls without a final answer."""

    code = "max_iterations"


LimitsExceeded = MaxIterations


class OutputInvalid(MaxIterations):
    """The turn of an agent with an output type ran out of iterations without a final answer
    that validates; the message lists what was wrong with the last one."""

    code = "output_invalid"


class BudgetReached(XclawError):
    """A model call would go past a budget cap (docs/budgets.md): it is not made, and the
    session waits in state `budget` — not Failed — until a grant or a raised cap lets it go
    on. `detail`: which cap, what was spent, what is left, what the call needed."""

    code = "budget"

    def __init__(self, message: str, detail: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.detail = dict(detail or {})


class HookDenied(XclawError):
    """A declared agent's before_model hook stopped the turn (the message says why); the
    session waits for the next instruction."""

    code = "hook_denied"


class LlmError(XclawError):
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


LLMError = LlmError


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


# --- what clients meet on the wire, besides the above -------------------------------------


class BadFrame(XclawError):
    """A frame (or request) the gateway could not read: not JSON, a wrong field, …"""

    code = "bad_frame"


class BadRequest(XclawError):
    """An HTTP request the API could not read (its body or parameters)."""

    code = "bad_request"


class BadCommand(XclawError):
    """A slash command, or a Python API call, with a wrong argument (a title too long)."""

    code = "bad_command"


class NotAttached(XclawError):
    code = "not_attached"


class InternalError(XclawError):
    """A bug: the run (or the request) failed; the server's log says more."""

    code = "internal_error"


class Unauthorized(XclawError):
    """A missing or wrong access token."""

    code = "unauthorized"
    exit_code = EXIT_USAGE


class ForbiddenOrigin(XclawError):
    """A browser page from an Origin the gateway does not allow."""

    code = "forbidden_origin"
    exit_code = EXIT_USAGE


class Forbidden(XclawError):
    """On a server shared by a team, an action the signed-in user's part in the session does
    not allow (a viewer's message; docs/teams.md)."""

    code = "forbidden"
    exit_code = EXIT_USAGE


class TooManyAttempts(XclawError):
    """Too many failed sign-ins from this address: refused for the rest of the minute."""

    code = "too_many_attempts"
    exit_code = EXIT_USAGE


class MessageRecorded(XclawError):
    """A message whose client-made id (`messageId`, docs/protocol.md) is recorded already, as
    step `seq`: a client's resend, acknowledged again and never run twice. The runtime's
    control flow; a client meets it as an `ack` with `duplicate` set."""

    code = "message_recorded"

    def __init__(self, seq: int) -> None:
        super().__init__(f"this message is recorded already (step {seq})")
        self.seq = seq


# --- the Python API's own: what a program meets besides the wire's codes --------------------


class GatewayUnavailable(XclawError):
    """`connect`: no xclaw gateway answered as one at the URL within the time allowed —
    nothing listens there, the connection dropped and did not come back, it fell silent, or
    what answered does not speak xclaw's protocol (not JSON, an answer or a frame that is
    not as declared, one over the size limit). The message says which."""

    code = "gateway_unavailable"


class Timeout(XclawError, TimeoutError):
    """A wait given a bound (`Session.wait(timeout=...)`) ran out; what it waited for goes
    on. Also a TimeoutError."""

    code = "timeout"


class AgentClosed(XclawError):
    """The agent was closed (`agent.close()`, the end of its `async with`): its sessions
    can do nothing more through it; open another."""

    code = "agent_closed"


def _by_code() -> dict[str, type[XclawError]]:
    found: dict[str, type[XclawError]] = {}
    stack: list[type[XclawError]] = [XclawError]
    while stack:
        cls = stack.pop()
        found.setdefault(cls.code, cls)
        stack.extend(cls.__subclasses__())
    return found


def from_code(code: str, message: str, *, session_id: str | None = None) -> XclawError:
    """The error an `error` frame or an HTTP error answer stands for, as the class its code
    names (a code this version does not know: an XclawError carrying it)."""
    cls = _by_code().get(code, XclawError)
    error = cls.__new__(cls)
    XclawError.__init__(error, message)
    if cls is XclawError:
        error.code = code
    for name, value in (
        ("session_id", session_id or ""),
        ("ref", ""),
        ("matches", []),
        ("retryable", False),
        ("provider", ""),
        ("request_id", ""),
        ("effects", {}),
    ):
        if name in _ATTRIBUTES.get(cls.__name__, ()):
            setattr(error, name, value)
    return error


# The attributes each class's own constructor sets, given a value by from_code.
_ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "UnknownSession": ("session_id",),
    "AmbiguousSession": ("session_id", "matches"),
    "BadStep": ("ref", "session_id"),
    "LlmError": ("retryable", "provider", "request_id"),
    "IrreversibleEffects": ("effects",),
}
