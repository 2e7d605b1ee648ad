# The C extension sandbox/jail/_identity.c (built by the install; reuse.py falls back
# to the same check in Python without it).
from typing import Any

def differing(entries: list[tuple[Any, type, tuple[Any, ...], tuple[Any, ...]]]) -> list[int]: ...
