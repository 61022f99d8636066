"""The Tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) in front of legacy servers.

A legacy `tools/call` may be answered with a task (`resultType: "task"`) by policy (`calls.tasks`); the call
then runs on in the background, driven by the call service (proxy/calls), and the client follows it with
`tasks/get`, answers what it asks with `tasks/update`, and may end it with `tasks/cancel`.

    policy.py   when a call becomes a task; capability rules          — pure
    state.py    one task's state machine and wire shapes               — pure
    ids.py      task ids: sealed claims (key ring format version 3)    — pure
    manager.py  the tasks of this replica: background drivers, TTL
    front.py    tools/call hand-over and tasks/* for ModernFront
"""
