"""A bare stdio relay for bench/gateway_proxy.py: starts COMMAND and copies bytes both
ways, nothing else (the floor of any process in between).

    python bench/_relay.py COMMAND ARGS...
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading


def pump(src: int, dst: int) -> None:
    while True:
        data = os.read(src, 65_536)
        if not data:
            break
        view = memoryview(data)
        while view:
            view = view[os.write(dst, view) :]


def main() -> None:
    child = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None
    out = threading.Thread(target=pump, args=(child.stdout.fileno(), 1), daemon=True)
    out.start()
    try:
        pump(0, child.stdin.fileno())
    finally:
        child.stdin.close()
        child.wait()
        out.join(1)


if __name__ == "__main__":
    main()
