#!/usr/bin/env python3
"""The benchmarks' one chart renderer: SVG charts from the results the benchmarks write.

    python3 bench/support/charts.py driver DIR   # paypipe-bench: DIR/throughput.svg, DIR/latency.svg from DIR/results.json

bench/vs-peer/vs_peer.py imports it for its throughput chart.
"""
import json
import math
import os
import sys

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"]


def escape(text):
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def nice_ceiling(value):
    if value <= 0:
        return 1.0
    magnitude = 10 ** math.floor(math.log10(value))
    for step in (1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10):
        if step * magnitude >= value:
            return step * magnitude
    return 10 * magnitude


class Chart:
    """A plot area with a title, axes and a legend; the chart functions below add the marks."""

    def __init__(self, width, height, left, right, top, bottom, title, subtitle=None):
        self.width, self.height = width, height
        self.left, self.right, self.top, self.bottom = left, right, top, bottom
        self.parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{int(width)}" height="{int(height)}" '
                      'font-family="sans-serif" font-size="12">', '<rect width="100%" height="100%" fill="white"/>',
                      f'<text x="{(left + width - right) / 2}" y="22" text-anchor="middle" font-size="15">{escape(title)}</text>']
        if subtitle:
            self.parts.append(f'<text x="{(left + width - right) / 2}" y="40" text-anchor="middle" fill="#555">{escape(subtitle)}</text>')
        self.legend_rows = 0

    @property
    def plot_bottom(self):
        return self.height - self.bottom

    def add(self, part):
        self.parts.append(part)

    def axes(self, x_label, y_label):
        left, top, right, bottom = self.left, self.top, self.width - self.right, self.plot_bottom
        middle = (top + bottom) / 2
        self.add(f'<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="black"/>')
        self.add(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{bottom}" stroke="black"/>')
        if x_label:
            self.add(f'<text x="{(left + right) / 2}" y="{self.height - 18}" text-anchor="middle">{escape(x_label)}</text>')
        self.add(f'<text x="18" y="{middle}" text-anchor="middle" transform="rotate(-90 18 {middle})">{escape(y_label)}</text>')

    def y_grid(self, ticks, y, label):
        for value in ticks:
            self.add(f'<line x1="{self.left}" y1="{y(value):.1f}" x2="{self.width - self.right}" y2="{y(value):.1f}" stroke="#ddd"/>')
            self.add(f'<text x="{self.left - 6}" y="{y(value) + 4:.1f}" text-anchor="end">{escape(label(value))}</text>')

    def legend(self, name, color, line=True, dashed=False, x=None):
        x = self.width - self.right + 15 if x is None else x
        y = self.top + 10 + self.legend_rows * 20
        self.legend_rows += 1
        if line:
            dash = ' stroke-dasharray="6 4"' if dashed else ""
            self.add(f'<line x1="{x}" y1="{y}" x2="{x + 25}" y2="{y}" stroke="{color}" stroke-width="2"{dash}/>')
        else:
            self.add(f'<rect x="{x + 5}" y="{y - 10}" width="14" height="14" fill="{color}"/>')
        self.add(f'<text x="{x + 31}" y="{y + 4}">{escape(name)}</text>')

    def svg(self):
        return "\n".join(self.parts + ["</svg>"]) + "\n"


def bar_groups(title, subtitle, y_label, groups, series_colors):
    """Grouped bars with whiskers. groups: [(label, {series: {"min","median","max"} or None})]."""
    chart = Chart(640.0, 420.0, 80.0, 150.0, 60.0, 60.0, title, subtitle)
    tops = [figure["max"] for _, figures in groups for figure in figures.values() if figure]
    y_max = nice_ceiling(max(tops) * 1.1) if tops else 1.0
    y = lambda v: chart.plot_bottom - v / y_max * (chart.plot_bottom - chart.top)
    chart.y_grid([y_max * i / 5 for i in range(6)], y, lambda v: f"{v:,.0f}")
    chart.axes(None, y_label)
    group_w = (chart.width - chart.left - chart.right) / max(1, len(groups))
    bar_w = group_w / (2 * max(1, len(series_colors)))
    for g, (label, figures) in enumerate(groups):
        x0 = chart.left + g * group_w + group_w / 2 - len(series_colors) * (bar_w + 8) / 2
        for k, (series, color) in enumerate(series_colors.items()):
            figure = figures.get(series)
            x = x0 + k * (bar_w + 8)
            if not figure:
                chart.add(f'<text x="{x + bar_w / 2}" y="{chart.plot_bottom - 6}" text-anchor="middle">failed</text>')
                continue
            chart.add(f'<rect x="{x:.1f}" y="{y(figure["median"]):.1f}" width="{bar_w:.1f}" '
                      f'height="{chart.plot_bottom - y(figure["median"]):.1f}" fill="{color}"/>')
            cx = x + bar_w / 2
            chart.add(f'<line x1="{cx:.1f}" y1="{y(figure["min"]):.1f}" x2="{cx:.1f}" y2="{y(figure["max"]):.1f}" stroke="black"/>')
            for v in (figure["min"], figure["max"]):
                chart.add(f'<line x1="{cx - 6:.1f}" y1="{y(v):.1f}" x2="{cx + 6:.1f}" y2="{y(v):.1f}" stroke="black"/>')
            chart.add(f'<text x="{cx:.1f}" y="{y(figure["max"]) - 6:.1f}" text-anchor="middle">{figure["median"]:,.0f}</text>')
        chart.add(f'<text x="{chart.left + g * group_w + group_w / 2:.1f}" y="{chart.plot_bottom + 20}" text-anchor="middle">{escape(label)}</text>')
    for series, color in series_colors.items():
        chart.legend(series, color, line=False)
    return chart.svg()


def scale_out(results):
    """paypipe-bench: throughput against submitter copies, with the ideal linear line."""
    chart = Chart(640.0, 420.0, 80.0, 60.0, 50.0, 60.0, f"Throughput vs submitter copies (W1, nproc {results.get('nproc', '?')})")
    points = sorted((s["spec"]["submitters"], s["ordersPerSecond"]) for s in results.get("scenarios", [])
                    if s["spec"].get("series") == "scale-out" and not s.get("error"))
    if not points or points[0][1] <= 0:
        chart.add(f'<text x="{chart.width / 2}" y="{chart.height / 2}" text-anchor="middle">no scale-out series in this run</text>')
        return chart.svg()
    max_copies = max(max(c for c, _ in points), 1)
    per_copy = points[0][1] / points[0][0]
    y_max = nice_ceiling(max(max_copies * per_copy, max(v for _, v in points)) * 1.05)
    x = lambda c: chart.left + c / max_copies * (chart.width - chart.left - chart.right)
    y = lambda v: chart.plot_bottom - v / y_max * (chart.plot_bottom - chart.top)
    chart.y_grid([y_max * i / 5 for i in range(6)], y, lambda v: str(int(v)))
    chart.axes("submitter copies", "orders/s")
    for c, _ in points:
        chart.add(f'<text x="{x(c)}" y="{chart.plot_bottom + 18}" text-anchor="middle">{c}</text>')
    chart.add(f'<line x1="{x(0)}" y1="{y(0)}" x2="{x(max_copies)}" y2="{y(max_copies * per_copy)}" stroke="#999" stroke-dasharray="6 4"/>')
    chart.add(f'<polyline points="{" ".join(f"{x(c)},{y(v)}" for c, v in points)}" fill="none" stroke="{PALETTE[0]}" stroke-width="2"/>')
    for c, v in points:
        chart.add(f'<circle cx="{x(c)}" cy="{y(v)}" r="4" fill="{PALETTE[0]}"/>')
        chart.add(f'<text x="{x(c) + 6}" y="{y(v) + 16}">{int(v)}</text>')
    chart.legend("measured", PALETTE[0], x=chart.left + 20)
    chart.legend("ideal linear (copies × 1-copy rate)", "#999", dashed=True, x=chart.left + 20)
    return chart.svg()


def latency(results):
    """paypipe-bench: each scenario's latency by percentile, on the HdrHistogram scale (1/(1-p))."""
    chart = Chart(760.0, 460.0, 80.0, 170.0, 50.0, 60.0, "End-to-end latency by percentile")
    max_x = 5.0
    series = []
    for s in results.get("scenarios", []):
        distribution = (s.get("latency") or {}).get("distribution") or []
        if distribution:
            points = []
            for percentile, ms in distribution:
                fraction = min(percentile / 100, 1 - 10 ** -max_x)
                points.append((min(max_x, math.log10(1 / (1 - fraction))), max(ms, 0.001)))
            series.append((s["spec"]["name"], points))
    if not series:
        return chart.svg()
    values = [ms for _, points in series for _, ms in points]
    y_low, y_high = math.floor(math.log10(min(values))), math.ceil(math.log10(max(values)))
    y_range = max(y_high - y_low, 1)
    x = lambda v: chart.left + v / max_x * (chart.width - chart.left - chart.right)
    y = lambda ms: chart.plot_bottom - (math.log10(ms) - y_low) / y_range * (chart.plot_bottom - chart.top)
    for i, label in enumerate(["0%", "90%", "99%", "99.9%", "99.99%", "99.999%"]):
        chart.add(f'<line x1="{x(i)}" y1="{chart.top}" x2="{x(i)}" y2="{chart.plot_bottom}" stroke="#eee"/>')
        chart.add(f'<text x="{x(i)}" y="{chart.plot_bottom + 18}" text-anchor="middle">{label}</text>')
    chart.y_grid([10 ** e for e in range(y_low, y_high + 1)], y, lambda ms: str(int(ms)) if ms >= 1 else f"{ms:g}")
    chart.axes("percentile", "latency ms (log)")
    for index, (name, points) in enumerate(series):
        color = PALETTE[index % len(PALETTE)]
        chart.add(f'<polyline points="{" ".join(f"{x(a):.2f},{y(b):.2f}" for a, b in points)}" fill="none" stroke="{color}" stroke-width="2"/>')
        chart.legend(name, color)
    return chart.svg()


def main(argv):
    if len(argv) != 3 or argv[1] != "driver":
        sys.exit(__doc__)
    directory = argv[2]
    with open(os.path.join(directory, "results.json")) as f:
        results = json.load(f)
    for name, draw in (("throughput.svg", scale_out), ("latency.svg", latency)):
        with open(os.path.join(directory, name), "w") as f:
            f.write(draw(results))


if __name__ == "__main__":
    main(sys.argv)
