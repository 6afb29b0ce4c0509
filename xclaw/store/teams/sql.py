"""[store/teams] Users, who may see each session, and who did what (migration 5, `teams`;
docs/teams.md).

Both backends, one SQL text (dialect.py): `store.teams`, a role over the backend's connection
layer (store/role.py). Each method is one transaction. Tokens are never seen here, only their SHA-256
(xclaw/people/teams.py). A session without an `owner` row is the admin's (every session written
before users existed); a user's rows go when the user goes (ON DELETE CASCADE), so a name
given again later inherits nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from xclaw.errors import Forbidden, SessionNotFound
from xclaw.people.teams import Need, ShareRole, TeamError, UserRole, allows, check_user_name
from xclaw.store.role import Db, Role
from xclaw.store.steps.model import Session
from xclaw.store.steps.rows import SESSION_COLS, check_session_id, load_json, row_to_session
from xclaw.store.steps.writes import Kind

if TYPE_CHECKING:
    from xclaw.store.steps.sql import SessionMethods

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class User:
    name: str
    role: UserRole
    created_at: int
    token_hash: str | None  # SHA-256 of the token; None: signs in through a proxy only
    token_created_at: int | None


@dataclass(frozen=True, slots=True)
class Share:
    user: str
    role: ShareRole
    granted_by: str | None  # None: the server's token
    created_at: int


@dataclass(frozen=True, slots=True)
class SessionAction:
    """Something a person did to a session that no step of it records: a cancel, a rollback
    (its steps are gone), a fork (recorded on the new session), a share or unshare."""

    id: int
    session_id: str
    kind: str  # cancel | rollback | fork | share | unshare
    user: str | None  # None: the server's token
    created_at: int
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "user": self.user,
            "at": self.created_at,
            **({"detail": self.detail} if self.detail else {}),
        }


ACTION_KINDS = ("cancel", "rollback", "fork", "share", "unshare")

_USER_COLS = "name, role, created_at, token_hash, token_created_at"
_INSERT_USER = (
    f"INSERT INTO users ({_USER_COLS}) VALUES (?, ?, ?, ?, ?)"
    " ON CONFLICT (name) DO NOTHING RETURNING 1"
)
_GET_USER = f"SELECT {_USER_COLS} FROM users WHERE name=?"
_USER_BY_HASH = f"SELECT {_USER_COLS} FROM users WHERE token_hash=?"
_USERS = f"SELECT {_USER_COLS} FROM users ORDER BY name"
_DELETE_USER = "DELETE FROM users WHERE name=?"
_SET_TOKEN = "UPDATE users SET token_hash=?, token_created_at=? WHERE name=?"
_SET_ROLE = "UPDATE users SET role=? WHERE name=?"

ROLE_SQL = "SELECT role FROM session_access WHERE session_id=? AND user_name=?"
# Whether the session exists and the user's part in it: both looked up whatever the answer,
# so another's session and an id nobody has cost the same (docs/teams.md).
_PART = (
    "SELECT (SELECT 1 FROM sessions WHERE session_id=?),"
    " (SELECT role FROM session_access WHERE session_id=? AND user_name=?)"
)
_OWNER = "SELECT user_name FROM session_access WHERE session_id=? AND role='owner'"
_SHARES = (
    "SELECT user_name, role, granted_by, created_at FROM session_access"
    " WHERE session_id=? ORDER BY created_at, user_name"
)
CLAIM_SQL = (
    "INSERT INTO session_access (session_id, user_name, role, granted_by, created_at)"
    " VALUES (?, ?, 'owner', ?, ?) ON CONFLICT DO NOTHING"  # an owner already: kept
)
_UPSERT_SHARE = (
    "INSERT INTO session_access (session_id, user_name, role, granted_by, created_at)"
    " VALUES (?, ?, ?, ?, ?) ON CONFLICT (session_id, user_name)"
    " DO UPDATE SET role=excluded.role, granted_by=excluded.granted_by"
)
_UNSHARE = "DELETE FROM session_access WHERE session_id=? AND user_name=? AND role<>'owner'"
_VISIBLE = "session_id IN (SELECT session_id FROM session_access WHERE user_name=?)"
_SESSION_EXISTS = "SELECT 1 FROM sessions WHERE session_id=?"
_ADD_ACTION = (
    "INSERT INTO session_actions (session_id, kind, user_name, detail, created_at)"
    " VALUES (?, ?, ?, ?::jsonb, ?)"
)
_ACTIONS = (
    "SELECT id, session_id, kind, user_name, created_at, detail FROM session_actions"
    " WHERE session_id=? ORDER BY id"
)


def _user(row: Any) -> User:
    return User(str(row[0]), UserRole(row[1]), int(row[2]), row[3], row[4])


class TeamMethods(Role):
    """The TeamStore protocol (xclaw/store/base.py), for both backends."""

    def __init__(self, db: Db, sessions: SessionMethods) -> None:
        super().__init__(db)
        self._sessions = sessions  # the record's body of a new session (create_session_as)

    # --- users ------------------------------------------------------------------------------
    def add_user(self, name: str, role: UserRole, token_hash: str | None) -> User:
        check_user_name(name)  # the one rule, whoever makes the user
        d = self._dialect

        def tx(conn: Any) -> User:
            now = self._now()
            stamp = now if token_hash is not None else None
            added = conn.execute(
                d.sql(_INSERT_USER), (name, UserRole(role).value, now, token_hash, stamp)
            ).fetchall()
            if not added:
                raise TeamError(f"there is already a user named {name!r}")
            return User(name, UserRole(role), now, token_hash, stamp)

        return self._write(tx, Kind.TEAM_CHANGED)

    def get_user(self, name: str) -> User | None:
        sql = self._dialect.sql(_GET_USER)
        row = self._read(lambda c: c.execute(sql, (name,)).fetchone())
        return None if row is None else _user(row)

    def user_by_token_hash(self, token_hash: str) -> User | None:
        sql = self._dialect.sql(_USER_BY_HASH)
        row = self._read(lambda c: c.execute(sql, (token_hash,)).fetchone())
        return None if row is None else _user(row)

    def users(self) -> list[User]:
        sql = self._dialect.sql(_USERS)
        return [_user(r) for r in self._read(lambda c: c.execute(sql).fetchall())]

    def remove_user(self, name: str) -> None:
        """The user, their token and every share and ownership of theirs (their sessions are
        the admin's from then on). Raises TeamError for an unknown name."""
        sql = self._dialect.sql(_DELETE_USER)

        def tx(conn: Any) -> None:
            if conn.execute(sql, (name,)).rowcount == 0:
                raise TeamError(f"no user named {name!r}")

        self._write(tx, Kind.TEAM_CHANGED)

    def set_user_token(self, name: str, token_hash: str | None) -> None:
        """A new token for the user: the old one stops working with this commit."""
        sql = self._dialect.sql(_SET_TOKEN)

        def tx(conn: Any) -> None:
            if conn.execute(sql, (token_hash, self._now(), name)).rowcount == 0:
                raise TeamError(f"no user named {name!r}")

        self._write(tx, Kind.TEAM_CHANGED)

    def set_user_role(self, name: str, role: UserRole) -> None:
        sql = self._dialect.sql(_SET_ROLE)

        def tx(conn: Any) -> None:
            if conn.execute(sql, (UserRole(role).value, name)).rowcount == 0:
                raise TeamError(f"no user named {name!r}")

        self._write(tx, Kind.TEAM_CHANGED)

    # --- who may see a session --------------------------------------------------------------
    def session_role(self, session_id: str, user: str) -> ShareRole | None:
        """The user's part in the session: owner, a shared role, or None."""
        sql = self._dialect.sql(ROLE_SQL)
        row = self._read(lambda c: c.execute(sql, (session_id, user)).fetchone())
        return None if row is None else ShareRole(row[0])

    def session_part(self, session_id: str, user: str) -> tuple[bool, ShareRole | None]:
        """Whether the session exists, and the user's part in it, in one query."""
        sql = self._dialect.sql(_PART)
        row = self._read(lambda c: c.execute(sql, (session_id, session_id, user)).fetchone())
        exists = row is not None and row[0] is not None
        return exists, None if row is None or row[1] is None else ShareRole(row[1])

    def session_owner(self, session_id: str) -> str | None:
        """The user who owns it; None: the admin's (no owner row)."""
        sql = self._dialect.sql(_OWNER)
        row = self._read(lambda c: c.execute(sql, (session_id,)).fetchone())
        return None if row is None else str(row[0])

    def claim_session(self, session_id: str, user: str, *, granted_by: str | None = None) -> None:
        """Make `user` the owner of a session that has none yet (its creator, a fork's maker).
        In the caller's transaction when called inside a write unit."""
        d = self._dialect

        def tx(conn: Any) -> None:
            conn.execute(d.sql(CLAIM_SQL), (session_id, user, d.text(granted_by), self._now()))

        self._write(tx, Kind.TEAM_CHANGED)

    def create_session_as(
        self, session_id: str, user: str | None, *, title: str = "", member: bool
    ) -> Session | None:
        """A new session written as `user`'s (None: the server's token, the admin's) in one
        transaction with its ownership. An id already written: None when `user` may act on
        that session (theirs, written by another socket of theirs; shared; or not `member`),
        else SessionNotFound with nothing written, as for an id nobody has."""
        d = self._dialect
        create = self._sessions._create_session_tx(check_session_id(session_id), title, None)

        def tx(conn: Any) -> Session | None:
            session = create(conn)
            if session is not None:
                if user is not None:
                    conn.execute(d.sql(CLAIM_SQL), (session_id, user, None, self._now()))
                return session
            if member:
                row = conn.execute(d.sql(ROLE_SQL), (session_id, user or "")).fetchone()
                if row is None or not allows(ShareRole(row[0]), Need.ACT):
                    raise SessionNotFound(session_id)
            return None

        return self._write(tx, Kind.SESSION_CREATED)

    def session_roles(self, session_ids: list[str]) -> list[tuple[str, str, ShareRole]]:
        """(session, user, role) of every part anyone has in these sessions: one query for
        the many sockets a worker checks each second (xclaw/gateway/context.py)."""
        if not session_ids:
            return []
        d = self._dialect
        condition, ids = d.in_ids("session_id", session_ids)
        sql = d.sql(f"SELECT session_id, user_name, role FROM session_access WHERE {condition}")
        rows = self._read(lambda c: c.execute(sql, (ids,)).fetchall())
        return [(str(r[0]), str(r[1]), ShareRole(r[2])) for r in rows]

    def shares(self, session_id: str) -> list[Share]:
        sql = self._dialect.sql(_SHARES)
        rows = self._read(lambda c: c.execute(sql, (session_id,)).fetchall())
        return [Share(str(r[0]), ShareRole(r[1]), r[2], int(r[3])) for r in rows]

    def share_session(
        self, session_id: str, user: str, role: ShareRole, *, by: str | None
    ) -> ShareRole | None:
        """Give `user` `role` in the session (replacing a role they had); the share is logged.
        Returns the role they had. TeamError for an unknown user or the owner themselves;
        SessionNotFound."""
        d = self._dialect
        role = ShareRole(role)
        if role is ShareRole.OWNER:
            raise TeamError("a session's owner is whoever made it; share a role below it")

        def tx(conn: Any) -> ShareRole | None:
            self._may_share_tx(conn, session_id, by)
            if conn.execute(d.sql(_GET_USER), (user,)).fetchone() is None:
                raise TeamError(f"no user named {user!r} (see xclaw users list)")
            had = conn.execute(d.sql(ROLE_SQL), (session_id, user)).fetchone()
            if had is not None and had[0] == ShareRole.OWNER.value:
                raise TeamError(f"{user} owns this session")
            now = self._now()
            conn.execute(d.sql(_UPSERT_SHARE), (session_id, user, role.value, d.text(by), now))
            detail = {"user": user, "role": role.value}
            self._action_tx(conn, session_id, "share", by, detail, now)
            return None if had is None else ShareRole(had[0])

        return self._write(tx, Kind.TEAM_CHANGED)

    def unshare_session(self, session_id: str, user: str, *, by: str | None) -> bool:
        """Take the user's shared role away (logged); False if they had none."""
        d = self._dialect

        def tx(conn: Any) -> bool:
            self._may_share_tx(conn, session_id, by)
            gone = bool(conn.execute(d.sql(_UNSHARE), (session_id, user)).rowcount > 0)
            if gone:
                self._action_tx(conn, session_id, "unshare", by, {"user": user}, self._now())
            return gone

        return self._write(tx, Kind.TEAM_CHANGED)

    def _may_share_tx(self, conn: Any, session_id: str, by: str | None) -> None:
        """The session exists and `by` may share it — its owner, an admin user, or the
        server's token (None) — read in the share's own transaction, so no share is written
        on a session that became someone else's after the gateway asked."""
        d = self._dialect
        if conn.execute(d.sql(_SESSION_EXISTS), (session_id,)).fetchone() is None:
            raise SessionNotFound(session_id)
        if by is None:
            return
        granter = conn.execute(d.sql(_GET_USER), (by,)).fetchone()
        if granter is not None and granter[1] == UserRole.ADMIN.value:
            return
        part = (
            None if granter is None else conn.execute(d.sql(ROLE_SQL), (session_id, by)).fetchone()
        )
        if part is None:
            raise SessionNotFound(session_id)
        if part[0] != ShareRole.OWNER.value:
            raise Forbidden(f"only the owner of session {session_id} may share it")

    def sessions_of(self, user: str, *, limit: int | None = None) -> list[Session]:
        """The sessions the user owns or that are shared with them, most recently updated
        first (as list_sessions orders every session)."""
        d = self._dialect
        sql = (
            f"SELECT {SESSION_COLS} FROM sessions WHERE {_VISIBLE} "
            f"ORDER BY updated_at DESC, created_at DESC, {d.session_tiebreak} DESC"
        )
        params: tuple[Any, ...] = (user,)
        if limit is not None:
            sql += " LIMIT ?"
            params = (user, max(limit, 0))
        rows = self._read(lambda c: c.execute(d.sql(sql), params).fetchall())
        return [row_to_session(r) for r in rows]

    # --- who did what -----------------------------------------------------------------------
    def record_action(
        self,
        session_id: str,
        kind: str,
        user: str | None,
        detail: dict[str, Any] | None = None,
    ) -> None:
        """Log what a person did to the session (a cancel, a rollback, a fork)."""

        def tx(conn: Any) -> None:
            self._action_tx(conn, session_id, kind, user, detail or {}, self._now())

        self._write(tx, Kind.ACTION_LOGGED)

    def _action_tx(
        self,
        conn: Any,
        session_id: str,
        kind: str,
        user: str | None,
        detail: dict[str, Any],
        now: int,
    ) -> None:
        if kind not in ACTION_KINDS:
            raise ValueError(f"unknown session action {kind!r}")
        d = self._dialect
        conn.execute(
            d.sql(_ADD_ACTION),
            (session_id, kind, d.text(user), d.json(detail or None, "detail"), now),
        )

    def session_actions(self, session_id: str) -> list[SessionAction]:
        sql = self._dialect.sql(_ACTIONS)
        rows = self._read(lambda c: c.execute(sql, (session_id,)).fetchall())
        return [
            SessionAction(int(r[0]), str(r[1]), str(r[2]), r[3], int(r[4]), load_json(r[5]) or {})
            for r in rows
        ]
