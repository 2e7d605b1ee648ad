"""The MCP endpoint (``/mcp``, endpoint.py), its tools (tools.py, imported on first use)
and what a tool answers (results.py)."""
