"""``python _profiled.py OUT -m MODULE ARGS...``: run MODULE; SIGUSR2 starts a cProfile
(CPU time, not wall time: a busy machine does not count), SIGUSR1 writes it to OUT
(bench/gateway_profile.py: around the measured calls only, start-up left out)."""

from __future__ import annotations

import cProfile
import runpy
import signal
import sys
import time

out, _, module, *rest = sys.argv[1:]
profile = cProfile.Profile(time.process_time)


def dump(*_: object) -> None:
    profile.disable()
    profile.dump_stats(out + ".part")
    import os

    os.replace(out + ".part", out)


def start(*_: object) -> None:
    profile.enable()


signal.signal(signal.SIGUSR1, dump)
signal.signal(signal.SIGUSR2, start)
sys.argv = [module, *rest]
runpy.run_module(module, run_name="__main__", alter_sys=True)
