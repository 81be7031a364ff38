#!/usr/bin/env python3
"""Builds dashboard.json (the Grafana dashboard "paypipe", uid paypipe-overview) from panels.json
and the layout below, so that the queries live in one machine-readable place.

    python3 deploy/observability/make-dashboard.py           # writes dashboard.json
    python3 deploy/observability/make-dashboard.py --check   # exit 1 if dashboard.json differs

panels.json is an array of {"title", "expr", "unit"}, one entry per query target, in dashboard
order; the entries with the same title are one panel's targets. The layout here gives each panel
its row, type, width, description, legends and display options, and must name every title in
panels.json exactly once. deploy/check runs --check.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PANELS = os.path.join(HERE, "panels.json")
DASHBOARD = os.path.join(HERE, "dashboard.json")

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}

# The rows, in order; in each, its panels: title (as in panels.json), type, width (of 24),
# description, one legend per target, and options merged into the panel's fieldConfig defaults.
LAYOUT = [
    ("Orders", [
        {"title": "Outcomes per second by status", "w": 12, "legend": ["{{status}}"],
         "description": "Outcomes the ledgers sent upstream per second, by status (approved, declined, pending, "
                        "unknown, ...), summed over the ledgers. paypipe_outcomes_out_total."},
        {"title": "Outcomes per second by provider and operation", "w": 12, "legend": ["{{provider}} {{operation}}"],
         "description": "Outcomes the ledgers sent upstream per second, by provider and operation, for the "
                        "providers chosen above. paypipe_outcomes_out_total."},
        {"title": "Orders in per second", "w": 12, "legend": ["{{instance}}"],
         "description": "Intake frames each ledger received per second (one line per ledger). "
                        "paypipe_orders_in_total."},
        {"title": "Orders open, pending and in review", "w": 12, "legend": ["open", "pending", "review"],
         "description": "Orders in the store by state: open (no outcome yet, or an unknown one: the work queue), "
                        "pending (waiting on the customer or a provider's callback or poll) and review (NEEDS_REVIEW, "
                        "waiting for an operator: `paypipe review` lists them). Every ledger reports the shared "
                        "store's counts, so this is the max over the ledgers."},
    ]),
    ("Age", [
        {"title": "Oldest open order by provider", "w": 12, "legend": ["{{provider}}"],
         "thresholds": [600],
         "description": "Age of the oldest open order per provider (0 when none is open). The "
                        "PaypipeOldestOpenOrderOld alert pages above 10 minutes (the red line). "
                        "paypipe_oldest_open_order_age_seconds."},
        {"title": "Oldest pending order by provider", "w": 12, "legend": ["{{provider}}"],
         "thresholds": [86400],
         "description": "Age of the oldest pending order per provider (0 when none is pending). The "
                        "PaypipeOldestPendingOrderOld alert opens a ticket above a day (the red line). "
                        "paypipe_oldest_pending_order_age_seconds."},
    ]),
    ("Providers", [
        {"title": "Provider request duration p50 and p99", "w": 8,
         "legend": ["p50 {{provider}} {{operation}}", "p99 {{provider}} {{operation}}"],
         "description": "Median and 99th percentile of the submitters' provider request durations over 1 minute, "
                        "by provider and operation (buckets 1 ms to 10 s). "
                        "paypipe_provider_request_duration_seconds."},
        {"title": "Provider responses per second by status class", "w": 8, "legend": ["{{provider}} {{status_class}}"],
         "description": "Provider responses per second by status class (2xx, 3xx, 4xx, 5xx, and transport: no "
                        "answer). 4xx is mostly declines. paypipe_provider_responses_total."},
        {"title": "Provider error ratio (5xx and transport)", "w": 8, "legend": ["{{provider}} {{operation}}"],
         "thresholds": [0.05],
         "description": "Share of provider requests answered 5xx or not at all over 5 minutes, by provider and "
                        "operation: the PaypipeProviderErrorRate alert's expression, which pages above 5 % "
                        "(the red line)."},
    ]),
    ("Stages", [
        {"title": "Readiness by job", "w": 8, "legend": ["{{job}}"],
         "min": 0, "max": 1, "mappings": {"0": "not ready", "1": "ready"},
         "description": "1 when every copy of the stage is ready (its /readyz answers 200), 0 when one is not. "
                        "The PaypipeStageNotReady alert pages after 2 minutes not ready. paypipe_ready."},
        {"title": "Store errors per second", "w": 8, "legend": ["{{instance}}"],
         "description": "Failed store transactions per second on each ledger. Each is retried; after 5 failures "
                        "in a row the ledger exits (status 75). The PaypipeStoreFailing alert pages on any. "
                        "paypipe_store_errors_total."},
        {"title": "Orders redelivered per second", "w": 8, "legend": ["{{instance}}"],
         "description": "Stalled orders each ledger dispatched again per second (a submitter lost or never "
                        "finished them). paypipe_orders_redelivered_total."},
        {"title": "Submitter requests in flight", "w": 12, "legend": ["{{instance}}"],
         "description": "Provider requests each submitter has in progress (at most its --concurrency). "
                        "paypipe_submitter_in_flight."},
        {"title": "Build info", "w": 12, "type": "table", "legend": [""],
         "description": "The version each stage's process runs, one row per copy. paypipe_build_info."},
    ]),
]


def panel_targets(entries, legends):
    targets = []
    for index, (entry, legend) in enumerate(zip(entries, legends)):
        target = {"datasource": DATASOURCE, "refId": chr(ord("A") + index), "expr": entry["expr"], "legendFormat": legend}
        targets.append(target)
    return targets


def field_config(spec, unit):
    defaults = {"unit": unit}
    if "min" in spec:
        defaults["min"] = spec["min"]
    if "max" in spec:
        defaults["max"] = spec["max"]
    if "mappings" in spec:
        defaults["mappings"] = [{"type": "value", "options": {value: {"text": text, "index": i}
                                                              for i, (value, text) in enumerate(sorted(spec["mappings"].items()))}}]
    steps = [{"color": "green", "value": None}] + [{"color": "red", "value": v} for v in spec.get("thresholds", [])]
    defaults["thresholds"] = {"mode": "absolute", "steps": steps}
    if spec.get("type", "timeseries") == "timeseries":
        defaults["custom"] = {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 0, "showPoints": "never",
                              "spanNulls": False,
                              "thresholdsStyle": {"mode": "line" if spec.get("thresholds") else "off"}}
    return {"defaults": defaults, "overrides": []}


def build(entries):
    by_title = {}
    for entry in entries:
        if set(entry) != {"title", "expr", "unit"}:
            sys.exit(f"make-dashboard: a panels.json entry must have exactly title, expr and unit: {entry}")
        by_title.setdefault(entry["title"], []).append(entry)
    placed = [spec["title"] for _, specs in LAYOUT for spec in specs]
    problems = [f"not in the layout: {t}" for t in by_title if t not in placed]
    problems += [f"in the layout but not in panels.json: {t}" for t in placed if t not in by_title]
    problems += [f"twice in the layout: {t}" for t in set(placed) if placed.count(t) > 1]
    order = [e["title"] for e in entries]
    if [t for t in placed if t in by_title] != sorted(set(order), key=order.index):
        problems.append("panels.json's order differs from the layout's (rows, then panels in each row)")
    for _, specs in LAYOUT:
        for spec in specs:
            targets = by_title.get(spec["title"], [])
            if targets and len(spec["legend"]) != len(targets):
                problems.append(f"{spec['title']}: {len(targets)} targets but {len(spec['legend'])} legends")
            if len({t["unit"] for t in targets}) > 1:
                problems.append(f"{spec['title']}: its targets have different units")
    if problems:
        sys.exit("make-dashboard: " + "; ".join(problems))

    panels, next_id, y = [], 1, 0
    for row_title, specs in LAYOUT:
        panels.append({"type": "row", "title": row_title, "id": next_id, "collapsed": False,
                       "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []})
        next_id, y, x = next_id + 1, y + 1, 0
        for spec in specs:
            targets = by_title[spec["title"]]
            if x + spec["w"] > 24:
                x, y = 0, y + 8
            panel = {
                "type": spec.get("type", "timeseries"),
                "title": spec["title"],
                "description": spec["description"],
                "id": next_id,
                "datasource": DATASOURCE,
                "gridPos": {"h": 8, "w": spec["w"], "x": x, "y": y},
                "fieldConfig": field_config(spec, targets[0]["unit"]),
                "targets": panel_targets(targets, spec["legend"]),
            }
            if panel["type"] == "table":
                for target in panel["targets"]:
                    target.update({"format": "table", "instant": True, "range": False})
                panel["options"] = {"showHeader": True, "cellHeight": "sm"}
                panel["transformations"] = [{"id": "organize", "options": {
                    "excludeByName": {"Time": True, "Value": True, "__name__": True},
                    "indexByName": {"stage": 0, "version": 1, "job": 2, "instance": 3}}}]
            else:
                for target in panel["targets"]:
                    target.update({"range": True})
                panel["options"] = {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                                    "tooltip": {"mode": "multi", "sort": "desc"}}
            panels.append(panel)
            next_id, x = next_id + 1, x + spec["w"]
        y += 8

    variables = [
        {"type": "datasource", "name": "datasource", "label": "Data source", "query": "prometheus",
         "current": {}, "hide": 0, "refresh": 1, "regex": "", "options": []},
        {"type": "query", "name": "provider", "label": "Provider", "datasource": DATASOURCE,
         "definition": "label_values(paypipe_outcomes_out_total, provider)",
         "query": {"qryType": 1, "query": "label_values(paypipe_outcomes_out_total, provider)", "refId": "PrometheusVariableQueryEditor-VariableQuery"},
         "includeAll": True, "multi": True, "allValue": ".*",
         "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
         "hide": 0, "refresh": 2, "regex": "", "sort": 1, "options": []},
    ]
    return {
        "uid": "paypipe-overview",
        "title": "paypipe",
        "description": "The payment pipeline: orders and outcomes, order ages, provider requests, and the stages' "
                       "health. Generated by deploy/observability/make-dashboard.py from panels.json; edit those, "
                       "not this file. Alerts: deploy/observability/alerts.yaml; what to do: docs/operations.md.",
        "tags": ["paypipe"],
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "graphTooltip": 1,
        "fiscalYearStartMonth": 0,
        "liveNow": False,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "timepicker": {},
        "timezone": "",
        "links": [],
        "annotations": {"list": [{
            "builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"}, "enable": True, "hide": True,
            "iconColor": "rgba(0, 211, 255, 1)", "name": "Annotations & Alerts", "type": "dashboard"}]},
        "templating": {"list": variables},
        "panels": panels,
    }


def targets_of(dashboard):
    """Every panel target of a dashboard as a panels.json entry."""
    return [{"title": p["title"], "expr": t["expr"], "unit": p["fieldConfig"]["defaults"]["unit"]}
            for p in dashboard["panels"] if p["type"] != "row" for t in p["targets"]]


def main(argv):
    if argv not in ([], ["--check"]):
        sys.exit(__doc__)
    with open(PANELS) as f:
        entries = json.load(f)
    dashboard = build(entries)
    if targets_of(dashboard) != entries:
        sys.exit("make-dashboard: the generated targets differ from panels.json (a bug in this script)")
    text = json.dumps(dashboard, indent=2, ensure_ascii=False) + "\n"
    if argv == ["--check"]:
        try:
            with open(DASHBOARD) as f:
                current = f.read()
        except FileNotFoundError:
            current = None
        if current != text:
            problem = "is missing" if current is None else "differs from what make-dashboard.py generates"
            if current is not None:
                try:
                    if targets_of(json.loads(current)) != entries:
                        problem += " (its targets differ from panels.json)"
                except (ValueError, KeyError, TypeError) as error:
                    problem += f" (and does not parse as a dashboard: {error})"
            sys.exit(f"make-dashboard: {os.path.relpath(DASHBOARD)} {problem}; run python3 {os.path.relpath(__file__)}")
        print(f"{os.path.relpath(DASHBOARD)}: up to date with panels.json ({len(entries)} targets)")
        return
    with open(DASHBOARD, "w") as f:
        f.write(text)
    print(f"wrote {os.path.relpath(DASHBOARD)} ({len(entries)} targets)")


if __name__ == "__main__":
    main(sys.argv[1:])
