"""What a run out of time says about more time (issue 48): the supervisor's ``done``
says in which stage the wall clock ran out and what the stages before it took; the
server, which alone knows its longest limit (``JAXPLAY_MAX_TIMEOUT_S``), says whether a
longer ``timeout_s`` is to be had and up to what."""

from __future__ import annotations

from sandbox.protocol.vocabulary import TIMEOUT_LONGER

#: how the supervisor's reason ends (sandbox/supervisor/relay.py ``_timed_out``)
LONGER = TIMEOUT_LONGER


#: what the reason says when the run had this server's longest limit already
LONGEST = "is this server's longest limit"


def timeout_reason(reason: str, had_s: float, max_s: float) -> str:
    """``reason`` of a run that ran out of ``had_s`` seconds, said with this server's
    longest limit: how far a longer ``timeout_s`` goes, or that this was the longest."""
    if not reason.endswith(LONGER):
        return reason  # not the supervisor's words (a pool of another kind): as it is
    if had_s < max_s:
        return f"{reason}: this server allows up to {max_s:g} s"
    return (
        reason.removesuffix(LONGER) + f"; {had_s:g} s {LONGEST} (JAXPLAY_MAX_TIMEOUT_S): "
        "the program needs less work to finish here"
    )
