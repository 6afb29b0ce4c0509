"""[terminal] Showing agent output on a terminal: the frame renderer and terminal-safe text.

Shared by the terminal client (`xclaw chat`, `xclaw run`, the store commands in xclaw/cli) and
the offline walkthrough (xclaw/demo), so neither of those packages imports the other's code.
"""
