"""Renaming a field of any event in the core fails `mypy --strict` (issue 17).

Each event kind is one TypedDict in server/core/events.py, built only by its keyword-only
constructor there, which server/core/table.py calls naming every field. This copies server/
to a temporary directory, checks that mypy passes on the copy, then renames fields in it (the
last field of every kind's definition, and two fields where table.py builds events, among
them the card's `index`, the rename only a run-time test used to notice) and checks that
mypy names every one of them. One copy, two runs sharing one cache: the second run rechecks
only what the renames touch.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from server.core import events

ROOT = Path(__file__).resolve().parents[1]

# Where table.py builds an event: the text of one keyword, and its rename.
CALL_SITES = {
    "index=state.dealt": "index_x=state.dealt",  # the card event
    "closes_at=closes_at,": "closes_at_x=closes_at,",  # round_opened
}


def _last_fields() -> dict[str, str]:
    """The last field of each payload with more than its kind: TypedDict name -> field."""
    names = {}
    for name in events.__all__:
        shape = getattr(events, name)
        if name.endswith("Payload") and isinstance(shape, type):
            fields = list(shape.__annotations__)
            if fields != ["kind"]:
                names[name] = fields[-1]
    return names


def _rename_in_definition(source: str, shape: str, field: str) -> str:
    """`field` becomes `field_x` in the class body of `shape` only."""
    body = re.search(rf"^class {shape}\(TypedDict\):\n(?:    .*\n)+", source, re.M)
    assert body is not None, shape
    renamed = re.sub(rf"^    {field}:", f"    {field}_x:", body.group(0), count=1, flags=re.M)
    assert renamed != body.group(0), (shape, field)
    return source[: body.start()] + renamed + source[body.end() :]


def _mypy(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(root / ".mypy_cache"), "server"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.mark.timeout(900)
def test_renaming_an_event_field_in_the_core_fails_mypy(tmp_path: Path) -> None:
    shutil.copytree(
        ROOT / "server", tmp_path / "server", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")  # the strict config
    clean = _mypy(tmp_path)
    assert clean.returncode == 0, clean.stdout + clean.stderr

    core = tmp_path / "server" / "core"
    definitions = _last_fields()
    assert len(definitions) >= 9, definitions  # every kind that has fields beside its kind
    source = (core / "events.py").read_text()
    for shape, field in definitions.items():
        source = _rename_in_definition(source, shape, field)
    (core / "events.py").write_text(source)
    table = (core / "table.py").read_text()
    for before, after in CALL_SITES.items():
        assert table.count(before) == 1, before
        table = table.replace(before, after)
    (core / "table.py").write_text(table)

    mutated = _mypy(tmp_path)
    assert mutated.returncode == 1, mutated.stdout + mutated.stderr
    errors = [line for line in mutated.stdout.splitlines() if ": error:" in line]
    unnoticed = [
        f"{shape}.{field}"
        for shape, field in definitions.items()
        if not any(f'"{field}_x"' in line and f'"{shape}"' in line for line in errors)
    ]
    unnoticed += [
        after.split("=")[0]
        for after in CALL_SITES.values()
        if not any(f'"{after.split("=")[0]}"' in line for line in errors)
    ]
    assert unnoticed == [], "\n".join(errors)
