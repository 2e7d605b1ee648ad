"""The result cache keeps an entry's state (candidate, confirmed, unstable) and who
computed it (backend/app/trust/cache.py); the old table (format 1) is dropped, not moved:
its entries were never confirmed by a second run.

SQLite also keeps the cache's entries and bytes (unstable markers apart: they have
their own cap) in ``cache_totals``, by triggers in every writer's transaction, so a
write reads them in O(1) instead of scanning every entry (10,000 by default);
PostgreSQL counts them (base.py ``RESULT_TOTALS``)."""

SQL = """
DROP TABLE IF EXISTS results;
CREATE TABLE IF NOT EXISTS cache_results (
    key     TEXT PRIMARY KEY,
    state   TEXT NOT NULL,
    digest  TEXT NOT NULL,
    tenant  TEXT NOT NULL,
    body    TEXT NOT NULL,
    size    BIGINT NOT NULL,
    created DOUBLE PRECISION NOT NULL
);
CREATE INDEX IF NOT EXISTS cache_results_age ON cache_results (created, size);
"""

SQLITE = (
    SQL
    + """
CREATE TABLE IF NOT EXISTS cache_totals (
    id      INTEGER PRIMARY KEY CHECK (id = 0),
    entries INTEGER NOT NULL,
    bytes   INTEGER NOT NULL
);
CREATE TRIGGER IF NOT EXISTS cache_totals_insert AFTER INSERT ON cache_results
WHEN NEW.state <> 'unstable' BEGIN
    UPDATE cache_totals SET entries = entries + 1, bytes = bytes + NEW.size WHERE id = 0;
END;
CREATE TRIGGER IF NOT EXISTS cache_totals_delete AFTER DELETE ON cache_results
WHEN OLD.state <> 'unstable' BEGIN
    UPDATE cache_totals SET entries = entries - 1, bytes = bytes - OLD.size WHERE id = 0;
END;
CREATE TRIGGER IF NOT EXISTS cache_totals_resize AFTER UPDATE OF size, state ON cache_results
BEGIN
    UPDATE cache_totals SET
        entries = entries - (OLD.state <> 'unstable') + (NEW.state <> 'unstable'),
        bytes = bytes - CASE WHEN OLD.state <> 'unstable' THEN OLD.size ELSE 0 END
                      + CASE WHEN NEW.state <> 'unstable' THEN NEW.size ELSE 0 END
    WHERE id = 0;
END;
"""
)
