"""deploy/redis.conf run as README.md and docs/configuration.md say, `redis-server
deploy/redis.conf` from the repository root, leaves only files that git ignores there (issue
16): its `dir ./` puts the append-only files and the RDB snapshot in the working directory."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.redis_server import find_redis_server, free_port

REPO = Path(__file__).resolve().parents[2]


def test_the_recipe_writes_only_what_git_ignores(tmp_path: Path) -> None:
    """A redis-server on the recipe, started in a scratch directory standing for the root and
    stopped as an operator stops it (SIGTERM: it writes its snapshot): every file it wrote is
    ignored by the repository's .gitignore."""
    port = free_port()
    log = []
    with subprocess.Popen(
        [find_redis_server(), str(REPO / "deploy" / "redis.conf"), "--port", str(port)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as server:
        assert server.stdout is not None
        try:
            for line in server.stdout:  # its log: the line that says it is up
                log.append(line)
                if "Ready to accept connections" in line:
                    break
        finally:
            server.terminate()
            log += server.stdout.readlines()  # to its end: it has stopped
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert "dump.rdb" in written, "".join(log)
    assert any(name.startswith("appendonlydir/") for name in written), "".join(log)
    ignored = subprocess.run(
        ["git", "-C", str(REPO), "check-ignore", "--no-index", *written],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()
    assert sorted(ignored) == written
