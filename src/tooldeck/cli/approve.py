"""``tooldeck approve FILE``: answer a waiting run's calls at the terminal; ``--watch
STATE``: a gateway's waiting calls, as they come.

The prompt itself (:class:`~tooldeck.policy.prompt.PromptApprover`,
:func:`~tooldeck.policy.prompt.ask_calls`) is library code in
:mod:`tooldeck.policy.prompt`, imported from there (loaded on first use, so that
``tooldeck approve --help`` loads none of the policy engine).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from .report import existing_file, user_error

__all__ = ["approve_command"]


def approve_command(
    pending: Annotated[
        Path | None,
        typer.Argument(
            metavar="[FILE]", help="A waiting run's <session>.pending.json (or --watch)."
        ),
    ] = None,
    answers: Annotated[
        Path | None,
        typer.Option("--answers", "-o", help="Where to write the answers (JSON)."),
    ] = None,
    watch: Annotated[
        Path | None,
        typer.Option(
            "--watch",
            metavar="STATE",
            help="Answer the calls a gateway (tooldeck serve --state STATE, by default "
            "~/.tooldeck/gateway) holds waiting, as they come, until Ctrl-C or the input "
            "ends; while it runs, that gateway's calls from clients without elicitation "
            "wait for you instead of being denied.",
        ),
    ] = None,
) -> None:
    """Answer the calls a waiting run needs approved; writes an answers file for resume."""
    console = Console()
    if watch is not None:
        if pending is not None or answers is not None:
            raise user_error(
                "--watch answers each waiting call beside it; leave out FILE and --answers"
            )
        _watch(watch, console)
        return
    if pending is None:
        raise user_error(
            "give FILE, a waiting run's <session>.pending.json, or --watch STATE to answer "
            "a gateway's calls as they come"
        )
    _answer(pending, answers, console)


def _answer(
    pending: Path, answers: Path | None, console: Console, *, watching: bool = False
) -> bool:
    """Ask about the calls of ``pending`` and write the answers; False when ``watching``
    and the input ended before every call was answered (then nothing is written)."""
    from .._config_files import ConfigFileError, decode_text, parse_json, read_bytes
    from ..approvals import ApprovalAnswer
    from ..policy._pending_json import MAX_DEPTH, decode_pending
    from ..policy.prompt import INPUT_ENDED, ask_calls

    what = "a waiting run's <session>.pending.json"
    existing_file(pending, what)
    try:
        read = read_bytes(pending)  # what is answered: compared again before writing
        found = decode_pending(parse_json(decode_text(read), max_depth=MAX_DEPTH), pending)
    except OSError as exc:
        raise user_error(f"{pending}: cannot read it ({exc.strerror or exc}); give {what}") from exc
    except ConfigFileError as exc:  # the file, checked: its size, encoding, nesting, format
        raise user_error(f"{pending}: {exc.problem}; give {what}") from exc
    session_id, step, waiter = found.session_id, found.step, found.waiter
    beside = pending.with_name(f"{session_id}.answers.json")
    if waiter and answers is not None and answers.absolute() != beside.absolute():
        raise user_error(
            f"{pending} is a call that waits for its answers beside it, in {beside}; "
            "leave out --answers"
        )
    target = answers or beside
    if target.is_dir():  # said before any question, so no answer is lost
        raise user_error(f"{target} is a folder; give --answers a file to write")
    if not target.parent.is_dir():
        raise user_error(
            f"{target.parent} does not exist; give --answers a file in a folder that does"
        )
    waits = f" ({escape(str(waiter['by']))} waits for them)" if waiter else ""
    console.print(
        f"Session [bold]{session_id}[/bold] waits for {len(step.calls)} answer(s){waits}.",
        highlight=False,
    )
    given = ask_calls(step.calls, sys.stdin, console)
    if watching and any(not a.by_user and a.message == INPUT_ENDED for a in given):
        return False  # nobody answered these: they stay waiting (for their timeout)
    by_id: dict[str, ApprovalAnswer] = {
        c.call_id: a for c, a in zip(step.calls, given, strict=True)
    }
    _save_if_still_waiting(pending, read, target, session_id, by_id, waiter)
    summary: dict[str, Any] = {
        "approved": sum(a.approved for a in given),
        "denied": sum(not a.approved for a in given),
    }
    then = (
        "The waiting call takes them now."
        if waiter
        else "Resume with session.resume(tooldeck.policy.load_answers(path))."
    )
    console.print(
        f"Wrote {target} ({summary['approved']} approved, {summary['denied']} denied). {then}",
        highlight=False,
    )
    return True


def _watch(state: Path, console: Console) -> None:
    """``--watch``: answer the gateway's waiting calls as their files appear, holding the
    folder's watcher lock meanwhile (which tells the gateway someone is here)."""
    import time

    from ..policy._files import watching

    folder = state.expanduser() / "approvals"
    if not folder.is_dir():
        raise user_error(
            f"{folder} does not exist; give --watch the --state folder of a tooldeck serve "
            "(by default ~/.tooldeck/gateway) once the gateway has started"
        )
    with watching(folder) as mine:
        if not mine:
            raise user_error(
                f"another tooldeck approve --watch watches {folder}; answer there, or stop it"
            )
        console.print(
            f"Watching {folder}: calls waiting for approval are asked here as they come "
            "(Ctrl-C stops).",
            highlight=False,
        )
        asked: set[tuple[str, int]] = set()  # each file once, as it was when asked
        try:
            while True:
                waiting = _waiting(folder)
                asked &= set(waiting)  # forget the files that are gone
                for key in waiting:
                    if key in asked:
                        continue
                    asked.add(key)
                    try:
                        if not _answer(folder / key[0], None, console, watching=True):
                            console.print("The input ended: stopped watching.")
                            return
                    except typer.Exit:
                        pass  # said in one line (the call stopped waiting...): watch on
                time.sleep(0.1)
        except KeyboardInterrupt:
            console.print("Stopped watching.")


def _waiting(folder: Path) -> list[tuple[str, int]]:
    """``(name, mtime)`` of the pending files in ``folder``, oldest first."""
    found: list[tuple[int, str]] = []
    for path in folder.glob("*.pending.json"):
        try:
            found.append((path.stat().st_mtime_ns, path.name))
        except OSError:
            continue  # answered, or given up, meanwhile
    return [(name, mtime) for mtime, name in sorted(found)]


def _save_if_still_waiting(
    pending: Path,
    read: bytes,
    target: Path,
    session_id: str,
    answers: dict[str, Any],
    waiter: dict[str, Any] | None,
) -> None:
    """Write the answers only if the pending file is still the one answered, under its
    lock: a call that stopped waiting meanwhile (timed out, cancelled, its gateway
    stopped) or a step resumed elsewhere gets no answers it would never read."""
    from .._config_files import ConfigFileError, read_bytes
    from ..policy._files import StateLocked, locked
    from ..policy.pending import save_answers

    try:
        with locked(pending):
            try:  # at most as much as was answered could be: a larger file has changed
                now: bytes | None = read_bytes(pending)
            except (FileNotFoundError, ConfigFileError):
                now = None
            if now != read:
                if waiter:
                    raise user_error(
                        f"{pending}: the call stopped waiting while you answered (it timed "
                        "out, was cancelled, or the gateway stopped); nothing was approved; "
                        "ask for the call again"
                    )
                raise user_error(
                    f"{pending} changed or was resumed while you answered; nothing was "
                    f"written; run tooldeck approve {pending} again"
                )
            save_answers(target, session_id, answers)
    except StateLocked as exc:
        raise user_error(f"{exc}") from exc
