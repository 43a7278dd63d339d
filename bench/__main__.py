"""`make bench`: run every benchmark, write one JSON report and print one summary table.

Each benchmark module has `main() -> dict` and measures its own baseline in the same run, so the
ratios mean the same on any machine. The runner turns each benchmark's figures into rows
`{benchmark, figure, value, baseline, ratio, target}` (one function per benchmark, below) and
writes them, with every benchmark's raw figures, to bench/results/report.json.
"""

from __future__ import annotations

import importlib
import json
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCHMARKS = ["bench.ingest", "bench.wire", "bench.live", "bench.dsr", "bench.soak",
              "bench.wordpress_ttfb", "bench.heatmaps"]
RESULTS = Path(__file__).resolve().parent / "results"

Row = dict[str, Any]


def row(benchmark: str, figure: str, value: Any, baseline: Any = None, target: Any = None,
        ratio: Any = None) -> Row:
    """One line of the summary; the ratio is value / baseline unless given."""
    if ratio is None and isinstance(value, int | float) and isinstance(baseline, int | float):
        ratio = round(value / baseline, 3) if baseline else None
    return {"benchmark": benchmark, "figure": figure, "value": value, "baseline": baseline,
            "ratio": ratio, "target": target}


def _ingest_rows(f: dict[str, Any]) -> list[Row]:
    rows = []
    for when in ("before", "after"):
        if when not in f:
            continue
        for name, label in (("pageviews", "pageviews"), ("errors", "errors, enqueue+process"),
                            ("errors_enqueue_only", "errors, enqueue only")):
            g = f[when][name]
            rows.append(row("ingest", f"{when}: {label} req/s (baseline: bare Tornado)",
                            g["service_rps"], g["baseline_rps"], None, g["ratio"]))
            rows.append(row("ingest", f"{when}: {label} CPU µs/request (baseline: bare)",
                            g["cpu_us_per_request"], g["baseline_cpu_us_per_request"]))
        kept = f[when]["errors_enqueue_only"]
        rows.append(row("ingest", f"{when}: errors on the queue (baseline: answered ok)",
                        kept["kept"], kept["accepted"], "= answered"))
    return rows


def _wire_rows(f: dict[str, Any]) -> list[Row]:
    return [row("wire", f"{name}: service CPU µs/request on the wire (baseline: bare Tornado)",
                g["cpu_us_per_request"], g["baseline_cpu_us_per_request"])
            for name, g in f.items()]


def _live_rows(f: dict[str, Any]) -> list[Row]:
    return [
        row("live", f"p99 ms, {f['sockets']} sockets (baseline: 1 socket)", f["p99_ms"],
            f["baseline_1_socket_p99_ms"], f"<= {f['target_p99_ms']} ms",
            f["p99_vs_1_socket"]),
        row("live", "p50 ms (baseline: 1 socket)", f["p50_ms"], f["baseline_1_socket_p50_ms"]),
        row("live", "deliveries (baseline: expected)", f["deliveries"], f["deliveries_expected"],
            "= expected"),
    ]


def _dsr_rows(f: dict[str, Any]) -> list[Row]:
    large, small = f["large"], f["small_baseline"]
    return [
        row("dsr", "export seconds, large visitor (baseline: 10x smaller)",
            large["export_seconds"], small["export_seconds"]),
        row("dsr", "export RSS growth MB (baseline: 10x smaller)", large["export_rss_growth_mb"],
            small["export_rss_growth_mb"], f"< {f['target_export_rss_growth_mb']} MB"),
        row("dsr", "erase seconds (baseline: 10x smaller)", large["erase_seconds"],
            small["erase_seconds"]),
    ]


def _soak_rows(f: dict[str, Any]) -> list[Row]:
    rows = [row("soak", f"{endpoint} p99 ms, last tenth (baseline: first tenth)",
                r["last_tenth_p99_ms"], r["first_tenth_p99_ms"])
            for endpoint, r in f["latency"].items() if r["count"] >= 20]
    rss = f["rss"]
    rows.append(row("soak", "RSS MB at end (baseline: at start)", rss["end_mb"], rss["start_mb"]))
    rows.append(row("soak", "RSS growth not explained by stored data, MB",
                    rss["unexplained_growth_mb"], None, "~0"))
    # A leak keeps growing once allocator warm-up is over; the second half shows it alone.
    rows.append(row("soak", "  same, second half of the run only, MB",
                    rss["second_half"]["unexplained_mb"], None, "~0"))
    for kind, a in f["accounting"].items():
        rows.append(row("soak", f"{kind}: stored + dropped (baseline: sent)",
                        a["stored"] + sum(a["dropped"].values()), a["sent"], "adds up",
                        1.0 if a["adds_up"] else 0.0))
    rows.append(row("soak", "error queue depth, max", f["queue_depth"]["max"]))
    return rows


def _wordpress_rows(f: dict[str, Any]) -> list[Row]:
    return [
        row("wordpress", "TTFB p50 ms, plugin active (baseline: inactive)",
            f["p50_ms"]["active"], f["p50_ms"]["inactive"], f"<= {f['target_ratio']}x",
            f["p50_ratio"]),
        row("wordpress", "service connections while pages rendered",
            f["service_connections_while_rendering"], None, "0"),
        *(row("wordpress", f"{kind}: p50 ms added with the service hung", added, None,
              "<= 50 ms") for kind, added in f["service_hung"]["p50_added_ms"].items()),
        row("wordpress", "items kept in the outbox while the service hung",
            f["service_hung"]["kept_while_hung"], f["service_hung"]["sent_while_hung"]),
    ]


def _heatmap_rows(f: dict[str, Any]) -> list[Row]:
    return [
        row("heatmaps", "API ms, 1M clicks (baseline: one indexed read)", f["api_ms_1m_clicks"],
            f["one_indexed_read_ms"]),
        row("heatmaps", "API ms, 1M clicks (baseline: 1k clicks)", f["api_ms_1m_clicks"],
            f["api_ms_1k_clicks"]),
        row("heatmaps", "render ms (baseline: browser, blank page)", f["render_ms"],
            f["blank_browser_ms"]),
        row("heatmaps", "render: browser peak RSS MB", f["browser_peak_rss_mb"]),
        row("heatmaps", "render: service RSS growth MB", f["service_rss_growth_mb"]),
    ]


#: How each benchmark's figures become rows.
ROWS_FOR: dict[str, Callable[[dict[str, Any]], list[Row]]] = {
    "bench.ingest": _ingest_rows, "bench.wire": _wire_rows, "bench.live": _live_rows,
    "bench.dsr": _dsr_rows,
    "bench.soak": _soak_rows, "bench.wordpress_ttfb": _wordpress_rows,
    "bench.heatmaps": _heatmap_rows,
}


def _dashboard_rows(f: dict[str, Any]) -> list[Row]:
    rows = []
    for name, one in f["single"]["calls"].items():
        two = f["double"]["calls"][name]
        rows.append(row("dashboard", f"{name}: p50 ms at 2x data (baseline: 1x)",
                        two["p50_ms"], one["p50_ms"]))
        rows.append(row("dashboard", f"{name}: p95 ms at 2x data (baseline: 1x)",
                        two["p95_ms"], one["p95_ms"]))
    return rows


# The dashboard API's latency at 1x and 2x data (issue 21).
BENCHMARKS.append("bench.dashboard")
ROWS_FOR["bench.dashboard"] = _dashboard_rows


def _shop_rows(f: dict[str, Any]) -> list[Row]:
    rows = []
    for when in ("before", "after"):
        if when not in f:
            continue
        one, many = f[when]["pageviews"]["1_connections"], f[when]["pageviews"]["16_connections"]
        rows.append(row("shop", f"{when}: pageviews/s at 16 connections (baseline: at 1)",
                        many["rps"], one["rps"], ">= 1"))
        rows.append(row("shop", f"{when}: pageviews/s at 16 connections (baseline: bare)",
                        many["rps"], f["bare_16_connections_rps"]))
        rows.append(row("shop", f"{when}: store commands per pageview at 16 connections",
                        many["commands_per_pageview"], one["commands_per_pageview"]))
        rows.append(row("shop", f"{when}: transaction aborts per pageview at 16 connections "
                        "(baseline: at 1)", many.get("aborts_per_pageview"),
                        one.get("aborts_per_pageview"), "< 0.01"))
        for name, crowd in f[when].items():
            if not name.startswith("shop_"):
                continue
            label = f"{when}: {crowd['visitors']} visitors"
            rows.append(row("shop", f"{label}: 5xx answers", crowd["server_errors"], None, 0))
            rows.append(row("shop", f"{label}: pageviews stored (baseline: answered 200)",
                            crowd["pageviews_stored"], crowd["pageviews_answered_200"],
                            "= answered"))
            rows.append(row("shop", f"{label}: transaction aborts per request",
                            crowd.get("aborts_per_request"), None, "< 0.01"))
            rows.append(row("shop", f"{label}: pageview p99 ms",
                            crowd["paths"]["/ingest/pageviews"]["p99_ms"]))
            rows.append(row("shop", f"{label}: interactions p99 ms",
                            crowd["paths"]["/ingest/recordings/interactions"]["p99_ms"]))
            rows.append(row("shop", f"{label}: service CPU ms per visitor-minute",
                            crowd["cpu_ms_per_visitor_minute"]))
    return rows


# A shop under load on the production path (issue 30).
BENCHMARKS.append("bench.shop")
ROWS_FOR["bench.shop"] = _shop_rows


def _page_cost_rows(f: dict[str, Any]) -> list[Row]:
    summary = f["summary"]
    base = summary["none"]
    rows = []
    for tracker, figures in summary.items():
        if tracker == "none":
            continue
        for name, label in (("load_event_start_ms", "load event start ms"),
                            ("long_tasks_before_load_ms", "long tasks before load ms"),
                            ("script_ms", "main-thread script ms, visit"),
                            ("task_ms", "main-thread task ms, visit")):
            rows.append(row("page_cost", f"{tracker}: {label} (baseline: no tracker)",
                            figures[name]["median"], base[name]["median"]))
        rows.append(row("page_cost", f"{tracker}: KB uploaded in the visit",
                        round(figures["uploaded_bytes"]["median"] / 1024, 1)))
    for tracker, why in f["not_measured"].items():
        rows.append(row("page_cost", f"{tracker}: not measured ({why})"[:62], None))
    return rows


# What a tracker costs a shop's page, beside Sentry's and PostHog's replay (issue 28 point 18).
BENCHMARKS.append("bench.page_cost")
ROWS_FOR["bench.page_cost"] = _page_cost_rows


def _retention_rows(f: dict[str, Any]) -> list[Row]:
    large, small, ingest = f["large"], f["small_baseline"], f["ingest"]
    without, during = ingest["without_purge"], ingest["during_purge"]
    return [
        row("retention", f"purge s, {large['pageviews']} pageviews (baseline: 10x fewer)",
            large["seconds"], small["seconds"], "~10x"),
        row("retention", "purge RSS growth MB (baseline: 10x fewer)", large["rss_growth_mb"],
            small["rss_growth_mb"], "~0"),
        row("retention", "ingest p99 ms during a purge (baseline: without)", during["p99_ms"],
            without["p99_ms"]),
        row("retention", "ingest pageviews/s during a purge (baseline: without)",
            during["per_second"], without["per_second"]),
    ]


# The retention purge of a site with many pageviews, and ingest beside it (issue 32).
BENCHMARKS.append("bench.retention")
ROWS_FOR["bench.retention"] = _retention_rows


def _derivation_rows(f: dict[str, Any]) -> list[Row]:
    wire, embedded = f["secantus"], f["embedded"]
    one, two = wire["one_worker"], wire["two_workers"]
    rows = [row("fold", f"{wire['facts']} facts: facts/s, two workers (baseline: one)",
                two["facts_per_second"], one["facts_per_second"])]
    rows.extend(row("fold", f"  {w['owner']} of two: facts/s (baseline: one alone)",
                    w["facts_per_second"], one["facts_per_second"]) for w in two["workers"])
    for name, label in (("one_worker", "one worker"), ("two_workers", "two workers")):
        check = wire[name]["check"]
        rows.append(row("fold", f"{label}: facts folded (baseline: backlog)",
                        check["folded"], check["facts"], "= backlog"))
        rows.append(row("fold", f"{label}: figure docs unequal to a rebuild (of all)",
                        sum(check["sites_differing"].values()), check["figure_documents"], 0))
    idle, fold = embedded["ticker_alone"], embedded["ticker_during_fold"]
    rows += [
        row("fold", f"embedded, {embedded['facts']} facts: facts/s",
            embedded["facts_per_second"]),
        row("fold", "embedded: longest loop stall ms, fold (baseline: idle)",
            fold["longest_stall_ms"], idle["longest_stall_ms"]),
        row("fold", "embedded: longest loop CPU ms between ticks (baseline: idle)",
            fold["longest_loop_cpu_ms"], idle["longest_loop_cpu_ms"]),
        row("fold", "embedded: figure docs unequal to a rebuild (of all)",
            sum(embedded["check"]["sites_differing"].values()),
            embedded["check"]["figure_documents"], 0),
    ]
    return rows


# A backlog folded by two workers at once, and the embedded default's event loop (issue 38).
BENCHMARKS.append("bench.derivation")
ROWS_FOR["bench.derivation"] = _derivation_rows


def _insight_rows(f: dict[str, Any]) -> list[Row]:
    scales = [str(scale) for scale in sorted(int(key) for key in f["sessions"])]
    base, top = scales[0], scales[-1]
    rows = []
    for name, sizes in f["reports"].items():
        target = f"<= {f['target_ratio']}x" if name.startswith("errors list") else None
        rows.append(row("insight", f"{name}: s at {f['sessions'][top]} sessions "
                        f"(baseline: {f['sessions'][base]})", sizes[top]["seconds"],
                        sizes[base]["seconds"], target))
        rows.append(row("insight", f"{name}: documents read at {f['sessions'][top]} "
                        f"(baseline: {f['sessions'][base]})", sizes[top]["documents_read"],
                        sizes[base]["documents_read"]))
    return rows


# The reports a shop owner bets on at 1x, 4x and 16x the sessions (issue 39).
BENCHMARKS.append("bench.insight")
ROWS_FOR["bench.insight"] = _insight_rows



def _alerts_rows(f: dict[str, Any]) -> list[Row]:
    rows = [row("alerts", f"evaluation ms per site per pass, {f['sites']} sites x "
                          f"{f['rules_per_site']} rules (baseline: {f['baseline_sites']} sites)",
                f["pass_ms_per_site"], f["baseline_ms_per_site"]),
            row("alerts", "store reads per site per pass", f["pass_reads_per_site"])]
    rows += [row("alerts", f"{kind}: ms per site", found["ms_per_site"])
             for kind, found in f["kinds"].items()]
    return rows


# The alert rules' evaluation with 1,000 sites' rules (issue 42).
BENCHMARKS.append("bench.alerts")
ROWS_FOR["bench.alerts"] = _alerts_rows

def summary_table(rows: list[Row]) -> str:
    """The rows as a fixed-width text table."""
    def cell(value: Any) -> str:
        return "-" if value is None else str(value)

    header = f"{'benchmark':<9} {'figure':<62} {'value':>10} {'baseline':>10} {'ratio':>7}  target"
    lines = [header, "-" * len(header)]
    for r in rows:
        lines.append(f"{r['benchmark']:<9} {r['figure'][:62]:<62} {cell(r['value']):>10} "
                     f"{cell(r['baseline']):>10} {cell(r['ratio']):>7}  {cell(r['target'])}")
    return "\n".join(lines)


def main() -> int:
    """Run what exists; a benchmark that fails is reported, the others still run."""
    report: dict[str, Any] = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                              "rows": [], "benchmarks": {}}
    failed = False
    for name in BENCHMARKS:
        try:
            module = importlib.import_module(f"{name}.__main__")
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.startswith(name):
                report["benchmarks"][name] = {"status": "not present"}
                continue
            raise
        print(f"\n=== {name}")
        try:
            figures = module.main()
            report["benchmarks"][name] = {"status": "ok", "figures": figures}
            report["rows"].extend(ROWS_FOR[name](figures))
        except Exception:  # noqa: BLE001 - one broken benchmark must not hide the others
            traceback.print_exc()
            report["benchmarks"][name] = {"status": "failed"}
            failed = True
    report["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / "report.json"
    path.write_text(json.dumps(report, indent=2, default=str) + "\n", encoding="utf-8")
    table = summary_table(report["rows"])
    (RESULTS / "summary.txt").write_text(table + "\n", encoding="utf-8")
    print("\n" + table)
    print(f"\nreport: {path}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
