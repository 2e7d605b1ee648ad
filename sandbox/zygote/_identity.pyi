# The C extension sandbox/zygote/_identity.c (built by the install; watch.py falls back
# to the same check in Python without it).
from typing import Any

def namespace(obj: Any) -> dict[str, Any]: ...

class Baseline: ...  # a capsule

def pack(entries: list[tuple[Any, type, Any, tuple[Any, ...], tuple[Any, ...]]]) -> Baseline: ...
def differing(baseline: Baseline) -> list[int]: ...
