"""`forbid_process_inspection`: before it, a same-user child reads its parent's /proc/<pid>/environ;
after it, that child is refused (and the process itself still reads its own)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

SCRIPT = r"""
import os, pathlib, subprocess, sys
from proxy.process.hardening import forbid_process_inspection

def child_reads_parent() -> str:
    code = "import os, pathlib; p = pathlib.Path(f'/proc/{os.getppid()}/environ')\n"
    code += "try: print('read' if b'HARDENING_PROBE=x' in p.read_bytes() else 'empty')\n"
    code += "except PermissionError: print('refused')"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip()

before = child_reads_parent()
ok = forbid_process_inspection()
after = child_reads_parent()
own = b"HARDENING_PROBE=x" in pathlib.Path(f"/proc/{os.getpid()}/environ").read_bytes()
print(before, ok, after, own)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_DUMPABLE is Linux only")
def test_children_lose_access_to_the_proxys_proc_entries() -> None:
    prefix: list[str] = []
    if os.geteuid() == 0:  # root's capabilities pass the check: test as an ordinary user would run
        setpriv = shutil.which("setpriv")
        assert setpriv is not None, "setpriv (util-linux) is needed to drop root's capabilities"
        prefix = [setpriv, "--bounding-set", "-all", "--inh-caps", "-all", "--"]
    out = subprocess.run(
        [*prefix, sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "HARDENING_PROBE": "x"},
        check=True,
    )
    assert out.stdout.split() == ["read", "True", "refused", "True"], out.stderr
