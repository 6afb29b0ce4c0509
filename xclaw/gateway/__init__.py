"""[gateway] The server: WebSocket, HTTP API, MCP and the protocol adapters' seams."""
