"""Debian's nginx on loopback, running deploy/nginx.conf in front of `baccarat serve` nodes.

The config is the deployed file itself with three things pointed at this machine: the
upstream `server nodeN:8765` lines (between the `# nodes:` markers) become loopback ports,
`listen 80` a free loopback port, and the static root the repository's client_demo/.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from tests.multinode.nodes import SCALE
from tests.redis_server import free_port

__all__ = ["INSTALL_HINT", "NginxProcess", "find_nginx", "render_config"]

REPO = Path(__file__).resolve().parents[2]
DEPLOYED_CONFIG = REPO / "deploy" / "nginx.conf"
INSTALL_HINT = "nginx is not installed: apt-get install -y nginx (Debian's package)"
_NODE_LINE = re.compile(r"^(\s*)server node\d+:8765(\b[^;]*);\n", re.MULTILINE)


def find_nginx() -> str | None:
    return shutil.which("nginx") or next(
        (path for path in ("/usr/sbin/nginx",) if Path(path).exists()), None
    )


def render_config(text: str, node_ports: list[int], port: int, root: Path) -> str:
    """deploy/nginx.conf with its nodes, listen port and static root moved to loopback."""
    head, begin, rest = text.partition("# nodes: begin\n")
    block, end, tail = rest.partition("# nodes: end\n")
    assert begin and end, "deploy/nginx.conf lost its '# nodes: begin/end' markers"
    lines = list(_NODE_LINE.finditer(block))
    assert len(lines) >= len(node_ports), "fewer nodes in deploy/nginx.conf than the test runs"
    indent, options = lines[0].group(1), lines[0].group(2)
    servers = "".join(f"{indent}server 127.0.0.1:{p}{options};\n" for p in node_ports)
    block = _NODE_LINE.sub("", block) + servers
    text = head + begin + block + end + tail
    moves = {
        "listen 80;": f"listen 127.0.0.1:{port};",
        "root /usr/share/nginx/html;": f"root {root};",
    }
    for old, new in moves.items():
        assert text.count(old) == 1, f"deploy/nginx.conf: expected one {old!r}"
        text = text.replace(old, new)
    return text


class NginxProcess:
    """One nginx master (and its workers) on a free loopback port, stopped by `stop()`."""

    def __init__(self, node_ports: list[int]) -> None:
        binary = find_nginx()
        assert binary is not None, INSTALL_HINT
        self.port = free_port()
        self._dir = tempfile.TemporaryDirectory(prefix="nginx-test-")
        folder = Path(self._dir.name)
        config = render_config(
            DEPLOYED_CONFIG.read_text(), node_ports, self.port, REPO / "client_demo"
        )
        (folder / "nginx.conf").write_text(config)
        self.log_path = folder / "nginx.log"
        self._log = self.log_path.open("w")
        self.argv = [
            binary,
            "-e",
            "stderr",
            "-p",
            str(folder),
            "-c",
            str(folder / "nginx.conf"),
            "-g",
            f"daemon off; pid {folder / 'nginx.pid'};",
        ]
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws"

    def start(self) -> NginxProcess:
        self.proc = subprocess.Popen(
            self.argv, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + 10 * SCALE
        while not self._answers():
            if self.proc.poll() is not None:
                raise RuntimeError(f"nginx exited:\n{self.log()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"nginx did not answer on {self.port}:\n{self.log()}")
            time.sleep(0.02)  # poll interval of a bounded wait, not a fixed delay
        return self

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                sock.sendall(b"GET /nginx-health HTTP/1.0\r\n\r\n")
                return sock.recv(64).startswith(b"HTTP/1.1 200")
        except OSError:
            return False

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # fast shutdown of the master and its workers
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        self._dir.cleanup()
