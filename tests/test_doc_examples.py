"""Every example in README.md, client_demo/README.md and docs/ that can run offline runs here,
so a doc example that breaks fails `make test` (issue 16).

The fenced blocks are parsed out of the Markdown (no line numbers are kept anywhere):

* ```python blocks run in a fresh interpreter from the repository root (top-level `await` and
  `async with` allowed, as in the REPL `python -m asyncio`). A block that holds a `ws://` URL
  is a client: it runs with the URL of a live node (the test fixtures', memory engine) as its
  first argument, as docs/protocol.md runs its client.
* ```sh blocks are read command by command (continuation lines, quotes and comments as the
  shell reads them). `baccarat` commands that work offline run (`coup`, `odds`, `roads`,
  `token`, any `--help`); `serve` and `bots`, which run until stopped or need a site, have
  their options parsed and their settings checked as `serve` checks them before it starts;
  `python -c ...` and `python tools/...` run. A synopsis (`[--redis URL]`, `HOST:PORT`, `...`)
  only has its option names checked. Any other program is in NOT_RUN, with why; a program
  the test does not know fails it, so a new kind of example is a decision, not a silent skip.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import os
import re
import secrets
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from server.cli import build_parser
from tests.transport.conftest import NodeFactory, make_node, within  # noqa: F401 - a fixture

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "client_demo" / "README.md", *sorted(ROOT.glob("docs/**/*.md"))]
BIN = Path(sys.executable).parent
SHELLS = {"sh", "shell", "bash", "console"}

# Programs of shell examples that are not run, and why.
NOT_RUN = {
    ".": "activates .venv in the reader's shell: the test runs .venv's commands already",
    "make": "builds .venv and runs the server, the suite (which runs this test) or benchmarks",
    "docker": "needs Docker, builds images and starts a site (tests/deploy check the files)",
    "redis-server": "a daemon; tests start their own (tests/redis_server.py, and "
    "tests/deploy/test_redis_recipe.py runs deploy/redis.conf)",
    "curl": "talks to a running site",
    "open": "opens a browser",
    "openssl": "makes a random secret: the test uses one of its own",
    "kubectl": "needs a Kubernetes cluster (tests/deploy check the manifests)",
    "docker-compose": "needs Docker, builds images and starts a site",
    "redis-cli": "talks to a running Redis",
    "kill": "stops a running server",
    "pytest": "runs tests: `make test` runs them all",
    "ruff": "lints: `make lint` runs it",
    "mypy": "type-checks: `make types` runs it",
    "apt-get": "installs system packages",
    "pip": "installs packages into .venv: `make install` does",
    "for": "a loop over the containers of a running deployment",
    "until": "a loop over the containers of a running deployment",
    "done": "a loop over the containers of a running deployment",
    "git": "checks out another commit to benchmark it (docs/benchmarks.md's before and after)",
}
# Python scripts of shell examples that are not run, by path prefix, and why.
SCRIPTS_NOT_RUN = {
    ".": "activates .venv in the reader's shell: the test runs .venv's commands already",
    "bench/": "a benchmark: minutes of load on a quiet machine (`make bench-smoke` proves it)",
    "client.py": "docs/protocol.md's client: its ```python block runs here against a live node",
}
# baccarat commands that need no server and stop by themselves.
OFFLINE = {"coup", "odds", "roads", "token"}
# A synopsis rather than an example: `[--x]`, `a|b`, `...`, or a placeholder in capitals.
PLACEHOLDER = re.compile(r"\.\.\.|[\[\]|]|(?<![A-Za-z])[A-Z]{1,}(?![a-z])")
ASSIGN = re.compile(r"[A-Za-z_]\w*=")
SUBSTITUTED = re.compile(r"\s*(?:export\s+)?([A-Za-z_]\w*)=\$\((.*)\)\s*(?:#.*)?")


@dataclass(frozen=True)
class Block:
    doc: Path
    line: int  # of the opening fence; for messages only
    lang: str
    body: str

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


def blocks(doc: Path) -> Iterator[Block]:
    """The fenced code blocks of one Markdown file (indented ones in lists too)."""
    lines = doc.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        opening = re.match(r"( *)(`{3,}|~{3,})\s*([\w+-]*)", lines[index])
        if opening is None:
            index += 1
            continue
        indent, fence, lang = opening.groups()
        body, start = [], index
        index += 1
        while index < len(lines) and not re.fullmatch(rf" *{fence}\s*", lines[index]):
            body.append(lines[index][len(indent) :] if lines[index].startswith(indent) else "")
            index += 1
        index += 1
        yield Block(doc, start + 1, lang.lower(), "\n".join(body) + "\n")


ALL = [block for doc in DOCS for block in blocks(doc)]
PYTHON = [block for block in ALL if block.lang in ("python", "py")]
SHELL = [block for block in ALL if block.lang in SHELLS]


def test_the_docs_have_examples_of_each_kind() -> None:
    """The parser finds the blocks (a parser that found none would pass everything)."""
    assert len(PYTHON) >= 3 and len(SHELL) >= 10
    assert any("baccarat token" in block.body for block in SHELL)


# --- python ---------------------------------------------------------------------------------

# Runs a file as __main__, with top-level await allowed (a fragment such as `async with
# Node(settings) as node: ...` runs as written).
RUN_SNIPPET = """
import ast, asyncio, sys
path = sys.argv[1]
sys.argv = sys.argv[1:]
code = compile(open(path).read(), path, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
result = eval(code, {"__name__": "__main__", "__file__": path})
if asyncio.iscoroutine(result):
    asyncio.run(result)
"""


def _clean_env() -> dict[str, str]:
    """The environment of a fresh shell: no BACCARAT_* setting of the machine running this."""
    return {k: v for k, v in os.environ.items() if not k.startswith("BACCARAT_")}


@pytest.mark.parametrize("block", PYTHON, ids=[block.where for block in PYTHON])
async def test_python_example_runs(
    block: Block,
    tmp_path: Path,
    make_node: NodeFactory,  # noqa: F811 - the fixture
) -> None:
    """Each ```python block runs to its end without an error (a client against a live node)."""
    snippet = tmp_path / "snippet.py"
    snippet.write_text(block.body)
    argv = [sys.executable, "-c", RUN_SNIPPET, str(snippet)]
    if "ws://" in block.body:
        node = await make_node(tables="classic8,punto6", betting_window=within(0.5))
        argv.append(f"ws://127.0.0.1:{node.port}/ws")
    process = await asyncio.create_subprocess_exec(
        *argv, cwd=ROOT, env=_clean_env(), stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(within(60)):
        _, err = await process.communicate()
    assert process.returncode == 0, f"{block.where}: {err.decode()[-2000:]}"
    assert b"Traceback" not in err, f"{block.where}: {err.decode()[-2000:]}"


# --- shell ----------------------------------------------------------------------------------


@dataclass
class Shell:
    """What a reader's shell would hold while going through one block."""

    block: Block
    env: dict[str, str] = field(default_factory=dict)
    ran: list[str] = field(default_factory=list)
    not_run: list[str] = field(default_factory=list)

    def fail(self, command: str, why: str) -> None:
        pytest.fail(f"{self.block.where}: `{command.strip()}`: {why}")

    def expand(self, word: str) -> str:
        def value(match: re.Match[str]) -> str:
            name = match.group(1) or match.group(2)
            return self.env.get(name, match.group(0))

        return re.sub(r"\$\{(\w+)\}|\$(\w+)", value, word)


def commands(body: str) -> Iterator[str]:
    """The block's commands: continuation lines joined, a quote left open goes on."""
    pending = ""
    for line in body.replace("\\\n", " ").splitlines():
        pending += line + "\n"
        try:
            words = shlex.split(pending, comments=True)
        except ValueError:  # a quote is still open
            continue
        if words:
            yield pending
        pending = ""
    assert not pending.strip(), f"an unclosed quote: {pending!r}"


def _program(word: str) -> str:
    return "baccarat" if word in ("baccarat", ".venv/bin/baccarat") else word


def run_command(shell: Shell, command: str) -> str:
    """Run, check or skip one command of a shell example; its output when it ran."""
    substituted = SUBSTITUTED.fullmatch(command.strip())
    if substituted is not None:  # NAME=$(command): the command's output, as the shell would
        name, inner = substituted.groups()
        inner_words = shlex.split(inner)
        if inner_words[:3] == ["openssl", "rand", "-hex"]:
            shell.env[name] = secrets.token_hex(int(inner_words[3]))
        else:
            shell.env[name] = run_command(shell, inner).strip()
        return ""
    words = [shell.expand(word) for word in shlex.split(command, comments=True)]
    if words[-1] == "&":
        words.pop()
    if words[0] == "export":
        words.pop(0)
    env = dict(shell.env)
    while words and ASSIGN.match(words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    if not words:  # NAME=value alone: for the commands after it
        shell.env = env
        return ""
    program = _program(words[0])
    if program == "baccarat":
        return _baccarat(shell, command, words[1:], env)
    if re.fullmatch(r"(\.venv/bin/)?python3?", program):
        return _python(shell, command, words[1:], env)
    if program in NOT_RUN or Path(program).name in NOT_RUN:
        shell.not_run.append(program)
        return ""
    shell.fail(command, "the doc test does not know this program: run it there or add it to "
               "NOT_RUN with why")  # fmt: skip
    return ""


def _run(shell: Shell, command: str, argv: list[str], env: dict[str, str]) -> str:
    done = subprocess.run(
        argv, cwd=ROOT, env={**_clean_env(), **env}, capture_output=True, text=True,
        timeout=within(60), check=False,
    )  # fmt: skip
    if done.returncode != 0:
        shell.fail(command, f"exit {done.returncode}: {done.stderr[-2000:]}")
    shell.ran.append(command)
    return done.stdout


def _python(shell: Shell, command: str, args: list[str], env: dict[str, str]) -> str:
    if args[:1] == ["-c"]:
        return _run(shell, command, [sys.executable, *args], env)
    if args[:2] == ["-m", "server.cli"]:
        return _baccarat(shell, command, args[2:], env)
    script = args[0] if args else ""
    for prefix, _why in SCRIPTS_NOT_RUN.items():
        if script.startswith(prefix):
            shell.not_run.append(script)
            return ""
    if script.startswith("tools/"):
        return _run(shell, command, [sys.executable, *args], env)
    shell.fail(command, "a Python command the doc test does not know: run it there or add it "
               "to SCRIPTS_NOT_RUN with why")  # fmt: skip
    return ""


def _subparser(name: str) -> argparse.ArgumentParser:
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction) and name in action.choices:
            parser: argparse.ArgumentParser = action.choices[name]
            return parser
    pytest.fail(f"`baccarat {name}`: no such command")


def _baccarat(shell: Shell, command: str, args: list[str], env: dict[str, str]) -> str:
    if not args or args[0] in ("-h", "--help") or "--help" in args or "-h" in args:
        return _run(shell, command, [str(BIN / "baccarat"), *args], env)
    parser = _subparser(args[0])
    if any(PLACEHOLDER.search(word) for word in args[1:]):  # a synopsis: its option names
        for word in args[1:]:
            option = word.lstrip("[").split("=")[0].rstrip("]")
            if option.startswith("--") and option not in parser._option_string_actions:
                shell.fail(command, f"`baccarat {args[0]}` has no option {option}")
        shell.ran.append(command)
        return ""
    if args[0] in OFFLINE:
        return _run(shell, command, [str(BIN / "baccarat"), *args], env)
    return _parse(shell, command, args, env)


def _parse(shell: Shell, command: str, args: list[str], env: dict[str, str]) -> str:
    """serve and bots: the options parsed as the command would (defaults from BACCARAT_* in
    the command's environment), and serve's settings and tables checked as it checks them."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update({**_clean_env(), **env})
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            parsed = build_parser().parse_args(args)
        if args[0] == "serve":
            from server.app import tables_of
            from server.config import Settings

            tables_of(Settings.from_args(parsed))
    except SystemExit:
        shell.fail(command, f"refused: {errors.getvalue().strip()}")
    except ValueError as error:
        shell.fail(command, f"refused: {error}")
    finally:
        os.environ.clear()
        os.environ.update(saved)
    shell.ran.append(command)
    return ""


def run_block(shell: Shell, body: str) -> None:
    for command in commands(body):
        run_command(shell, command)


@pytest.mark.parametrize("block", SHELL, ids=[block.where for block in SHELL])
def test_shell_example_runs(block: Block) -> None:
    """Each command of a ```sh block runs (offline ones), parses (serve, bots) or is in
    NOT_RUN; the reader's BACCARAT_SECRET is one the test made, as the docs ask for one."""
    shell = Shell(block, env={"BACCARAT_SECRET": secrets.token_hex(32)})
    run_block(shell, block.body)
    assert shell.ran or shell.not_run


def test_a_broken_example_fails() -> None:
    """The checks bite: a wrong option, a failing command, an unknown program."""
    block = Block(ROOT / "README.md", 1, "sh", "")
    for body in (
        "baccarat serve --no-such-option 1\n",
        "baccarat coup 4 3\n",  # too few cards
        "baccarat bots --url ws://h:1/ws --token-secret S\n",  # a synopsis, an old option
        "rm -rf build\n",
        "python -c 'print(\"unclosed)'\n",
    ):
        with pytest.raises(pytest.fail.Exception):
            run_block(Shell(block), body)


# --- one form of the command (issue 16) ----------------------------------------------------


def _baccarat_forms(block: Block) -> list[str]:
    """How the block's commands call baccarat: `baccarat` or `.venv/bin/baccarat`."""
    forms = []
    for command in commands(block.body):
        words = [w for w in shlex.split(command, comments=True) if not ASSIGN.match(w)]
        substituted = SUBSTITUTED.fullmatch(command.strip())
        if substituted is not None:
            words = shlex.split(substituted.group(2))
        if words and _program(words[0]) == "baccarat":
            forms.append(words[0])
    return forms


def test_one_form_of_the_baccarat_command() -> None:
    """The examples call `baccarat` one way, and README says how to get it on PATH (with
    `. .venv/bin/activate`) before its first example that needs it."""
    assert {form for block in SHELL for form in _baccarat_forms(block)} == {"baccarat"}
    readme = [
        block for block in SHELL if block.doc.name == "README.md" and block.doc.parent == ROOT
    ]
    activate = next(i for i, b in enumerate(readme) if ". .venv/bin/activate" in b.body)
    first_use = next(i for i, b in enumerate(readme) if _baccarat_forms(b))
    assert activate < first_use


# --- tools/ is checked like the rest (issue 16) ---------------------------------------------


def test_every_python_folder_is_linted_and_type_checked() -> None:
    """`make lint` (ruff check and ruff format) and mypy's `files` cover every top-level
    folder with Python in it, tools/ included: a script the docs tell people to run cannot
    rot unseen."""
    import tomllib

    folders = {
        path.parent.relative_to(ROOT).parts[0]
        for path in ROOT.glob("*/**/*.py")
        if not path.relative_to(ROOT).parts[0].startswith(".")
        and "egg-info" not in path.relative_to(ROOT).parts[0]
    }
    assert "tools" in folders
    makefile = (ROOT / "Makefile").read_text()
    for tool in ("ruff check", "ruff format --check"):
        line = next(line for line in makefile.splitlines() if f"$(BIN)/{tool} " in line)
        assert folders <= set(line.split()), f"make lint: {line.strip()}"
    mypy_files = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]["files"]
    assert folders - {"tests"} <= set(mypy_files)
