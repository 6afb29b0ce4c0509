"""[store/sqlite] The SQLite backend: the store, its writer thread, leases, fsck, probe.

`store.py` SQLiteStore, `writer.py` the one writer thread (group commit),
`leases.py`, `probe.py` what is at a path, `wal.py` and `fsck.py` for `xclaw fsck`.
"""
