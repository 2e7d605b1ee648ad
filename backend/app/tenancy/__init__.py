"""Who a caller is and what they may do now: the caller (caller.py), identities the
server issues (identity.py: sessions, tokens, addresses) and admission (admission.py:
runs in flight and the pool's queue), with its token buckets (rates.py) and the turns on
the pool's warm processes (turns.py). It may import core and the sandbox's pool
interface; never storage (``app-layers``: ``tenancy | storage``), nor anything above."""
