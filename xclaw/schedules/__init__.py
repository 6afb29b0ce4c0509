"""[schedules] Schedules and webhooks: work that starts by itself, exactly once
(docs/schedules.md)."""
