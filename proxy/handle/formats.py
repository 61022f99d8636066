"""The version byte of every kind of token the key ring seals, in one list.

Each kind has its own byte, in the associated data as well as in front of the token, so no token is ever
taken for another kind (a cursor for a session id, a task id for a handle). A new kind takes the next free
number here; a number is never reused, since tokens of a retired kind may still be in clients' hands.
"""

from typing import Final

CALL_HANDLE: Final = 1  # requestState of a parked call (claims.py)
LEGACY_SESSION_ID: Final = 2  # a legacy client's sealed Mcp-Session-Id (session_ids.py)
TASK_ID: Final = 3  # a Tasks-extension task id (proxy/tasks/ids.py)
RELAY_STATE: Final = 4  # a modern upstream's requestState bound to the principal (relay_state.py)
MIRROR_SESSION: Final = 5  # a mirror session's Mcp-Session-Id (mirror_ids.py)
MIRROR_ASK: Final = 6  # the id of an inline request the mirror sends a legacy client (mirror_ids.py)
LIST_CURSOR: Final = 7  # an aggregated route's merged-list cursor (proxy/routes/cursor.py)
RELAY_TASK: Final = 8  # a modern upstream's task id bound to the principal (relay_task.py)
