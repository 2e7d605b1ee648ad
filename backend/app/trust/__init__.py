"""What lets one person's answer reach another: the result cache (cache.py), pristine
runs that confirm it (confirm.py) and who waits and pays for them (pristine_lines.py),
and whose code a run is (provenance.py). It may import tenancy (a pristine run takes a
turn through admission), storage and core; never relay, web, services, outside or routes
(``app-layers``)."""
