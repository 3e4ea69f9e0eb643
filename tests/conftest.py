"""Shared test settings."""

import os
import tempfile

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
