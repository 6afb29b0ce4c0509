"""[people] People on one server: who is asking (`Identity`), what a user's role and a session's
share allow, and the tokens users sign in with (docs/teams.md).

Pure values and rules: the store keeps users, shares and token hashes (xclaw/store/teams/sql.py),
the gateway decides who is asking and enforces what they may do (xclaw/gateway/identity.py,
xclaw/gateway/access.py), the runtime and the recorder only carry the name into the record.

The server's own token (`XCLAW_TOKEN` / `$XCLAW_HOME/token`) is the admin's and has no name: a
single-person install has no users and records exactly what it recorded before.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import re
from dataclasses import dataclass
from typing import Any

from xclaw.errors import EXIT_USAGE, BadRequest
from xclaw.people.answered_by import AnsweredBy
from xclaw.security.credentials import USER_TOKEN_PREFIX, issue_token


class UserRole(enum.StrEnum):
    """What a user is on the server: an admin sees and does everything, a member only what
    they own or what is shared with them."""

    ADMIN = "admin"
    MEMBER = "member"


class ShareRole(enum.StrEnum):
    """A user's part in one session, from the least to the most they may do."""

    VIEWER = "viewer"  # follows it live, reads its history, steps, trace and export
    APPROVER = "approver"  # also answers its approvals
    COLLABORATOR = "collaborator"  # also sends messages, cancels, rolls back, forks, renames
    OWNER = "owner"  # also shares it and deletes it (whoever created it, or forked it)


# What may be shared: the owner is whoever made the session.
SHARE_ROLES = (ShareRole.VIEWER, ShareRole.APPROVER, ShareRole.COLLABORATOR)
_RANK = {role: i for i, role in enumerate(ShareRole)}


class Need(enum.Enum):
    """What an action on a session needs, as the least share role that allows it."""

    READ = ShareRole.VIEWER
    APPROVE = ShareRole.APPROVER
    ACT = ShareRole.COLLABORATOR
    OWN = ShareRole.OWNER


def allows(role: ShareRole, need: Need) -> bool:
    return _RANK[role] >= _RANK[need.value]


# What an action is called in the `forbidden` error's text.
NEED_WORDS = {
    Need.READ: "read it",
    Need.APPROVE: "answer its approvals",
    Need.ACT: "send messages, cancel, roll back, fork or rename it",
    Need.OWN: "share or delete it",
}


class TeamError(BadRequest):
    """A users or share command given something wrong (an unknown or taken name)."""

    exit_code = EXIT_USAGE


# A user's name: what the record says, what `xclaw share` and `/share` take. No spaces, no
# characters a terminal or a log line could misread. Always matched whole (`fullmatch`: a
# `$` alone lets a trailing newline through, and `admin\n` shows as `admin`).
USER_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")
# The server's token holder, as messages and listings name them (never a user's name).
ADMIN_WORD = "admin"
# Names no user may take, in any case (`Admin` reads as the admin too).
RESERVED_NAMES = frozenset({ADMIN_WORD})


def user_name_problem(name: str) -> str | None:
    """Why `name` cannot be a user's, or None: the one rule for every way a user is made
    (`xclaw users add`, a name a trusted proxy vouches for) and every name signed in with."""
    if USER_NAME_RE.fullmatch(name) is None:
        return (
            f"{name!r} is not a user name: 1-64 characters of letters, digits and . _ @ -, "
            "starting with a letter or a digit"
        )
    if name.lower() in RESERVED_NAMES:
        return f"{name!r} is the server's own token (XCLAW_TOKEN); give the user another name"
    return None


def check_user_name(name: str) -> str:
    """`name`, or a TeamError saying why it cannot be a user's."""
    problem = user_name_problem(name)
    if problem is not None:
        raise TeamError(problem)
    return name


@dataclass(frozen=True, slots=True)
class Identity:
    """Who is asking: a user by name, or the holder of the server's token (`user` None)."""

    user: str | None
    role: UserRole

    @property
    def admin(self) -> bool:
        return self.role is UserRole.ADMIN

    @property
    def label(self) -> str:
        """The name people are shown: the user's, or `admin` for the server's token."""
        return self.user or ADMIN_WORD


SERVER_TOKEN = Identity(None, UserRole.ADMIN)


# --- tokens ---------------------------------------------------------------------------------


def new_token() -> str:
    """A user's token: a recognisable prefix and 256 random bits (xclaw/security/credentials.py, where
    the redactor learns the form of every token xclaw issues). Only its SHA-256 is stored: it
    is high-entropy, so a hash needs no salt or stretching to be useless to whoever reads the
    database."""
    return issue_token(USER_TOKEN_PREFIX)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def hashes_match(given: str, stored: str) -> bool:
    """Constant-time comparison of two token hashes."""
    return hmac.compare_digest(given.encode(), stored.encode())


@dataclass(frozen=True, slots=True)
class Actor:
    """Who does something to a session and by which route, as the record will say it."""

    identity: Identity
    via: str  # websocket | http | terminal
    client: str | None = None  # the client's name for itself (chat, web), when it gave one

    @property
    def user(self) -> str | None:
        return self.identity.user

    def by(self) -> AnsweredBy:
        return AnsweredBy.person(self.client, self.via, self.identity.user)

    def recorded(self) -> dict[str, Any] | None:
        """What a user's message records as its step's output: `{"by": …}` when a user sent
        it; None for the server's token (as before users existed)."""
        return None if self.identity.user is None else {"by": self.by().to_json()}
