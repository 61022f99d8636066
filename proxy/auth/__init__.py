"""OAuth 2.1 for the proxy's routes (MCP authorization; RFC 6750, 9728, 8707).

Pure pieces: `challenge` (WWW-Authenticate parse and build), `metadata` (resource URLs, the RFC 9728
document and where it is served), `tokens` (bearer JWT verification against given keys, scope checks).
I/O at the edges: `jwks` (fetching and caching signing keys), `credentials` (service credentials read at
start), `gate` (one upstream's policy: validate a request's token, or relay the upstream's challenge).
"""
