"""docker-compose.yml: valid for docker-compose (offline `config -q`), and every service,
file and target it names exists."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker-compose.yml"
COMPOSE: dict[str, Any] = yaml.safe_load(COMPOSE_FILE.read_text())  # merge keys resolved
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
NODES = sorted(name for name in SERVICES if re.fullmatch(r"node\d+", name))
INSTALL_HINT = "docker-compose is not installed: apt-get install -y docker-compose (Debian)"
REDIS_PASSWORD = "0123abcd" * 8  # as `openssl rand -hex 32` makes one


def _compose(
    *args: str, secret: str | None = "test-secret", redis_password: str | None = REDIS_PASSWORD
) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("docker-compose")
    if binary is None:
        pytest.skip(INSTALL_HINT)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("BACCARAT_") and k != "REDIS_PASSWORD"
    }
    if secret is not None:
        env["BACCARAT_SECRET"] = secret
    if redis_password is not None:
        env["REDIS_PASSWORD"] = redis_password
    return subprocess.run(
        [binary, "-f", str(COMPOSE_FILE), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
        cwd=REPO,
    )


def test_docker_compose_validates_the_file() -> None:
    """`docker-compose config -q` accepts the file (profiles, healthchecks, merge keys)."""
    done = _compose("config", "-q")
    assert done.returncode == 0, done.stderr


def test_the_secret_is_required() -> None:
    """Without BACCARAT_SECRET in the environment the site refuses to start."""
    done = _compose("config", "-q", secret=None)
    assert done.returncode != 0 and "BACCARAT_SECRET" in done.stderr


def test_the_redis_password_is_required() -> None:
    """Without REDIS_PASSWORD in the environment the site refuses to start."""
    done = _compose("config", "-q", redis_password=None)
    assert done.returncode != 0 and "REDIS_PASSWORD" in done.stderr


def test_redis_requires_the_password_and_the_nodes_send_it() -> None:
    """Redis runs with `--requirepass` from the environment and without `--protected-mode
    no` (it had no password: anything on the compose network could read and move money);
    every node's URL carries the same password; the healthcheck's redis-cli uses it too."""
    done = _compose("config")
    assert done.returncode == 0, done.stderr
    resolved = yaml.safe_load(done.stdout)["services"]
    command = resolved["redis"]["command"]
    assert command[command.index("--requirepass") + 1] == REDIS_PASSWORD
    assert "--protected-mode" not in command
    assert resolved["redis"]["environment"]["REDISCLI_AUTH"] == REDIS_PASSWORD
    assert resolved["redis"]["healthcheck"]["test"] == ["CMD", "redis-cli", "ping"]
    for name in NODES:
        url = urlparse(resolved[name]["environment"]["BACCARAT_REDIS"])
        assert (url.password, url.hostname, url.port) == (REDIS_PASSWORD, "redis", 6379)
    conf = (REPO / "deploy" / "redis.conf").read_text()
    assert re.search(r"^protected-mode yes$", conf, re.MULTILINE)
    assert not re.search(r"^requirepass", conf, re.MULTILINE)  # never in a file of the repo


def test_the_resolved_config_keeps_the_bots_profile() -> None:
    """The bots service only starts with `--profile bots`."""
    done = _compose("config")
    assert done.returncode == 0, done.stderr
    resolved = yaml.safe_load(done.stdout)["services"]
    assert resolved["bots"]["profiles"] == ["bots"]
    assert set(resolved) == set(SERVICES)


def test_three_nodes_share_redis_and_the_secret() -> None:
    """Three nodes, each with its own id, the same Redis URL and the same secret."""
    assert len(NODES) == 3
    envs = [SERVICES[name]["environment"] for name in NODES]
    assert len({env["BACCARAT_NODE_ID"] for env in envs}) == 3
    assert len({env["BACCARAT_REDIS"] for env in envs}) == 1
    assert len({env["BACCARAT_SECRET"] for env in envs}) == 1
    assert envs[0]["BACCARAT_SECRET"].startswith("${BACCARAT_SECRET:?")
    # The password is an interpolation (${REDIS_PASSWORD:?...}); the rest is a plain URL.
    redis_host = urlparse(re.sub(r"\$\{[^}]*\}", "pw", envs[0]["BACCARAT_REDIS"])).hostname
    assert redis_host in SERVICES
    for name in NODES:
        assert SERVICES[name]["depends_on"]["redis"]["condition"] == "service_healthy"


def test_redis_runs_the_durable_config() -> None:
    """Redis runs deploy/redis.conf, which keeps the append-only file on."""
    redis = SERVICES["redis"]
    assert any(v.startswith("./deploy/redis.conf:") for v in redis["volumes"])
    assert "/usr/local/etc/redis/redis.conf" in redis["command"]
    conf = (REPO / "deploy" / "redis.conf").read_text()
    assert re.search(r"^appendonly yes$", conf, re.MULTILINE)


def test_every_depends_on_names_a_service() -> None:
    for name, service in SERVICES.items():
        for needed in service.get("depends_on", []):
            assert needed in SERVICES, f"{name} depends on unknown service {needed}"


def test_every_mounted_file_exists() -> None:
    """Bind mounts of the repository's files point at files that are there."""
    for name, service in SERVICES.items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (REPO / source).exists(), f"{name} mounts missing {source}"


def test_nginx_balances_the_nodes_and_serves_the_client() -> None:
    """deploy/nginx.conf's upstream servers are the compose nodes on their port, WebSocket
    upgrade headers and long timeouts are set, and client_demo/ is its root."""
    conf = (REPO / "deploy" / "nginx.conf").read_text()
    servers = re.findall(r"^\s*server (\S+):(\d+)\b", conf, re.MULTILINE)
    assert sorted(host for host, _ in servers) == NODES
    ports = {SERVICES[name]["environment"]["BACCARAT_PORT"] for name in NODES}
    assert {port for _, port in servers} == ports
    for directive in (
        "proxy_set_header Upgrade $http_upgrade;",
        "proxy_set_header Connection $connection_upgrade;",
        "proxy_http_version 1.1;",
        "proxy_read_timeout 1h;",
        "proxy_next_upstream error timeout http_502 http_503;",
    ):
        assert directive in conf, directive
    nginx = SERVICES["nginx"]
    assert "./client_demo:/usr/share/nginx/html:ro" in nginx["volumes"]
    assert "root /usr/share/nginx/html;" in conf


def test_nginx_passes_only_the_websocket_and_the_lobby_to_the_nodes() -> None:
    """The public proxy sends /ws and /lobby to the nodes and nothing else: /status,
    /metrics, /readyz and /api/... are answered 404 by nginx itself."""
    conf = (REPO / "deploy" / "nginx.conf").read_text()
    proxied = re.findall(r"location\s+([^{]+?)\s*\{[^}]*proxy_pass", conf)
    assert proxied == ["= /ws", "= /lobby"]
    hidden = re.search(r"location ~ (\S+) \{\s*return 404;", conf)
    assert hidden is not None
    for path in ("/status", "/metrics", "/readyz", "/api/tables", "/api/players/a/credit"):
        assert re.match(hidden.group(1), path), path


def test_nginx_logs_no_query_strings() -> None:
    """Browsers send their token as ?token=: the access log's format must not write the query
    ($request, $request_uri, $args, $query_string, $arg_token)."""
    conf = (REPO / "deploy" / "nginx.conf").read_text()
    formats = re.findall(r"^\s*log_format\s+\S+\s+((?:'[^']*'\s*)+);", conf, re.MULTILINE)
    assert formats, "no log_format in deploy/nginx.conf"
    leaky = re.compile(r"\$(request|request_uri|args|query_string|arg_\w+)\b")
    for text in formats:
        assert not leaky.search(text), text
    assert re.search(r"^\s*access_log\s+\S+\s+upstream;", conf, re.MULTILINE)


def test_prometheus_scrapes_every_node() -> None:
    """deploy/prometheus.yml scrapes exactly the compose nodes, on their admin port (which
    serves /metrics; the public port does not)."""
    prometheus = yaml.safe_load((REPO / "deploy" / "prometheus.yml").read_text())
    (job,) = [j for j in prometheus["scrape_configs"] if j["job_name"] == "baccarat"]
    targets = [t for config in job["static_configs"] for t in config["targets"]]
    assert sorted(t.split(":")[0] for t in targets) == NODES
    admin_ports = {SERVICES[name]["environment"]["BACCARAT_ADMIN_PORT"] for name in NODES}
    assert admin_ports == {"8766"}
    assert all(t.endswith(":8766") for t in targets)
    assert job["metrics_path"] == "/metrics"


def test_the_admin_port_is_not_published_to_the_host() -> None:
    """Only nginx and Prometheus publish ports; the nodes' admin listener is bound on the
    compose network (for Prometheus) and nginx proxies none of it."""
    for name in NODES:
        node = SERVICES[name]
        assert "ports" not in node, name
        assert node["environment"]["BACCARAT_ADMIN_HOST"] == "0.0.0.0"
    published = {name for name, service in SERVICES.items() if "ports" in service}
    assert published == {"nginx", "prometheus"}
    conf = (REPO / "deploy" / "nginx.conf").read_text()
    assert ":8766" not in conf


def test_bots_go_through_nginx() -> None:
    """The bots service runs `baccarat bots` against nginx's /ws, under the bots profile."""
    bots = SERVICES["bots"]
    assert bots["profiles"] == ["bots"]
    command = bots["command"]
    assert command[0] == "bots"
    url = urlparse(command[command.index("--url") + 1])
    assert url.scheme == "ws" and url.hostname in SERVICES and url.path == "/ws"
    assert url.hostname == "nginx"


def test_the_wallet_checks_its_own_port() -> None:
    """The image's healthcheck asks a node's /healthz; the wallet serves only its API on 8780,
    so its service checks that port instead (else it would always be unhealthy)."""
    wallet = COMPOSE["services"]["wallet"]
    test = " ".join(wallet["healthcheck"]["test"])
    assert "8780" in test and "healthz" not in test
