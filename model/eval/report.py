"""Human-readable views of evaluation results: Markdown tables and an HTML page of predictions.

Pure string builders: ``evaluate.py`` decides what to compute and where to write.
"""

from __future__ import annotations

import html
import itertools
import json
import math
import numbers
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from model.metrics import DISPLAY_NAMES
from rat import SqlSpans, sql_spans
from rat.text import BIDI_CONTROLS
from rat.walks import post_order_children

# The fine-grained paper's Table 4 columns, then the extras this project reports.
TABLE4_COLUMNS = ("brier_platt", "auc", "ece", "ece_platt")
EXTRA_COLUMNS = ("brier", "ece_monotonic", "ece_monotonic_platt", "ace_adaptive",
                 "brier_isotonic", "ece_isotonic")


# --------------------------------------------------------------------------- Markdown


def format_number(value: float | None, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.{digits}f}"


def _with_ci(summary: Mapping, name: str) -> str:
    value = summary["metrics"].get(name)
    ci = summary.get("ci", {}).get(name)
    if ci is None or any(v is None or math.isnan(v) for v in ci):
        return format_number(value)
    return f"{format_number(value)} [{format_number(ci[0])}, {format_number(ci[1])}]"


# a query holding a bidirectional control would be shown other than it runs: each is shown as its code point
_BIDI = re.compile(f"[{BIDI_CONTROLS}]")


def visible(text: str) -> str:
    r"""``text`` with each bidirectional control character shown as ``<U+202E>``.

    >>> visible("SELECT 'a\u202eb'")
    "SELECT 'a<U+202E>b'"
    """
    return _BIDI.sub(lambda m: f"<U+{ord(m.group()):04X}>", text)


def _esc(text: str) -> str:
    """HTML text or attribute value: escaped, quotes included, bidi controls shown."""
    return html.escape(visible(text))


def write_report(path, text: str) -> None:
    """Write a report (Markdown or HTML) whole or not at all (a temporary file renamed over it:
    never left empty; the temporary file removed when the write fails; a device or a pipe is
    written into, a link's file replaced), as UTF-8; a lone surrogate from a hostile row is
    written as ``\\ud800`` rather than failing the whole report."""
    from pathlib import Path

    path = Path(path)
    if path.is_symlink() and path.resolve().is_file():  # a link stays a link: its file is written
        path = path.resolve()
    if path.exists() and not path.is_file():  # a device or a pipe (/dev/stdout): written into, not replaced
        path.write_text(text, encoding="utf-8", errors="backslashreplace")
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8", errors="backslashreplace")
        tmp.replace(path)
    except BaseException:  # a full disk, an interrupt: no temporary file left beside the report
        tmp.unlink(missing_ok=True)
        raise


def json_safe(value):
    """``value`` as strict JSON holds it: a NaN or an infinity (an AUC where every query is
    right) is ``null``, a numpy number Python's, a tuple a list, a key a string.

    >>> import numpy as np
    >>> json_safe({"auc": (float("nan"), [np.float32(0.5), np.int64(3), True]), 1: float("inf")})
    {'auc': [None, [0.5, 3, True]], '1': None}
    """
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, bool):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value) if math.isfinite(value) else None
    return value


def eval_dir(path: Path) -> Path:
    """The folder an evaluation of the file ``path`` is written to by default, beside it and named
    after its whole name: ``scores.csv`` -> ``scores_csv_eval`` (a ``scores.jsonl`` beside it
    keeps its own).

    >>> eval_dir(Path("runs/scores.csv")).as_posix()
    'runs/scores_csv_eval'
    """
    return path.with_name(f"{path.name.replace('.', '_')}_eval")


def write_json(path, value) -> None:
    """``value`` written as strict JSON (``json_safe``: never a bare NaN), as ``write_report`` writes."""
    write_report(path, json.dumps(json_safe(value), indent=1, allow_nan=False))


def markdown_cell(text: object) -> str:
    r"""One cell of a Markdown table: HTML and ``|`` escaped, on one line, bidi controls shown
    (a name read from a file is data, never markup).

    >>> markdown_cell("sys<script>|x\ny")
    'sys&lt;script&gt;\\|x y'
    """
    return " ".join(html.escape(visible(str(text)), quote=False).replace("|", "\\|").split())


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    r"""A GitHub-flavoured Markdown table, each cell a ``markdown_cell``.

    >>> print(markdown_table(["a", "b"], [["1", "x|y"]]))
    | a | b |
    |---|---|
    | 1 | x\|y |
    """
    lines = ["| " + " | ".join(map(markdown_cell, header)) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(markdown_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def metrics_table(summaries: Mapping[str, Mapping], columns: Sequence[str] = TABLE4_COLUMNS,
                  first: str = "method", intervals: bool = True) -> str:
    """One row per entry of ``summaries`` (name -> ``metrics.summary`` dict): N, accuracy and
    the ``columns`` (with bootstrap intervals when ``intervals``)."""
    header = [first, "N", "Acc"] + [DISPLAY_NAMES.get(c, c) for c in columns]
    rows = []
    for name, s in summaries.items():
        cells = [_with_ci(s, c) if intervals else format_number(s["metrics"].get(c)) for c in columns]
        rows.append([name, str(s["n"]), format_number(s["accuracy"])] + cells)
    return markdown_table(header, rows)


def abstention_markdown(rows: Sequence[Mapping]) -> str:
    """TrustSQL RS(c) table: thresholded vs answer-all vs abstain-all."""
    header = ["c", "threshold", "RS(c)", "answer all", "abstain all", "coverage", "risk"]
    body = [[r["penalty"] if r["penalty"] == "N" else format_number(r["c"], 0),
             format_number(r["threshold"]) if math.isfinite(r["threshold"]) else "∞ (abstain)",
             format_number(r["rs"]), format_number(r["rs_answer_all"]), format_number(r["rs_abstain_all"]),
             format_number(r["coverage"]), format_number(r["risk"])] for r in rows]
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


def _lineage(tree) -> list[list[int]]:
    """For each node in post-order: its own index, then its ancestors' up to the root."""
    lineage: list[list[int]] = []

    def visit(node) -> None:
        # A node's post-order index is known only after its subtree's: append it to every
        # entry of the subtree once that is done (nearest ancestors are appended first).
        first = len(lineage)
        for child in node.children:
            visit(child)
        index = len(lineage)
        for entry in lineage[first:]:
            entry.append(index)
        lineage.append([index])

    visit(tree)
    return lineage


TITLE_ANCESTORS = 3  # enclosing nodes a coloured run's title names
# an example over these is named, not drawn (rat-score's own bounds on what it scores)
MAX_DRAWN_NODES, MAX_SHOWN_CHARS = 500, 10_000


def _subtree_starts(nodes) -> list[int]:
    """For each node of ``nodes`` (a tree in post-order), the first post-order index of its
    subtree, its first child's (``rat.walks``): the subtree of node ``i`` is ``starts[i]..i``
    (the page's script lights those on hover)."""
    starts: list[int] = []
    for i, children in enumerate(post_order_children([len(n.children) for n in nodes])):
        starts.append(starts[children[0]] if children else i)
    return starts


def _nested_spans(node, scores: dict[int, tuple[float, int | None]]) -> str:
    """The tree as nested text, ``Label(child, child)``; each node's subtree in a box whose
    border and label background carry the node's confidence (wrong nodes struck through)."""
    conf, label = scores[id(node)]
    colour = confidence_colour(conf)
    mark = " wrong" if label == 0 else ""
    title = _esc(f"{node.label}: confidence {conf:.2f}"
                        + ("" if label is None else f", label {label}"))
    name = f'<span class="lbl{mark}" style="background:{colour}">{_esc(node.label)}</span>'
    if not node.children:
        return f'<span class="node" style="border-color:{colour}" title="{title}">{name}</span>'
    inner = ", ".join(_nested_spans(child, scores) for child in node.children)
    return (f'<span class="node" style="border-color:{colour}" title="{title}">'
            f"{name}({inner})</span>")


def _node_title(label: str, conf: float, node_label: int | None) -> str:
    verdict = {None: "", 1: " · correct", 0: " · WRONG"}[node_label]
    return f"{label}: confidence {conf:.2f}{verdict}"


def coloured_sql(spans: SqlSpans, tree, confidences: Sequence[float],
                 labels: Sequence[int] | None = None, look_here: int | None = None,
                 runner_up: int | None = None) -> str:
    """The SQL text as HTML, each character on the background of the innermost RAT node whose
    subtree covers it (the fine-grained paper's Table 13). Runs carry their node's post-order
    index and its subtree's first (``data-n``, ``data-lo``), so hovering one can light up a whole
    subtree; the title names the node, its confidence, its label and its nearest enclosing nodes
    (at most ``TITLE_ANCESTORS``: a page's size stays linear in the query's). The text of
    ``look_here`` is outlined, that of ``runner_up`` (the second place) dashed."""
    nodes = tree.postorder()
    lineage = _lineage(tree)
    starts = _subtree_starts(nodes)
    out = []
    for owner, run in itertools.groupby(zip(spans.sql, spans.owners), key=lambda p: p[1]):
        text = _esc("".join(char for char, _ in run))
        if owner is None:
            out.append(text)
            continue
        conf = float(confidences[owner])
        node_label = None if labels is None else int(labels[owner])
        title = _node_title(nodes[owner].label, conf, node_label)
        outer = [f"{nodes[a].label} {float(confidences[a]):.2f}" for a in lineage[owner][1:1 + TITLE_ANCESTORS]]
        if outer:
            more = len(lineage[owner]) - 1 - len(outer)
            title += "\nwithin: " + " ‹ ".join(outer) + (f" ‹ … ({more} more)" if more else "")
        wrong = " bad" if node_label == 0 else ""
        if look_here is not None and starts[look_here] <= owner <= look_here:
            wrong += " look"
        elif runner_up is not None and starts[runner_up] <= owner <= runner_up:
            wrong += " second"
        out.append(f'<span class="s{wrong}" data-n="{owner}" data-lo="{starts[owner]}" '
                   f'style="background:{confidence_colour(conf)}" title="{_esc(title)}">'
                   f"{text}</span>")
    return "".join(out)


def tree_svg(tree, confidences: Sequence[float], labels: Sequence[int] | None = None) -> str:
    """The RAT drawn as an inline SVG tree: one box per node, coloured by its confidence, with
    the score under the label (a cross marks nodes labelled wrong). Nodes are in post-order."""
    nodes = tree.postorder()
    if len(nodes) != len(confidences):
        raise ValueError(f"{len(nodes)} nodes but {len(confidences)} confidences")
    starts = _subtree_starts(nodes)
    box_w, box_h, gap_x, gap_y = 118, 34, 10, 30
    x: dict[int, float] = {}
    depth: dict[int, int] = {}
    next_leaf = 0

    # Positions are keyed by post-order index, not id(): a WITH query's shared subtree is
    # drawn once per use.
    def place(node, level: int) -> int:
        nonlocal next_leaf
        children = [place(child, level + 1) for child in node.children]
        index = len(depth)
        depth[index] = level
        if children:
            x[index] = sum(x[c] for c in children) / len(children)
        else:
            x[index] = next_leaf * (box_w + gap_x)
            next_leaf += 1
        edges.extend((index, c) for c in children)
        return index

    edges: list[tuple[int, int]] = []
    place(tree, 0)
    width = next_leaf * (box_w + gap_x)
    height = (max(depth.values()) + 1) * (box_h + gap_y)
    parts = [(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'font-family="monospace" font-size="11">')]

    def centre(index: int) -> tuple[float, float]:
        return x[index] + box_w / 2, depth[index] * (box_h + gap_y)

    for parent, child in edges:
        cx, top = centre(parent)
        ccx, ctop = centre(child)
        parts.append(f'<line x1="{cx:.0f}" y1="{top + box_h}" x2="{ccx:.0f}" y2="{ctop}" '
                     'stroke="#888"/>')
    for i, node in enumerate(nodes):
        cx, top = centre(i)
        conf = float(confidences[i])
        node_label = None if labels is None else int(labels[i])
        wrong = node_label == 0
        text = node.label if len(node.label) <= 16 else node.label[:15] + "…"
        parts.append(
            f'<g data-n="{i}" data-lo="{starts[i]}">'
            f'<title>{_esc(_node_title(node.label, conf, node_label))}</title>'
            f'<rect x="{cx - box_w / 2:.0f}" y="{top}" width="{box_w}" height="{box_h}" rx="5" '
            f'fill="{confidence_colour(conf)}" stroke="{"#000" if wrong else "#666"}" '
            f'stroke-width="{2 if wrong else 1}"/>'
            f'<text x="{cx:.0f}" y="{top + 14}" text-anchor="middle">{_esc(text)}</text>'
            f'<text x="{cx:.0f}" y="{top + 28}" text-anchor="middle">'
            f'{conf:.2f}{" ✗" if wrong else ""}</text></g>')
    parts.append("</svg>")
    return "".join(parts)


_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1400px; padding: 0 1em;
       color: #222; }
h1 { font-size: 1.5em; }
.example { border: 1px solid #ccc; border-radius: 6px; padding: 0.8em 1em; margin: 1.2em 0; }
.sql { font-family: monospace; background: #f6f6f6; padding: 0.4em; white-space: pre-wrap; }
.sqlc { font-family: ui-monospace, monospace; font-size: 15px; line-height: 2.1;
        white-space: pre-wrap; word-break: break-word; padding: 0.5em 0.6em;
        border: 1px solid #ddd; border-radius: 4px; background: #fff; }
.sqlc .s { padding: 2px 0; border-radius: 2px; }
.sqlc .bad { text-decoration: underline wavy #000; text-decoration-thickness: 1.5px;
             text-underline-offset: 4px; }
.sqlc .hl { outline: 2px solid #000; }
g.hl rect { stroke: #000; stroke-width: 3; }
.rat { font-family: monospace; line-height: 2.1; }
.node { border-bottom: 3px solid; padding: 0 1px 1px 1px; }
.lbl { border-radius: 3px; padding: 0 2px; }
.wrong { text-decoration: line-through; }
.sqlc .look { outline: 2px solid #000; }
.sqlc .second { outline: 2px dashed #666; }
.lookhere { margin: 4px 0; }
.meta, .note { color: #555; font-size: 0.9em; }
.badge { border-radius: 3px; padding: 0 4px; color: #000; }
.tree { overflow-x: auto; margin-top: 0.5em; }
.legend { display: flex; gap: 2em; align-items: center; margin: 0.5em 0 1em; padding-left: 1em; }
.legend > .note { flex: 1; min-width: 20em; }
.scale { position: relative; width: 320px; height: 16px; border: 1px solid #999; }
.ticks { position: relative; width: 320px; height: 1.2em; font-size: 0.85em; }
.ticks span { position: absolute; transform: translateX(-50%); }
"""

# Hovering any node (a run of SQL text or a box of the tree) outlines its whole subtree in both.
_SCRIPT = """
document.querySelectorAll('.example').forEach(function (ex) {
  ex.addEventListener('mouseover', function (event) {
    ex.querySelectorAll('.hl').forEach(function (el) { el.classList.remove('hl'); });
    var node = event.target.closest('[data-n]');
    if (!node) return;
    var n = +node.dataset.n, lo = +node.dataset.lo;
    ex.querySelectorAll('[data-n]').forEach(function (el) {
      var k = +el.dataset.n;
      if (k >= lo && k <= n) el.classList.add('hl');
    });
  });
});
"""


def _legend(labelled: bool) -> str:
    """The colour scale and how to read the page; the marks of a wrong node only where a node has
    a label (``labelled``: gold was there to compare with)."""
    stops = ", ".join(f"{confidence_colour(c / 10)} {c * 10}%" for c in range(11))
    ticks = "".join(f'<span style="left:{c * 25}%">{c / 4:.2f}</span>' for c in range(5))
    wrong = ("<br><span class='sqlc' style='border:0;padding:0'><span class='bad'>wavy underline</span></span>, "
             "✗, struck through: node labelled wrong against gold." if labelled else "")
    return ("<div class='legend'><div><div class='scale' "
            f"style='background:linear-gradient(to right, {stops})'></div>"
            f"<div class='ticks'>{ticks}</div><div class='note'>node confidence</div></div>"
            "<div class='note'>Each character of the SQL has the colour of the innermost RAT "
            f"node whose subtree covers it.{wrong} Hover a node for its score; its subtree is outlined "
            "in the SQL and the tree.</div></div>")


def html_report(examples: Sequence[Mapping], title: str = "RAT node confidences",
                query_confidence_means: str | None = None) -> str:
    """A standalone HTML page with one section per example; under its title,
    ``query_confidence_means`` (what "right" means for the query confidence) where given.

    Each example is a mapping with ``tree`` (a ``rat.Node``), ``confidences`` and optional
    ``labels`` (post-order), optional ``schema`` (the ``rat.Schema`` the tree was built with),
    and display fields ``question_id``, ``system``, ``sql``, ``question``, ``gold_sql``,
    ``query_confidence``, ``dialect`` (of ``sql``; default sqlite); with ``site_scores`` and ``look_here`` (the post-order index of the
    most likely error site) a "look here first" line names that node and outlines its text,
    with ``runner_up`` the second place and with ``reasons`` (node index -> sentences) why the
    first is doubted. The SQL is shown in canonical form with its text coloured by node
    (see ``coloured_sql``); nodes not found in the text are counted in the page.
    """
    sections, located, total = [], 0, 0
    for ex in examples:
        tree, confidences, labels = ex["tree"], ex["confidences"], ex.get("labels")
        nodes = tree.postorder()
        written = ex.get("sql") or ""
        if len(nodes) > MAX_DRAWN_NODES or len(written) > MAX_SHOWN_CHARS:  # the page stays bounded
            meta = " · ".join(_esc(str(ex[k])) for k in ("question_id", "system", "db_id") if ex.get(k) is not None)
            sections.append(f"<div class='example'><div class='meta'>{meta} · too large to show: "
                            f"{len(nodes)} nodes, {len(written)} characters of SQL (at most {MAX_DRAWN_NODES} "
                            f"and {MAX_SHOWN_CHARS} are drawn)</div></div>")
            continue
        scores = {id(n): (float(c), None if labels is None else int(labels[i]))
                  for i, (n, c) in enumerate(zip(nodes, confidences))}
        spans = sql_spans(ex.get("sql") or "", tree, ex.get("schema"), ex.get("dialect") or "sqlite")
        located += len(nodes) - spans.unmapped
        total += len(nodes)
        meta = " · ".join(_esc(str(ex[k])) for k in ("question_id", "system", "db_id")
                          if ex.get(k) is not None)
        qc = ex.get("query_confidence")
        out = ["<div class='example'>",
               f"<div class='meta'>{meta}"
               + (f" · <span class='badge' style='background:{confidence_colour(qc)}'>"
                  f"&nbsp;</span> query confidence {qc:.2f}" if qc is not None else "")
               + (f" · all nodes correct: {bool(min(labels))}" if labels else "")
               + (f" · {spans.unmapped} of {len(nodes)} nodes not located in the SQL"
                  if spans.unmapped else "") + "</div>"]
        if ex.get("question"):
            out.append(f"<p><b>Q:</b> {_esc(ex['question'])}</p>")
        look = ex.get("look_here")
        if look is not None:
            text = spans.text(look) or nodes[look].label
            runner = ex.get("runner_up")
            then = "" if runner is None else (
                f"; then <code>{_esc(spans.text(runner) or nodes[runner].label)}</code>"
                f" ({_esc(nodes[runner].label)}, {float(ex['site_scores'][runner]):.2f})")
            out.append(f"<p class='lookhere'><b>Look here first:</b> <code>{_esc(text)}</code> "
                       f"({_esc(nodes[look].label)}, site score {float(ex['site_scores'][look]):.2f}){then}</p>")
            why = (ex.get("reasons") or {}).get(look) or []
            if why:
                out.append("<ul class='reasons'>" + "".join(f"<li>{_esc(r)}</li>" for r in why) + "</ul>")
        out.append(f"<div class='sqlc'>{coloured_sql(spans, tree, confidences, labels, look, ex.get('runner_up'))}</div>")
        if " ".join(written.lower().rstrip("; \n").split()) != spans.sql.lower():
            out.append(f"<div class='sql meta'>as written: {_esc(written)}</div>")
        if ex.get("gold_sql"):
            out.append(f"<div class='sql meta'>gold: {_esc(ex['gold_sql'])}</div>")
        out.append(f"<div class='tree'>{tree_svg(tree, confidences, labels)}</div>")
        out.append("<details><summary class='meta'>RAT as nested text</summary>"
                   f"<p class='rat'>{_nested_spans(tree, scores)}</p></details>")
        out.append("</div>")
        sections.append("\n".join(out))
    summary = (f"<p class='meta'>{len(examples)} predictions; {located} of {total} RAT nodes "
               "located in their SQL text.</p>")
    if query_confidence_means:
        summary = f"<p class='meta'>Query confidence: {_esc(query_confidence_means)}.</p>" + summary
    head = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{_esc(title)}"
            f"</title><style>{_CSS}</style></head><body><h1>{_esc(title)}</h1>")
    labelled = any(ex.get("labels") is not None for ex in examples)
    return "\n".join([head, _legend(labelled), summary, *sections,
                      f"<script>{_SCRIPT}</script></body></html>"])
