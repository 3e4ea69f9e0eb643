"""Approve-always grants: a human's standing approval for one tool, kept per session.

A grant names exactly one tool and, optionally, an argument pattern (the predicates of
a policy rule: ``{"path": {"prefix": "docs/"}}``). It turns the policy's *ask* into
*allow* for the calls it covers: that tool only, those arguments only, never a
DANGEROUS tool. Grants live in a JSON file per session, written atomically; revoking
one removes it from the file, and every process using the file sees the change at its
next decision (the file is re-read when it changes).

Adding and revoking are read-modify-write cycles on a file other processes rewrite too
(a session recording a grant while ``tooldeck policy revoke`` runs): each cycle holds
the file's inter-process lock and reads the file afresh under it, so a revocation is
never undone by a grant written from a stale copy. Between writes, a process trusts
its cached copy only while the file's identity (inode, size, modification time) is
unchanged and that time is old enough that a rewrite could not share it (file-system
timestamps are coarse, and a freed inode is soon reused).
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from .._atomic_json import write_json_atomic
from .._config_files import ConfigFileError, check_model, load_json
from ._files import StateLocked, locked
from .chain import PolicyError
from .rules import ArgPredicate, all_of, parse_args

__all__ = ["grant_of"]

FORMAT = "tooldeck.grants/1"
_log = logging.getLogger("tooldeck.policy")
_MISSING_FILE = (-1, -1, -1)
_RACY_NS = 2 * 10**9
"""A file modified less than this long before it was read may be rewritten unseen:
the next rewrite could carry the same modification time (and size, and a reused
inode), so the cached copy is not trusted and the file is read again."""


@dataclass(frozen=True, slots=True)
class Grant:
    id: str
    tool: str
    args: Mapping[str, Any] | None  # the pattern as given; None: every call of the tool
    predicates: tuple[ArgPredicate, ...]
    created: str
    by: str

    def covers(self, tool: str, args: Mapping[str, Any], home: Path | None = None) -> bool:
        """This tool, and (with a pattern) arguments that certainly match it.

        ``home`` is the agent's home, for path patterns (see :func:`.rules.path_under`).
        """
        return tool == self.tool and all_of(p.test(args, home) for p in self.predicates) is True

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "tool": self.tool,
            "args": dict(self.args) if self.args is not None else None,
            "created": self.created,
            "by": self.by,
        }

    def describe(self) -> str:
        if not self.predicates:
            return f"{self.tool} (every call)"
        return f"{self.tool} where " + " and ".join(p.describe() for p in self.predicates)


def parse_pattern(pattern: Mapping[str, Any] | None, where: str) -> tuple[ArgPredicate, ...]:
    """The predicates of an argument pattern (none or empty: every call); raises
    :class:`PolicyError` if unusable."""
    if pattern is None or (isinstance(pattern, Mapping) and not pattern):
        return ()
    problems: list[str] = []
    predicates = parse_args(pattern, where, problems)
    if problems:
        raise PolicyError(where, problems)
    return predicates


class _GrantEntry(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    id: str = ""
    tool: str = Field(min_length=1)
    args: dict[str, JsonValue] | None = None
    created: str = ""
    by: str = ""


class _GrantsFile(BaseModel):
    """The grants file's format, strictly (what :meth:`GrantStore._write` writes)."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    format: Literal["tooldeck.grants/1"]
    grants: list[_GrantEntry] = []


def grant_of(data: Any, where: str = "grant") -> Grant:
    """A grant from its :meth:`Grant.as_dict` form (kept elsewhere than a grants file);
    raises :class:`PolicyError` for anything else."""
    try:
        entry = check_model(_GrantEntry, data)
    except ConfigFileError as exc:
        raise PolicyError(where, [exc.problem]) from None
    return _grant(entry, where)


def _grant(entry: _GrantEntry, where: str) -> Grant:
    return Grant(
        entry.id,
        entry.tool,
        entry.args,
        parse_pattern(entry.args, where),
        entry.created,
        entry.by,
    )


class GrantStore:
    """The approve-always grants of one session (in memory when ``path`` is None)."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self._lock = threading.Lock()
        self._grants: tuple[Grant, ...] = ()
        self._stamp: tuple[int, int, int] | None = None  # None: read the file next time
        self.revision = 0  # changes whenever the grants do

    # -- reading --------------------------------------------------------------------------
    def _file_stamp(self) -> tuple[int, int, int]:
        assert self.path is not None
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return _MISSING_FILE
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def _read(self) -> tuple[Grant, ...]:
        assert self.path is not None
        try:  # read as every file tooldeck is given (size, encoding, nesting), then typed
            data = load_json(self.path)
            if not isinstance(data, Mapping) or data.get("format") != FORMAT:
                raise PolicyError(str(self.path), [f"not a grants file ({FORMAT})"])
            entries = check_model(_GrantsFile, data).grants
        except FileNotFoundError:
            return ()
        except ConfigFileError as exc:
            raise PolicyError(str(self.path), [exc.problem]) from None
        return tuple(_grant(e, f"grants[{i}].args") for i, e in enumerate(entries))

    def _refresh(self, *, force: bool = False) -> None:
        """Re-read the file if it may have changed (``force``: whatever its stamp says)."""
        if self.path is None:
            return
        stamp = self._file_stamp()
        if not force and self._stamp is not None and stamp == self._stamp:
            return
        try:
            grants = self._read()
        except (OSError, ValueError, PolicyError):
            # fail closed: an unreadable store approves nothing
            _log.exception("cannot read the grants file %s; no grant applies", self.path)
            grants = ()
        racy = stamp != _MISSING_FILE and time.time_ns() - stamp[0] < _RACY_NS
        self._stamp = None if racy else stamp
        if grants != self._grants:
            self._grants = grants
            self.revision += 1

    @contextmanager
    def _exclusive(self) -> Iterator[None]:
        """This process's threads and every other process: one read-modify-write at a time."""
        with self._lock:
            if self.path is None:
                yield
                return
            try:
                with locked(self.path):
                    self._refresh(force=True)
                    yield
            except StateLocked as exc:
                raise PolicyError(str(self.path), [str(exc)]) from exc

    @property
    def grants(self) -> tuple[Grant, ...]:
        with self._lock:
            self._refresh()
            return self._grants

    def __iter__(self) -> Iterator[Grant]:
        return iter(self.grants)

    def __len__(self) -> int:
        return len(self.grants)

    def match(self, tool: str, args: Mapping[str, Any], home: Path | None = None) -> Grant | None:
        """The first grant covering this call, or None."""
        return next((g for g in self.grants if g.covers(tool, args, home)), None)

    def predicates_for(self, tool: str) -> list[ArgPredicate]:
        return [p for g in self.grants if g.tool == tool for p in g.predicates]

    # -- writing --------------------------------------------------------------------------
    def _write(self, grants: tuple[Grant, ...]) -> None:
        """Replace the grants (the caller holds :meth:`_exclusive`)."""
        self._grants = grants
        self.revision += 1
        if self.path is None:
            return
        write_json_atomic(self.path, {"format": FORMAT, "grants": [g.as_dict() for g in grants]})
        self._stamp = None  # just written: too recent to trust a stamp

    def add(
        self, tool: str, pattern: Mapping[str, Any] | None = None, *, by: str = "human"
    ) -> Grant:
        """Record an approve-always grant for ``tool`` (and ``pattern``, if given)."""
        predicates = parse_pattern(pattern, f"approve-always pattern for {tool}")
        created = datetime.now(UTC).isoformat(timespec="seconds")
        grant = Grant(
            f"g_{secrets.token_hex(6)}",
            tool,
            json.loads(json.dumps(dict(pattern))) if pattern else None,
            predicates,
            created,
            by,
        )
        with self._exclusive():
            self._write((*self._grants, grant))
        return grant

    def replace(self, grants: tuple[Grant, ...]) -> None:
        """Hold ``grants`` from now on (read from where they are shared: the gateway's
        session store); nothing changes, not even :attr:`revision`, if they are the same."""
        with self._exclusive():
            if grants != self._grants:
                self._write(grants)

    def revoke(self, grant_id: str) -> bool:
        """Remove one grant; False when there is no such grant."""
        with self._exclusive():
            kept = tuple(g for g in self._grants if g.id != grant_id)
            if len(kept) == len(self._grants):
                return False
            self._write(kept)
            return True

    def revoke_tool(self, tool: str) -> int:
        """Remove every grant of ``tool``; returns how many were removed."""
        with self._exclusive():
            kept = tuple(g for g in self._grants if g.tool != tool)
            removed = len(self._grants) - len(kept)
            if removed:
                self._write(kept)
            return removed
