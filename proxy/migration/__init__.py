"""Migration progress (issue 44): which upstreams and tools still need the proxy, counted from live calls.

`tally.py` counts (the hot path), `verdict.py` says it in plain words, `report.py` is the JSON the admin
listener serves and the sum over replicas the CLI and the admin page show. Pure: no I/O.
"""
