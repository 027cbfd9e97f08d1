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


RULE_TESTS = """
rule_files: [{rules}]
evaluation_interval: 15s
tests:
  - interval: 15s
    input_series:
      - series: 'baccarat_bets_total{{instance="n1", result="ACCEPTED"}}'
        values: '0+45x20'
      - series: 'baccarat_bets_total{{instance="n2", result="LIMIT"}}'
        values: '0+15x20'
      - series: 'baccarat_rounds_total{{instance="n1", outcome="banker"}}'
        values: '0x20'
      - series: 'up{{job="baccarat", instance="n1"}}'
        values: '1x20'
    promql_expr_test:
      - expr: baccarat:bets_rejected:ratio1m
        eval_time: 4m
        exp_samples:
          - labels: 'baccarat:bets_rejected:ratio1m'
            value: 0.25
      - expr: baccarat:bets:rate1m
        eval_time: 4m
        exp_samples:
          - labels: 'baccarat:bets:rate1m{{result="ACCEPTED"}}'
            value: 3
          - labels: 'baccarat:bets:rate1m{{result="LIMIT"}}'
            value: 1
    alert_rule_test:
      - alertname: BaccaratTablesNotDealing
        eval_time: 5m
        exp_alerts:
          - exp_labels: {{severity: page}}
            exp_annotations:
              summary: "no round settled on any node for 2 minutes"
"""


def test_promtool_unit_tests_of_the_rules(tmp_path: Path) -> None:
    """On synthetic series the recorded bet rate and rejected share, and the no-rounds alert,
    come out as intended."""
    tests = tmp_path / "rules_test.yml"
    tests.write_text(RULE_TESTS.format(rules=RULES))
    done = _promtool("test", "rules", str(tests))
    assert done.returncode == 0, done.stdout + done.stderr
