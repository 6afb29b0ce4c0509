"""[store/queue] Messages waiting for a session's run to end, both backends."""
