"""Storage of snippets, cached results and run figures: the interface and the SQLite
implementation (sqlite.py), PostgreSQL (postgres.py, imported only for a postgresql://
URL), the one module that opens either from a URL (url.py) and the schema's migrations.
It may import backend.app.core and the sandbox's protocol; nothing about who asks, the
cache's rules or HTTP."""
