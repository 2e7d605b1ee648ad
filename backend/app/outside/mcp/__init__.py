"""The MCP endpoint (``/mcp``, endpoint.py), its tools (tools.py, imported on the
endpoint's first request) and what a tool answers (results.py)."""
