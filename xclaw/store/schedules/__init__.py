"""[store/schedules] Schedules, webhooks and their fires, both backends."""
