"""A run's public figures (backend/app/relay/figures.py, ``GET /api/v1/stats``): when it
ended, the JAX version, whether the cache answered, its status, its first-output
latency. No code, no tenant, no address; rows older than two days are dropped."""

SQL = """
CREATE TABLE IF NOT EXISTS run_stats (
    at          DOUBLE PRECISION NOT NULL,
    jax_version TEXT NOT NULL,
    cached      BOOLEAN NOT NULL,
    status      TEXT NOT NULL,
    first_ir_ms DOUBLE PRECISION
);
CREATE INDEX IF NOT EXISTS run_stats_at ON run_stats (at);
"""
