"""The result cache keeps an entry's state (candidate, confirmed, unstable) and who
computed it (backend/app/cache.py); the old table (format 1) is dropped, not moved:
its entries were never confirmed by a second run."""

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
