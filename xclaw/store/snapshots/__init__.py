"""[store/snapshots] Workspace snapshots: manifests, deltas, the restore journal.

`model.py` pure values, `sql.py` the methods both backends mix in,
`memo.py` the latest snapshot this process saved.
"""
