"""[sandbox] Where tools may reach: a session's workspace directory and path confinement (paths.py),
and the OS isolation of the shell tool (isolation.py: bubblewrap; landlock.py and socket_filter.py
when it is missing). Plain file-system and process code with no store: the tools use it. Time travel
over a workspace (snapshots, restores) is xclaw/workspace.
"""
