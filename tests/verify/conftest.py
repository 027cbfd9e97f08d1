"""Live in-process nodes for the `--url` tests (the transport tests' fixtures)."""

from __future__ import annotations

from tests.transport.conftest import engine, make_node, open_client  # noqa: F401 - fixtures
