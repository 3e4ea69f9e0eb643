"""Per-session files of the policy package: names, and atomic JSON writes."""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def session_file(directory: str | Path, session_id: str, suffix: str) -> Path:
    """``<directory>/<session_id><suffix>``; the id must be a plain file name."""
    if not _SAFE_ID.fullmatch(session_id) or ".." in session_id:
        raise ValueError(f"session id {session_id!r} cannot name a file")
    return Path(directory) / f"{session_id}{suffix}"


def write_json_atomic(path: Path, data: Any) -> None:
    """Write ``data`` as JSON to a temporary file beside ``path``, then rename it over."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, ensure_ascii=False, indent=1, sort_keys=True)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
