"""The result cache is confirmed by pristine runs only (backend/app/trust/cache.py): entries
made under the older rule (two tenants' runs agreeing) are dropped, not kept (their
keys, of cache format 2, are never looked up again anyway). Each entry gains the
client group whose run left it (its candidates' quota) and when it was last served
(trimming takes candidates first, then the least recently served). SQLite has no
``ADD COLUMN IF NOT EXISTS``: its text adds them plainly (it runs once, recorded)."""

SQL = """
DELETE FROM cache_results;
ALTER TABLE cache_results ADD COLUMN IF NOT EXISTS grp TEXT NOT NULL DEFAULT '';
ALTER TABLE cache_results ADD COLUMN IF NOT EXISTS served DOUBLE PRECISION NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS cache_results_group ON cache_results (grp, state, created);
CREATE INDEX IF NOT EXISTS cache_results_state ON cache_results (state, served, created);
"""

SQLITE = SQL.replace("ADD COLUMN IF NOT EXISTS", "ADD COLUMN")
