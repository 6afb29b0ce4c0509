"""[store/budgets] Budgets in the record: each call's hold, the caps and grants, both backends."""
