"""MCP servers used by tests/test_mcp*.py, run as real subprocesses (stdio or HTTP)."""
