"""Live in-process nodes for the bot tests (the transport tests' fixtures, short rounds)."""

from __future__ import annotations

from tests.transport.conftest import make_node  # noqa: F401 - a fixture, used by name
