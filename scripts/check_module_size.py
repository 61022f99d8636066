"""Fails when a module under the given folders is longer than the limit, naming each one: a module should
fit in one reading (docs/architecture.md); bench/ is code people read too. Usage:
check_module_size.py FOLDER [FOLDER ...] LIMIT"""

import sys
from pathlib import Path


def main(folders: list[str], limit: int) -> int:
    long = [
        (n, path)
        for folder in folders
        for path in sorted(Path(folder).rglob("*.py"))
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > limit
    ]
    for n, path in long:
        print(f"{path}: {n} lines (more than {limit}); split it along its seams", file=sys.stderr)
    return 1 if long else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:-1], int(sys.argv[-1])))
