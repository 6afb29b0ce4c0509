"""[people] Who: people on a shared server, their roles and tokens, who answered.

`teams.py`: identities, roles, shares and users' tokens (docs/teams.md);
`answered_by.py`: who or what answered an approval (docs/approval.md).
"""
