"""[mcp_server] xclaw as an MCP server (`xclaw mcp`): its sessions as tools and resources for MCP
hosts (docs/mcp-server.md). Not to be confused with xclaw/tools/mcp/, xclaw as an MCP client."""
