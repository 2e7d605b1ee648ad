"""Storage of snippets, cached results and run figures: the interface (base.py), SQLite
(sqlite.py), PostgreSQL (postgres.py, imported only for a postgresql:// URL), the one
module that opens either from a URL (url.py) and the schema's migrations. It may import
core and the sandbox's protocol; never tenancy (``app-layers``: ``tenancy | storage``),
nor anything above, nor the web framework (``storage-no-web``)."""
