"""`mrtr-proxy probe`: how a legacy MCP server will behave behind the proxy, before you migrate.

Pure core: `findings` (what was seen), `verdicts` (works / works with limits / will not work, and the YAML
upstream block), `report` (text and JSON). I/O edges: `streamable`, `sse`, `stdio` (one conversation per
transport), `steps` (the MCP-level steps over any of them), `run` (one whole probe, bounded), `cli`.
"""
