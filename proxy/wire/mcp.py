"""MCP constants shared by every layer: protocol eras, methods, `_meta` keys, result types."""

from __future__ import annotations

from typing import Final

MODERN_VERSION: Final = "2026-07-28"
MODERN_VERSIONS: Final = (MODERN_VERSION,)
LEGACY_VERSIONS: Final = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")  # newest first

META_PROTOCOL_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
META_CLIENT_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
META_SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"
# The per-request logging opt-in (2026-07-28, SEP-2575): no notifications/message for a request without it.
META_LOG_LEVEL: Final = "io.modelcontextprotocol/logLevel"
LOG_LEVELS: Final = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")

# The legacy (Streamable HTTP) session header: the relay seals it, the bridge issues it, the endpoint
# looks for it.
SESSION_HEADER: Final = "Mcp-Session-Id"

RESULT_COMPLETE: Final = "complete"
RESULT_INPUT_REQUIRED: Final = "input_required"

# Client requests that may answer with InputRequiredResult (SEP-2322: these and no other).
MRTR_METHODS: Final = frozenset({"tools/call", "prompts/get", "resources/read"})
# Client requests relayed to the upstream as they are.
FORWARDED_METHODS: Final = frozenset(
    {
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "completion/complete",
    }
)
# Results that carry SEP-2549 caching hints (`ttlMs`, `cacheScope`), required on the 2026-07-28 wire. The
# proxy cannot know how fresh a legacy server's lists stay, so it says "immediately stale, this user only".
CACHEABLE_METHODS: Final = frozenset(
    {
        "server/discover",
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
    }
)
DEFAULT_CACHE_HINT: Final = {"ttlMs": 0, "cacheScope": "private"}
# The Tasks extension (SEP-2663): its identifier, its methods, and the result type of CreateTaskResult.
TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"
TASKS_GET: Final = "tasks/get"
TASKS_UPDATE: Final = "tasks/update"
TASKS_CANCEL: Final = "tasks/cancel"
TASK_METHODS: Final = frozenset({TASKS_GET, TASKS_UPDATE, TASKS_CANCEL})
RESULT_TASK: Final = "task"
# subscriptions/listen (SEP-2575): one long-lived notification stream per request.
LISTEN: Final = "subscriptions/listen"
LISTEN_ACKNOWLEDGED: Final = "notifications/subscriptions/acknowledged"
META_SUBSCRIPTION_ID: Final = "io.modelcontextprotocol/subscriptionId"

# Requests whose Mcp-Name header mirrors a params field: name, uri, or (SEP-2663) the task id.
NAMED_METHODS: Final = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    TASKS_GET: "taskId",
    TASKS_UPDATE: "taskId",
    TASKS_CANCEL: "taskId",
}

# Server → client requests a legacy server may send mid-call, and what capability each needs.
ELICIT: Final = "elicitation/create"
SAMPLE: Final = "sampling/createMessage"
ROOTS: Final = "roots/list"
PING: Final = "ping"
INPUT_REQUEST_METHODS: Final = frozenset({ELICIT, SAMPLE, ROOTS})

CANCELLED: Final = "notifications/cancelled"
PROGRESS: Final = "notifications/progress"
LOG_MESSAGE: Final = "notifications/message"
SET_LOG_LEVEL: Final = "logging/setLevel"
ROOTS_LIST_CHANGED: Final = "notifications/roots/list_changed"
INITIALIZED: Final = "notifications/initialized"
