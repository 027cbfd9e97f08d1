"""deploy/k8s/: the manifests fit together (labels, ports, probes, the secret) and keep
the rules a rolling restart needs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from server.tables_file import tables_from_toml

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "deploy" / "k8s"


def _documents() -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    docs: list[dict[str, Any]] = []
    for name in kustomization["resources"]:
        assert (K8S / name).is_file(), f"kustomization lists missing {name}"
        docs += [doc for doc in yaml.safe_load_all((K8S / name).read_text()) if doc]
    return docs


DOCS = _documents()


def _one(kind: str, name: str) -> dict[str, Any]:
    (found,) = [d for d in DOCS if d["kind"] == kind and d["metadata"]["name"] == name]
    return found


DEPLOYMENT = _one("Deployment", "baccarat")
POD = DEPLOYMENT["spec"]["template"]
(CONTAINER,) = POD["spec"]["containers"]
ENV = {e["name"]: e for e in CONTAINER["env"]}


def test_every_manifest_file_is_listed() -> None:
    """kustomization.yaml lists every manifest in the folder."""
    listed = set(yaml.safe_load((K8S / "kustomization.yaml").read_text())["resources"])
    assert listed == {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}


def test_probes_readiness_on_readyz_liveness_on_healthz() -> None:
    port = CONTAINER["ports"][0]
    assert (port["name"], port["containerPort"]) == ("http", 8765)
    assert CONTAINER["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert CONTAINER["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert CONTAINER["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert ENV["BACCARAT_PORT"]["value"] == "8765"


def test_prometheus_scrapes_the_admin_port() -> None:
    """/metrics is on the admin listener: a port of its own in the pod and the Service, named
    `admin`, bound on the pod's address, and the one the scrape annotations name."""
    ports = {p["name"]: p["containerPort"] for p in CONTAINER["ports"]}
    assert ports == {"http": 8765, "admin": 8766}
    assert ENV["BACCARAT_ADMIN_PORT"]["value"] == "8766"
    assert ENV["BACCARAT_ADMIN_HOST"]["value"] == "0.0.0.0"
    annotations = POD["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == "8766"
    assert annotations["prometheus.io/path"] == "/metrics"
    service = {p["name"]: p for p in _one("Service", "baccarat")["spec"]["ports"]}
    assert service["admin"]["targetPort"] == "admin" and service["http"]["targetPort"] == "http"


def test_a_rolling_update_never_drops_below_the_wanted_pods() -> None:
    strategy = DEPLOYMENT["spec"]["strategy"]
    assert strategy["type"] == "RollingUpdate"
    assert strategy["rollingUpdate"]["maxUnavailable"] == 0
    drain = float(ENV["BACCARAT_DRAIN_SECONDS"]["value"])
    assert POD["spec"]["terminationGracePeriodSeconds"] > drain + 10


def test_selectors_match_the_pods() -> None:
    """The Deployment's, Service's and PodDisruptionBudget's selectors pick these pods."""
    labels = POD["metadata"]["labels"]
    selectors = [
        DEPLOYMENT["spec"]["selector"]["matchLabels"],
        _one("Service", "baccarat")["spec"]["selector"],
        _one("PodDisruptionBudget", "baccarat")["spec"]["selector"]["matchLabels"],
    ]
    for selector in selectors:
        assert selector.items() <= labels.items()
    assert _one("PodDisruptionBudget", "baccarat")["spec"]["maxUnavailable"] == 1


def test_nodes_share_the_secret_and_redis_and_have_their_own_ids() -> None:
    assert ENV["BACCARAT_SECRET"]["valueFrom"]["secretKeyRef"] == {
        "name": "baccarat",
        "key": "secret",
    }
    assert ENV["BACCARAT_NODE_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    redis_service = _one("Service", "redis")
    assert ENV["BACCARAT_REDIS"]["value"].startswith(
        "redis://:$(REDIS_PASSWORD)@redis-0.redis:6379/"
    )
    assert redis_service["spec"]["clusterIP"] == "None"


def test_runs_as_non_root_with_a_read_only_root() -> None:
    assert POD["spec"]["securityContext"]["runAsNonRoot"] is True
    assert POD["spec"]["securityContext"]["runAsUser"] != 0
    security = CONTAINER["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False


def test_the_tables_file_is_mounted_and_valid() -> None:
    """The ConfigMap's tables.toml is mounted where BACCARAT_TABLES_FILE points, and parses."""
    config = _one("ConfigMap", "baccarat-tables")
    (mount,) = CONTAINER["volumeMounts"]
    assert ENV["BACCARAT_TABLES_FILE"]["value"] == f"{mount['mountPath']}/tables.toml"
    assert set(tables_from_toml(config["data"]["tables.toml"])) == {"classic8", "punto6", "vip"}


def test_redis_keeps_an_append_only_file_on_a_volume() -> None:
    conf = _one("ConfigMap", "redis-config")["data"]["redis.conf"]
    assert "appendonly yes" in conf and "maxmemory-policy noeviction" in conf
    redis = _one("StatefulSet", "redis")
    assert redis["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "data"


# --- what is public, and who reaches Redis (issue 16, item 20) --------------------------------

REDIS_PASSWORD_REF = {"secretKeyRef": {"name": "baccarat", "key": "redis-password"}}
INGRESS_PATHS = [
    (p["path"], p["pathType"])
    for rule in _one("Ingress", "baccarat")["spec"]["rules"]
    for p in rule["http"]["paths"]
]


def _routed(path: str) -> bool:
    """Whether the Ingress sends this request path to the nodes (Exact, or Prefix by whole
    path elements, as Kubernetes defines them)."""
    for routed, kind in INGRESS_PATHS:
        if kind == "Exact" and path == routed:
            return True
        if kind == "Prefix" and (path == routed or path.startswith(routed.rstrip("/") + "/")):
            return True
    return False


def test_the_ingress_routes_the_page_and_the_websocket_only() -> None:
    """The Ingress sent every path to the nodes, so /metrics, /status and /api were public:
    now only the page, /ws, /lobby and /healthz go through."""
    for path in ("/", "/index.html", "/ws", "/lobby", "/healthz"):
        assert _routed(path), path
    for path in ("/metrics", "/status", "/readyz", "/api/tables", "/api/players/a/credit"):
        assert not _routed(path), path
    assert not _routed("/README.md") and not _routed("/jsx")
    for routed, kind in INGRESS_PATHS:
        assert kind in ("Exact", "Prefix") and routed.startswith("/"), routed
        backend = next(
            p["backend"]["service"]
            for rule in _one("Ingress", "baccarat")["spec"]["rules"]
            for p in rule["http"]["paths"]
            if p["path"] == routed
        )
        assert backend == {"name": "baccarat", "port": {"name": "http"}}


def test_every_file_the_page_loads_is_routed() -> None:
    """Every file of client_demo/ a browser fetches (all but the Markdown notes) goes
    through the Ingress, so the page works; a file added at the top of the folder must be
    added to ingress.yaml too."""
    client = REPO / "client_demo"
    files = [p for p in client.rglob("*") if p.is_file() and p.suffix != ".md"]
    assert files
    for file in files:
        path = "/" + file.relative_to(client).as_posix()
        assert _routed(path), f"{path} is not routed by deploy/k8s/ingress.yaml"
    page = (client / "index.html").read_text()
    for ref in re.findall(r'(?:src|href)="(?![a-z]+:)([^"#?]+)', page):  # not data: or #
        assert _routed("/" + ref.lstrip("./")), ref


def test_redis_needs_a_password_from_the_secret() -> None:
    """The bundled Redis had no password and `protected-mode no`: it now takes
    `--requirepass` from the Secret (not from the ConfigMap), the nodes' URL carries the same
    value, and redis-cli in the probe authenticates with it."""
    conf = _one("ConfigMap", "redis-config")["data"]["redis.conf"]
    assert re.search(r"^protected-mode yes$", conf, re.MULTILINE)
    assert "requirepass" not in conf
    (redis,) = _one("StatefulSet", "redis")["spec"]["template"]["spec"]["containers"]
    args = redis["args"]
    assert args[args.index("--requirepass") + 1] == "$(REDIS_PASSWORD)"
    redis_env = {e["name"]: e for e in redis["env"]}
    assert redis_env["REDIS_PASSWORD"]["valueFrom"] == REDIS_PASSWORD_REF
    assert redis_env["REDISCLI_AUTH"]["value"] == "$(REDIS_PASSWORD)"
    assert redis["readinessProbe"]["exec"]["command"] == ["redis-cli", "ping"]
    # Kubernetes expands $(NAME) only from variables defined earlier in the list.
    names = [e["name"] for e in CONTAINER["env"]]
    assert names.index("REDIS_PASSWORD") < names.index("BACCARAT_REDIS")
    assert ENV["REDIS_PASSWORD"]["valueFrom"] == REDIS_PASSWORD_REF


def test_only_the_nodes_may_reach_redis() -> None:
    """A NetworkPolicy admits connections to Redis's pods on 6379 from the nodes' pods only."""
    policy = _one("NetworkPolicy", "redis")["spec"]
    redis_pod = _one("StatefulSet", "redis")["spec"]["template"]["metadata"]["labels"]
    assert policy["podSelector"]["matchLabels"].items() <= redis_pod.items()
    assert policy["policyTypes"] == ["Ingress"]
    (rule,) = policy["ingress"]
    (source,) = rule["from"]
    assert source["podSelector"]["matchLabels"].items() <= POD["metadata"]["labels"].items()
    assert rule["ports"] == [{"protocol": "TCP", "port": 6379}]
