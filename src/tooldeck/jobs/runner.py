"""Running background jobs: :class:`JobManager` (embedded) and what a job needs to run.

A job is a sub-agent session that runs apart from the turn that started it. Every job is
a row in the ``jobs`` table first (:mod:`tooldeck.jobs.store`); a manager runs it:

- **embedded** (the default): the manager of the process that started it runs it as an
  asyncio task, at most ``concurrency`` at once; the others wait ``pending`` and are
  claimed as slots free up. A job started by a tool keeps its parent's live protection
  (policy, result hooks, tools) in memory (:class:`LiveJob`). A process whose manager
  has a :class:`JobRuntime` also runs the pending jobs nobody holds: jobs made by a
  schedule, and jobs handed back after their lease lapsed;
- **dbos**: the row is written and the job is enqueued on the ``tooldeck_jobs`` DBOS
  queue; a ``tooldeck worker`` runs it with the worker's runtime (see
  :mod:`tooldeck.jobs.durable`).

While a job runs, its manager renews the job's ``heartbeat_at`` every ``heartbeat``
seconds and reads its cancellation flag; a job whose heartbeat is older than ``lease``
belongs to a process that died (or was cut off from the database for that long), and
the next manager that looks (every ``poll`` seconds) resumes it (``on_lost='resume'``,
attempts left: it starts again from its task) or marks it ``lost``, saying whose
heartbeat stopped. A manager that closes normally hands its running jobs back as
``pending`` at once. Every store call rides out a dropped connection (the store's
``retry_for``); a job's end is written for as long as its lease, so a job that answered
across a database blip is recorded as it ended and never run again.

A job is headless (:mod:`tooldeck.jobs.policy`): its protection is its parent's, as for
``delegate_task``, with the headless denylist first and every ask denied; its approver
denies everything. A job run away from its session (a schedule's, a DBOS job, one resumed
elsewhere) rebuilds its parent's policy from the row (``spec['creator']``) and gets no
more tools than its parent had; a runtime's policy must allow its calls too; a job whose
record cannot be rebuilt ends ``failed`` ("not run: ...") without its model being called.
When it ends, its full result is stored in the starting session's offload store (the
recall reference goes in the row) and the session's next turn sees one notice
(:mod:`tooldeck.jobs.notices`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import socket
import uuid
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._call import ResultHook
from ..approvals import PolicyHook, policy_decision
from ..assembly import Toolset, TurnContext
from ..context import AbortSignal
from ..events import CallStarted, Event, ModelStepStarted
from ..loop import RunResult, Session
from ..model import Model
from ..offload import OffloadStore
from ..offload.defaults import child_hooks, store_of
from ..policy import SessionPolicy
from ..policy.protection import Protection
from ..registry import ToolRegistry
from ..result import ToolResult
from ..transcript import StopReason, ToolCall
from ..workflows.store.base import WorkflowStore
from .policy import CreatorPolicyError, creator_policy, creator_tools, job_policy
from .store import JobRecord, JobState, JobTable, NewJob, by_id_or_prefix

if TYPE_CHECKING:
    from ..workflows.engine import WorkflowEngine

__all__ = ["registry_tools"]

_log = logging.getLogger("tooldeck.jobs")

JOB_INSTRUCTIONS = (
    "You are running a background job: nobody is watching and nobody can approve "
    "anything, so tools that need approval are refused. Do the task in the user message "
    "with your tools, then answer with the result; your final answer is reported to the "
    "session that started the job."
)
SUMMARY_CHARS = 300


def summarise_output(text: str, limit: int = SUMMARY_CHARS) -> str:
    """One line of at most ``limit`` characters from a job's answer."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


@dataclass(frozen=True)
class LiveJob:
    """What a job started from a turn in this process inherits from that turn."""

    model: Model
    tools: Toolset
    policy: PolicyHook | Protection  # the starting session's (its dispatcher's hook)
    result_hooks: tuple[ResultHook, ...] = ()
    parent_hooks: tuple[ResultHook, ...] = ()
    home: Path | None = None
    instructions: str | None = None
    web_provider: Any = None  # the turn's binding: a provider, a name, or None


@dataclass
class JobRuntime:
    """How this process runs a job it did not start (queued, scheduled or resumed).

    ``model_for(job)`` makes its model; ``tools_for(job)`` its tools (default: none),
    limited to those its creator had; ``policy`` is this process's policy (the
    organization's, say): a job that records its creator's policy runs under both (both
    must allow), a job made without one (through the Python API) under this one alone
    (default: an empty :class:`~tooldeck.policy.SessionPolicy`: tiers decide, WRITE is
    denied); headless either way;
    ``home`` the jobs' home directory (their recall references are stored there);
    ``engine`` starts the workflows of workflow jobs (scheduled workflows).
    """

    model_for: Callable[[JobRecord], Model]
    tools_for: Callable[[JobRecord], Toolset] | None = None
    policy: PolicyHook | Protection | None = None
    home: Path | None = None
    result_hooks: Sequence[ResultHook] = ()
    engine: WorkflowEngine | None = None
    instructions: str = JOB_INSTRUCTIONS
    web_provider: Any = None  # a provider, a provider name, or None


def registry_tools(
    registry: ToolRegistry, home: Path | None = None
) -> Callable[[JobRecord], Toolset]:
    """A ``JobRuntime.tools_for``: the registry's tools for the job's turn, limited to the
    names its starting turn recorded (``spec['tools']``) when there are any."""

    def tools_for(job: JobRecord) -> Toolset:
        turn = TurnContext(session_id=job.session_id, home=home or Path.cwd())
        made = registry.toolset(turn)
        names = job.spec.get("tools")
        return made.only(names) if isinstance(names, list) else made

    return tools_for


@dataclass
class _Running:
    task: asyncio.Task[None]
    signal: AbortSignal
    steps: int = 0
    cancelled: str | None = None


async def _until_aborted(
    turn: Coroutine[Any, Any, RunResult], signal: AbortSignal
) -> RunResult | None:
    """Run the turn until it ends, or until the signal fires (then the turn is cancelled,
    even in the middle of a model call, which does not look at the signal)."""
    job = asyncio.ensure_future(turn)
    stop = asyncio.ensure_future(signal.wait())
    try:
        done, _ = await asyncio.wait({job, stop}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        job.cancel()
        stop.cancel()
        await asyncio.wait({job, stop})
        raise
    stop.cancel()
    if job in done:
        return job.result()
    job.cancel()
    await asyncio.wait({job})
    return None


def _owner_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:4]}"


class JobManager:
    """Starts, runs, cancels and recovers jobs in one store (see the module docstring).

    Use ``async with manager:`` (or :meth:`open` / :meth:`close`): that starts the loop
    that renews leases, reads cancellations, recovers jobs of dead processes and claims
    pending ones.
    """

    def __init__(
        self,
        store: WorkflowStore,
        runtime: JobRuntime | None = None,
        *,
        concurrency: int = 4,
        owner: str | None = None,
        lease: float = 30.0,
        heartbeat: float | None = None,
        poll: float = 1.0,
        dispatch: str = "embedded",
        queue: Any = None,
        max_steps: int = 20,
        time_budget: float = 900.0,
        tool_timeout: float | None = 120.0,
        serve_pending: bool = True,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if dispatch not in ("embedded", "dbos"):
            raise ValueError("dispatch must be 'embedded' or 'dbos'")
        if dispatch == "dbos" and queue is None:
            raise ValueError("dispatch='dbos' needs a queue (tooldeck.jobs.DbosJobQueue)")
        self.store = store
        self.table = JobTable(store)
        self.runtime = runtime
        self.concurrency = concurrency
        self.owner = owner or _owner_name()
        self.lease = lease
        self.heartbeat = heartbeat if heartbeat is not None else max(0.05, lease / 5)
        if self.heartbeat >= lease:
            raise ValueError("the heartbeat must be shorter than the lease")
        self.poll = poll
        self.dispatch = dispatch
        self.queue = queue
        self.max_steps = max_steps
        self.time_budget = time_budget
        self.tool_timeout = tool_timeout
        self.serve_pending = serve_pending
        self._live: dict[str, LiveJob] = {}
        self._running: dict[str, _Running] = {}
        self._wake = asyncio.Event()
        self._claiming = asyncio.Lock()
        self._ended = asyncio.Event()  # set (and replaced) whenever a job here ends
        self._loop_task: asyncio.Task[None] | None = None
        self._closing = False
        self.started = 0  # jobs this manager ran (for tests and reports)
        self.peak = 0

    # -- life cycle ---------------------------------------------------------------------------
    async def open(self) -> None:
        if self._loop_task is None:
            self._closing = False
            self._loop_task = asyncio.create_task(self._serve(), name=f"tooldeck-jobs:{self.owner}")

    async def close(self, *, grace: float = 5.0, hand_back: bool = True) -> None:
        """Stop the loop; running jobs are stopped and handed back as ``pending``.

        ``hand_back=False`` (a DBOS worker) leaves running jobs alone: their DBOS
        workflows stay pending and are recovered by another worker, which takes the jobs
        over.
        """
        self._closing = True
        loop, self._loop_task = self._loop_task, None
        if loop is not None:
            loop.cancel()
            await asyncio.gather(loop, return_exceptions=True)
        if not hand_back:
            if self.queue is not None:
                await self.queue.close()
            return
        running = list(self._running.values())
        for job in running:
            job.signal.abort("the process running the job is stopping")
        tasks = [r.task for r in running]
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=grace)
            for t in late:
                t.cancel()
            if late:
                await asyncio.wait(late, timeout=grace)
        if self.queue is not None:
            await self.queue.close()

    async def __aenter__(self) -> JobManager:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def running(self) -> tuple[str, ...]:
        return tuple(self._running)

    # -- starting -----------------------------------------------------------------------------
    async def start(self, job: NewJob, live: LiveJob | None = None) -> str:
        """Write ``job`` and have it run (here, or on the DBOS queue); returns its id."""
        if self._loop_task is None and self.dispatch == "embedded":
            raise RuntimeError("the job manager is not open: use `async with manager:`")
        if self.dispatch == "dbos":
            job = dataclasses.replace(job, dispatch="dbos")
            live = None  # a worker runs it, with its own runtime
        if self.dispatch == "dbos":
            await self.table.create(job)
            await self.queue.submit(job.id)
            return job.id
        # Under the claiming lock, so the loop never sees a live job before its row exists
        # (nor claims its row before its live protection is known).
        async with self._claiming:
            free = len(self._running) < self.concurrency
            # with a free slot, written and claimed in one transaction
            await self.table.create(job, claim_for=self.owner if free else None)
            if live is not None:
                self._live[job.id] = live
            if free:
                self._launch(job.id)
                return job.id
        self._wake.set()
        return job.id

    @staticmethod
    def new_id() -> str:
        return f"job-{uuid.uuid4().hex[:12]}"

    def _launch(self, job_id: str) -> None:
        signal = AbortSignal()
        task = asyncio.create_task(self._guarded(job_id, signal), name=f"tooldeck-job:{job_id}")
        self._running[job_id] = _Running(task, signal)
        self.started += 1
        self.peak = max(self.peak, len(self._running))

    async def _guarded(self, job_id: str, signal: AbortSignal) -> None:
        try:
            await self._execute(job_id, signal)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await asyncio.shield(self._release(job_id, "cancelled in its process"))
            raise
        except Exception as exc:  # the job's own failure is in its row; this is a bug
            _log.exception("job %s crashed", job_id)
            with contextlib.suppress(Exception):
                await self._finish(job_id, "failed", error=f"{type(exc).__name__}: {exc}")
        finally:
            self._running.pop(job_id, None)
            self._live.pop(job_id, None)
            self._wake.set()
            ended, self._ended = self._ended, asyncio.Event()
            ended.set()

    async def run_job(self, job_id: str, *, take_over: str | None = None) -> JobRecord | None:
        """Run one job to its end in this task (a durable executor's step calls this).

        ``take_over``: why a job still ``running`` under another owner may be taken (its
        runner died: the executor knows it is the only one running it now). Returns the
        job as it ended, ``None`` when there was nothing to run.
        """
        job = await self.table.get(job_id)
        if job is None or job.terminal:
            return job
        if job.state == "running":
            if (
                take_over is None
                or await self.table.take_over(job_id, self.owner, take_over) is None
            ):
                return await self.table.get(job_id)
        elif await self.table.claim(job_id, self.owner) is None:
            return await self.table.get(job_id)
        signal = AbortSignal()
        this = asyncio.current_task()
        assert this is not None
        self._running[job_id] = _Running(this, signal)
        self.started += 1
        try:
            await self._execute(job_id, signal)
        finally:
            self._running.pop(job_id, None)
        return await self.table.get(job_id)

    # -- the loop -----------------------------------------------------------------------------
    async def _serve(self) -> None:
        loop = asyncio.get_running_loop()
        last_beat = last_poll = -1e9
        while not self._closing:
            now = loop.time()
            try:
                if now - last_beat >= self.heartbeat:
                    last_beat = now
                    await self._beat()
                if now - last_poll >= self.poll or self._wake.is_set():
                    last_poll = now
                    self._wake.clear()
                    await self._take_up()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the database went away: try again next round
                _log.warning("job manager %s: %s", self.owner, exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), min(self.heartbeat, self.poll))

    async def _beat(self) -> None:
        ids = list(self._running)
        if not ids:
            return
        held = await self.table.heartbeat(self.owner, ids)
        for job_id in ids:
            run = self._running.get(job_id)
            if run is None:
                continue
            if job_id not in held:
                run.signal.abort("the job is no longer held by this process")
            elif held[job_id]:
                run.cancelled = run.cancelled or "cancelled"
                run.signal.abort("the job was cancelled")

    async def _take_up(self) -> None:
        async with self._claiming:
            await self._take_up_now()

    async def _take_up_now(self) -> None:
        if self.serve_pending and self.runtime is not None:
            resumed, lost = await self.table.recover(self.lease, self.owner)
            # What is known, not a cause: a lapsed lease may be a process that stopped or
            # one cut off from the database for longer than the lease.
            for job_id, why in resumed:
                _log.warning("job %s was %s", job_id, why)
            for job_id, why in lost:
                _log.warning("job %s is lost: %s", job_id, why)
        free = self.concurrency - len(self._running)
        for job_id in list(self._live):
            if free <= 0:
                return
            if job_id in self._running:
                continue
            if await self.table.claim(job_id, self.owner) is not None:
                self._launch(job_id)
                free -= 1
                continue
            current = await self.table.get(job_id)
            if current is None or current.state != "pending":
                self._live.pop(job_id, None)  # cancelled, or another process has it
        if free > 0 and self.serve_pending and self.runtime is not None:
            for job_id in await self.table.claim_pending(self.owner, free):
                if job_id not in self._running:
                    self._launch(job_id)

    async def _release(self, job_id: str, why: str) -> None:
        """Hand a job this process holds back (``pending``), as if its process had died."""
        await self.table.release(job_id, self.owner, why)

    async def _finish(self, job_id: str, state: JobState, **end: Any) -> bool:
        """Write a job's end. Across dropped connections it is tried for as long as the
        job's lease (not just the store's window): a job that answered is recorded as it
        ended, and nobody runs it again, unless the database stays away past the lease."""
        return await self.table.finish(job_id, self.owner, state, retry_for=self.lease, **end)

    async def _refuse(self, job: JobRecord, why: str) -> None:
        """End a job its creator's policy does not let run: ``failed``, ``not run: why``
        (written as any job's end is), and said in one log line (event ``refused``)."""
        _log.warning(
            "job %s not run: %s",
            job.id,
            why,
            extra={
                "event": "refused",
                "fields": {"job": job.id, "session": job.session_id, "origin": job.origin},
            },
        )
        await self._finish(job.id, "failed", error=f"not run: {why}")

    # -- cancelling ---------------------------------------------------------------------------
    async def cancel(self, job_id: str, reason: str = "cancelled") -> tuple[str, bool]:
        """Cancel a job; ``(state, changed)``. A running job stops at its next step."""
        outcome = await self.table.cancel(job_id, reason)
        if outcome is None:
            raise LookupError(f"no job {job_id!r}")
        run = self._running.get(job_id)
        if run is not None:
            run.cancelled = reason
            run.signal.abort(f"the job was cancelled: {reason}")
        if self.dispatch == "dbos" and self.queue is not None and outcome[0] == "cancelled":
            with contextlib.suppress(Exception):
                await self.queue.cancel(job_id)
        return outcome

    async def get(self, job_id: str, session_id: str | None = None) -> JobRecord:
        """A job by id or unique id prefix; ``LookupError`` when there is none.

        ``session_id``: only that session's jobs are looked at (an ambiguous prefix
        names none of another session's)."""
        return await by_id_or_prefix(self.table.get, self.table.find, job_id, session_id, "job")

    async def wait(self, job_id: str, *, poll: float = 0.05) -> JobRecord:
        """Wait until the job has ended (bound it with ``asyncio.timeout()``)."""
        while True:
            job = await self.table.get(job_id)
            if job is None:
                raise LookupError(f"no job {job_id!r}")
            if job.terminal:
                return job
            run = self._running.get(job_id)
            if run is not None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(run.task), poll * 20)
            elif job_id in self._live:  # queued here: wait until some local job ends
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._ended.wait(), poll * 20)
            else:
                await asyncio.sleep(poll)

    # -- running one job ----------------------------------------------------------------------
    async def _execute(self, job_id: str, signal: AbortSignal) -> None:
        job = await self.table.get(job_id)
        if job is None or job.state != "running" or job.owner != self.owner:
            return
        if job.kind == "workflow":
            await self._execute_workflow(job, signal)
            return
        live = self._live.get(job_id)
        try:
            session, home, parent_hooks = self._session_for(job, live, signal)
        except CreatorPolicyError as exc:  # its creator's policy: or it does not run at all
            await self._refuse(job, str(exc))
            return
        if session is None:
            await self._finish(
                job_id,
                "failed",
                error="this process cannot run jobs it did not start (no job runtime)",
            )
            return
        run = self._running.get(job_id)

        async def watch(event: Event) -> None:
            if isinstance(event, ModelStepStarted):
                if run is not None:
                    run.steps = event.step
                stop = await self.table.progress(
                    job_id, self.owner, f"step {event.step}", event.step
                )
                if stop and not signal.aborted:
                    signal.abort("the job was cancelled or taken over")
            elif isinstance(event, CallStarted):
                with contextlib.suppress(Exception):
                    await self.table.progress(
                        job_id, self.owner, event.label, run.steps if run else 0
                    )

        session.events.subscribe(watch)
        result: RunResult | None = None
        error: str | None = None
        budget = float(job.spec.get("time_budget", self.time_budget))
        try:
            async with asyncio.timeout(budget):
                result = await _until_aborted(session.run(job.task, signal=signal), signal)
        except TimeoutError:
            signal.abort("time budget spent")
            error = f"the job ran out of its {budget:g}s time budget"
        await self._conclude(job, signal, result, error, home, parent_hooks)

    def _session_for(
        self, job: JobRecord, live: LiveJob | None, signal: AbortSignal
    ) -> tuple[Session | None, Path | None, tuple[ResultHook, ...]]:
        child_id = f"{job.session_id}.job.{job.id}"
        agent = job.agent or "job"
        if live is not None:
            model, tools = live.model, live.tools
            parent_policy = Protection.of(live.policy)
            hooks, parent_hooks, home = live.result_hooks, live.parent_hooks, live.home
            instructions, web = live.instructions or JOB_INSTRUCTIONS, live.web_provider
        elif self.runtime is not None:
            rt = self.runtime
            home = rt.home
            spec_home = job.spec.get("home")
            if isinstance(spec_home, str) and home is None:
                home = Path(spec_home)
            names: list[str] | None = None
            if "creator" in job.spec:  # its creator's policy, and this process's if any
                creator = job.spec["creator"]
                parent_policy = creator_policy(creator, child_id, home)
                names = creator_tools(creator)
                if rt.policy is not None:
                    parent_policy = parent_policy & Protection.of(rt.policy)
            else:  # a job made through the Python API: this process's policy
                parent_policy = Protection.of(rt.policy or SessionPolicy())
            model = rt.model_for(job)
            tools = rt.tools_for(job) if rt.tools_for is not None else Toolset()
            if names is not None:  # never more tools than its creator had
                tools = tools.only(names)
            hooks, parent_hooks = tuple(rt.result_hooks), tuple(rt.result_hooks)
            instructions, web = rt.instructions, rt.web_provider
        else:
            return None, None, ()
        policy = job_policy(parent_policy, agent, child_id, home)
        visible = [t for t in tools.tools if policy.visible(t)]
        turn = TurnContext(
            session_id=child_id,
            home=home or Path.cwd(),
            can_create_jobs=False,
            web_provider=web,
            signal=signal,
        )
        session = Session(
            model,
            Toolset(visible),
            session_id=child_id,
            instructions=instructions,
            max_steps=int(job.spec.get("max_steps", self.max_steps)),
            protect=policy,
            timeout=self.tool_timeout,
            result_hooks=child_hooks(hooks, child_id),
            turn=turn if home is not None else None,
            guard=True,
        )
        return session, home, parent_hooks

    async def _conclude(
        self,
        job: JobRecord,
        signal: AbortSignal,
        result: RunResult | None,
        error: str | None,
        home: Path | None,
        parent_hooks: Sequence[ResultHook],
    ) -> None:
        run = self._running.get(job.id)
        state: JobState
        cancelled = run.cancelled if run is not None else None
        if signal.aborted and cancelled is None:
            current = await self.table.get(job.id)
            if current is None or current.owner != self.owner or current.state != "running":
                return  # taken over or gone: whoever holds it now writes its end
            if current.cancel_requested:
                cancelled = current.error or "cancelled"
            elif self._closing:
                await self._release(job.id, signal.reason or "the process stopped")
                return
        if cancelled is not None:
            state, error = "cancelled", f"cancelled: {cancelled}"
        elif error is not None or result is None:
            state = "failed"
            error = error or f"stopped: {signal.reason}"
        elif result.stop_reason is StopReason.END_TURN:
            state = "succeeded"
        else:
            state, error = "failed", f"the job stopped without an answer: {result.reason}"
        output = result.output if result is not None else ""
        details: dict[str, Any] = {"output": output}
        if result is not None:
            details.update(
                stop_reason=result.stop_reason.value,
                reason=result.reason,
                steps=result.steps,
                tools_used=list(dict.fromkeys(o.name for o in result.tool_outputs)),
                usage=dataclasses.asdict(result.usage),
            )
        summary = summarise_output(output) if output else (error or state)
        ref = await asyncio.to_thread(
            self._store_result, job, output or summary, home, parent_hooks
        )
        await self._finish(
            job.id,
            state,
            summary=summary,
            result=details,
            result_ref=ref,
            error=error,
            steps=result.steps if result is not None else (run.steps if run else 0),
        )

    def _store_result(
        self, job: JobRecord, text: str, home: Path | None, parent_hooks: Sequence[ResultHook]
    ) -> str | None:
        """Keep the whole answer in the starting session's offload store; its ref id."""
        store = next((s for s in map(store_of, parent_hooks) if s is not None), None)
        if store is None or store.session_id != job.session_id:
            if home is None:
                return None
            store = OffloadStore(home, job.session_id)
        if store.threshold_tokens <= 0 or str(store.home) == os.devnull:
            return None
        try:
            _, ref = store.offload(
                ToolResult(text), tool_name=f"job {job.id}", call_id=job.id, arguments={}
            )
        except Exception as exc:
            _log.warning("job %s: its result could not be stored for recall: %s", job.id, exc)
            return None
        return ref.ref_id

    async def _creator_refuses(
        self, job: JobRecord, engine: WorkflowEngine, name: str
    ) -> str | None:
        """Why the session that made ``job`` may not start workflow ``name`` (``None``: it
        may). Its recorded policy, and this process's, judge the ``workflow`` call it
        stands for: a deny refuses it; an ask does not (the human approved the schedule,
        which showed the workflow and its inputs)."""
        if "creator" not in job.spec:
            return None  # made through the Python API: the operator's
        from ..workflows.tools import workflow_tools

        rt = self.runtime
        try:
            policy = creator_policy(job.spec["creator"], f"{job.session_id}.job.{job.id}")
        except CreatorPolicyError as exc:
            return str(exc)
        if rt is not None and rt.policy is not None:
            policy = policy & Protection.of(rt.policy)
        params = {"name": name, "inputs": job.spec.get("inputs") or {}}
        start = next((t for t in workflow_tools(engine) if t.name == "workflow"), None)
        if start is None:
            return None  # no catalog: engine.start says the workflow is unknown
        call = ToolCall(job.id, "workflow", json.dumps(params))
        decided = await policy_decision(policy, start, params, call)
        if decided.action == "deny":
            return f"the policy of the session that made it denies starting it: {decided.reason}"
        return None

    async def _execute_workflow(self, job: JobRecord, signal: AbortSignal) -> None:
        engine = self.runtime.engine if self.runtime is not None else None
        name = job.spec.get("workflow")
        if engine is None or not isinstance(name, str):
            await self._finish(job.id, "failed", error="no workflow engine here to start it")
            return
        from ..workflows.tools import format_workflow

        refused = await self._creator_refuses(job, engine, name)
        if refused is not None:
            await self._refuse(job, refused)
            return
        try:
            workflow_id = await engine.start(name, job.spec.get("inputs") or {})
        except ValueError as exc:
            await self._finish(job.id, "failed", error=str(exc))
            return
        await self.table.progress(job.id, self.owner, f"workflow {workflow_id}", 0)
        while True:
            wf = await engine.store.get_workflow(workflow_id)
            if wf is None or wf.terminal:
                break
            if signal.aborted:
                await engine.cancel(workflow_id, signal.reason or "the job was cancelled")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(signal.wait(), self.poll)
        text = format_workflow(wf) if wf is not None else f"workflow {workflow_id} is gone"
        state: JobState = "succeeded" if wf is not None and wf.state == "succeeded" else "failed"
        run = self._running.get(job.id)
        if run is not None and run.cancelled:
            state = "cancelled"
        await self._finish(
            job.id,
            state,
            summary=summarise_output(text),
            result={"workflow_id": workflow_id, "output": text},
            result_ref=await asyncio.to_thread(
                self._store_result, job, text, self.runtime.home if self.runtime else None, ()
            ),
            error=None if state == "succeeded" else (wf.error if wf is not None else "gone"),
        )
