"""``python tests/_zygote_run.py -m MODULE ARGS...``: run ``MODULE`` as ``python -m MODULE
ARGS...`` would, by the tests' fork server when there is one (tests/_zygote.py). The tests
start ``tooldeck serve`` this way (tests/gateway_client.py)."""

import sys

from mcp_servers._zygote_client import handoff

if len(sys.argv) < 3 or sys.argv[1] != "-m":
    sys.exit("usage: _zygote_run.py -m MODULE [ARGS...]")
module = sys.argv[2]
del sys.argv[1:3]  # as -m leaves them: argv[0], then the module's arguments
handoff(module)
import os  # noqa: E402
import runpy  # noqa: E402

sys.path[0] = os.getcwd()  # not this folder: -m puts the working folder first

runpy._run_module_as_main(module)  # type: ignore[attr-defined]
