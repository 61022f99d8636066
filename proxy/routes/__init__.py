"""Aggregated routes, the pure part (no I/O): which upstreams a route serves and under which names, who owns
a name or URI, the proxy's own list cursor across upstreams, and the tool policy. The front does the I/O
(front/modern/aggregate*.py)."""
