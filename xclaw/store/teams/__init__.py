"""[store/teams] Users, shares and who did what, both backends.

`sql.py`: the methods both backends mix in (docs/teams.md).
"""
