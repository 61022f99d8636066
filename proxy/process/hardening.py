"""Process hardening at start-up: keep the proxy's memory and environment out of its children's reach.

A stdio upstream runs as a child process under the proxy's own user, so by default it could read
`/proc/<proxy pid>/environ` (a sealing key given by environment variable, any other secret there),
`/proc/<pid>/mem`, the proxy's open file descriptors under `/proc/<pid>/fd`, and attach a debugger.
`PR_SET_DUMPABLE = 0` (as ssh-agent and gpg-agent do) makes those files owned by root and refuses
ptrace to anyone but root. What a child can still do as the same user (read files that user can read,
key files included) is only prevented by running it as another user or in its own container
(docs/security.md, "Child processes").
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

import structlog

log = structlog.get_logger(__name__)

PR_SET_DUMPABLE = 4
PR_GET_DUMPABLE = 3


def forbid_process_inspection() -> bool:
    """Make this process non-dumpable (Linux). True when it now is; False elsewhere or when it failed."""
    if not sys.platform.startswith("linux"):
        log.info("hardening.unavailable", reason=f"prctl(PR_SET_DUMPABLE) is Linux only ({sys.platform})")
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")
        dumpable = int(libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0))
    except OSError as exc:
        log.warning("hardening.failed", error=str(exc), hint="stdio children may read /proc/<pid>/environ")
        return False
    return dumpable == 0
