"""Human-readable views of evaluation results: Markdown tables and an HTML page of predictions.

Pure string builders: ``evaluate.py`` decides what to compute and where to write.
"""

from __future__ import annotations

import html
import itertools
import math
from collections.abc import Mapping, Sequence

from model.metrics import DISPLAY_NAMES

# The fine-grained paper's Table 4 columns, then the extras this project reports.
TABLE4_COLUMNS = ("brier_platt", "auc", "ece", "ece_platt")
EXTRA_COLUMNS = ("brier", "ece_monotonic", "ece_monotonic_platt", "ace_adaptive",
                 "brier_isotonic", "ece_isotonic")


# --------------------------------------------------------------------------- Markdown


def _fmt(value: float | None, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.{digits}f}"


def _with_ci(summary: Mapping, name: str) -> str:
    value = summary["metrics"].get(name)
    ci = summary.get("ci", {}).get(name)
    if ci is None or any(v is None or math.isnan(v) for v in ci):
        return _fmt(value)
    return f"{_fmt(value)} [{_fmt(ci[0])}, {_fmt(ci[1])}]"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub-flavoured Markdown table.

    >>> print(markdown_table(["a", "b"], [["1", "2"]]))
    | a | b |
    |---|---|
    | 1 | 2 |
    """
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def metrics_table(summaries: Mapping[str, Mapping], columns: Sequence[str] = TABLE4_COLUMNS,
                  first: str = "method", intervals: bool = True) -> str:
    """One row per entry of ``summaries`` (name -> ``metrics.summary`` dict): N, accuracy and
    the ``columns`` (with bootstrap intervals when ``intervals``)."""
    header = [first, "N", "Acc"] + [DISPLAY_NAMES.get(c, c) for c in columns]
    rows = []
    for name, s in summaries.items():
        cells = [_with_ci(s, c) if intervals else _fmt(s["metrics"].get(c)) for c in columns]
        rows.append([name, str(s["n"]), _fmt(s["accuracy"])] + cells)
    return markdown_table(header, rows)


def abstention_markdown(rows: Sequence[Mapping]) -> str:
    """TrustSQL RS(c) table: thresholded vs answer-all vs abstain-all."""
    header = ["c", "threshold", "RS(c)", "answer all", "abstain all", "coverage", "risk"]
    body = [[r["penalty"] if r["penalty"] == "N" else _fmt(r["c"], 0),
             _fmt(r["threshold"]) if math.isfinite(r["threshold"]) else "∞ (abstain)",
             _fmt(r["rs"]), _fmt(r["rs_answer_all"]), _fmt(r["rs_abstain_all"]),
             _fmt(r["coverage"]), _fmt(r["risk"])] for r in rows]
    return markdown_table(header, body)


# --------------------------------------------------------------------------- HTML


def confidence_colour(confidence: float) -> str:
    """Red (0) through yellow (0.5) to green (1), as a hex colour.

    >>> confidence_colour(0.0), confidence_colour(1.0)
    ('#d73027', '#1a9850')
    """
    stops = [(0.0, (0xD7, 0x30, 0x27)), (0.5, (0xFE, 0xE0, 0x8B)), (1.0, (0x1A, 0x98, 0x50))]
    c = min(max(float(confidence), 0.0), 1.0)
    for (x0, a), (x1, b) in itertools.pairwise(stops):
        if c <= x1:
            t = (c - x0) / (x1 - x0)
            return "#" + "".join(f"{round(u + (v - u) * t):02x}" for u, v in zip(a, b))
    return "#1a9850"


def _nested_spans(node, scores: dict[int, tuple[float, int | None]]) -> str:
    """The tree as nested text, ``Label(child, child)``; each node's subtree in a box whose
    border and label background carry the node's confidence (wrong nodes struck through)."""
    conf, label = scores[id(node)]
    colour = confidence_colour(conf)
    mark = " wrong" if label == 0 else ""
    title = html.escape(f"{node.label}: confidence {conf:.2f}"
                        + ("" if label is None else f", label {label}"))
    name = f'<span class="lbl{mark}" style="background:{colour}">{html.escape(node.label)}</span>'
    if not node.children:
        return f'<span class="node" style="border-color:{colour}" title="{title}">{name}</span>'
    inner = ", ".join(_nested_spans(child, scores) for child in node.children)
    return (f'<span class="node" style="border-color:{colour}" title="{title}">'
            f"{name}({inner})</span>")


def tree_svg(tree, confidences: Sequence[float], labels: Sequence[int] | None = None) -> str:
    """The RAT drawn as an inline SVG tree: one box per node, coloured by its confidence, with
    the score under the label (a cross marks nodes labelled wrong). Nodes are in post-order."""
    nodes = tree.postorder()
    if len(nodes) != len(confidences):
        raise ValueError(f"{len(nodes)} nodes but {len(confidences)} confidences")
    box_w, box_h, gap_x, gap_y = 118, 34, 10, 30
    x: dict[int, float] = {}
    depth: dict[int, int] = {}
    next_leaf = 0

    def place(node, level: int) -> None:
        nonlocal next_leaf
        depth[id(node)] = level
        for child in node.children:
            place(child, level + 1)
        if node.children:
            x[id(node)] = sum(x[id(c)] for c in node.children) / len(node.children)
        else:
            x[id(node)] = next_leaf * (box_w + gap_x)
            next_leaf += 1

    place(tree, 0)
    width = next_leaf * (box_w + gap_x)
    height = (max(depth.values()) + 1) * (box_h + gap_y)
    parts = [(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'font-family="monospace" font-size="11">')]

    def centre(node) -> tuple[float, float]:
        return x[id(node)] + box_w / 2, depth[id(node)] * (box_h + gap_y)

    for node in nodes:
        cx, top = centre(node)
        for child in node.children:
            ccx, ctop = centre(child)
            parts.append(f'<line x1="{cx:.0f}" y1="{top + box_h}" x2="{ccx:.0f}" y2="{ctop}" '
                         'stroke="#888"/>')
    for i, node in enumerate(nodes):
        cx, top = centre(node)
        conf = float(confidences[i])
        wrong = labels is not None and labels[i] == 0
        text = node.label if len(node.label) <= 16 else node.label[:15] + "…"
        parts.append(
            f'<g><title>{html.escape(node.label)}: {conf:.3f}</title>'
            f'<rect x="{cx - box_w / 2:.0f}" y="{top}" width="{box_w}" height="{box_h}" rx="5" '
            f'fill="{confidence_colour(conf)}" stroke="{"#000" if wrong else "#666"}" '
            f'stroke-width="{2 if wrong else 1}"/>'
            f'<text x="{cx:.0f}" y="{top + 14}" text-anchor="middle">{html.escape(text)}</text>'
            f'<text x="{cx:.0f}" y="{top + 28}" text-anchor="middle">'
            f'{conf:.2f}{" ✗" if wrong else ""}</text></g>')
    parts.append("</svg>")
    return "".join(parts)


_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em; max-width: 1400px; }
.example { border: 1px solid #ccc; border-radius: 6px; padding: 0.8em 1em; margin: 1em 0; }
.sql { font-family: monospace; background: #f6f6f6; padding: 0.4em; white-space: pre-wrap; }
.rat { font-family: monospace; line-height: 2.1; }
.node { border-bottom: 3px solid; padding: 0 1px 1px 1px; }
.lbl { border-radius: 3px; padding: 0 2px; }
.wrong { text-decoration: line-through; }
.meta { color: #555; font-size: 0.9em; }
.tree { overflow-x: auto; }
.legend span { display: inline-block; width: 3em; text-align: center; }
"""


def html_report(examples: Sequence[Mapping], title: str = "RAT node confidences") -> str:
    """A standalone HTML page with one section per example.

    Each example is a mapping with ``tree`` (a ``rat.Node``), ``confidences`` and optional
    ``labels`` (post-order), and display fields ``question_id``, ``system``, ``sql``,
    ``question``, ``gold_sql``, ``query_confidence``.
    """
    legend = "".join(f'<span style="background:{confidence_colour(c / 10)}">{c / 10:.1f}</span>'
                     for c in range(11))
    out = [(f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
           f"</title><style>{_CSS}</style></head><body><h1>{html.escape(title)}</h1>"),
           (f"<p class='legend'>confidence: {legend} &nbsp; struck-through / ✗: node labelled "
           "wrong against gold. Hover a node for its score.</p>")]
    for ex in examples:
        nodes = ex["tree"].postorder()
        labels = ex.get("labels")
        scores = {id(n): (float(c), None if labels is None else int(labels[i]))
                  for i, (n, c) in enumerate(zip(nodes, ex["confidences"]))}
        meta = " · ".join(html.escape(str(ex[k])) for k in ("question_id", "system", "db_id")
                          if ex.get(k) is not None)
        qc = ex.get("query_confidence")
        out.append("<div class='example'>")
        out.append(f"<div class='meta'>{meta}"
                   + (f" · query confidence {qc:.2f}" if qc is not None else "")
                   + (f" · all nodes correct: {bool(min(labels))}" if labels else "") + "</div>")
        if ex.get("question"):
            out.append(f"<p><b>Q:</b> {html.escape(ex['question'])}</p>")
        out.append(f"<div class='sql'>{html.escape(ex.get('sql', ''))}</div>")
        if ex.get("gold_sql"):
            out.append(f"<div class='sql meta'>gold: {html.escape(ex['gold_sql'])}</div>")
        out.append(f"<p class='rat'>{_nested_spans(ex['tree'], scores)}</p>")
        out.append("<details><summary>tree</summary><div class='tree'>"
                   f"{tree_svg(ex['tree'], ex['confidences'], labels)}</div></details>")
        out.append("</div>")
    out.append("</body></html>")
    return "\n".join(out)
