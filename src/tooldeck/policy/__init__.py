"""Access control: the policy chain, approval tiers, approvals, headless sessions, audit.

- :mod:`.rules`: selectors (name, glob, ``ns:``, ``tier:``) and argument predicates
  (``equals``, ``in``, path ``prefix``, shell ``program``), three-valued; a path is
  judged as the file tools resolve it (:mod:`tooldeck._paths`), a command line as bash
  reads it (:mod:`._shell`);
- :mod:`.chain`: :class:`Policy` (loaded from TOML or JSON), the six levels and
  :meth:`Policy.decide`, the one decision function, with its trace;
- :mod:`.protection`: :class:`~tooldeck.policy.protection.Protection` (exported as
  ``tooldeck.Protection``), what protects a session (``protect=``): its judges (the
  stricter wins) and who answers their asks, made by name
  (``Protection.ask("WRITE")``, ``Protection.policy(session_policy)``, ``a & b``), and
  what a sub-agent, a job or a schedule's run inherits of it;
- :mod:`.session`: :class:`SessionPolicy` (the plan's ``visible``, the dispatcher's
  policy hook, sub-agent policies) and :class:`PolicyApprover` (answers: approve,
  approve-always, deny, edit);
- :mod:`.grants`: approve-always grants, per session, revocable;
- :mod:`.audit`: one JSON line per decision;
- :mod:`.pending`: runs waiting for approval, on disk, resumed without running a tool
  twice.

The file format and the rules are described in ``docs/policy.md``.
"""

from ._shell import shell_programs
from .audit import AuditLog, arguments_digest, canonical_json
from .chain import (
    ALWAYS_DANGEROUS,
    HEADLESS_DENY,
    LEVELS,
    Policy,
    PolicyContext,
    PolicyError,
    effective_tier,
)
from .grants import Grant, GrantStore
from .pending import PendingFiles, load_answers, read_pending, save_answers
from .rules import Level, Rule, Selector
from .session import (
    ApproveAlways,
    PolicyApprover,
    SessionPolicy,
    approve,
    approve_always,
    deny,
    edit,
    wait_for_human,
)

__all__ = [
    "ALWAYS_DANGEROUS",
    "HEADLESS_DENY",
    "LEVELS",
    "ApproveAlways",
    "AuditLog",
    "Grant",
    "GrantStore",
    "Level",
    "PendingFiles",
    "Policy",
    "PolicyApprover",
    "PolicyContext",
    "PolicyError",
    "Rule",
    "Selector",
    "SessionPolicy",
    "approve",
    "approve_always",
    "arguments_digest",
    "canonical_json",
    "deny",
    "edit",
    "effective_tier",
    "load_answers",
    "read_pending",
    "save_answers",
    "shell_programs",
    "wait_for_human",
]
