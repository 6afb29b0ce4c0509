"""[a2a] A2A on the gateway (docs/a2a.md): the agent card and the JSON-RPC methods of A2A 1.0, as
`a2a-sdk` implements them, over xclaw sessions — a context is a session, a task a turn."""
