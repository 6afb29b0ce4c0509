"""Users, ownership, sharing and the log of who did what (migration 5), on both backends."""

from __future__ import annotations

import pytest

from tests.store.builders import user
from tests.store.conftest import Backend
from xclaw.errors import Forbidden, SessionNotFound
from xclaw.people.teams import ShareRole, TeamError, UserRole, new_token, token_hash
from xclaw.store.base import Store
from xclaw.store.steps.writes import AddStep


def test_users_are_added_listed_found_by_token_hash_and_removed(store: Store) -> None:
    t = store.teams
    token = new_token()
    alice = t.add_user("alice", UserRole.MEMBER, token_hash(token))
    assert alice.role is UserRole.MEMBER and alice.token_hash == token_hash(token)
    t.add_user("boss", UserRole.ADMIN, token_hash(new_token()))
    with pytest.raises(TeamError, match="already a user named 'alice'"):
        t.add_user("alice", UserRole.ADMIN, None)
    assert [u.name for u in t.users()] == ["alice", "boss"]
    assert t.user_by_token_hash(token_hash(token)) == alice
    assert t.user_by_token_hash(token_hash(token + "x")) is None
    # A new token: the old one stops matching with the commit.
    fresh = new_token()
    t.set_user_token("alice", token_hash(fresh))
    assert t.user_by_token_hash(token_hash(token)) is None
    found = t.user_by_token_hash(token_hash(fresh))
    assert found is not None and found.name == "alice"
    t.remove_user("alice")
    assert t.get_user("alice") is None and t.user_by_token_hash(token_hash(fresh)) is None
    with pytest.raises(TeamError, match="no user named 'alice'"):
        t.remove_user("alice")
    with pytest.raises(TeamError):
        t.set_user_token("nobody", None)


def test_no_user_is_made_under_a_name_the_rule_refuses(store: Store) -> None:
    """The store holds the one name rule (xclaw.people.teams.check_user_name) for whoever adds a
    user: the command line and a trusted proxy alike (tests/cli/test_user_names.py)."""
    t = store.teams
    for name in ("admin\n", "alice\n", "Admin", "ADMIN", " alice", "a b", ""):
        with pytest.raises(TeamError):
            t.add_user(name, UserRole.MEMBER, None)
    assert t.users() == []


def test_no_token_is_stored_only_its_hash(store: Store, backend: Backend) -> None:
    token = new_token()
    store.teams.add_user("alice", UserRole.MEMBER, token_hash(token))
    rows = backend.query("SELECT name, role, token_hash FROM users")
    assert rows == [("alice", "member", token_hash(token))]
    assert token not in repr(rows)


def test_owner_shares_and_visibility(store: Store) -> None:
    t = store.teams
    for name in ("alice", "bob", "carol"):
        t.add_user(name, UserRole.MEMBER, None)
    a = store.record.create_session(title="alice's").session_id
    b = store.record.create_session(title="bob's").session_id
    admins = store.record.create_session(title="admin's").session_id
    t.claim_session(a, "alice")
    t.claim_session(b, "bob")
    assert t.session_owner(a) == "alice" and t.session_owner(admins) is None
    assert t.session_role(a, "alice") is ShareRole.OWNER
    assert t.session_role(a, "bob") is None
    assert [s.session_id for s in t.sessions_of("alice")] == [a]
    assert t.sessions_of("carol") == []

    assert t.share_session(a, "bob", ShareRole.VIEWER, by="alice") is None
    assert t.session_role(a, "bob") is ShareRole.VIEWER
    assert {s.session_id for s in t.sessions_of("bob")} == {a, b}
    # Sharing again changes the role and says what it was.
    assert t.share_session(a, "bob", ShareRole.APPROVER, by="alice") is ShareRole.VIEWER
    assert [(s.user, s.role) for s in t.shares(a)] == [
        ("alice", ShareRole.OWNER),
        ("bob", ShareRole.APPROVER),
    ]
    with pytest.raises(TeamError, match="alice owns this session"):
        t.share_session(a, "alice", ShareRole.VIEWER, by=None)
    with pytest.raises(TeamError, match="no user named 'dave'"):
        t.share_session(a, "dave", ShareRole.VIEWER, by=None)
    with pytest.raises(TeamError, match="owner is whoever made it"):
        t.share_session(a, "carol", ShareRole.OWNER, by=None)
    with pytest.raises(SessionNotFound):
        t.share_session("nope", "carol", ShareRole.VIEWER, by=None)
    # A second claim never takes a session from its owner.
    t.claim_session(a, "carol")
    assert t.session_owner(a) == "alice"

    assert t.unshare_session(a, "bob", by="alice") is True
    assert t.unshare_session(a, "bob", by="alice") is False
    assert t.unshare_session(a, "alice", by=None) is False  # the owner stays
    assert t.session_role(a, "bob") is None
    kinds = [(x.kind, x.user, x.detail) for x in t.session_actions(a)]
    assert kinds == [
        ("share", "alice", {"user": "bob", "role": "viewer"}),
        ("share", "alice", {"user": "bob", "role": "approver"}),
        ("unshare", "alice", {"user": "bob"}),
    ]


def test_a_removed_user_takes_their_access_along(store: Store) -> None:
    """Their sessions become the admin's; the name given again later inherits nothing."""
    t = store.teams
    t.add_user("alice", UserRole.MEMBER, None)
    t.add_user("bob", UserRole.MEMBER, None)
    a = store.record.create_session().session_id
    t.claim_session(a, "alice")
    t.share_session(a, "bob", ShareRole.COLLABORATOR, by="alice")
    t.remove_user("alice")
    t.remove_user("bob")
    assert t.session_owner(a) is None
    t.add_user("alice", UserRole.MEMBER, None)
    assert t.session_role(a, "alice") is None and t.sessions_of("alice") == []
    assert store.record.get_session(a).session_id == a  # the session itself stays


def test_actions_are_kept_through_rollback_and_go_with_the_session(store: Store) -> None:
    t = store.teams
    t.add_user("alice", UserRole.MEMBER, None)
    sid = store.record.create_session().session_id
    store.record.write(AddStep(session_id=sid, step=user("one")))
    store.record.write(AddStep(session_id=sid, step=user("two")))
    t.record_action(sid, "cancel", "alice")
    store.record.rollback(sid, 2)
    t.record_action(sid, "rollback", None, {"stepId": "s0002", "deleted": 1})
    got = [(a.kind, a.user, a.detail) for a in t.session_actions(sid)]
    assert got == [
        ("cancel", "alice", {}),
        ("rollback", None, {"stepId": "s0002", "deleted": 1}),
    ]
    with pytest.raises(ValueError, match="unknown session action"):
        t.record_action(sid, "explode", None)
    store.record.delete_session(sid)
    assert t.session_actions(sid) == []


def test_sessions_of_orders_and_limits_like_list_sessions(store: Store) -> None:
    t = store.teams
    t.add_user("alice", UserRole.MEMBER, None)
    ids = []
    for i in range(4):
        sid = store.record.create_session(title=f"s{i}").session_id
        t.claim_session(sid, "alice")
        ids.append(sid)
    store.record.update_session(ids[1], title="touched")
    mine = [s.session_id for s in t.sessions_of("alice")]
    assert mine == [s.session_id for s in store.record.list_sessions()]
    assert [s.session_id for s in t.sessions_of("alice", limit=2)] == mine[:2]


def test_existence_and_part_are_one_lookup(store: Store) -> None:
    """What the gateway decides a frame by: whether the session exists and the user's part,
    the same query for another's session as for an id nobody has."""
    t = store.teams
    t.add_user("alice", UserRole.MEMBER, None)
    t.add_user("bob", UserRole.MEMBER, None)
    a = store.record.create_session().session_id
    t.claim_session(a, "alice")
    assert t.session_part(a, "alice") == (True, ShareRole.OWNER)
    assert t.session_part(a, "bob") == (True, None)
    assert t.session_part("nobody-has-this", "bob") == (False, None)
    t.share_session(a, "bob", ShareRole.VIEWER, by="alice")
    assert t.session_part(a, "bob") == (True, ShareRole.VIEWER)


def test_a_new_session_is_written_and_owned_in_one_transaction(store: Store) -> None:
    """create_session_as: an id nobody has becomes the writer's; one already written is
    refused as unknown to a member with no part that lets them act, nothing written."""
    t = store.teams
    for name in ("alice", "bob", "carol"):
        t.add_user(name, UserRole.MEMBER, None)
    made = t.create_session_as("cli", "alice", title="hers", member=True)
    assert made is not None and made.title == "hers"
    assert t.session_owner("cli") == "alice"
    assert t.create_session_as("cli", "alice", member=True) is None  # hers already
    with pytest.raises(SessionNotFound):
        t.create_session_as("cli", "bob", title="his", member=True)
    t.share_session("cli", "carol", ShareRole.VIEWER, by="alice")
    with pytest.raises(SessionNotFound):  # a viewer may not write it either
        t.create_session_as("cli", "carol", member=True)
    t.share_session("cli", "carol", ShareRole.COLLABORATOR, by="alice")
    assert t.create_session_as("cli", "carol", member=True) is None
    assert t.create_session_as("cli", "boss", member=False) is None  # an admin's: any
    assert store.record.get_session("cli").title == "hers" and t.session_owner("cli") == "alice"
    admins = t.create_session_as("admins-own", None, member=False)
    assert admins is not None and t.session_owner("admins-own") is None


def test_sharing_needs_the_owners_part_in_the_shares_own_transaction(store: Store) -> None:
    """Whoever shares (`by`) is checked where the share is written: the owner, an admin
    user or the server's token (None) may; anyone else is refused, nothing written."""
    t = store.teams
    for name in ("alice", "bob", "carol"):
        t.add_user(name, UserRole.MEMBER, None)
    t.add_user("boss", UserRole.ADMIN, None)
    a = store.record.create_session().session_id
    t.claim_session(a, "alice")
    t.share_session(a, "bob", ShareRole.COLLABORATOR, by="alice")
    with pytest.raises(Forbidden):  # a collaborator may not share on
        t.share_session(a, "carol", ShareRole.VIEWER, by="bob")
    with pytest.raises(Forbidden):
        t.unshare_session(a, "bob", by="bob")
    with pytest.raises(SessionNotFound):  # no part: as for an id nobody has
        t.share_session(a, "carol", ShareRole.COLLABORATOR, by="carol")
    with pytest.raises(SessionNotFound):
        t.share_session(a, "carol", ShareRole.COLLABORATOR, by="gone")
    assert t.session_role(a, "carol") is None
    assert t.share_session(a, "carol", ShareRole.VIEWER, by="boss") is None
    assert t.unshare_session(a, "carol", by=None) is True
    assert [(x.kind, x.user) for x in t.session_actions(a)] == [
        ("share", "alice"),
        ("share", "boss"),
        ("unshare", None),
    ]
