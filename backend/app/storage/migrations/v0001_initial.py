"""The first schema: snippets and the first result cache (both databases)."""

SQL = """
CREATE TABLE IF NOT EXISTS snippets (
    id      TEXT PRIMARY KEY,
    digest  TEXT NOT NULL UNIQUE,
    format  INTEGER NOT NULL,
    body    TEXT NOT NULL,
    created DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS results (
    key     TEXT PRIMARY KEY,
    body    TEXT NOT NULL,
    created DOUBLE PRECISION NOT NULL
);
CREATE INDEX IF NOT EXISTS results_created ON results (created);
"""
