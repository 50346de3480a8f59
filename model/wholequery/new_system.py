"""A model applied to a system or benchmark it was not fitted on: for each system's file of
scored queries (``rat-score``'s output), how far its confidence can be trusted there.

Per system, each with its 95% bootstrap interval (queries resampled; node AUC resamples whole
queries with their nodes): the rate of right queries by the label named (``execution``: the
query executes to gold's result, where the benchmark has databases; ``tree``: its tree is gold's,
every node right — stricter: an equivalent query written differently counts as wrong), the tree
rate beside it, the mean whole-query confidence and its gap to the rate, whole-query ECE (10
uniform bins), whole-query AUC, and node AUC against tree node labels. Where the rows were moved
by label shift (``model.label_shift``), the same numbers before the shift and the estimated
rate with its interval. A reliability diagram of the whole-query confidence, one panel per
system, is drawn to ``plots/reliability_new_system.png``.

    rat-score --model <run>/model --data-root ../shared/data/spider --predictions graphix_t5.txt \\
        --out scored.jsonl
    python evaluate.py new_system.scored=scored.jsonl data_root=../shared/data/spider out_dir=eval/

Labels are computed here from the benchmark's gold SQL (``model.nodes.examples.build_examples``),
never read by the model.
"""

from __future__ import annotations

import json
import tempfile
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from model import metrics as M
from model.errors import UsageError
from model.nodes.outputs import is_confidence

LABELS = {"execution": "executes to gold's result", "tree": "tree equal to gold's",
          "mixed": "execution where the benchmark has the query's database, tree elsewhere"}


@dataclass
class SystemScores:
    """One system's scored queries beside their labels (aligned, query order)."""

    system: str
    confidence: np.ndarray  # whole-query confidence as scored (shifted where the rows were)
    unshifted: np.ndarray | None  # before label shift; None where the rows were not shifted
    execution: np.ndarray | None  # 1 = executes to gold's result, NaN without its database; None: no database
    tree: np.ndarray | None  # 1 = the tree is gold's (tree comparison alone); None where not computed
    node_confidence: list[np.ndarray]
    node_labels: list[np.ndarray]
    label_shift: dict | None = None  # the rows' estimate (model.label_shift.RateShift.to_dict)
    # per query, its nodes the model reads as an unknown operator (rows' nodes[].unfamiliar)
    node_unfamiliar: list[np.ndarray] | None = None
    # the benchmark whose outputs of this system the model was fitted on (rows' fitted_on_system,
    # written by rat-score; True where the model names no benchmark); None: not fitted on it
    fitted_on: str | bool | None = None

    @property
    def label(self) -> str:
        """``execution`` (every query has its database), ``tree`` (none has) or ``mixed``."""
        if self.execution is None:
            return "tree"
        return "mixed" if np.isnan(self.execution).any() else "execution"

    @property
    def right(self) -> np.ndarray:
        """1 = right by the label: execution where there is one, else tree."""
        if self.execution is None:
            return self.tree
        return np.where(np.isnan(self.execution), self.tree, self.execution).astype(int)


def row_problem(row) -> str | None:
    """Why a ``rat-score`` row cannot be evaluated (None when it can): not an object; no
    ``question_id`` (a string or an integer); no ``sql`` string; no ``query_confidence`` in
    [0, 1] (nor ``query_confidence_unshifted``, where given); ``nodes`` not a list of objects
    each with a ``confidence`` in [0, 1]; a ``label_shift`` without its rate and interval.

    >>> ok = {"question_id": "dev_0", "sql": "SELECT 1", "query_confidence": 0.9, "nodes": [{"confidence": 1}]}
    >>> row_problem(ok) is None
    True
    >>> [row_problem({**ok, **bad}) for bad in ({"sql": None}, {"query_confidence": "abc"},
    ...                                          {"nodes": [{"label": "x"}]})]  # doctest: +NORMALIZE_WHITESPACE
    ['no sql (a string)', 'query_confidence not a number in [0, 1]',
     'nodes not a list of objects with a confidence in [0, 1]']
    """
    if not isinstance(row, Mapping):
        return "not an object"
    qid = row.get("question_id")
    if not isinstance(qid, (str, int)) or isinstance(qid, bool):
        return "no question_id (a string)"
    if not isinstance(row.get("sql"), str):
        return "no sql (a string)"
    for field in ("query_confidence", "query_confidence_unshifted"):
        if (field in row or field == "query_confidence") and not is_confidence(row.get(field)):
            return f"{field} not a number in [0, 1]"
    nodes = row.get("nodes")
    if not isinstance(nodes, list) or not all(isinstance(n, Mapping) and is_confidence(n.get("confidence"))
                                              for n in nodes):
        return "nodes not a list of objects with a confidence in [0, 1]"
    shift = row.get("label_shift")
    if shift is not None and not (isinstance(shift, Mapping) and all(is_confidence(shift.get(k))
                                                                     for k in ("rate", "low", "high"))):
        return "label_shift not an estimate (rate, low, high in [0, 1])"
    return None


def labelled(rows: Sequence[Mapping], data_root: Path, split: str = "dev", labels: str = "execution",
             skipped: Counter | None = None) -> dict[str, SystemScores]:
    """``rat-score`` rows grouped by system and labelled against ``data_root``'s gold SQL:
    execution labels where the benchmark has a query's database (``labels="execution"``), tree
    labels for the others (the label ``mixed`` where a system has both). Left out and counted
    in ``skipped`` by reason: a row ``row_problem`` refuses, a question_id the split does not
    have, a row whose ``db_id`` (where given) is not its question's, a system's second row for
    a question (the first is kept), a row whose question or tree cannot be labelled, a row whose
    node count differs from its labelled tree's. Rows with a ``db_id`` none of which is its
    question's were scored on another benchmark: a ``UsageError``, in one line. A system's name
    is only a label: nothing is named after it."""
    from model.data.datasets import load_questions
    from model.nodes.examples import build_examples

    skipped = skipped if skipped is not None else Counter()
    database_of = {q.question_id: q.db_id for q in load_questions(data_root, split)}
    by_system: dict[str, dict[str, Mapping]] = defaultdict(dict)
    matched, other = 0, Counter()  # rows whose db_id is their question's; the others' db_ids
    for row in rows:
        problem = row_problem(row)
        if problem is None:
            system, qid = str(row.get("system") or "system"), str(row["question_id"])
            db_id = row.get("db_id")
            if qid not in database_of:
                problem = "unknown question_id"
            elif db_id is not None and str(db_id) != database_of[qid]:
                problem = "db_id not its question's"  # (model.data.predictions.question_of's words)
                other[str(db_id)] += 1
            elif qid in by_system[system]:
                problem = "duplicate question_id (the first kept)"
        if problem:
            skipped[problem] += 1
            continue
        matched += db_id is not None
        by_system[system][qid] = row
    if other and not matched:  # as evaluate.py's run path refuses another benchmark's predictions
        names = sorted(other)
        more = f" and {len(names) - 3} more" if len(names) > 3 else ""
        raise UsageError(f"data_root={data_root}: no row's db_id is its {split} question's (the rows' databases: "
                         f"{', '.join(names[:3])}{more}); give the data_root the rows were scored on")
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for index, (system, by_id) in enumerate(sorted(by_system.items())):
            path = Path(tmp) / f"{index}.jsonl"  # named by its index: a system name is data
            # with its db_id, where the row has one: build_examples checks it against the question's too
            path.write_text("".join(json.dumps({"question_id": qid, "sql": r["sql"],
                                                **({"db_id": str(r["db_id"])} if r.get("db_id") is not None else {})})
                                    + "\n" for qid, r in by_id.items()))
            examples, report = build_examples(data_root, split, prediction_files=[path], require_database=False,
                                              labels=labels, verbose=False)
            # each row build_examples leaves out, it counts by reason; the temporary file goes unnamed
            skipped.update({why.replace(path.name, f"system {system}"): n for why, n in report.skipped.items()})
            example_of = {e.question_id: e for e in examples}
            unlabelled = sum(qid not in example_of for qid in by_id) - sum(report.skipped.values())
            if unlabelled > 0:
                skipped["not labelled"] += unlabelled
            kept = []
            for qid, r in by_id.items():
                e = example_of.get(qid)
                if e is None:
                    continue  # counted above
                if len(e.node_labels) != len(r["nodes"]):
                    skipped["node count differs from the labelled tree"] += 1
                else:
                    kept.append((r, e))
            if not kept:
                continue
            has_execution = labels == "execution" and any(e.execution_match is not None for _, e in kept)
            shifted = all("query_confidence_unshifted" in r for r, _ in kept)
            fitted = next((f for r, _ in kept if isinstance(f := r.get("fitted_on_system"), str) or f is True), None)
            out[system] = SystemScores(
                system, np.array([r["query_confidence"] for r, _ in kept], dtype=float),
                np.array([r["query_confidence_unshifted"] for r, _ in kept], dtype=float) if shifted else None,
                np.array([np.nan if e.execution_match is None else float(bool(e.execution_match)) for _, e in kept])
                if has_execution else None,
                np.array([int(e.tree_match) for _, e in kept]),
                [np.array([n["confidence"] for n in r["nodes"]], dtype=float) for r, _ in kept],
                [np.asarray(e.node_labels, dtype=int) for _, e in kept],
                kept[0][0].get("label_shift") if shifted else None,
                [np.array([n.get("unfamiliar") is True for n in r["nodes"]], dtype=bool) for r, _ in kept],
                fitted)
    return out


def _kind_named(name: str) -> str | None:
    """The benchmark format a folder's name says (``spider_data``: spider), where it says one of
    the two ``model.data.datasets`` reads; None where it says neither (or both)."""
    found = [kind for kind in ("bird", "spider") if kind in name.lower()]
    return found[0] if len(found) == 1 else None


def fitted_notes(scores: Mapping[str, SystemScores], data_root: Path | str) -> tuple[set[str], set[str], list[str]]:
    """(the systems whose numbers are in-sample, those that may be, one line per system the model
    was fitted on): a system is in-sample where rat-score marked its rows ``fitted_on_system``
    with this benchmark's name (``data_root``'s folder name), or with no name. Marked with
    another name, the model was fitted on a system of that name's outputs on a benchmark of that
    name: another benchmark where that name says a format (Spider's, BIRD's) other than the one
    ``data_root`` is in (BIRD's layout, ``model.data.datasets.is_bird``), so not in-sample (the
    model records its benchmark by the folder's name alone); else it may be this benchmark in
    another folder (a Spider download in ``spider_data``).

    >>> s = SystemScores("a", np.ones(1), None, None, np.ones(1), [], [], fitted_on="spider")
    >>> fitted_notes({"a": s, "b": SystemScores("b", *[None] * 6)}, "../data/spider")[:2]
    ({'a'}, set())
    >>> fitted_notes({"a": s}, "spider_data")[:2]
    (set(), {'a'})
    """
    from model.data.datasets import is_bird

    here = Path(data_root).resolve().name
    kind = "bird" if is_bird(Path(data_root)) else "spider"
    names = {"bird": "BIRD", "spider": "Spider"}
    inside, unsure, lines = set(), set(), []
    for system, s in sorted(scores.items()):
        if s.fitted_on is True or s.fitted_on == here:
            inside.add(system)
            lines.append(f"{system}: the model was fitted on this system's outputs: in-sample numbers; see "
                         "data.holdout_system / scripts/leave_one_system_out.py for out-of-fold ones")
        elif s.fitted_on and _kind_named(s.fitted_on) not in (None, kind):
            lines.append(f"{system}: the model was fitted on the outputs of a system of this name on {s.fitted_on} "
                         f"({names[_kind_named(s.fitted_on)]}'s format, by its name); {here} is in {names[kind]}'s: "
                         "another benchmark's outputs, not in-sample")
        elif s.fitted_on:
            unsure.add(system)
            lines.append(f"{system}: the model was fitted on the outputs of a system of this name on {s.fitted_on}: "
                         f"if {here} is {s.fitted_on}'s benchmark in another folder, these numbers are in-sample")
    return inside, unsure, lines


def _node_draws(sizes: np.ndarray, draws: Sequence[np.ndarray]):
    """For each bootstrap draw of queries, the indices of their nodes (whole queries resampled)."""
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    for idx in draws:
        lens = sizes[idx]
        offsets = np.arange(lens.sum()) - np.repeat(np.cumsum(lens) - lens, lens)
        yield np.repeat(starts[idx], lens) + offsets


def _interval(values: list[float]) -> list[float]:
    return [round(v, 4) for v in M.percentile_interval(values)]


def report(s: SystemScores, n_bootstrap: int = 1000, seed: int = 0, n_bins: int = 10) -> dict[str, Any]:
    """The new-system numbers of one system, each ``[value, [low, high]]`` (95% bootstrap); where
    some nodes are ones the model reads as an unknown operator (``unfamiliar``), their count, their
    node AUC and their mean confidence minus their rate of right nodes.

    >>> s = SystemScores("a", np.array([0.9, 0.8, 0.3, 0.6]), None, np.array([1, 1, 0, 1]),
    ...                  np.array([1, 0, 0, 1]), [np.array([0.9, 0.8])] * 4, [np.array([1, 1]), np.array([1, 0]),
    ...                  np.array([0, 0]), np.array([1, 1])])
    >>> r = report(s, n_bootstrap=20)
    >>> r["label"], r["rate"][0], r["tree_rate"][0], r["mean_confidence"][0], r["gap"][0]
    ('execution', 0.75, 0.5, 0.65, -0.1)
    """
    y, tree = s.right, s.tree if s.tree is not None else np.full(len(s.right), np.nan)
    nodes_c, nodes_y = np.concatenate(s.node_confidence), np.concatenate(s.node_labels)
    sizes = np.array([len(c) for c in s.node_confidence])
    variants = {"": s.confidence, **({"unshifted_": s.unshifted} if s.unshifted is not None else {})}

    def query_stats(c, yy, tt):
        return {"rate": float(yy.mean()), "tree_rate": float(np.mean(tt)),
                **{f"{k}{name}": v for k, conf in c.items() for name, v in (
                    ("mean_confidence", float(conf.mean())), ("gap", float(conf.mean() - yy.mean())),
                    ("ece", M.ece(conf, yy, n_bins)), ("query_auc", M.auc(conf, yy)))}}

    unfamiliar = (np.concatenate(s.node_unfamiliar) if s.node_unfamiliar
                  else np.zeros(len(nodes_c), dtype=bool))

    def node_stats(c, yy, u):
        out = {"node_auc": M.auc(c, yy)}
        if unfamiliar.any():
            out["unfamiliar_node_auc"] = M.auc(c[u], yy[u]) if u.any() else float("nan")
            out["unfamiliar_node_gap"] = float(c[u].mean() - yy[u].mean()) if u.any() else float("nan")
        return out

    point = {**query_stats(variants, y, tree), **node_stats(nodes_c, nodes_y, unfamiliar)}
    draws = list(M.bootstrap_indices(len(y), n_bootstrap, seed)) if n_bootstrap else []
    samples: dict[str, list[float]] = defaultdict(list)
    for idx, node_idx in zip(draws, _node_draws(sizes, draws)):
        for k, v in query_stats({k: c[idx] for k, c in variants.items()}, y[idx], tree[idx]).items():
            samples[k].append(v)
        for k, v in node_stats(nodes_c[node_idx], nodes_y[node_idx], unfamiliar[node_idx]).items():
            samples[k].append(v)
    out: dict[str, Any] = {"system": s.system, "queries": len(y), "nodes": len(nodes_c),
                           "label": s.label, "unfamiliar_nodes": int(unfamiliar.sum())}
    for k, v in point.items():
        out[k] = [round(float(v), 4), _interval(samples[k]) if draws else None]
    if s.label_shift:
        out["label_shift"] = s.label_shift
    return out


def markdown(reports: Sequence[Mapping]) -> list[str]:
    """The per-system table; a system whose report says ``in_sample`` is marked so by its name
    (``in-sample?`` where it may be: ``fitted_on_system`` with ``in_sample`` null; false: another
    benchmark's outputs, unmarked)."""
    def cell(v) -> str:
        value, ci = v
        if value is None or not np.isfinite(value):
            return "–"
        return f"{value:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")

    shifted = any("unshifted_mean_confidence" in r for r in reports)
    unfamiliar = any(r.get("unfamiliar_nodes") for r in reports)
    head = ["system", "queries", "label", "rate", "tree rate", "mean confidence", "confidence − rate",
            "whole-query ECE", "whole-query AUC", "node AUC"]
    if unfamiliar:
        head += ["unfamiliar nodes", "their node AUC", "their confidence − rate"]
    if shifted:
        head += ["estimated rate (label shift)", "before shift: mean confidence", "before shift: ECE"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in reports:
        mark = (" (in-sample)" if r.get("in_sample")
                else " (in-sample?)" if r.get("fitted_on_system") and r.get("in_sample") is None else "")
        cells = [r["system"] + mark, str(r["queries"]), r["label"],
                 cell(r["rate"]), cell(r["tree_rate"]), cell(r["mean_confidence"]), cell(r["gap"]), cell(r["ece"]), cell(r["query_auc"]),
                 cell(r["node_auc"])]
        if unfamiliar:
            cells += [str(r.get("unfamiliar_nodes", 0)), *(cell(r[k]) if k in r else "–"
                                                           for k in ("unfamiliar_node_auc", "unfamiliar_node_gap"))]
        if shifted:
            ls = r.get("label_shift")
            cells += [f"{ls['rate']:.3f} [{ls['low']:.3f}, {ls['high']:.3f}]" if ls else "–",
                      cell(r["unshifted_mean_confidence"]) if ls else "–", cell(r["unshifted_ece"]) if ls else "–"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def reliability(scores: Mapping[str, SystemScores], path_stem: Path | str, title: str,
                n_bins: int = 10) -> list[Path]:
    """One reliability diagram per system (whole-query confidence against its label)."""
    from model.eval import plots

    methods = {f"{s.system} ({s.label})": (s.confidence, s.right) for s in scores.values()}
    return plots.plot_reliability(methods, path_stem, n_bins=n_bins, suptitle=title, formats=("png",))


def read_scored(paths: Sequence[str | Path], skipped: Counter | None = None) -> list[dict]:
    """``rat-score`` output rows of one or more JSONL files, read as ``evaluate.py`` reads any
    file of rows (``model.data.jsonl.read_rows``): a line that is not JSON, or not an object, is
    left out and counted in ``skipped``; a missing file is one line."""
    from model.data.jsonl import read_rows

    rows = []
    for path in paths:
        path = Path(path)
        if not path.is_file():
            raise UsageError(f"new_system.scored={path}: no such file")
        rows += read_rows(path, skipped)
    return rows


def evaluate_new_system(cfg) -> dict:
    """``python evaluate.py new_system.scored=<rat-score JSONL>[,...] data_root=<benchmark>``:
    metrics.json, report.md and plots/reliability_new_system.png in ``out_dir``."""
    ns = cfg.new_system
    files = [ns.scored] if isinstance(ns.scored, str) else list(ns.scored)
    if not cfg.data_root or not Path(cfg.data_root).is_dir():
        raise UsageError(f"new_system needs data_root=<the benchmark folder with its gold SQL>; got {cfg.data_root}")
    from model.data.jsonl import report_left_out
    from model.errors import check_writable
    from model.eval.report import eval_dir, write_json, write_report

    out_dir = Path(cfg.out_dir) if cfg.out_dir else eval_dir(Path(files[0]))
    check_writable(out_dir, "out_dir", directory=True)  # before the work, not after it
    skipped: Counter = Counter()
    rows = read_scored(files, skipped)
    n_read = len(rows) + sum(skipped.values())
    scores = labelled(rows, Path(cfg.data_root), ns.split, ns.labels, skipped)
    if not scores:
        raise UsageError(f"{', '.join(map(str, files))}: no row could be labelled ({dict(skipped)})")
    report_left_out(", ".join(map(str, files)), n_read, skipped)
    reports = [report(s, cfg.n_bootstrap, cfg.seed, cfg.n_bins) for s in scores.values()]
    inside, unsure, notes = fitted_notes(scores, cfg.data_root)  # systems the model was fitted on (rat-score's mark)
    for r, s in zip(reports, scores.values()):
        if s.fitted_on:  # (in_sample None: a system of its name, on a benchmark that may be this one)
            r["fitted_on_system"] = s.fitted_on
            r["in_sample"] = True if s.system in inside else None if s.system in unsure else False
    title = ns.title or f"{', '.join(Path(f).name for f in files)} on {Path(cfg.data_root).name}"
    pictures = reliability(scores, out_dir / "plots" / "reliability_new_system", title, cfg.n_bins)
    marked = [f"{len(inside)} it was fitted on (marked in-sample)"] if inside else []
    marked += [f"{len(unsure)} of a name it was fitted on elsewhere (marked: see the notes)"] if unsure else []
    heading = ("systems it was fitted on (in-sample numbers)" if len(inside) == len(scores)
               else f"systems it was not fitted on, and {' and '.join(marked)}" if marked
               else "systems it was not fitted on")
    md = [f"# A model on {heading}: {title}", "", *(f"- {line}" for line in notes), *([""] if notes else []),
          "Per system, 95% bootstrap intervals over its queries. Labels: "
          + "; ".join(f"{k}: {v}" for k, v in LABELS.items()) + ". Node AUC against tree node labels."
          + (f" Left out: {dict(skipped)}." if skipped else ""), "", *markdown(reports), "",
          f"![reliability](plots/{pictures[0].name})", ""]
    results = {"source": [str(f) for f in files], "data_root": str(cfg.data_root), "systems": reports,
               "rows_skipped": dict(skipped)}
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(out_dir / "metrics.json", results)
    write_report(out_dir / "report.md", "\n".join(md) + "\n")
    print("\n".join(md[:-2]))
    print(f"wrote {out_dir / 'metrics.json'}, {out_dir / 'report.md'}, {pictures[0]}")
    return {"new_system": results}
