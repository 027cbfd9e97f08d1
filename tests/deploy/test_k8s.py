"""deploy/k8s/: the manifests fit together (labels, ports, probes, the secret) and keep
the rules a rolling restart needs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from server.tables_file import tables_from_toml

K8S = Path(__file__).resolve().parents[2] / "deploy" / "k8s"


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
    assert ENV["BACCARAT_PORT"]["value"] == "8765"


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
    assert ENV["BACCARAT_REDIS"]["value"].startswith("redis://redis-0.redis:6379/")
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
