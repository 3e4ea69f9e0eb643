"""Approvals answered out of band: the call waits while a human runs ``tooldeck approve``.

A call waits here under ``--approvals out-of-band``, or under ``auto`` (a client without
elicitation) while a ``tooldeck approve --watch`` watches the folder
(:meth:`ApprovalDesk.watched`): someone is there to answer.

For a client that cannot ask its user (no MCP elicitation), an ask of the gateway's
policy is written as a pending-approval file, in the format of
:class:`~tooldeck.policy.PendingFiles` (``tooldeck.pending/1``), to
``<state>/approvals/<call id>.pending.json``, one file per waiting call, with a
``waiter`` entry naming the gateway. The gateway logs one line on stderr with the
command to run, ``tooldeck approve <file>``, and the call waits (bounded by
:attr:`ApprovalDesk.timeout`) for ``<call id>.answers.json`` beside it.

The two sides agree under the pending file's inter-process lock
(:func:`tooldeck.policy._files.locked`): ``tooldeck approve`` writes the answers only
while the pending file it answered is still there, unchanged; the gateway takes the
answers and removes both files, or, giving up (the timeout, the gateway shutting down,
the call cancelled), removes the pending file when no answers are there. So an answer
is either taken by the waiting call or refused to the approver, never lost in between.

What the answers can do is what :class:`~tooldeck.policy.PolicyApprover` (which wraps
this approver) lets them: edited arguments are validated and judged by the policy
again, approve-always records a grant for the session's tool but never for a DANGEROUS
one, anything but an explicit approval is a deny, and every answer (and every give-up)
is audited. A give-up is a deny whose message tells the model what a person can do.

Whoever can write to ``<state>/approvals`` can approve, so the folder is made private
(``0700``) and refused when it is writable by others (:func:`approvals_folder`).
"""

from __future__ import annotations

import logging
import math
import os
import stat
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import anyio.to_thread

from ..approvals import (
    ApprovalAnswer,
    ApprovalRequest,
    Approver,
    PendingCall,
    PendingStep,
    not_answered,
)
from ..errors import TooldeckError
from ..policy._files import locked, watched
from ..policy.pending import PendingFiles, load_answers
from ..tools import Tier, Tool
from ..transcript import AssistantMessage, StopReason, Usage
from .approval import Progress, progress_while

__all__ = [
    "DEFAULT_TIMEOUT",
    "WHO",
    "ApprovalDesk",
    "ApprovalsFolderError",
    "approvals_folder",
]

_log = logging.getLogger("tooldeck.gateway")
DEFAULT_TIMEOUT = 120.0
"""Seconds a call waits for ``tooldeck approve`` by default."""
POLL_SECONDS = 0.05  # one stat() of the answers file per waiting call
WATCHED_SECONDS = 1.0
"""How long a look at whether ``tooldeck approve --watch`` runs holds."""
WHO = "tooldeck approve (out of band)"
"""Who approved, in the audit log, for answers given with ``tooldeck approve``."""


class ApprovalsFolderError(TooldeckError, ValueError):
    """The approvals folder cannot be made private (or is not)."""


def approvals_folder(state: Path) -> Path:
    """``<state>/approvals``, made (``0700``) if missing; raises
    :class:`ApprovalsFolderError` if it is not a folder of this user's that only this
    user can write to (anyone who can write there can approve calls)."""
    folder = state / "approvals"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.lstat(folder)
    except OSError as exc:
        raise ApprovalsFolderError(f"{folder} cannot be made: {exc}") from exc
    if not stat.S_ISDIR(info.st_mode):
        raise ApprovalsFolderError(f"{folder} is not a folder")
    if hasattr(os, "geteuid") and info.st_uid != os.geteuid():
        raise ApprovalsFolderError(f"{folder} belongs to another user")
    if info.st_mode & 0o022:
        raise ApprovalsFolderError(
            f"{folder} can be written by other users (mode {stat.S_IMODE(info.st_mode):o}), "
            f"who could then approve calls; chmod 700 {folder}"
        )
    return folder


class ApprovalDesk:
    """Waiting calls of one gateway, and the files they wait on. See the module docstring.

    :meth:`close` makes every waiting call give up at once (denied, with a message), as
    the gateway shuts down; :attr:`waiting` counts the calls waiting now.
    """

    def __init__(self, folder: Path, timeout: float = DEFAULT_TIMEOUT) -> None:
        if timeout <= 0:
            raise ValueError("the approval timeout must be positive")
        self.folder = folder
        self.timeout = timeout
        self.files = PendingFiles(folder)
        self.closing = False
        self.waiting = 0
        self._watched = False
        self._look_again = -math.inf

    def close(self) -> None:
        self.closing = True

    def watched(self) -> bool:
        """Whether a ``tooldeck approve --watch`` watches this desk's folder: looked at
        most once per :data:`WATCHED_SECONDS` (a lock attempt costs a fraction of a
        millisecond, and this is asked for every call of a client without elicitation)."""
        now = time.monotonic()
        if now >= self._look_again:
            self._watched = watched(self.folder)
            self._look_again = now + WATCHED_SECONDS
        return self._watched

    def asker(
        self,
        session_id: str,
        *,
        tier_of: Callable[[Tool], Tier],
        shown: Callable[[Tool], str],
        progress: Progress | None = None,
        on_give_up: Callable[[ApprovalRequest, str], None] | None = None,
    ) -> Approver:
        """An approver for one call of gateway session ``session_id``.

        ``tier_of`` gives the effective tier (shown, and deciding whether approve-always
        is offered), ``shown`` the name the client knows the tool by, ``progress`` a
        client progress report (sent every :data:`.approval.PROGRESS_SECONDS` while the
        call waits),
        ``on_give_up`` is told when a call stops waiting without answers because it was
        cancelled (a timeout or a shutdown is a deny answer, audited as such).
        """

        async def ask(requests: Sequence[ApprovalRequest]) -> list[ApprovalAnswer]:
            if not requests:
                return []
            return await self._wait(session_id, requests, tier_of, shown, progress, on_give_up)

        return ask

    # -- one wait ---------------------------------------------------------------------------
    def _write(
        self,
        key: str,
        session_id: str,
        requests: Sequence[ApprovalRequest],
        tier_of: Callable[[Tool], Tier],
        shown: Callable[[Tool], str],
    ) -> Path:
        calls = tuple(
            PendingCall(r.call.call_id, shown(r.tool), tier_of(r.tool), r.reason, r.display)
            for r in requests
        )
        message = AssistantMessage(
            [r.call for r in requests], StopReason.TOOL_CALLS, provider="mcp-client"
        )
        deadline = datetime.now(UTC) + timedelta(seconds=self.timeout)
        self.files.save(
            key,
            [],
            PendingStep(message, (), calls, 0, 0, Usage()),
            waiter={
                "by": f"tooldeck serve (pid {os.getpid()})",
                "gateway_session": session_id,
                "until": deadline.isoformat(timespec="seconds"),
            },
        )
        return self.files.path(key)

    def _settle(self, key: str, give_up: bool) -> dict[str, ApprovalAnswer] | str | None:
        """Under the pending file's lock: the answers (both files removed), or, with
        ``give_up``, ``None`` after removing the pending file; a string says why the
        answers file could not be used (both files removed)."""
        pending = self.files.path(key)
        answers = pending.with_name(f"{key}.answers.json")
        taken: dict[str, ApprovalAnswer] | str | None = None
        with locked(pending):
            if answers.exists():
                try:
                    taken = load_answers(answers, session_id=key)
                except (OSError, ValueError, UnicodeDecodeError) as exc:
                    taken = f"the answers file could not be used ({exc})"
            elif not give_up:
                return None
            pending.unlink(missing_ok=True)
            answers.unlink(missing_ok=True)
            self.files.forget(key)
            # nobody needs the lock of this key again (a late approver finds no pending
            # file under whichever lock it gets), so it goes too
            Path(f"{pending}.lock").unlink(missing_ok=True)
        return taken

    async def _wait(
        self,
        session_id: str,
        requests: Sequence[ApprovalRequest],
        tier_of: Callable[[Tool], Tier],
        shown: Callable[[Tool], str],
        progress: Progress | None,
        on_give_up: Callable[[ApprovalRequest, str], None] | None,
    ) -> list[ApprovalAnswer]:
        key = requests[0].call.call_id
        names = ", ".join(shown(r.tool) for r in requests)
        if self.closing:
            return [not_answered(_SHUTTING_DOWN) for _ in requests]
        path = await anyio.to_thread.run_sync(
            self._write, key, session_id, requests, tier_of, shown
        )
        _log.warning(
            "%s needs approval (%s); it waits up to %g s: run  tooldeck approve %s",
            names,
            requests[0].reason,
            self.timeout,
            path,
        )
        self.waiting += 1
        deadline = anyio.current_time() + self.timeout
        why = ""
        waiting = f"waiting for approval: tooldeck approve {path}"
        try:
            async with progress_while(progress, waiting, self.timeout):
                while True:
                    give_up = self.closing or anyio.current_time() >= deadline
                    answers = path.with_name(f"{key}.answers.json")
                    if give_up or answers.exists():
                        taken = await anyio.to_thread.run_sync(self._settle, key, give_up)
                        if isinstance(taken, dict):
                            _log.info("%s: answered with tooldeck approve", names)
                            return [
                                taken.get(r.call.call_id, not_answered("no answer was given"))
                                for r in requests
                            ]
                        if isinstance(taken, str):
                            _log.warning("%s: %s; denied", names, taken)
                            return [not_answered(taken) for _ in requests]
                        if give_up:
                            why = _SHUTTING_DOWN if self.closing else _timed_out(self.timeout, path)
                            _log.warning("%s: %s", names, why.split(";")[0])
                            return [not_answered(why) for _ in requests]
                    await anyio.sleep(POLL_SECONDS)
        except BaseException:
            why = why or "the call was cancelled while it waited for approval"
            with anyio.CancelScope(shield=True):
                try:
                    await anyio.to_thread.run_sync(self._settle, key, True)
                except Exception as exc:
                    _log.warning("the pending file %s was not removed: %s", path, exc)
            if on_give_up is not None:
                for request in requests:
                    on_give_up(request, why)
            raise
        finally:
            self.waiting -= 1


_SHUTTING_DOWN = (
    "the gateway is shutting down, so nobody can approve the call now; it was not run. "
    "Call it again once the gateway is back, or ask the user to allow the tool in the "
    "gateway's policy file"
)


def _timed_out(timeout: float, path: Path) -> str:
    return (
        f"nobody approved the call within {timeout:g} s (it waited for: tooldeck approve "
        f"{path}); it was not run. Tell the user the call needs their approval, and call it "
        "again when they are ready to run tooldeck approve on the file the gateway names, "
        "or ask them to allow the tool in the gateway's policy file"
    )
