"""The Dockerfile, read as instructions (no Docker engine runs here), and its healthcheck
command run for real against a live node."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from server.app import Node
from server.config import Settings
from tests.redis_server import free_port

REPO = Path(__file__).resolve().parents[2]
BUILD_TOOLS = ("gcc", "g++", "build-essential", "make", "cc ", "clang", "git")


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str


def instructions(text: str) -> list[Instruction]:
    """Dockerfile instructions, with `\\` continuations joined and comments dropped."""
    logical: list[str] = []
    pending = ""
    for line in text.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    parsed = []
    for line in logical:
        keyword, _, args = line.strip().partition(" ")
        parsed.append(Instruction(keyword.upper(), args.strip()))
    return parsed


def stages(parsed: list[Instruction]) -> dict[str, list[Instruction]]:
    """Stage name -> its instructions (FROM ... AS name)."""
    named: dict[str, list[Instruction]] = {}
    current: list[Instruction] | None = None
    for instruction in parsed:
        if instruction.keyword == "FROM":
            match = re.fullmatch(r"\S+\s+AS\s+(\S+)", instruction.args, re.IGNORECASE)
            assert match, f"every stage is named: FROM {instruction.args}"
            current = named[match.group(1)] = []
        elif current is not None:
            current.append(instruction)
    return named


PARSED = instructions((REPO / "Dockerfile").read_text())
STAGES = stages(PARSED)
FINAL = list(STAGES.values())[-1]


def _final(keyword: str) -> list[str]:
    return [i.args for i in FINAL if i.keyword == keyword]


def test_multi_stage_on_a_slim_python_base() -> None:
    """A build stage and a final stage, both FROM a slim Python image."""
    assert len(STAGES) >= 2
    base = next(i.args for i in PARSED if i.keyword == "ARG" and "PYTHON_IMAGE" in i.args)
    assert re.search(r"python:3\.1[1-9]-slim", base), base
    assert all(
        "${PYTHON_IMAGE}" in i.args or "-slim" in i.args for i in PARSED if i.keyword == "FROM"
    )


def test_the_final_stage_copies_the_build_and_installs_no_tools() -> None:
    """The final stage takes the virtualenv from the build stage and runs no installer."""
    build_name = next(iter(STAGES))
    assert any(f"--from={build_name}" in args for args in _final("COPY"))
    for command in _final("RUN"):
        assert "apt-get install" not in command and "pip install" not in command, command
        assert not any(tool in command for tool in BUILD_TOOLS), command


def test_runs_as_a_non_root_user() -> None:
    """The last USER is not root (by name or uid 0)."""
    users = _final("USER")
    assert users, "no USER in the final stage"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0")


def test_the_client_is_in_the_image_and_served() -> None:
    """client_demo/ is copied into the image and BACCARAT_STATIC_DIR points at it."""
    copied = [args for args in _final("COPY") if args.startswith("client_demo ")]
    assert copied, "client_demo/ is not copied"
    target = copied[0].split()[-1]
    env = " ".join(_final("ENV"))
    assert f"BACCARAT_STATIC_DIR={target}" in env
    assert "BACCARAT_HOST=0.0.0.0" in env
    ignore = (REPO / ".dockerignore").read_text().split()
    assert "!client_demo/" in ignore and "!server/" in ignore and "*" in ignore


def test_entrypoint_serves_and_exposes_the_port() -> None:
    """`baccarat serve` on 8765 is what the container runs."""
    assert json.loads(_final("ENTRYPOINT")[-1]) == ["baccarat"]
    assert json.loads(_final("CMD")[-1]) == ["serve"]
    assert "8765" in _final("EXPOSE")[-1]
    assert _final("STOPSIGNAL") == ["SIGTERM"]


def _healthcheck_command() -> list[str]:
    (check,) = _final("HEALTHCHECK")
    command: list[str] = json.loads(check.split("CMD", 1)[1])
    return command


def test_healthcheck_asks_healthz() -> None:
    """HEALTHCHECK runs a Python one-liner (slim has no curl) against /healthz."""
    command = _healthcheck_command()
    assert command[:2] == ["python", "-c"]
    assert "/healthz" in command[2]


async def _run_check(port: int) -> int:
    command = _healthcheck_command()
    env = {**os.environ, "BACCARAT_PORT": str(port)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        *command[1:],
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    return await asyncio.wait_for(proc.wait(), 20)


async def test_healthcheck_passes_on_a_live_node_and_fails_without_one() -> None:
    """The HEALTHCHECK command exits 0 against a serving node, non-zero when nothing answers."""
    settings = Settings(port=0, tables="t1=classic8", static_dir="/nonexistent")
    async with Node(settings) as node:
        assert await _run_check(node.port) == 0
    assert await _run_check(free_port()) != 0
