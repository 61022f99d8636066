"""`mrtr-proxy probe`: how a legacy MCP server will behave behind the proxy, before you migrate.

Pure core: `findings` (what was seen), `verdicts` (works / works with limits / will not work, and the YAML
upstream block), `report` (text and JSON), `authinfo` (WWW-Authenticate, RFC 9728 locations), `channel`'s
answers. I/O edges: `streamable`, `sse`, `stdio` (one small legacy client per transport), `oauth` (the
metadata fetch), `steps` (the MCP-level steps over any of them), `run` (one whole probe, bounded), `cli`.
"""
