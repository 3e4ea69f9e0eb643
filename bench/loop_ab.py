"""The loop's step, now against an earlier commit's ``loop.py``, in one process.

``loop_overhead.py`` compares tooldeck with its peers; a change *inside* the loop moves
tooldeck's row by a microsecond or two, less than what load on a shared machine moves it
between two runs. This puts both Sessions in one process: the package as it is now, and
the ``Session`` of ``git show REV:src/tooldeck/loop.py`` loaded beside it as
``tooldeck._loop_before`` (so REV's loop.py must import from modules that still exist).
Blocks alternate old / new; in each block, the fastest of ``--reps`` 0-step turns and the
fastest of ``--reps`` 20-step turns (the minimum is what load inflates least). Reported:
(fastest 20-step − fastest 0-step) / 20 over all blocks, and the median over blocks.

``--against-src DIR`` instead loads a whole other checkout's package (``DIR/tooldeck``, e.g.
``/tmp/base/src``) beside this one as ``tooldeck_before`` and takes its ``Session``: a
change below the loop (the dispatcher) is then measured too.

Run: ``uv run python bench/loop_ab.py [--against REV | --against-src DIR] [--blocks 30]
[--reps 15] [--runs 3]``
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
STEPS = 20


def child(blocks: int, reps: int, whole: bool) -> None:
    import importlib

    import tooldeck
    from tooldeck.loop import Session as New
    from tooldeck.testing import ScriptedModel, call, reply

    old_package = "tooldeck_before" if whole else "tooldeck"
    Old = importlib.import_module(
        "tooldeck_before.loop" if whole else "tooldeck._loop_before"
    ).Session
    before: Any = importlib.import_module(old_package)
    scripted: Any = importlib.import_module(f"{old_package}.providers.scripted")

    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    tools = {"old": before.tool(add), "new": tooldeck.tool(add)}
    models = {"old": (before.ScriptedModel, scripted.call, scripted.reply)}
    models["new"] = (ScriptedModel, call, reply)

    ids = itertools.count()

    def script(k: int, name: str) -> Any:
        _, call, reply = models[name]
        left = [k]

        def fn(request: Any) -> Any:
            if left[0] == 0:
                return reply("done")
            left[0] -= 1
            return reply(call("add", '{"a": 1, "b": 2}', call_id=f"c{next(ids)}"))

        return fn

    async def one(name: str, k: int) -> float:
        session, model = kinds[name], models[name][0]
        s = session(model(script(k, name)), [tools[name]], max_steps=k + 2)
        t0 = time.perf_counter()
        result = await s.run("Add some numbers.")
        took = time.perf_counter() - t0
        if result.output != "done" or len(result.tool_outputs) != k:
            raise AssertionError(f"the run went wrong: {result.reason}")
        return took

    kinds = {"old": Old, "new": New}

    async def main() -> None:
        for name in kinds:
            for _ in range(30):
                await one(name, 0)
                await one(name, STEPS)
        best = {name: [float("inf"), float("inf")] for name in kinds}
        per_block: dict[str, list[float]] = {name: [] for name in kinds}
        for b in range(blocks):
            for name in ("old", "new") if b % 2 == 0 else ("new", "old"):
                gc.collect()
                zero = min([await one(name, 0) for _ in range(reps)])
                full = min([await one(name, STEPS) for _ in range(reps)])
                per_block[name].append((full - zero) / STEPS)
                best[name] = [min(best[name][0], zero), min(best[name][1], full)]
        for name in kinds:
            zero, full = best[name]
            print(
                f"{name}: fastest 0-step turn {zero * 1e6:.0f} µs, fastest {STEPS}-step turn "
                f"{full * 1e6:.0f} µs, per step {(full - zero) / STEPS * 1e6:.2f} µs; "
                f"median over blocks {statistics.median(per_block[name]) * 1e6:.2f} µs"
            )

    asyncio.run(main())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", default="3323fb7", help="the commit of the old loop.py")
    parser.add_argument("--blocks", type=int, default=30)
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--runs", type=int, default=3, help="processes, one after another")
    parser.add_argument("--against-src", help="a src directory: its whole package is the old")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--whole", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.blocks, args.reps, args.whole)
        return
    if args.against_src:
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copytree(Path(args.against_src) / "tooldeck", Path(tmp) / "tooldeck_before")
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([tmp, str(ROOT / "src")])}
            print(f"# old: {args.against_src}; new: src/ now; load: {os.getloadavg()}")
            for _ in range(args.runs):
                command = [sys.executable, __file__, "--child", "--whole"]
                command += [f"--blocks={args.blocks}", f"--reps={args.reps}"]
                subprocess.run(command, env=env, check=True)
            print(f"# load after: {os.getloadavg()}")
        return
    old = subprocess.run(
        ["git", "show", f"{args.against}:src/tooldeck/loop.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    with tempfile.TemporaryDirectory() as tmp:
        package = Path(tmp) / "tooldeck"
        shutil.copytree(ROOT / "src" / "tooldeck", package)
        (package / "_loop_before.py").write_text(old, encoding="utf-8")
        env = {**os.environ, "PYTHONPATH": tmp}
        print(f"# old: loop.py at {args.against}; new: src/ now; load: {os.getloadavg()}")
        for _ in range(args.runs):
            command = [sys.executable, __file__, "--child", f"--blocks={args.blocks}"]
            subprocess.run([*command, f"--reps={args.reps}"], env=env, check=True)
        print(f"# load after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
