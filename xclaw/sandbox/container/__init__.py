"""[sandbox/container] A container per session (`sandbox.isolation: container`, docs/containers.md):
podman found and checked (podman.py), the policy a session's container runs under (policy.py), its
lifecycle and the shell tool's `podman exec` (lifecycle.py), the workspace's mount that follows a
restore (mounts.py) and the processes inside it (procs.py). No store: capturing and rewinding the
container's file system with the session's snapshots is xclaw/workspace's (env_layer.py)."""
