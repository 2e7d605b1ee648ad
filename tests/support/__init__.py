"""What the tests share: one live ``jaxplay serve`` (live_server.py), private Redis and
PostgreSQL servers (services.py) and their fixtures (fixtures.py), ``jaxplay worker``
processes and process-tree helpers (processes.py), free ports and polling (ports.py),
and the suite's requirement gates (tests/gates.py)."""
