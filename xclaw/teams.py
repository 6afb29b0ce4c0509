"""People on one server: who is asking (`Identity`), what a user's role and a session's share
allow, and the tokens users sign in with (docs/teams.md).

Pure values and rules: the store keeps users, shares and token hashes (xclaw/store/teams_sql.py),
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
import secrets
from dataclasses import dataclass
from typing import Any

from xclaw.answered_by import AnsweredBy
from xclaw.errors import EXIT_USAGE, BadRequest


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
# characters a terminal or a log line could misread.
USER_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")
# The server's token holder, as messages and listings name them (never a user's name).
ADMIN_WORD = "admin"


def check_user_name(name: str) -> str:
    if not USER_NAME_RE.match(name):
        raise TeamError(
            f"{name!r} is not a user name: 1-64 characters of letters, digits and . _ @ -, "
            "starting with a letter or a digit"
        )
    if name == ADMIN_WORD:
        raise TeamError(
            f"{ADMIN_WORD!r} is the server's own token (XCLAW_TOKEN); give the user another name"
        )
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

# A user's token: a recognisable prefix (so a log filter, a secret scanner or a person can tell
# one when they see it) and 256 random bits. Only its SHA-256 is stored: it is high-entropy,
# so a hash needs no salt or stretching to be useless to whoever reads the database.
TOKEN_PREFIX = "xcu_"
TOKEN_RE = re.compile(r"xcu_[A-Za-z0-9_-]{20,}")


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


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
