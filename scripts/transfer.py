"""Transfer between benchmarks: a saved boosted model (``<run>/model``) scores another benchmark's
labelled predictions through ``Scorer``, as a user would, and prints node AUC, whole-query AUC
(least confident node) and look-here-first top-1 beside an in-domain run's out-of-fold numbers.

    python scripts/transfer.py --model /tmp/runs/db_without/model --data bird \\
        --in-domain /tmp/runs/bird
    python scripts/transfer.py --model /tmp/runs/bird/model --data spider --no-database \\
        --in-domain /tmp/runs/db_without --importance 3

``--data spider|bird`` reads ``../shared/data/<name>`` and its predictions (the 11 Spider dev
systems, the 4 CodeS BIRD dev systems). BIRD has no databases here: tree labels, no database
features, and the evidence is read as part of the question. ``--no-database`` scores Spider
without its databases. ``--labels tree`` labels Spider by tree comparison with gold, as BIRD is
labelled (default: execution labels). A model never saw the other benchmark's databases,
schemas or questions. ``--data spider_train_qwen`` scores Qwen2.5-Coder-1.5B's answers to Spider
*train* (``data/llm_answers/spider_train``; 144 databases disjoint from dev's): a model
trained on the dev systems without them (``model.train_predictions=null``) meets a system and
databases it never saw. ``--predictions DIR`` scores other files on ``--data``'s benchmark and
split (another prompt's answers to Spider train, say).

``--adapt TEACHER``: also the model adapted to the tested benchmark's unlabelled outputs with
``rat-adapt``'s ``model.scoring.adapt`` (a consensus model, TEACHER, reads every system's answers
side by side; the model's node model learns its confidences; with ``--without-label-shift`` also
without its label-shift step, the teacher's rates of right nodes and queries re-estimated by
EM), out of fold by database: the
queries of each of 5 folds of databases are scored by the model adapted on the other folds'
outputs (all systems). The tested benchmark's labels are read for the metrics only.

``--quantiles rows``: a model trained with ``model.quantiles=true`` reads the tested
benchmark's count features against that benchmark's own nodes (``Scorer.score_many``), not
against its training nodes: the tested predictions' features are read, never their labels.

``--importance N``: grouped permutation importance (``model.nodes.boosted.group_importance``):
the drop in node AUC on the tested benchmark when the columns of one feature group are permuted
together, N repeats; for the transferred model, and with ``--in-domain`` for that run's
configuration cross-fitted on the tested benchmark (its folds refitted: out of fold).
``--importance-by feature``: each feature permuted alone instead.
"""

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from model import metrics as M
from model.data.datasets import database_path, load_questions, load_schemas
from model.eval.localisation import localisation
from model.nodes.examples import build_examples
from model.scoring import RowError, Scorer
from rat.walks import error_sites

SHARED = Path(os.environ.get("RAT_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
# --data: (benchmark folder under SHARED, split, folder of the predictions scored)
PREDICTIONS = {"spider": ("spider", "dev", SHARED / "predictions" / "spider_dev"),
               "bird": ("bird", "dev", SHARED / "predictions" / "bird_dev"),
               "spider_train_qwen": ("spider", "train",
                                     Path(__file__).resolve().parents[1] / "data" / "llm_answers" / "spider_train")}


def run_labels(config: dict) -> str:
    """The labels a run trained on: tree where it had no databases (BIRD here) or data.labels=tree."""
    data = config.get("data", {})
    return "tree" if data.get("labels") == "tree" or not data.get("require_database", True) else "execution"


def importance(examples: list, root: Path, use_db: bool, model_dir: Path, in_domain: Path | None,
               repeats: int, by: str = "group") -> None:
    """Print the group (or feature) x (transfer, in domain) table of drops in node AUC."""
    from model.nodes.boosted import fold_scorers, group_importance
    from model.nodes.estimator import BoostedNodeModel, without_database
    from model.nodes.features import build_features
    from model.nodes.table import NodeTable, fold_roles
    from model.train_boosted import params_of

    schemas = load_schemas(root)
    db_paths = {db: database_path(root, db) for db in {e.db_id for e in examples}}
    # features as computed with the databases (cached), then the database ones blanked: what
    # Scorer computes without a database (the same columns, NaN)
    features, names, _ = build_features(examples, schemas, db_paths, use_cache=True, progress=False)
    table = NodeTable(examples, features, names, root)

    def columns(wanted) -> list[int]:
        missing = [n for n in wanted if n not in names]
        if missing:
            sys.exit(f"transfer.py: error: --importance reads the single-system features only; "
                     f"the model also reads {missing[:3]}")
        return [names.index(n) for n in wanted]

    saved = BoostedNodeModel.load(model_dir)
    x, labels, _ = table.stack(range(len(examples)))
    if not use_db:
        x = without_database(x, names)
    x = x[:, columns(saved.features_)]
    base, drops = group_importance([(x, lambda rows: saved.node_confidence(rows, use_db))], labels,
                                   saved.features_, repeats, by=by)
    results = {"transfer": (base, drops)}
    if in_domain is not None:
        run = json.loads((in_domain / "config.json").read_text())
        run_names = json.loads((in_domain / "data.json").read_text())["features"]
        config = params_of(run["model"])
        if not use_db:
            config.test_database = False
        keep = columns(run_names)
        sub = NodeTable(examples, [f[:, keep] for f in features], tuple(run_names), root)
        roles, info = fold_roles(sub, run["data"])
        expected = json.loads((in_domain / "data.json").read_text()).get("folds")
        if info.get("folds") != expected:
            sys.exit(f"transfer.py: error: {in_domain}: its folds are not the ones these examples give")
        blocks = fold_scorers(sub, roles, config)
        held_out = np.concatenate([np.concatenate([sub.examples[k].node_labels for k in role["test"]])
                                   for role in roles])
        results["in domain"] = group_importance(blocks, held_out, run_names, repeats, by=by)
    groups = list(dict.fromkeys(g for _, d in results.values() for g in d))
    what = "grouped permutation importance" if by == "group" else "permutation importance per feature"
    print(f"\n{what}: node AUC as scored minus with the {by} permuted "
          f"(mean of {repeats} repeats, ± their std; 'missing': NaN in every row)\n")
    print(f"| {by} | " + " | ".join(results) + " |\n|---|" + "---|" * len(results))
    print("| node AUC as scored | " + " | ".join(f"{b:.3f}" for b, _ in results.values()) + " |")
    for g in groups:
        cells = []
        for _, d in results.values():
            item = d.get(g)
            cells.append("not read" if item is None else "missing" if item.missing
                         else f"{item.drop:+.3f} ± {item.std:.3f}")
        print(f"| {g} | " + " | ".join(cells) + " |")


def measure(kept: list, calibrated: bool = True) -> dict[str, float]:
    """Node AUC and ECE, whole-query AUC (least confident node) and, calibrated, AUC and ECE,
    look here first (top-1 / top-3 of the site head, top-1 of the site reading) of scored
    ``(example, ScoredQuery)`` pairs."""
    conf = np.concatenate([[n.confidence for n in r.nodes] for _, r in kept])
    node_labels = np.concatenate([e.node_labels for e, _ in kept])
    query = np.array([min(n.confidence for n in r.nodes) for _, r in kept])
    calibrated_query = np.array([r.query_confidence for _, r in kept])
    correct = np.array([int(e.correct) for e, _ in kept])
    where = localisation([{"node_labels": e.node_labels, "node_arity": e.node_arity} for e, _ in kept],
                         [[n.confidence for n in r.nodes] for _, r in kept],
                         [[n.site_score for n in r.nodes] for _, r in kept])
    return {"auc": M.auc(conf, node_labels), "ece": M.ece(conf, node_labels), "query_auc": M.auc(query, correct),
            "calibrated_query_auc": M.auc(calibrated_query, correct),
            "calibrated_query_ece": M.ece(calibrated_query, correct),
            "top1": where["top1_site_scores"], "top3": where["top3_site_scores"],
            "top1_reading": where["top1_site_reading"]}


def per_system(kept: list, labels: str, saved) -> None:
    """One row per system of scored ``(example, ScoredQuery)`` pairs: its queries, the rate of
    right ones by ``labels``, the mean whole-query confidence (calibrated to ``saved``'s
    ``query_label``), whole-query AUC (least confident node; the whole-query confidence) and ECE."""
    label = getattr(saved, "query_label", "unrecorded")
    print(f"\nper system (whole-query confidence calibrated to {label} labels; right by {labels} labels):\n")
    print("| system | queries | right | mean whole-query confidence | whole-query AUC (least node) | "
          "whole-query AUC / ECE |\n|---|---|---|---|---|---|")
    for system in sorted({e.system for e, _ in kept}):
        mine = [(e, r) for e, r in kept if e.system == system]
        correct = np.array([int(e.correct) for e, _ in mine])
        query = np.array([r.query_confidence for _, r in mine])
        least = np.array([min(n.confidence for n in r.nodes) for _, r in mine])
        print(f"| {system} | {len(mine)} | {correct.mean():.3f} | {query.mean():.3f} | {M.auc(least, correct):.3f} | "
              f"{M.auc(query, correct):.3f} / {M.ece(query, correct):.3f} |", flush=True)


def calibrated_query(run: Path, prefix: str) -> str:
    """A run's cross-fitted calibrated whole-query AUC / ECE (its saved model's card), as scored
    with (``test/``) or without databases."""
    card = run / "model" / "model.json"
    if not card.is_file():
        return "–"
    metrics = json.loads(card.read_text())["metrics"]
    m = metrics.get("out_of_fold" if prefix == "test/" else "out_of_fold_without_database", {})
    if "test/calibrated_query_auc" not in m:
        return "–"
    return f"{m['test/calibrated_query_auc']:.3f} / {m['test/calibrated_query_ece']:.3f}"


def adapted_results(saved, teacher_dir: Path, examples: list, rows: list[dict], label_shift: bool = True
                    ) -> tuple[list, list]:
    """Each row scored by ``saved`` adapted (``model.scoring.adapt``) on the other folds'
    rows, 5 folds by database (``RowError`` where a row cannot be scored), and each fold's
    adapted model."""
    from model.data.folds import schema_disjoint_folds
    from model.nodes.estimator import BoostedNodeModel
    from model.scoring.adapt import adapt

    teacher = BoostedNodeModel.load(teacher_dir)
    folds = schema_disjoint_folds([e.db_id for e in examples])
    out: list = [None] * len(rows)
    models = []
    for f in range(int(folds.max()) + 1):
        adapted = adapt(saved, teacher, [r for r, g in zip(rows, folds) if g != f], progress=False,
                        label_shift=label_shift)
        models.append(adapted.model)
        held = np.flatnonzero(folds == f)
        for k, r in zip(held, Scorer(adapted.model).score_many([rows[k] for k in held], progress=False,
                                                               spans=False, label_shift=False)):
            out[k] = r
        rates = "" if not adapted.estimated_rates else (
            ", right nodes / queries {:.1%} / {:.1%} -> {:.1%} / {:.1%}".format(*adapted.teacher_rates,
                                                                               *adapted.estimated_rates))
        print(f"  fold {f + 1}/{folds.max() + 1}: adapted on {adapted.queries} outputs "
              f"({adapted.shared_questions} questions answered by 2+ systems{rates}), scored {len(held)}",
              flush=True)
    return out, models


def recalibrated(models, examples: list, rows: list[dict], results: list, golds: dict[str, str],
                 labels: str, use_db: bool, sizes: list[int], draws: int, ways: tuple[str, ...] = ("select", "always")
                 ) -> dict[tuple[str, int], list[dict]]:
    """For each way (``select``: rat-calibrate's default, a pair replaced only where a refit
    predicts the labelled outputs better; ``always``: always refitted) and sample size n,
    ``measure`` of each of ``draws`` draws: in each of the 5 folds by database, fold f's model
    (``models``: one model for all folds, or one a fold) recalibrated
    (``model.scoring.recalibrate``) on n outputs drawn from the other folds, labelled with their
    gold SQL (and, for execution labels, their execution match), then applied to fold f's scored
    ``results`` (``RowError`` rows left out). The drawn outputs' labels are read to recalibrate;
    fold f's for the metrics only. Each fold has its own recalibrated model, so a whole-query
    AUC over the pooled folds mixes five maps: the rankings within a model do not change."""
    from dataclasses import replace

    from model.data.folds import schema_disjoint_folds
    from model.scoring.recalibrate import RecalibrationError, recalibrate

    folds = schema_disjoint_folds([e.db_id for e in examples])
    models = models if isinstance(models, list) else [models] * (int(folds.max()) + 1)
    ok = np.array([not isinstance(r, RowError) for r in results])
    out: dict[tuple[str, int], list[dict]] = {}
    for way in ways:
        for n in sizes:
            out[way, n] = []
            for draw in range(draws):
                rng = np.random.default_rng(draw)
                pairs, failed, refits = [], 0, 0
                for f in range(int(folds.max()) + 1):
                    pool = np.flatnonzero((folds != f) & ok)
                    picked = rng.choice(pool, size=min(n, len(pool)), replace=False)
                    sample = [{**rows[k], "gold": golds[examples[k].question_id],
                               **({"correct": bool(examples[k].execution_match)}
                                  if labels == "execution" and examples[k].execution_match is not None else {})}
                              for k in picked]
                    try:
                        result = recalibrate(models[f], sample, labels=labels, select=way == "select",
                                             progress=False, workers=1)
                        model, refits = result.model, refits + bool(result.refitted)
                    except RecalibrationError:
                        model, failed = models[f], failed + 1  # one class only: the model as it was
                    for k in np.flatnonzero((folds == f) & ok):
                        r = results[k]
                        conf, query = model.confidences(model.raw_node_probability(r.features), use_db)
                        pairs.append((examples[k], replace(r, query_confidence=query, nodes=[
                            replace(node, confidence=float(c)) for node, c in zip(r.nodes, conf)])))
                mean = float(np.mean([r.query_confidence for _, r in pairs]))
                out[way, n].append({**measure(pairs), "failed": failed, "refits": refits, "mean_query": mean})
            m = out[way, n]
            print(f"  recalibrated ({way}) on {n} labelled outputs: node ECE {np.mean([x['ece'] for x in m]):.3f}, "
                  f"whole-query ECE {np.mean([x['calibrated_query_ece'] for x in m]):.3f} (mean of {draws} draws)",
                  flush=True)
    return out


def recalibration_table(name: str, measured: dict[tuple[str, int], list[dict]], share_right: float,
                        folds: int = 5) -> None:
    """Mean ± std over the draws of node ECE, whole-query ECE and mean whole-query confidence,
    per way and sample size."""
    draws = len(next(iter(measured.values())))
    print(f"\n{name}, recalibrated on n labelled outputs of the other folds' databases (mean ± std over "
          f"{draws} draws; {share_right:.1%} of the outputs right):\n")
    print("| way | labelled outputs | node ECE | whole-query ECE | mean whole-query confidence | "
          f"calibrators refitted (of {draws * folds} folds) | draws with one class only |\n|---|---|---|---|---|---|---|")
    for (way, n), m in measured.items():
        cell = {k: f"{np.mean([x[k] for x in m]):.3f} ± {np.std([x[k] for x in m]):.3f}"
                for k in ("ece", "calibrated_query_ece", "mean_query")}
        label = "selected (default)" if way == "select" else "always refitted"
        print(f"| {label} | {n} | {cell['ece']} | {cell['calibrated_query_ece']} | {cell['mean_query']} | "
              f"{sum(x['refits'] for x in m)} | {sum(x['failed'] for x in m)} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, required=True, help="a <run>/model directory")
    parser.add_argument("--data", choices=sorted(PREDICTIONS), required=True)
    parser.add_argument("--predictions", type=Path, metavar="DIR",
                        help="score the id-keyed JSONL files in DIR instead of --data's, on its benchmark and "
                             "split (e.g. --data spider_train_qwen --predictions <other answers to Spider train>)")
    parser.add_argument("--no-database", action="store_true", help="score without the databases")
    parser.add_argument("--labels", choices=("execution", "tree"), default="execution",
                        help="Spider's labels: execution match (default) or tree comparison with gold "
                             "(BIRD: tree labels always, there are no databases)")
    parser.add_argument("--in-domain", type=Path, help="a run on --data whose metrics.json to print beside")
    parser.add_argument("--per-system", action="store_true",
                        help="also one row per system (each file's queries alone): mean whole-query "
                             "confidence beside the rate of right queries, whole-query AUC and ECE")
    parser.add_argument("--adapt", type=Path, metavar="TEACHER",
                        help="a consensus <run>/model: also the model adapted on the tested outputs, out of fold")
    parser.add_argument("--without-label-shift", action="store_true",
                        help="with --adapt: also the model adapted without the label-shift step")
    parser.add_argument("--recalibrate", type=int, nargs="+", default=[], metavar="N",
                        help="also each model recalibrated (rat-calibrate) on N labelled outputs of the other "
                             "folds, out of fold by database")
    parser.add_argument("--draws", type=int, default=5, help="with --recalibrate: random samples of each size")
    parser.add_argument("--recalibrate-ways", nargs="+", choices=("select", "always"), default=["select", "always"],
                        help="with --recalibrate: rat-calibrate's default (select) and/or --always-refit (always)")
    parser.add_argument("--recalibrate-models", choices=("both", "transfer", "adapted"), default="both",
                        help="with --recalibrate: which rows to recalibrate (adapted: needs --adapt)")
    parser.add_argument("--importance", type=int, default=0, metavar="N",
                        help="grouped permutation importance with N repeats (0: off)")
    parser.add_argument("--importance-by", choices=("group", "feature"), default="group",
                        help="with --importance: permute each feature group together (default) or each feature")
    parser.add_argument("--quantiles", choices=("model", "rows"), default="model",
                        help="a model trained with model.quantiles=true reads the count features against its "
                             "training nodes (model) or the tested benchmark's own (rows: its features, no labels)")
    args = parser.parse_args()
    for path, what in ((args.model / "model.json", "--model"),
                       *(((args.adapt / "model.json", "--adapt"),) if args.adapt else ()),
                       *(((args.in_domain / "metrics.json", "--in-domain"),) if args.in_domain else ())):
        if not path.is_file():
            parser.error(f"{what} {path.parent}: no {path.name} there")
    if any(n < 1 for n in args.recalibrate) or args.draws < 1:
        parser.error("--recalibrate and --draws: numbers of outputs and draws must be >= 1")
    if args.importance < 0:
        parser.error(f"--importance {args.importance}: the number of repeats must be >= 0")
    benchmark, split, folder = PREDICTIONS[args.data]
    folder = args.predictions or folder
    if args.labels == "tree" and benchmark != "spider":
        parser.error("--labels: BIRD is labelled by tree comparison always (there are no databases)")
    root = SHARED / benchmark
    if args.predictions and not args.predictions.is_dir():
        parser.error(f"--predictions {args.predictions}: not a folder of predictions files")
    for path in (root, folder):
        if not path.is_dir():
            parser.error(f"--data {args.data}: {path} not found (the shared data: set RAT_SHARED_DATA)")
    files = sorted(folder.iterdir())
    with_databases = benchmark == "spider"
    labels = args.labels if with_databases else "tree"
    examples, _ = build_examples(root, split, prediction_files=files, require_database=with_databases,
                                 evidence=benchmark == "bird", labels=labels)  # BIRD: question + evidence
    if with_databases and labels == "execution":
        examples = [e for e in examples if e.execution_match is not None]
    schemas = load_schemas(root)
    use_db = with_databases and not args.no_database
    # question_id and system: a consensus model reads each query beside the other systems' answers
    rows = [{"sql": e.sql, "question": e.question, "db_id": e.db_id, "schema": schemas[e.db_id],
             "database": database_path(root, e.db_id) if use_db else None,
             "question_id": e.question_id, "system": e.system} for e in examples]
    scorer = Scorer.load(args.model)
    if args.importance and scorer.saved.quantiles_ is not None:
        parser.error("--importance reads the features as computed; this model reads some as quantiles")
    if args.quantiles == "rows" and scorer.saved.quantiles_ is None:
        parser.error(f"--quantiles rows: {args.model} was trained without model.quantiles=true")
    results = scorer.score_many(rows, progress=True, spans=False, quantiles=args.quantiles, label_shift=False)
    kept = [(e, r) for e, r in zip(examples, results) if not isinstance(r, RowError)]
    correct = np.array([int(e.correct) for e, _ in kept])
    sites = [sum(error_sites(e.node_labels, e.node_arity)) for e, _ in kept if not e.correct]
    sites = np.array([n for n in sites if n])
    info = scorer.saved.info_
    trained = info.get("trained_on", {})
    config = json.loads((args.model.parent / "config.json").read_text()) if (
        args.model.parent / "config.json").is_file() else {}
    print(f"\nmodel {args.model} (trained on {trained.get('data_root')}: {trained.get('examples')} predictions, "
          f"{run_labels(config) if config else trained.get('labels', 'unrecorded')} labels, groups: {info.get('config', {}).get('groups', 'single')}, "
          f"database features: "
          f"{info.get('config', {}).get('database', 'with')}, dropped: {info.get('config', {}).get('drop')}) -> "
          f"{benchmark} {split} ({folder.name}), {len(kept)} predictions ({correct.mean():.1%} right by {labels} labels), "
          f"{'with' if use_db else 'without'} databases; its {len(sites)} wrong queries with an error site"
          + (f" have {sites.mean():.2f} sites each on average, {np.mean(sites == 1):.1%} of them one" if len(sites) else "")
          + "\n")
    print("| | node AUC | whole-query AUC | look-here-first top-1 | top-3 | top-1 by the site reading of "
          "the node confidences (no head) | node ECE | calibrated whole-query AUC / ECE |\n|---|---|---|---|---|---|---|---|")

    def line(name: str, m: dict[str, float]) -> str:
        return (f"| {name} | {m['auc']:.3f} | {m['query_auc']:.3f} | {m['top1']:.3f} | {m['top3']:.3f} | "
                f"{m['top1_reading']:.3f} | {m['ece']:.3f} | {m['calibrated_query_auc']:.3f} / "
                f"{m['calibrated_query_ece']:.3f} |")

    print(line("transfer", measure(kept)), flush=True)
    if args.per_system:
        per_system(kept, labels, scorer.saved)
    golds = {q.question_id: q.gold_sql for q in load_questions(root, split)}
    tables = []
    ways = tuple(args.recalibrate_ways)
    if args.recalibrate and args.recalibrate_models != "adapted":
        tables.append(("transfer", recalibrated(scorer.saved, examples, rows, results, golds, labels, use_db,
                                                args.recalibrate, args.draws, ways)))
    for label_shift in ((True, False) if args.without_label_shift else (True,)) if args.adapt else ():
        adapted, models = adapted_results(scorer.saved, args.adapt, examples, rows, label_shift)
        both = [(e, r) for (e, _), r in zip(kept, (a for a, b in zip(adapted, results) if not isinstance(b, RowError)))]
        if any(isinstance(r, RowError) for _, r in both):
            sys.exit("transfer.py: error: a row the model scored could not be scored adapted")
        name = (f"adapted ({args.adapt.parent.name} teacher, out of fold by database"
                f"{'' if label_shift else ', without the label-shift step'})")
        print(line(name, measure(both)), flush=True)
        if args.recalibrate and label_shift and args.recalibrate_models != "transfer":
            tables.append((name, recalibrated(models, examples, rows, adapted, golds, labels, use_db,
                                              args.recalibrate, args.draws, ways)))
    if args.in_domain:
        m = json.loads((args.in_domain / "metrics.json").read_text())
        prefix = "test_without_database/" if not use_db and "test_without_database/auc" in m else "test/"
        run = json.loads((args.in_domain / "config.json").read_text())
        print(f"| in domain ({args.in_domain.name}, out of fold, {run_labels(run)} labels"
              f"{', scored without databases' if prefix != 'test/' else ''}) | {m[prefix + 'auc']:.3f} | "
              f"{m[prefix + 'query_auc']:.3f} | {m[prefix + 'localisation_top1_site_scores']:.3f} | "
              f"{m[prefix + 'localisation_top3_site_scores']:.3f} | {m[prefix + 'localisation_top1_site_reading']:.3f} | "
              f"{m[prefix + 'ece']:.3f} | {calibrated_query(args.in_domain, prefix)} |")
        if run_labels(run) != labels:
            print(f"(the in-domain run learnt {run_labels(run)} labels; these are {labels} labels)")
    for name, measured in tables:
        recalibration_table(name, measured, float(correct.mean()))
    if args.importance and args.in_domain and run_labels(run) != labels:
        sys.exit(f"transfer.py: error: --importance refits {args.in_domain} on {labels} labels, but it "
                 f"learnt {run_labels(run)} labels: give a run of the same labels")
    if args.importance:
        importance([e for e, _ in kept], root, use_db, args.model, args.in_domain, args.importance,
                   args.importance_by)


if __name__ == "__main__":
    from model.errors import user_errors

    with user_errors():  # a data root of another layout: one line
        main()
