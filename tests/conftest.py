"""Fixtures shared by every test package: a real Redis for the whole session."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.redis_server import start_redis


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A real Redis for the whole session: REDIS_URL, or a redis-server started here."""
    url = os.environ.get("REDIS_URL")
    if url:
        yield url
        return
    with start_redis() as server:
        yield server.url
