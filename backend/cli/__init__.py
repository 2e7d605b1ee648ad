"""The ``jaxplay`` command line: main.py wires the commands (run.py, serve.py,
worker.py, mcp_proxy.py, show_settings.py, versions.py), which share common.py,
the client of a server's REST API (client/) and the text printed for a run's events
(render/). It sits above the server (contract ``backend-layers``): it may import
backend.app (the settings, the pool, the app factory for ``serve``) and the sandbox, and
nothing in backend.app imports it. Inside, main above the commands above what they share
(``cli-layers``)."""
