"""[runtime] Sessions driven: runs, turns, approvals, leases, the assembly."""
