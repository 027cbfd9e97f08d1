"""docs/configuration.md lists every setting with its option, environment variable and default."""

from __future__ import annotations

from pathlib import Path

import pytest

from server.config import OPTIONS, Option

DOC = (Path(__file__).resolve().parents[1] / "docs" / "configuration.md").read_text()


@pytest.mark.parametrize("option", OPTIONS, ids=lambda option: option.name)
def test_every_setting_has_a_row_with_its_env_variable(option: Option) -> None:
    """Each setting has a row: `--option` | `BACCARAT_NAME` | type | default."""
    # The options table's row (the table of ranges further down has two cells per row).
    rows = [
        line
        for line in DOC.splitlines()
        if line.startswith(f"| `{option.flag}` |") and line.count("|") > 3
    ]
    assert len(rows) == 1, f"docs/configuration.md has no row for {option.flag}"
    cells = [cell.strip() for cell in rows[0].strip("|").split("|")]
    assert cells[1] == f"`{option.env}`"
    assert cells[2] == option.type.replace(" | ", " or ")
    if option.name != "static_dir":  # shown as <repo>/client_demo, not this checkout's path
        assert cells[3] == f"`{option.default!r}`"
