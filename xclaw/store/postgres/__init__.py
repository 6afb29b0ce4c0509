"""[store/postgres] The PostgreSQL backend: the store, pools, leases, the bus, fsck.

`store.py` PostgresStore, `conn.py` pools and transactions, `rows.py`,
`leases.py`, `bus.py` LISTEN/NOTIFY between workers, `fsck.py` (docs/postgres.md).
"""
