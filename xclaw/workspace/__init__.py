"""[workspace] Time travel over a session's files: snapshots, restores."""
