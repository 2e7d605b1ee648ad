"""A jailed command's exit status, read as the command's own."""

from __future__ import annotations


def jail_returncode(returncode: int) -> int:
    """bubblewrap reports a command killed by signal N as status 128 + N."""
    return -(returncode - 128) if 128 < returncode < 128 + 65 else returncode
