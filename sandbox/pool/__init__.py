"""Pools run requests somewhere and stream their events back (see base.Pool)."""
