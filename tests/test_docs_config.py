"""docs/configuration.md lists every setting with its option, environment variable and default."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from server.config import Settings

DOC = (Path(__file__).resolve().parents[1] / "docs" / "configuration.md").read_text()


@pytest.mark.parametrize("name", [f.name for f in fields(Settings)])
def test_every_setting_has_a_row_with_its_env_variable(name: str) -> None:
    """Each setting has a row: `--option` | `BACCARAT_NAME` | type | default."""
    option = "--" + name.replace("_", "-")
    # The options table's row (the table of ranges further down has two cells per row).
    rows = [
        line
        for line in DOC.splitlines()
        if line.startswith(f"| `{option}` |") and line.count("|") > 3
    ]
    assert len(rows) == 1, f"docs/configuration.md has no row for {option}"
    cells = [cell.strip() for cell in rows[0].strip("|").split("|")]
    assert cells[1] == f"`BACCARAT_{name.upper()}`"
    default = getattr(Settings(), name)
    assert cells[2] == str(next(f for f in fields(Settings) if f.name == name).type).replace(
        " | ", " or "
    )
    if name != "static_dir":  # shown as <repo>/client_demo, not this checkout's path
        assert cells[3] == f"`{default!r}`"
