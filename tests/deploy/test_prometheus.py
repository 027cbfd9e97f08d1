"""Prometheus's config and rules: valid for promtool when it is installed, and every series
they use is one that server/metrics.py exports."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from server.metrics import Metrics

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "deploy" / "prometheus" / "baccarat.rules.yml"
CONFIG = REPO / "deploy" / "prometheus.yml"
SUFFIXES = ("_total", "_bucket", "_count", "_sum")


def _rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("promtool")
    if binary is None:
        pytest.skip("promtool is not installed: apt-get install -y prometheus (Debian)")
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=60, check=False)


def test_rules_use_only_exported_families() -> None:
    """Each baccarat_* series in a rule is a family of server/metrics.py (plus its suffix)."""
    exported = set(Metrics().families())
    for rule in _rules():
        for series in re.findall(r"\b(baccarat_[a-z_]+)", rule["expr"]):
            family = next((series[: -len(s)] for s in SUFFIXES if series.endswith(s)), series)
            assert family in exported, f"{rule.get('record') or rule['alert']}: {series}"


def test_every_recorded_name_follows_the_convention() -> None:
    """Recorded series are named level:metric:operation (baccarat:...)."""
    for rule in _rules():
        if "record" in rule:
            assert re.fullmatch(r"baccarat:[a-z_]+:[a-z0-9_]+", rule["record"]), rule["record"]


def test_promtool_accepts_the_rules() -> None:
    done = _promtool("check", "rules", str(RULES))
    assert done.returncode == 0, done.stdout + done.stderr


def test_promtool_accepts_the_config(tmp_path: Path) -> None:
    """The config, with the rules where compose mounts them, is valid and finds them."""
    rules_dir = tmp_path / "rules"
    rules_dir.mkdir()
    shutil.copy(RULES, rules_dir / RULES.name)
    text = CONFIG.read_text().replace("/etc/prometheus/rules/", f"{rules_dir}/")
    (tmp_path / "prometheus.yml").write_text(text)
    done = _promtool("check", "config", str(tmp_path / "prometheus.yml"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout and RULES.name in done.stdout
