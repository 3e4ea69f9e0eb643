"""Writing a JSON state file whole or not at all (grants, pending approvals, OAuth tokens).

The data goes to a temporary file beside the target (``mkstemp``: mode 0600), is flushed
and fsynced, then renamed over the target; a failure or a kill at any point leaves the
old file as it was and no temporary file behind (except after a kill, a ``.tmp`` file
that is never read).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["write_json_atomic"]


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
