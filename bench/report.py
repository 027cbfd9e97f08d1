"""Turn a bench run's results into PNG plots and the generated section of docs/benchmarks.md."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from bench.cores import problems, section_lines

__all__ = ["plot", "update_doc"]

BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"
LABELS = {
    "memory": "ours (memory)",
    "redis": "ours (Redis, 1 node)",
    "redis2": "ours (Redis, 2 nodes)",
    "bare": "bare websockets",
    "socketio": "python-socketio",
    "redisw2": "ours (Redis, 1 node, 2 workers)",
}


def _series(results: dict[str, Any], pick: Any) -> dict[str, list[tuple[int, float]]]:
    series: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for row in results["fanout"]:
        if "error" not in row:
            series[row["engine"]].append((row["spectators"], pick(row)))
    return series


def plot(results: dict[str, Any], out: Path) -> list[str]:
    """Latency, CPU per delivery and connect time against spectators; the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    prefix = "smoke_" if results["kind"] == "smoke" else ""
    charts = [
        ("fanout_latency", "card delivery p99 (ms)", lambda r: r["latency_ms"]["p99"]),
        ("fanout_cpu", "server CPU per delivery (µs)", lambda r: r["server_us_per_delivery"]),
        ("fanout_connect", "connect + join (s)", lambda r: r["connect_s"]),
    ]
    written = []
    for name, ylabel, pick in charts:
        fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=100)
        for engine, points in sorted(_series(results, pick).items()):
            xs, ys = zip(*sorted(points), strict=True)
            ax.plot(xs, ys, marker="o", label=LABELS.get(engine, engine))
        sizes = sorted({row["spectators"] for row in results["fanout"]})
        if len(sizes) > 1:
            ax.set_xscale("log")
            ax.set_xticks(sizes, [f"{n:,}" for n in sizes])
            ax.minorticks_off()
        ax.set_xlabel("spectators on one table")
        ax.set_ylabel(ylabel)
        ax.set_title(f"{ylabel} ({results['kind']} run, {results['date']})", fontsize=9)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = out / f"{prefix}{name}.png"
        fig.savefig(path)
        plt.close(fig)
        written.append(path.name)
    return written


def _fanout_table(results: dict[str, Any]) -> list[str]:
    lines = [
        "| engine | spectators | connect + join s | RSS / conn KiB | card p50 / p99 / max ms "
        "| first write p50 / p99 ms | spread p50 / p99 ms | server µs / delivery | generator CPU |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results["fanout"]:
        if "error" in r:
            lines.append(
                f"| {r['engine']} | {r['spectators']} | failed: {r['error']} | | | | | | |"
            )
            continue
        lat, first, spread = r["latency_ms"], r["first_ms"], r["spread_ms"]
        lines.append(
            f"| {LABELS.get(r['engine'], r['engine'])} | {r['connected']:,} | {r['connect_s']} "
            f"| {r['rss_per_conn_kib']} | {lat['p50']} / {lat['p99']} / {lat['max']} "
            f"| {first['p50']} / {first['p99']} | {spread['p50']} / {spread['p99']} "
            f"| {r['server_us_per_delivery']} | {r['generator_cpu']:.0%} |"
        )
    return lines


def _ratios(results: dict[str, Any]) -> list[str]:
    rows = {(r["engine"], r["spectators"]): r for r in results["fanout"] if "error" not in r}
    sizes = sorted({n for _, n in rows})
    lines = [
        "| ratio | " + " | ".join(f"{n:,}" for n in sizes) + " |",
        "| --- |" + " ---: |" * len(sizes),
    ]

    def ratio(a: str, b: str, pick: Any) -> str:
        cells = []
        for n in sizes:
            if (a, n) in rows and (b, n) in rows and pick(rows[(b, n)]):
                cells.append(f"{pick(rows[(a, n)]) / pick(rows[(b, n)]):.2f}")
            else:
                cells.append("-")
        return " | ".join(cells)

    def cpu(r: dict[str, Any]) -> float:
        return float(r["server_us_per_delivery"])

    def p99(r: dict[str, Any]) -> float:
        return float(r["latency_ms"]["p99"])

    def connect(r: dict[str, Any]) -> float:
        return float(r["connect_s"])

    def rss(r: dict[str, Any]) -> float:
        return float(r["rss_per_conn_kib"])

    for label, a, b, pick in (
        ("CPU per delivery, ours (memory) ÷ bare", "memory", "bare", cpu),
        ("card p99, ours (memory) ÷ bare", "memory", "bare", p99),
        ("RSS per connection, ours (memory) ÷ bare", "memory", "bare", rss),
        ("connect + join, ours (memory) ÷ bare", "memory", "bare", connect),
        ("CPU per delivery, Redis ÷ memory", "redis", "memory", cpu),
        ("connect + join, Redis ÷ memory", "redis", "memory", connect),
        ("CPU per delivery, python-socketio ÷ bare", "socketio", "bare", cpu),
        ("card p99, 2 workers ÷ 1 process (Redis)", "redisw2", "redis", p99),
        ("CPU per delivery, 2 workers ÷ 1 process (Redis)", "redisw2", "redis", cpu),
    ):
        lines.append(f"| {label} | {ratio(a, b, pick)} |")
    return lines


def _second_node(results: dict[str, Any]) -> list[str]:
    lines = [
        "| spectators | second node's first delivery minus the owner's, p50 / p99 / max ms |",
        "| ---: | ---: |",
    ]
    for r in results["fanout"]:
        if r.get("engine") == "redis2" and "second_node_added_ms" in r:
            s = r["second_node_added_ms"]
            lines.append(f"| {r['spectators']:,} | {s['p50']} / {s['p99']} / {s['max']} |")
    return lines


_BET_SITES = {
    "bare": "bare websockets (ack)",
    "floor": "floor: memory node, bets answered as bare",
    "memory": "memory, 1 node",
    "redis": "Redis, 1 node",
    "redis2": "Redis, 2 nodes",
    "redisw2": "Redis, 1 node of 2 workers",
}


def _bets_table(results: dict[str, Any]) -> list[str]:
    site = _BET_SITES
    lines = [
        "| site | clients | accepted bets/s | ack p50 / p99 / max ms | rejected | node CPU "
        "| Redis CPU | generator CPU | node µs / bet | Redis µs / bet (INFO cpu) "
        "| paced: most bets/s at ack p99 <= 5 ms |",
        "| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results["bets"]:
        if "error" in r:
            lines.append(f"| {r['site']} | failed: {r['error']} | | | | | | | | | |")
            continue
        redis_us = r.get("redis_us_per_bet")
        ack = r["ack_ms"]
        lines.append(
            f"| {site.get(r['site'], r['site'])} | {r['clients']} | {r['bets_per_s']:,.0f} "
            f"| {ack['p50']} / {ack['p99']} / {ack['max']} | {r['rejected'] or '-'} "
            f"| {r['server_cpu']:.0%} | {r['redis_cpu']:.0%} | {r['generator_cpu']:.0%} "
            f"| {r.get('node_us_per_bet', '-')} | {'-' if redis_us is None else redis_us} "
            f"| {_paced_best(r)} |"
        )
    lines += _bet_ratios(results)
    steps = [r for r in results["bets"] if r.get("paced")]
    if steps:
        lines += [
            "",
            "Paced steps (offered bets/s: accepted bets/s, ack p50 / p99 ms, generator CPU):",
            "",
        ]
        for r in steps:
            shown = [_paced_step(step) for step in r["paced"]]
            lines.append(f"- {site.get(r['site'], r['site'])}: " + "; ".join(shown))
    return lines


def _bet_ratios(results: dict[str, Any]) -> list[str]:
    """Node CPU per accepted bet of each site divided by the bare ack server's (same run)."""
    per_bet = {r["site"]: r["node_us_per_bet"] for r in results["bets"] if "node_us_per_bet" in r}
    bare = per_bet.get("bare")
    if not bare:
        return []
    shown = [
        f"{_BET_SITES.get(site, site)} {us / bare:.2f}"
        for site, us in per_bet.items()
        if site != "bare"
    ]
    if not shown:
        return []
    return [
        "",
        "Node CPU per accepted bet ÷ the bare acknowledgement server's: " + "; ".join(shown),
    ]


def _paced_best(r: dict[str, Any]) -> str:
    if not r.get("paced"):
        return "-"
    best = r.get("best_paced_per_s", 0)
    return f"{best:,}" if best else f"< {r['paced'][0]['offered_per_s']:,}"


def _paced_step(step: dict[str, Any]) -> str:
    if "error" in step:
        return f"{step['offered_per_s']:,}: {step['error']}"
    ack = step["ack_ms"]
    shown = f"{step['offered_per_s']:,}: {step['accepted_per_s']:,}, {ack['p50']} / {ack['p99']}"
    again = " (again: the first try missed)" if step.get("retry") else ""
    return shown + f", {step.get('generator_cpu', 0):.0%}{again}"


GC_TARGET_MS = 20.0  # issue 20: no collector pause over 20 ms


def _gc_cells(gc: dict[str, Any]) -> str:
    """One run's pauses: collections (full), longest wall / CPU, p99; each process's if more."""
    procs = gc.get("processes", [])
    each = procs if len(procs) > 1 else [gc]
    cells = [
        " · ".join(f"{p['count']} ({p['full']})" for p in each),
        " · ".join(f"{p['max_ms']} / {p['cpu_max_ms']}" for p in each),
        " · ".join(f"{p['p99_ms']}" for p in each),
    ]
    over = gc["cpu_max_ms"] > GC_TARGET_MS
    missing = f", {gc['missing']} process(es) wrote none" if gc.get("missing") else ""
    return " | ".join(cells) + f" | {'**over**' if over else 'yes'}{missing} |"


def gc_problems(results: dict[str, Any]) -> list[str]:
    """Runs of our node with a process that wrote no collector pauses: its longest pause was
    not measured, whatever the table's other processes say (a problem, not a 'yes')."""
    found = []
    for r in results.get("bets", []):
        if (r.get("gc") or {}).get("missing"):
            found.append(f"bets {r['site']}: {r['gc']['missing']} process(es) wrote no pauses")
    for r in results.get("fanout", []):
        if (r.get("gc") or {}).get("missing"):
            run = f"fan-out {r['engine']} {r['spectators']:,}"
            found.append(f"{run}: {r['gc']['missing']} process(es) wrote no pauses")
    return found


def _gc_runs_table(results: dict[str, Any]) -> list[str]:
    """Our node's collector pauses per run (from the first connection to the run's end)."""
    lines = [
        "| run | collections (full) | longest ms, wall / CPU | p99 ms | longest CPU ≤ 20 ms |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for r in results.get("bets", []):
        if r.get("gc"):
            lines.append(f"| bets, {_BET_SITES.get(r['site'], r['site'])} | " + _gc_cells(r["gc"]))
    for r in results.get("fanout", []):
        if r.get("gc"):
            name = f"fan-out, {LABELS.get(r['engine'], r['engine'])}, {r['spectators']:,}"
            lines.append(f"| {name} | " + _gc_cells(r["gc"]))
    return lines


_PHASES = {
    "spectators": (("joins", "connect + join"), ("window", "joined, fan-out")),
    "bets": (("fill", "filling the round"), ("hold_and_settle", "held, settled, delivered")),
}


def _collector_table(results: dict[str, Any]) -> list[str]:
    """bench/gc_pauses.py's two situations, run by `make bench` (collector tuned)."""
    found = results.get("collector") or {}
    lines = [
        "| situation, phase | collections (full) | longest ms, wall / CPU | p99 ms, wall / CPU "
        "| longest CPU ≤ 20 ms | load average |",
        "| --- | ---: | ---: | ---: | --- | --- |",
    ]
    for situation, phases in _PHASES.items():
        run = found.get(situation)
        if not run:
            continue
        name = f"{run['size']:,} {situation}"
        if "error" in run:
            lines.append(f"| {name} | failed: {run['error']} | | | | |")
            continue
        for key, phase in phases:
            s = run[key]
            met = (
                "no collection"
                if not s["count"]
                else ("**over**" if s["cpu_max_ms"] > GC_TARGET_MS else "yes")
            )
            lines.append(
                f"| {name}, {phase} | {s['count']} ({s['full']}) "
                f"| {s['max_ms']} / {s['cpu_max_ms']} | {s['p99_ms']} / {s['cpu_p99_ms']} "
                f"| {met} | {run['load_average']} |"
            )
    return lines


def _collector_section(results: dict[str, Any]) -> list[str]:
    return [
        "### Collector pauses",
        "",
        "Per run, our node's processes (each, ` · ` between them, for two nodes or workers):",
        "",
        *_gc_runs_table(results),
        "",
        "The issue's two situations (`bench/gc_pauses.py`, once, the collector tuned):",
        "",
        *_collector_table(results),
        "",
    ]


def section(results: dict[str, Any], plots: list[str]) -> str:
    m = results["machine"]
    pinned = "server(s) and Redis on core 0, generator on core 1 (taskset)"
    lines = [
        BEGIN,
        "",
        f"_Generated by `{results['command']}` ({results['kind']} run) on {results['date']} "
        f"in {results.get('elapsed_s', '?')} s. Do not edit by hand: rerun it._",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB, Linux "
        f"{m['kernel']}, Python {m['python']}, websockets {m['websockets']}, python-socketio "
        f"{m['python-socketio']} on aiohttp {m['aiohttp']}, redis-server {m['redis-server']}; "
        f"{pinned if m['pinned'] else 'not pinned (no taskset or one core)'}; "
        f"load average at start {m['load_average']}.",
        "",
        "### Fan-out to spectators",
        "",
        *_fanout_table(results),
        "",
        *_ratios(results),
        "",
        "### Two nodes on Redis",
        "",
        *_second_node(results),
        "",
        "### Bets",
        "",
        *_bets_table(results),
        "",
        *_collector_section(results),
        "### Several cores (--workers), measured",
        "",
        *section_lines(results),
        "",
        *[f"![{name}](bench/{name})" for name in plots],
        "",
    ]
    if found := problems(results):
        lines += ["**Problems** (the generator was the limit): " + "; ".join(found) + ".", ""]
    if found := gc_problems(results):
        lines += ["**Problems** (collector not measured): " + "; ".join(found) + ".", ""]
    if results["skipped"]:
        lines += [f"Skipped to stay within the time budget: {', '.join(results['skipped'])}.", ""]
    lines.append(END)
    return "\n".join(lines)


def update_doc(results: dict[str, Any], plots: list[str], doc: Path) -> None:
    text = doc.read_text()
    new = section(results, plots)
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + new + rest.split(END, 1)[1]
    else:
        text = text.rstrip() + "\n\n## Results\n\n" + new + "\n"
    doc.write_text(text)
