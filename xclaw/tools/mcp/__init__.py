"""[tools/mcp] MCP servers as tool sources (docs/tools.md): config, connection, tool adapter,
hub."""
