"""What jaxplay offers outside the page: the MCP endpoint and its tools (mcp/), the bug
report (bug_report.py) and its self-contained repro (repro.py), a notebook turned into a
run (ipynb.py) and the public figures page (figures_page.py). It goes through the API as
any client does: it may import web (the MCP tools call the REST API in-process through
web/local_api.py, and show op docs), tenancy and core; never services, relay, trust or
storage (``outside-through-the-api``), nor routes. Its parts do not import each other;
the repro lies below them (``outside-layers``)."""
