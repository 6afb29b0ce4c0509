"""[budgets] Budgets: caps on what sessions, people and the deployment spend on models, checked
before each call and counted once in the record (docs/budgets.md)."""
