"""Shared test settings."""

import os
import tempfile

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "default", deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=200
)
settings.register_profile(
    "ci",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    max_examples=300,
    derandomize=True,
)
settings.load_profile("ci" if __import__("os").environ.get("CI") else "default")

# Tool search caches embeddings under the user's cache folder; tests keep theirs private.
os.environ.setdefault("TOOLDECK_CACHE_DIR", tempfile.mkdtemp(prefix="tooldeck-test-cache-"))

# Tests that run worker, scheduler or job processes take the longest (10-30 s each): run
# them first, so that with two test processes (pytest-xdist) the run does not end with one
# process still in a long test while the other has nothing left to do.
_LONG_FIRST = (
    # the mypy group (one process): mypy on a user's file, which writes the mypy cache the
    # docs blocks' mypy then reads, and every docs block, a process each
    "test_typed_entry_points.py",
    "test_docs_blocks.py",
    "test_worker_logs.py",
    "test_jobs_dbos.py",
    "test_workflows_workers.py",
    "test_workflows_faults.py",
    "test_gateway_out_of_band.py",
    "test_gateway_clients_cli.py",
    "test_jobs_processes.py",
    "test_gateway_stateless.py",
    "test_telemetry_integration.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        name = item.path.name
        return _LONG_FIRST.index(name) if name in _LONG_FIRST else len(_LONG_FIRST)

    items.sort(key=rank)  # stable: the order inside each group is kept
