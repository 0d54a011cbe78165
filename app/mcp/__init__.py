"""MCP (Model Context Protocol) adapter: a sibling of ``mindsdb/`` that turns a JSON-RPC tool
call into the same service call a REST route or a SQL statement makes (docs/mcp.md)."""
