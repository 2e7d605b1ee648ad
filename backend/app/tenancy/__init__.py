"""Who a caller is and what they may do now: the caller (caller.py), identities the server
issues (identity.py: sessions, tokens, addresses) and admission (admission.py: rates,
runs in flight, the pool's queue, tenants' turns on a kept process). It may import
backend.app.core and the sandbox's pool interface; never storage, the cache or routes."""
