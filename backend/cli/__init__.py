"""The ``jaxplay`` command line: its commands (main.py wires them: run, serve, worker,
mcp, settings, versions), the client of a server's REST API (client/) and the text it prints
for a run's events (render/). It sits above the server: it may import backend.app (the
settings, the pool, the app factory for ``serve``) and the sandbox, and nothing in backend.app
imports it; a command never imports the routes or the services directly."""
