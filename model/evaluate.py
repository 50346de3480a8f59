"""Evaluate confidences: calibration tables, reliability diagrams, abstention, an HTML view.

    python evaluate.py run_dir=<training run>        # node model: <run>/predictions/{val,test}.jsonl
    python evaluate.py predictions=<file>            # node JSONL, or confidence,label[,group] JSONL/CSV
    python evaluate.py new_system.scored=<rat-score JSONL> data_root=<benchmark>   # per system
                                                     # (model.wholequery.new_system)

Writes metrics.json, report.md, report.html (node-level input) and plots/ into ``out_dir``
(default ``<run_dir>/eval``) and prints the main table. ``evaluate(cfg)`` is the function tests
call; the Hydra wrapper only calls it.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig

from model import metrics
from model.data.cache import cache_dir
from model.data.folds import fold_splits
from model.data.jsonl import read_rows, report_left_out
from model.errors import UsageError, check_writable
from model.eval import abstention, plots, report
from model.eval.localisation import localisation_markdown, localisation_of_scores
from model.nodes.outputs import check_rows, tree_of

NODE_FIELDS = ("node_confidences", "node_labels")
CONFIDENCE_COLUMNS = ("confidence", "conf", "score", "probability")
LABEL_COLUMNS = ("label", "correct", "execution_match", "is_correct")
GROUP_COLUMNS = ("group", "db_id", "database")


# --------------------------------------------------------------------------- loading


def is_node_level(rows: list[dict]) -> bool:
    """Whether the rows are node predictions (some row has node confidences and labels), not
    generic (confidence, label) rows."""
    return any(isinstance(r, dict) and all(f in r for f in NODE_FIELDS) for r in rows)


def _pick(row: dict, names: tuple[str, ...], what: str, required: bool = True):
    for name in names:
        if name in row and row[name] not in (None, ""):
            return row[name]
    if required:
        raise ValueError(f"no {what} column: expected one of {names}, found {sorted(row)}")
    return None


_TRUE, _FALSE = ("1", "true", "yes", "1.0"), ("0", "false", "no", "0.0")


def _as_label(value) -> int:
    """1 or 0 from a label: a boolean, 0 / 1, or one of the words ``_TRUE`` / ``_FALSE``;
    anything else (``"x"``, 0.5, a list) is a ValueError.

    >>> _as_label("Yes"), _as_label(0.0), _as_label(True)
    (1, 0, 1)
    """
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE + _FALSE:
            return int(word in _TRUE)
    elif isinstance(value, (bool, int, float)) and value in (0, 1):
        return int(value)
    raise ValueError(f"label {value!r}: expected 0/1, true/false or yes/no")


def _score_row(row: dict) -> tuple[float, int]:
    """(confidence, label) of a generic row; ValueError (the reason a row is left out) when the
    confidence is not a number in [0, 1] or the label is missing or not a label."""
    raw = _pick(row, CONFIDENCE_COLUMNS, "confidence", required=False)
    if raw is None:
        raise ValueError("no confidence")
    try:
        confidence = float(raw)
    except (TypeError, ValueError):
        raise ValueError("confidence not a number") from None
    if not 0.0 <= confidence <= 1.0:  # NaN too
        raise ValueError("confidence not in [0, 1]")
    label = _pick(row, LABEL_COLUMNS, "label", required=False)
    if label is None:
        raise ValueError("no label")
    try:
        return confidence, _as_label(label)
    except ValueError:
        raise ValueError("label not 0/1") from None


def check_score_rows(rows: list[dict], skipped: Counter) -> list[dict]:
    """The generic rows ``score_table`` can read; the others counted in ``skipped`` by reason."""
    kept = []
    for row in rows:
        try:
            _score_row(row)
        except ValueError as e:
            skipped[str(e)] += 1
            continue
        kept.append(row)
    return kept


def score_table(rows: list[dict]) -> dict[str, np.ndarray]:
    """(confidence, label, group) arrays from generic rows; group defaults to the row index."""
    pairs = [_score_row(r) for r in rows]
    conf = np.array([c for c, _ in pairs], dtype=float)
    labels = np.array([y for _, y in pairs], dtype=int)
    groups = [_pick(r, GROUP_COLUMNS, "group", required=False) for r in rows]
    groups = np.array([str(g) if g is not None else str(i) for i, g in enumerate(groups)])
    return {"confidence": conf, "label": labels, "group": groups}


def query_scores(rows: list[dict]) -> dict[str, np.ndarray]:
    """Whole-query (confidence, label, group) from node-level rows.

    Confidence: the row's ``query_confidence`` when the model wrote one, else its least
    confident node (a query is only as right as its weakest node). Label: ``execution_match``
    when present, else whether every node is labelled correct; ``label_name`` says which.
    """
    conf, labels, by_execution = [], [], 0
    for r in rows:
        qc = r.get("query_confidence")
        conf.append(float(qc) if qc is not None else float(min(r["node_confidences"])))
        try:
            labels.append(_as_label(r["execution_match"]))
            by_execution += 1
        except (KeyError, ValueError):  # none, or an unreadable execution_match: the node labels decide
            labels.append(int(all(r["node_labels"])))
    name = ("execution match" if by_execution == len(rows) else "all nodes correct" if not by_execution
            else f"execution match, else all nodes correct ({len(rows) - by_execution} of {len(rows)})")
    return {"confidence": np.array(conf), "label": np.array(labels),
            "group": np.array([str(r.get("db_id", i)) for i, r in enumerate(rows)]), "label_name": name}


def node_scores(rows: list[dict]) -> dict[str, np.ndarray]:
    """Flattened node arrays: confidence, label, group (database), node type, row index."""
    conf, labels, groups, types, row_index = [], [], [], [], []
    for i, r in enumerate(rows):
        n = len(r["node_confidences"])  # rows passed check_rows: every per-node list has n entries
        conf += [float(c) for c in r["node_confidences"]]
        labels += [int(x) for x in r["node_labels"]]
        groups += [str(r.get("db_id", i))] * n
        types += list(r.get("node_types") or ["?"] * n)
        row_index += [i] * n
    return {"confidence": np.array(conf), "label": np.array(labels), "group": np.array(groups),
            "node_type": np.array(types), "row": np.array(row_index)}


def run_data_root(run_dir: Path | None) -> Path | None:
    """data.root from a run's saved config (train.py writes <run>/config.yaml, resolved); a run
    on the demo corpus (data.root null) gets the demo corpus."""
    if run_dir is None:
        return None
    for candidate in (run_dir / "config.yaml", run_dir / ".hydra" / "config.yaml"):
        if candidate.exists():
            data = _load_config(candidate).get("data")
            if not isinstance(data, dict):
                continue
            root = data.get("root")
            if root:
                return Path(str(root))
            from model.synth.demo import demo_root

            return demo_root()
    return None


def _load_config(path: Path) -> dict:
    """A run's saved config as plain YAML: a run directory may come from someone else, and an
    OmegaConf interpolation in it (``${oc.env:TOKEN}``) would read this machine's environment
    into the report, so none is resolved. One that is not a YAML mapping is a ``UsageError``."""
    import yaml

    try:
        cfg = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError, ValueError, RecursionError) as e:
        problem = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise UsageError(f"{path}: not a readable config ({problem})") from None
    if not isinstance(cfg, dict):
        raise UsageError(f"{path}: not a readable config (expected a mapping)")
    return cfg


def is_real_system(system: str | None) -> bool:
    """Predictions of text-to-SQL systems, not synthetic perturbations (``perturb:*``)."""
    return not str(system or "").startswith("perturb")


# --------------------------------------------------------------------------- computing


def breakdown(scores: dict[str, np.ndarray], key: str, cfg: DictConfig,
              min_count: int = 20) -> dict[str, dict]:
    """BS, AUC, ECE (with intervals) of each value of ``scores[key]`` with >= min_count items."""
    out = {}
    values, counts = np.unique(scores[key], return_counts=True)
    for value in progress(values[np.argsort(-counts)], f"by {key.replace('_', ' ')}, bootstrap intervals"):
        mask = scores[key] == value
        if mask.sum() < min_count:
            continue
        c, y = scores["confidence"][mask], scores["label"][mask]
        fns = metrics.core_metric_fns(cfg.n_bins)
        out[str(value)] = {
            "n": int(mask.sum()), "accuracy": float(y.mean()),
            "metrics": {k: fn(c, y) for k, fn in fns.items()},
            "ci": {k: list(metrics.bootstrap_ci(fn, c, y, cfg.breakdown_bootstrap, cfg.seed,
                                                cfg.level))
                   for k, fn in fns.items()} if cfg.breakdown_bootstrap else {},
        }
    return out


def progress(items, what: str):
    """``items``, with a progress bar on stderr where it is a terminal (tqdm): the bootstrap
    intervals of a Spider-size run take minutes per method."""
    from tqdm.auto import tqdm

    return tqdm(items, desc=what, disable=None, leave=False)


def summarise(scores: dict[str, np.ndarray], cfg: DictConfig) -> dict:
    return metrics.summary(scores["confidence"], scores["label"], scores["group"],
                           n_bins=cfg.n_bins, n_folds=cfg.n_folds, n_bootstrap=cfg.n_bootstrap,
                           seed=cfg.seed, level=cfg.level, min_bin_size=cfg.min_bin_size,
                           max_bin_size=cfg.max_bin_size)


def _trees(rows: list[dict]) -> dict[int, Any]:
    """Row index -> its RAT, rebuilt from the tree the predictions file carries
    (``model.nodes.outputs``), for rows whose tree has exactly one node per confidence."""
    trees = {}
    for i, r in enumerate(rows):
        tree = tree_of(r)
        if tree is not None and len(r["node_arity"]) == len(r["node_confidences"]):
            trees[i] = tree
    return trees


def agreement_scores(rows: list[dict], trees: dict[int, Any]) -> dict[str, np.ndarray] | None:
    """Node-agreement baseline on the rows of real systems answered by at least two of them."""
    from model.eval.baselines import node_agreement

    keyed = {(rows[i].get("system"), rows[i]["question_id"]): tree for i, tree in trees.items()
             if is_real_system(rows[i].get("system"))}
    agreement = node_agreement(keyed)
    conf, labels, groups, row_index = [], [], [], []
    for i in trees:
        key = (rows[i].get("system"), rows[i]["question_id"])
        if key in agreement:
            conf += agreement[key]
            labels += list(rows[i]["node_labels"])
            groups += [str(rows[i].get("db_id"))] * len(agreement[key])
            row_index += [i] * len(agreement[key])  # per-row readings (localisation)
    if not conf:
        return None
    return {"confidence": np.array(conf), "label": np.array(labels, dtype=int),
            "group": np.array(groups), "row": np.array(row_index)}


def token_scores(rows: list[dict], data_root: Path, cfg: DictConfig) -> dict[str, np.ndarray]:
    """Token-level baseline on the real systems' predictions (runs the scorer LM)."""
    from model.data.datasets import load_schemas
    from model.eval.baselines import standardise, token_level_scores
    from model.lm import load_causal_lm
    from model.lm.token_probabilities import prompt_text

    schemas = load_schemas(data_root)
    questions = _questions(data_root, rows)
    items, groups = [], []
    for r in rows:
        q = questions.get(r["question_id"])
        if q is None or not is_real_system(r.get("system")):
            continue
        schema = schemas.get(r.get("db_id"))
        prompt = prompt_text(q.question, schema.tables if schema else None, q.evidence)
        items.append((prompt, standardise(r["sql"], schema), standardise(q.gold_sql, schema)))
        groups.append(str(r.get("db_id")))
    if cfg.baselines.token_limit:
        items, groups = items[: cfg.baselines.token_limit], groups[: cfg.baselines.token_limit]
    model, tokenizer = load_causal_lm(cfg.baselines.token_model)
    conf, labels, token_groups = [], [], []
    cache = cache_dir("scores", "token_baseline.jsonl")  # re-runs read, not rescore
    for (c, y), g in zip(token_level_scores(model, tokenizer, items, progress=True, cache_path=cache), groups):
        conf += c
        labels += y
        token_groups += [g] * len(c)
    return {"confidence": np.array(conf), "label": np.array(labels, dtype=int),
            "group": np.array(token_groups)}


def with_gold_diff(rows: list[dict], trees: dict[int, Any], questions: dict, schemas: dict) -> list[dict]:
    """The rows, wrong ones (a node labelled wrong) with what a reviewer compares against gold:
    ``node_spans`` (each node's text in the canonical SQL, ``rat.sql_spans``), ``diff_marks``
    (what a token diff of that text against gold's canonical SQL marks) and ``error_kind``
    (``model.synth.error_kinds.classify_error``). Rows without their gold query stay as they are."""
    import rat
    from model.eval.localisation import diff_marks
    from model.synth.error_kinds import classify_error

    out = []
    for i, r in enumerate(rows):
        q = questions.get(r.get("question_id"))
        gold = q.gold_sql if q is not None else r.get("gold_sql")
        if all(r["node_labels"]) or not gold or i not in trees or not r.get("sql"):
            out.append(r)
            continue
        schema = schemas.get(r.get("db_id"))
        spans = rat.sql_spans(r["sql"], trees[i], schema)
        try:
            marks = diff_marks(spans.sql, rat.canonicalize(gold, schema))
        except rat.RATError:
            marks = []
        out.append({**r, "node_spans": None if spans.unmapped == len(spans.spans) else list(spans.spans),
                    "diff_marks": marks, "error_kind": classify_error(gold, r["sql"], schema)})
    return out


def _questions(data_root: Path, rows: list[dict], problems: list[str] | None = None) -> dict:
    """question_id -> Question for the splits the rows' ids name (``dev_12`` -> dev), only where
    the question is on the row's database (an id alone also names a question of another benchmark);
    a split that cannot be read is left out, the one-line reason appended to ``problems``."""
    from model.data.datasets import load_questions

    stems = {r["question_id"].rsplit("_", 1)[0] for r in rows if "_" in r["question_id"]}
    db_of = {r["question_id"]: r.get("db_id") for r in rows}
    out = {}
    for stem in sorted(stems):
        try:
            out.update({q.question_id: q for q in load_questions(data_root, stem)
                        if db_of.get(q.question_id) in (None, q.db_id)})
        except (OSError, ValueError, KeyError) as e:  # UsageError is a ValueError
            if problems is not None:
                problems.append(str(e).splitlines()[0] if str(e) else type(e).__name__)
    return out


def gold_sources(data_root: Path | None, rows: list[dict]) -> tuple[dict, dict, str | None]:
    """(schemas, question_id -> Question, why what is missing is missing) of ``data_root``, for
    the gold SQL and difficulty the node-level report compares with. No ``data_root``: nothing,
    and no reason; a ``data_root`` that is no folder or whose schemas or questions cannot be
    read: what could be read, and the reasons in one line naming it. A ``data_root`` holding none
    of the rows' databases is another benchmark's: a ``UsageError``."""
    if data_root is None:
        return {}, {}, None
    if not data_root.is_dir():
        return {}, {}, f"data_root={data_root}: " + ("a file, not the benchmark's folder" if data_root.exists()
                                                     else "no such folder")
    from model.data.datasets import load_schemas

    problems: list[str] = []
    try:
        schemas = load_schemas(data_root)
    except (OSError, ValueError, KeyError) as e:
        schemas = {}
        problems.append(str(e).splitlines()[0] if str(e) else type(e).__name__)
    databases = sorted({str(r["db_id"]) for r in rows if r.get("db_id")})
    if schemas and databases and not set(databases) & set(schemas):
        more = f" and {len(databases) - 3} more" if len(databases) > 3 else ""
        raise UsageError(f"data_root={data_root}: holds none of the predictions' databases "
                         f"({', '.join(databases[:3])}{more}); give the data_root they were made on")
    questions = _questions(data_root, rows, problems)
    return schemas, questions, f"data_root={data_root}: {'; '.join(problems)}" if problems else None


def _difficulties(rows: list[dict], questions: dict) -> list[str | None]:
    out = []
    for r in rows:
        d = r.get("difficulty")
        if d is None and r["question_id"] in questions:
            d = questions[r["question_id"]].difficulty
        out.append(d)
    return out


# --------------------------------------------------------------------------- entry point


def run_protocol(run_dir: Path) -> str | None:
    """data.protocol of a train.py run as its ``data.json`` records it (``crossfit``, ``split``);
    None where there is no readable ``data.json`` or it names none."""
    try:
        info = json.loads((run_dir / "data.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    protocol = info.get("protocol") if isinstance(info, dict) else None
    return protocol if isinstance(protocol, str) else None


def _pairs(rows: list) -> set[tuple]:
    """The (question, system) pairs of predictions rows; a row that is no object, or whose
    question_id or system is no string (``check_rows`` leaves it out), is no pair."""
    return {(r["question_id"], r.get("system")) for r in rows
            if isinstance(r, dict) and isinstance(r.get("question_id"), str)
            and isinstance(r.get("system"), str | None)}


def _resolve_inputs(cfg: DictConfig, skipped: Counter | None = None, cal_skipped: Counter | None = None,
                    notes: dict | None = None) -> tuple[Path, list[dict], list[dict] | None, Path | None]:
    """(out_dir, evaluated rows, calibration rows or None, data root or None); rows of the
    evaluated file that are not objects are counted in ``skipped``, those of the calibration
    split in ``cal_skipped``. A calibration split that is the evaluated one is not read (None,
    with a line saying so): thresholds are then chosen on the split's other folds. So too for a
    cross-fitted run (``data.json``'s protocol ``crossfit``, or calibration rows of the evaluated
    (question, system) pairs): its val.jsonl scores every pair again, each by the fold model
    calibrated on it (in-sample); ``notes["cross_fitted"]`` then says so for the report."""
    if cfg.run_dir and cfg.predictions:
        raise UsageError("run_dir and predictions: give one of them (a training run, or one predictions file)")
    if cfg.run_dir:
        run_dir = Path(cfg.run_dir)
        if not run_dir.is_dir():
            raise UsageError(f"run_dir={run_dir}: " + ("a file, not a run directory" if run_dir.exists()
                                                       else "no such directory"))
        test_path = run_dir / "predictions" / f"{cfg.split}.jsonl"
        if not test_path.exists():
            raise UsageError(f"run_dir={run_dir}: no predictions/{cfg.split}.jsonl in it "
                             "(is it a train.py run directory?)")
        rows = read_rows(test_path, skipped)
        cal_path = run_dir / "predictions" / f"{cfg.calibration_split}.jsonl"
        same = cal_path.exists() and cal_path.resolve() == test_path.resolve()
        if same:  # thresholds chosen on the items they score: RS(c) the best possible there
            print(f"calibration_split={cfg.calibration_split} is the evaluated split: RS(c) thresholds are "
                  "chosen on its other schema-disjoint folds instead", file=sys.stderr)
        cal_rows, read_skipped = None, Counter()
        if cal_path.exists() and not same:
            cal_rows = read_rows(cal_path, read_skipped)
        protocol = run_protocol(run_dir)
        evaluated = _pairs(rows)
        both = len(evaluated & _pairs(cal_rows)) if cal_rows is not None else None
        if protocol == "crossfit" or both:
            if cal_rows is not None:  # thresholds chosen on (in-sample scores of) the pairs they score
                how = " is cross-fitted (data.json: protocol crossfit)" if protocol == "crossfit" else ""
                print(f"run_dir={run_dir}{how}: predictions/{cfg.calibration_split}.jsonl holds {both} of "
                      f"the {len(evaluated)} evaluated (question, system) pairs; RS(c) thresholds are chosen "
                      f"on the other schema-disjoint folds of {cfg.split} instead", file=sys.stderr)
                cal_rows, read_skipped = None, Counter()
            if notes is not None:
                notes["cross_fitted"] = {"protocol": protocol, "calibration_split": cfg.calibration_split,
                                         "pairs_in_both": both, "pairs_evaluated": len(evaluated),
                                         "in_sample": cfg.split == "val"}
        if cal_skipped is not None:
            cal_skipped.update(read_skipped)
        out_dir = Path(cfg.out_dir) if cfg.out_dir else run_dir / "eval"
        data_root = Path(cfg.data_root) if cfg.data_root else run_data_root(run_dir)
        return out_dir, rows, cal_rows, data_root
    if cfg.predictions:
        path = Path(cfg.predictions)
        if not path.is_file():
            raise UsageError(f"predictions={path}: no such file")
        out_dir = Path(cfg.out_dir) if cfg.out_dir else report.eval_dir(path)
        return out_dir, read_rows(path, skipped), None, Path(cfg.data_root) if cfg.data_root else None
    raise UsageError("give run_dir=<training run> or predictions=<file>")


def select_systems(rows: list[dict] | None, which: str) -> list[dict] | None:
    """``real``: only text-to-SQL systems' predictions (perturbations left out) when there are
    any; ``all``: every row."""
    if rows is None or which == "all":
        return rows
    if which != "real":
        raise UsageError(f"systems must be real or all; found {which!r}")
    real = [r for r in rows if is_real_system(r.get("system"))]
    return real or rows


def _abstention(test: dict, calibration: dict | None, cfg: DictConfig) -> dict:
    """RS(c) rows with the threshold chosen on ``calibration``, or without it on the other
    schema-disjoint folds; no rows (the protocol says why) when there is neither a calibration
    split nor a second database to fold by. AURC in every case."""
    penalties = list(cfg.penalties)
    aurc = abstention.aurc(test["confidence"], test["label"])
    if calibration is None and len(np.unique(test["group"])) < 2:
        return {"protocol": "not computed: no calibration split, and the threshold cannot be chosen "
                            "on other folds of a single database", "rows": [], "aurc": aurc}
    if calibration is not None:
        rows = abstention.abstention_table((calibration["confidence"], calibration["label"]),
                                           (test["confidence"], test["label"]), penalties)
        protocol = "threshold chosen on the calibration split"
    else:
        rows = abstention.cross_fitted_abstention_table(
            test["confidence"], test["label"], test["group"], penalties, cfg.n_folds, cfg.seed)
        folds = len(fold_splits(len(test["label"]), test["group"], cfg.n_folds, cfg.seed))
        protocol = f"threshold chosen on the other {folds - 1} of {folds} schema-disjoint folds"
    return {"protocol": protocol, "rows": rows, "aurc": aurc}


# evaluate.py's numeric options: the least each may be
_LEAST = {"n_bins": 1, "min_bin_size": 1, "max_bin_size": 1, "n_folds": 2, "n_bootstrap": 0,
          "breakdown_bootstrap": 0, "seed": 0, "html.max_examples": 0, "baselines.token_limit": 1}


def check_options(cfg: DictConfig) -> None:
    """Each numeric option a whole number at least its least (``_LEAST``), ``max_bin_size`` at least ``min_bin_size``, ``level`` between 0 and 1, and
    ``penalties`` numbers of at least 0 or ``N``: else one ``UsageError`` line naming it.

    >>> from omegaconf import OmegaConf
    >>> check_options(OmegaConf.create({"n_bins": 0}))
    Traceback (most recent call last):
    model.errors.UsageError: n_bins: expected a whole number of at least 1, found 0
    """
    from omegaconf import OmegaConf

    for key, least in _LEAST.items():
        value = OmegaConf.select(cfg, key)
        if value is None:  # (not set: its default, or none)
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise UsageError(f"{key}: expected a whole number of at least {least}, found {value!r}"[:200])
    if cfg.get("min_bin_size") is not None and cfg.get("max_bin_size") is not None \
            and cfg.max_bin_size < cfg.min_bin_size:
        raise UsageError(f"max_bin_size: {cfg.max_bin_size} is below min_bin_size ({cfg.min_bin_size})")
    level = cfg.get("level", 0.95)
    if isinstance(level, bool) or not isinstance(level, int | float) or not 0 < level < 1:
        raise UsageError(f"level: expected a number between 0 and 1, found {level!r}"[:200])
    for c in cfg.get("penalties") or ():
        if not (isinstance(c, str) and c.strip().upper() == "N") and (isinstance(c, bool) or not isinstance(c, int | float) or not c >= 0):
            raise UsageError(f"penalties: expected numbers of at least 0 or N, found {c!r}"[:200])


def evaluate(cfg: DictConfig) -> dict:
    """Compute every table and picture for one run or file; returns what metrics.json holds."""
    check_options(cfg)
    if (cfg.get("new_system") or {}).get("scored"):  # a model on systems it was not fitted on
        from model.wholequery.new_system import evaluate_new_system

        other = "run_dir" if cfg.run_dir else "predictions" if cfg.predictions else None
        if other:
            raise UsageError(f"new_system.scored and {other}: give one of them (rat-score files of a benchmark, "
                             "or a training run's predictions)")

        return evaluate_new_system(cfg)
    if not (cfg.run_dir or cfg.predictions) and _wants_whole_query(cfg):
        return evaluate_whole_query(cfg)
    skipped: Counter = Counter()
    cal_skipped: Counter = Counter()
    notes: dict[str, Any] = {}
    out_dir, rows, cal_rows, data_root = _resolve_inputs(cfg, skipped, cal_skipped, notes)
    cross_fitted = notes.get("cross_fitted")
    if cross_fitted and cross_fitted["in_sample"]:
        print(f"split={cfg.split} of a cross-fitted run: each row scored by the fold model calibrated (and "
              "whose site head was fitted) on it; every number is in-sample (split=test: out of fold)",
              file=sys.stderr)
    n_rows = len(rows) + sum(skipped.values())
    n_cal_rows = len(cal_rows or ()) + sum(cal_skipped.values())
    check = check_rows if is_node_level(rows) else check_score_rows
    rows = check(rows, skipped)  # a malformed row is counted and left out, never a crash
    cal_rows = check(cal_rows, cal_skipped) if cal_rows is not None else None
    if not rows:
        note = f" ({', '.join(f'{n} {why}' for why, n in skipped.items())})" if skipped else ""
        raise UsageError(f"{cfg.run_dir or cfg.predictions}: no predictions to evaluate{note}")
    check_writable(out_dir, "out_dir", directory=True)  # before the work, not after it
    source = Path(cfg.run_dir) / "predictions" / f"{cfg.split}.jsonl" if cfg.run_dir else Path(cfg.predictions)
    report_left_out(str(source), n_rows, skipped)
    report_left_out(str(source.with_name(f"{cfg.calibration_split}.jsonl")), n_cal_rows, cal_skipped)
    rows, cal_rows = select_systems(rows, cfg.systems), select_systems(cal_rows, cfg.systems)
    results: dict[str, Any] = {"source": str(cfg.run_dir or cfg.predictions),
                               "data_root": str(data_root) if data_root else None,
                               "rows": len(rows), "rows_read": n_rows, "rows_skipped": dict(skipped)}
    if cal_skipped:
        results["calibration_rows_skipped"] = dict(cal_skipped)
    md = [f"# Evaluation of `{results['source']}`", "",
          f"{len(rows)} of {n_rows} predictions evaluated (systems={cfg.systems})"
          + (f"; left out: {', '.join(f'{n} {why}' for why, n in skipped.items())}." if skipped else "."), ""]
    if cross_fitted:
        results["cross_fitted"] = cross_fitted
        results["in_sample"] = cross_fitted["in_sample"]
        md += _cross_fitted_note(cross_fitted, cfg)
    pictures: list[tuple[str, Path]] = []
    written = [out_dir / "metrics.json", out_dir / "report.md"]
    if is_node_level(rows):
        results["node"], node_md, node_pictures, html = node_level(rows, data_root, out_dir, cfg)
        if results.get("in_sample"):  # a site head scoring the rows it was fitted on: top-1 near 1
            node_md = [line + " (in-sample)" if line.startswith("### Error localisation") else line
                       for line in node_md]
        md += node_md
        pictures += node_pictures
        (out_dir / "report.html").parent.mkdir(parents=True, exist_ok=True)
        report.write_report(out_dir / "report.html", html)
        written.append(out_dir / "report.html")
        test_queries = query_scores(rows)
        cal_queries = query_scores(cal_rows) if cal_rows and is_node_level(cal_rows) else None
        query_title = f"Whole query (least confident node; label: {test_queries['label_name']})"
    else:
        test_queries = score_table(rows)
        cal_queries = score_table(cal_rows) if cal_rows else None
        query_title = "Scores"
    results["query"], query_md, query_pictures = query_level(test_queries, cal_queries, query_title,
                                                            out_dir, cfg)
    md += query_md
    pictures += query_pictures
    if _wants_whole_query(cfg):
        results["wholequery"], wq_md = whole_query(cfg)
        md += wq_md

    md += ["## Figures", ""]
    md += [f"![{title}](plots/{stem.name}.png)" for title, stem in pictures]
    results = report.json_safe(results)
    out_dir.mkdir(parents=True, exist_ok=True)
    report.write_json(out_dir / "metrics.json", results)
    report.write_report(out_dir / "report.md", "\n".join(md) + "\n")
    print("\n".join(md[: md.index("## Figures")]))
    print("wrote " + ", ".join(str(p) for p in written) + f" and {out_dir / 'plots'}/")
    return results


def _cross_fitted_note(note: dict, cfg: DictConfig) -> list[str]:
    """The report's word on a cross-fitted run: its val.jsonl is in-sample, chooses no threshold,
    and its val/* numbers (the run's metrics.json, or this report's for split=val) are no held-out
    numbers."""
    why = "data.json: protocol crossfit" if note["protocol"] == "crossfit" else \
        f"predictions/{cfg.calibration_split}.jsonl holds evaluated (question, system) pairs"
    shared = (f" ({note['pairs_in_both']} of the {note['pairs_evaluated']} evaluated pairs)"
              if note.get("pairs_in_both") is not None else "")
    lines = [(f"Cross-fitted run ({why}): its predictions/val.jsonl scores the (question, system) pairs of "
              f"test.jsonl again{shared}, each by the fold model whose calibrators and site head were fitted "
              "on it: in-sample, and so are the run's metrics.json val/* numbers (val/localisation_* among "
              "them), no held-out numbers. RS(c) thresholds are chosen on the other schema-disjoint folds of "
              f"the evaluated split ({cfg.split})" + (", not on val." if cfg.split != "val" else "."))]
    if note["in_sample"]:
        lines += ["", ("**In-sample**: the evaluated split is that val: every number below, the error "
                       "localisation above all, is in-sample; evaluate split=test for out-of-fold numbers.")]
    return lines + [""]


def _wants_whole_query(cfg: DictConfig) -> bool:
    wq = cfg.get("wholequery") or {}
    return bool(wq.get("base_scores") or wq.get("predictions"))


def evaluate_whole_query(cfg: DictConfig) -> dict:
    """Only the whole-query section (no node-level input): metrics.json and report.md."""
    out_dir = Path(cfg.out_dir) if cfg.out_dir else Path(cfg.wholequery.base_scores or ".").parent / "eval"
    check_writable(out_dir, "out_dir", directory=True)
    results, md = whole_query(cfg)
    out_dir.mkdir(parents=True, exist_ok=True)
    report.write_json(out_dir / "metrics.json", {"wholequery": results})
    report.write_report(out_dir / "report.md", "\n".join(md) + "\n")
    print("\n".join(md))
    print(f"wrote {out_dir / 'metrics.json'}, {out_dir / 'report.md'}")
    return {"wholequery": results}


def whole_query(cfg: DictConfig) -> tuple[dict, list[str]]:
    """Whole-query confidence in both tracks under the three protocols: the base-score table
    (read, or built here: execution and SCF cached, token scores with the scorer's progress bar
    and cache), then ``model.wholequery.tracks``."""
    from model.wholequery.base_scores import (
        BaseScores,
        add_node_confidences,
        add_pooled_scores,
        read_node_confidences,
    )
    from model.wholequery.tracks import track_results, tracks_markdown

    wq = cfg.wholequery
    if wq.base_scores:
        path = Path(wq.base_scores)
        if not path.is_file():
            raise UsageError(f"wholequery.base_scores={path}: no such file")
        table = BaseScores.read_csv(path)
        if wq.scores:
            from model.lm.token_probabilities import read_scores

            table = add_pooled_scores(table, read_scores(wq.scores))
    else:
        table = _build_base_scores(cfg)
    for key, prefix in (("node_predictions", "node"), ("node_predictions_consensus", "nodec")):
        if wq.get(key):
            if not Path(wq[key]).is_file():
                raise UsageError(f"wholequery.{key}={wq[key]}: no such file")
            table = add_node_confidences(table, read_node_confidences(wq[key]), prefix)
    results = track_results(table, cfg.n_folds, cfg.seed, cfg.n_bins)
    md = ["## Whole query: single-system and consensus tracks", "",
          (f"{len(table)} predictions of {len(set(table.system))} systems; labels: execution match. "
           f"Out-of-fold confidences pooled per system over {cfg.n_folds} schema-disjoint folds: fit on "
           "one fold (the papers), fit on the other folds, or fit on the other systems only (leave "
           f"one system out); ECE with {cfg.n_bins} uniform bins."), "", tracks_markdown(results), ""]
    return results, md


def _build_base_scores(cfg: DictConfig):
    from model.data.datasets import database_path, load_questions, load_schemas
    from model.data.predictions import load_predictions
    from model.lm.token_probabilities import prediction_files, read_scores
    from model.wholequery.base_scores import build_base_scores

    wq = cfg.wholequery
    if not cfg.data_root or not Path(cfg.data_root).is_dir():
        raise UsageError(f"wholequery.predictions needs data_root=<dataset folder>; got {cfg.data_root}")
    root = Path(cfg.data_root)
    questions = load_questions(root, wq.split_of)
    schemas = load_schemas(root)
    preds = [p for f in prediction_files([wq.predictions]) for p in load_predictions(f, questions)]
    scores = read_scores(wq.scores) if wq.scores else _score_here(cfg, questions, schemas, preds) if wq.score else None
    db_paths = {q.db_id: database_path(root, q.db_id) for q in questions}
    return build_base_scores(questions, preds, schemas, db_paths, scores, exec_cache_dir=cache_dir("exec"))


def _score_here(cfg: DictConfig, questions, schemas, preds) -> dict:
    """Token scores under the scorer LM, with its progress bar and disk cache."""
    from model.lm import load_causal_lm
    from model.lm.token_probabilities import score_predictions, scores_cache_path

    by_id = {q.question_id: q for q in questions}
    preds = [p for p in preds if p.question_id in by_id and p.sql.strip()]
    model, tokenizer = load_causal_lm(cfg.wholequery.scorer_model)
    scores = score_predictions(model, tokenizer, preds, by_id, schemas,
                               cache_path=scores_cache_path(cfg.wholequery.scorer_model or None))
    return {(p.system, p.question_id): s for p, s in zip(preds, scores)}


def node_level(rows: list[dict], data_root: Path | None, out_dir: Path, cfg: DictConfig
               ) -> tuple[dict, list[str], list[tuple[str, Path]], str]:
    """Node-level tables (the model and the baselines), breakdowns, reliability diagrams and
    the HTML page: (results, Markdown lines, pictures, report.html text)."""
    plot_dir = out_dir / "plots"
    nodes = node_scores(rows)
    # A scorer may name itself (the boosted scorer says whether it is single-system or consensus).
    methods = {rows[0].get("method") or "RAT node model": nodes}
    schemas, questions, gold_problem = gold_sources(data_root, rows)
    if gold_problem:
        print(f"evaluation without gold SQL and difficulty: {gold_problem}", file=sys.stderr)
    trees = _trees(rows)
    agreement_problem = None
    if cfg.baselines.agreement:
        agreement = agreement_scores(rows, trees)
        if agreement is not None:
            methods["node agreement (consensus)"] = agreement
        else:  # (a single-system evaluation: data.holdout_system, one system's file)
            real = {r.get("system") for r in rows if is_real_system(r.get("system"))}
            agreement_problem = ("one system in the evaluated split" if len(real) < 2
                                 else "no question answered by two systems, each with its tree")
            print(f"node agreement: left out ({agreement_problem})", file=sys.stderr)
    if cfg.baselines.token and data_root is not None and not gold_problem:
        methods["token level"] = token_scores(rows, data_root, cfg)
    summaries = {name: summarise(s, cfg) for name, s in progress(methods.items(), "node metrics, bootstrap intervals")}
    located_rows = with_gold_diff(rows, trees, questions, schemas)
    for name, s in progress(methods.items(), "error localisation"):  # does the score point at where a wrong query goes wrong?
        if "row" in s:
            summaries[name]["localisation"] = localisation_of_scores(located_rows, s, site_scores=s is nodes)
    results = {"methods": summaries, "by_node_type": breakdown(nodes, "node_type", cfg)}
    systems = sorted({r.get("system") for r in rows if r.get("system")})
    if len(systems) > 1 and "row" in nodes:  # the node model's localisation, system by system
        system_of = np.array([rows[i].get("system") for i in nodes["row"]])
        results["localisation_by_system"] = {
            s: localisation_of_scores(located_rows, {k: v[system_of == s] for k, v in nodes.items()
                                                     if k in ("confidence", "row")}, site_scores=True)
            for s in systems}
    difficulty = _difficulties(rows, questions)
    if any(d is not None for d in difficulty):
        nodes["difficulty"] = np.array([str(difficulty[i]) for i in nodes["row"]])
        results["by_difficulty"] = breakdown(nodes, "difficulty", cfg)

    folds = min(cfg.n_folds, len(np.unique(nodes["group"])))
    md = ["## Node level", "",
          ("Table 4 shape (the fine-grained paper): BS-P and ECE-P after Platt scaling fitted on "
           + (f"{folds} schema-disjoint folds (one a database at most)" if folds > 1 else
              "schema-disjoint folds (none here: one database)")
           + f"; ECE with {cfg.n_bins} uniform bins; [{cfg.level:.0%} bootstrap interval, {cfg.n_bootstrap} resamples]."),
          "",
          report.metrics_table(summaries), ""]
    md += _missing_platt_note(summaries, nodes["group"], cfg)
    if gold_problem:
        md += [(f"Left out, for want of the benchmark's gold SQL and difficulty: the comparison with "
                f"gold (spans, error kinds, gold in report.html), the table by Spider difficulty"
                f"{' and the token-level baseline' if cfg.baselines.token else ''} ({gold_problem})."), ""]
    if agreement_problem:
        md += [f"Left out: the node agreement (consensus) baseline ({agreement_problem}).", ""]
    md += ["More metrics:", "", report.metrics_table(summaries, report.EXTRA_COLUMNS), ""]
    located = {n: s["localisation"] for n, s in summaries.items()
               if s.get("localisation", {}).get("n_wrong_queries")}
    if located:  # rows written without their tree (node_arity) have no error sites to find
        md += ["### Error localisation", "",
               ("Wrong queries with an error site (a wrong node whose children are all right): how "
                "often the node pointed at first (top-1) or one of the first three (top-3) is a site, "
                "and the mean reciprocal rank of the first site (mrr). Readings: the least confident "
                "node; the site reading (1 - p(node)) * prod p(child); the site scores of a head "
                "trained on site labels. A method's pointer (metrics.json's plain top1, top3, mrr) is "
                "its last reading here: the site scores where it has them, else the site reading. "
                "Span: the pointed node's SQL text overlaps what a token diff of the canonical SQL "
                "against gold's marks (large nodes overlap easily: the root always does)."), "", localisation_markdown(located), ""]
    if results.get("localisation_by_system"):
        md += ["### Error localisation by system (the node model)", "",
               localisation_markdown(results["localisation_by_system"], best_only=True), ""]
    for key, title in (("by_node_type", "node type"), ("by_difficulty", "Spider difficulty")):
        if results.get(key):
            md += [f"### RAT node model by {title}", "",
                   report.metrics_table(results[key], ("brier", "auc", "ece"), first=title), ""]
    pictures = []
    binning_kw = {"n_bins": cfg.n_bins, "min_bin_size": cfg.min_bin_size, "max_bin_size": cfg.max_bin_size}
    pairs = {name: (s["confidence"], s["label"]) for name, s in methods.items()}
    for binning in ("uniform", "monotonic"):
        stem = plot_dir / f"node_reliability_{binning}"
        plots.plot_reliability(pairs, stem, binning=binning, style="bars", **binning_kw)
        pictures.append((f"Node-level reliability, {binning} binning", stem))
    stem = plot_dir / "node_reliability_markers"
    plots.plot_reliability(pairs, stem, binning="monotonic", style="markers", **binning_kw)
    pictures.append(("Node-level reliability, monotonic bins, marker area ∝ bin size", stem))
    html = _html(rows, trees, query_scores(rows), questions, schemas, cfg)
    return results, md, pictures, html


def _missing_platt_note(summaries: dict, groups: np.ndarray, cfg: DictConfig) -> list[str]:
    """Why BS-P / ECE-P read "–" when they do: Platt maps are fitted out of fold by database."""
    if not any("post_hoc_missing" in s for s in summaries.values()):
        return []
    n_db = len(np.unique(groups))
    return [(f"BS-P and ECE-P are \"–\": they need at least 2 databases for schema-disjoint "
            f"folds and the evaluated split has {n_db}."), ""]


def query_level(test: dict, calibration: dict | None, title: str, out_dir: Path, cfg: DictConfig
                ) -> tuple[dict, list[str], list[tuple[str, Path]]]:
    """Whole-query table, abstention (RS(c), AURC), reliability and risk-coverage plots."""
    plot_dir = out_dir / "plots"
    q = {"summary": summarise(test, cfg), "abstention": _abstention(test, calibration, cfg)}
    md = [f"## {title}", "", report.metrics_table({"confidence": q["summary"]}), ""]
    md += _missing_platt_note({"confidence": q["summary"]}, test["group"], cfg)
    md += [report.metrics_table({"confidence": q["summary"]}, report.EXTRA_COLUMNS), "",
           (f"### Abstention (TrustSQL RS(c); {q['abstention']['protocol']}; "
            f"N = {len(test['label'])})"), ""]
    if q["abstention"]["rows"]:
        md += [report.abstention_markdown(q["abstention"]["rows"]), ""]
    md += [f"AURC (area under the risk-coverage curve): {q['abstention']['aurc']:.4f}", ""]
    pair = {"confidence": (test["confidence"], test["label"])}
    pictures = []
    stem = plot_dir / "query_reliability"
    plots.plot_reliability(pair, stem, binning="uniform", style="bars", n_bins=cfg.n_bins,
                           min_bin_size=cfg.min_bin_size, max_bin_size=cfg.max_bin_size)
    pictures.append(("Whole-query reliability", stem))
    stem = plot_dir / "risk_coverage"
    plots.plot_risk_coverage({"confidence": abstention.risk_coverage(*pair["confidence"])}, stem)
    pictures.append(("Risk-coverage curve", stem))
    return q, md, pictures


def look_here_first(row: dict) -> dict:
    """The node to look at first, and the runner-up: the highest site scores the scorer wrote
    (``site_scores``), else the highest site readings of the node confidences."""
    from rat.walks import site_reading

    scores = row.get("site_scores") or site_reading(row["node_confidences"], row["node_arity"])
    order = np.argsort(-np.asarray(scores, dtype=float), kind="stable")
    return {"site_scores": list(scores), "look_here": int(order[0]),
            "runner_up": int(order[1]) if len(order) > 1 else None}


def _html(rows: list[dict], trees: dict, queries: dict, questions: dict, schemas: dict,
          cfg: DictConfig) -> str:
    order = [i for i in np.argsort(queries["confidence"], kind="stable") if i in trees]
    examples = []
    for i in order[: cfg.html.max_examples]:
        r = rows[i]
        q = questions.get(r["question_id"])
        examples.append({**{k: r.get(k) for k in ("question_id", "system", "db_id", "sql")},
                         "question": q.question if q else r.get("question"),
                         "gold_sql": q.gold_sql if q else r.get("gold_sql"),
                         "tree": trees[i], "confidences": r["node_confidences"],
                         "labels": r["node_labels"], "schema": schemas.get(r.get("db_id")),
                         "query_confidence": float(queries["confidence"][i]),
                         **look_here_first(r)})
    return report.html_report(examples, title=f"RAT node confidences: the {len(examples)} least confident "
                                              f"of {len(order)} queries, least confident first")
