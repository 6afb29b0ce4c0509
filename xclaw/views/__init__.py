"""[views] The record in plain text: the /steps listing, trees, costs, branch comparisons.

Plain text, no markup, so the same string goes to a terminal, a `notice` frame or a
test: `record.py` (the /steps listing, the trace tree, costs, the sessions list),
`branch_diff.py` (two branches compared), `outside_effects.py` (what rollback and fork
say of effects outside the workspace).
"""
