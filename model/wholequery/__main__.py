"""Whole-query calibration pipeline: predictions -> base scores -> calibrators -> metrics table.

    python -m model.wholequery --data-root ../shared/data/spider \
        --predictions ../shared/data/predictions/spider_dev --out runs/wholequery [--scores scores.jsonl]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from model.lm.token_probabilities import SAMPLE_MODES
from model.wholequery.base_scores import (
    BaseScores,
    add_node_confidences,
    add_pooled_scores,
    build_base_scores,
    generate_lm_samples,
    node_confidences_from_checkpoint,
    read_node_confidences,
)
from model.wholequery.methods import (
    default_methods,
    evaluate_methods,
    fit_calibrators,
    format_tables,
    mps_weight_report,
)

# --------------------------------------------------------------------------------------- CLI


def main(argv: Sequence[str] | None = None) -> None:
    from model.errors import user_errors

    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with user_errors("python -m model.wholequery"):  # (a score file of other predictions: one line)
        table = base_table(args)
    table.write_csv(args.out / "base_scores.csv")  # the rows and columns every method is measured on
    write_results(args, table)
    if args.tracks:
        write_tracks(args, table)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m model.wholequery", description=__doc__.split("\n")[0])
    ap.add_argument("--data-root", type=Path, default=None)
    ap.add_argument("--split", default="dev")
    ap.add_argument("--predictions", nargs="+", default=None, help="prediction files or folders")
    ap.add_argument("--out", type=Path, required=True, help="output folder")
    ap.add_argument("--scores", type=Path, default=None, help="pooled scores from python -m model.lm.token_probabilities")
    ap.add_argument("--base-scores", type=Path, default=None,
                    help="reuse a base_scores.csv written earlier instead of recomputing")
    ap.add_argument("--protocol", choices=["cv", "split"], default="cv")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--fit-on", choices=["one", "rest"], default="one",
                    help="cv: fit on one fold and test on the rest (the papers), or the reverse")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--exec-cache", type=Path, default=None, help="default: <cache>/exec ($RAT_CACHE)")
    ap.add_argument("--node-predictions", type=Path, default=None,
                    help="node-model predictions JSONL (<run>/predictions/test.jsonl): adds node_root, "
                         "node_min and keeps only the predictions it covers")
    ap.add_argument("--node-predictions-consensus", type=Path, default=None,
                    help="a consensus node scorer's predictions JSONL: adds nodec_root, nodec_min")
    ap.add_argument("--tracks", action="store_true",
                    help="also write tracks.md: single-system and consensus combiners, fit on one fold "
                         "vs on the rest, and leave-one-system-out")
    ap.add_argument("--node-checkpoint", type=Path, default=None,
                    help="a node-model .ckpt or run directory: scores every prediction (slow on a CPU)")
    lm = ap.add_argument_group("LM samples", "a third SCF source drawn from the scorer LM; off by default, "
                                             "meant for a GPU")
    lm.add_argument("--lm-samples", nargs="+", choices=SAMPLE_MODES, default=[],
                    help="add source lm_<mode>: nucleus sampling and/or beam search")
    lm.add_argument("--lm-model", default=None, help="HF id or folder; default: packaged SmolLM2-135M")
    lm.add_argument("--lm-gguf-file", default=None)
    lm.add_argument("--lm-n", type=int, default=5, help="samples (or beams returned) per question")
    lm.add_argument("--lm-top-p", type=float, default=0.9)
    lm.add_argument("--lm-max-new-tokens", type=int, default=128)
    lm.add_argument("--lm-batch-size", type=int, default=8)
    lm.add_argument("--device", default=None, help="for the LM and the node model; default: cuda if available")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    if args.node_predictions and args.node_checkpoint:
        ap.error("give --node-predictions or --node-checkpoint, not both")
    if args.base_scores is None and (args.data_root is None or args.predictions is None):
        ap.error("--data-root and --predictions are required unless --base-scores is given")
    if args.base_scores is not None and args.lm_samples:
        ap.error("--lm-samples needs --data-root and --predictions (its outputs are executed)")
    if args.node_checkpoint and (args.data_root is None or args.predictions is None):
        ap.error("--node-checkpoint needs --data-root and --predictions (the queries it scores)")
    return args


def base_table(args: argparse.Namespace) -> BaseScores:
    """The base-score table the arguments ask for: computed, or read and extended."""
    from model.data.datasets import database_path, load_questions, load_schemas
    from model.data.predictions import load_predictions
    from model.lm.token_probabilities import prediction_files, read_scores

    if args.data_root is not None and args.predictions is not None:
        questions = load_questions(args.data_root, args.split)
        schemas = load_schemas(args.data_root)
        preds = [p for f in prediction_files(args.predictions) for p in load_predictions(f, questions)]
    if args.base_scores is not None:
        table = BaseScores.read_csv(args.base_scores)
        if args.scores is not None:
            # Scores computed elsewhere (e.g. on a GPU) join a table saved earlier, so execution
            # and SCF are not recomputed.
            table = add_pooled_scores(table, read_scores(args.scores))
    else:
        from model.data.execution import default_cache_dir

        db_paths = {q.db_id: database_path(args.data_root, q.db_id) for q in questions}
        scores = read_scores(args.scores) if args.scores else None
        lm_outputs = _lm_samples(args, questions, preds, schemas, db_paths) if args.lm_samples else None
        table = build_base_scores(questions, preds, schemas, db_paths, scores,
                                  exec_cache_dir=args.exec_cache or default_cache_dir(),
                                  workers=args.workers, progress=not args.no_progress,
                                  additional_outputs=lm_outputs)
    if args.node_predictions or args.node_checkpoint:
        if args.node_predictions:
            node_confidences = read_node_confidences(args.node_predictions)
        else:
            wanted = set(zip(table.system.tolist(), table.question_id.tolist()))
            node_confidences = node_confidences_from_checkpoint(
                args.node_checkpoint, questions, [p for p in preds if (p.system, p.question_id) in wanted],
                schemas, args.device, progress=not args.no_progress)
        n_before = len(table)
        table = add_node_confidences(table, node_confidences)
        print(f"node confidences for {len(table)} of {n_before} predictions; evaluating on those")
    if args.node_predictions_consensus:
        table = add_node_confidences(table, read_node_confidences(args.node_predictions_consensus), "nodec")
    return table


def write_results(args: argparse.Namespace, table: BaseScores) -> None:
    """Evaluate every method, save the calibrators, write metrics.json and tables.md."""
    methods = default_methods(list(table.columns))
    results = evaluate_methods(table, methods, args.protocol, args.folds, args.seed, fit_on=args.fit_on)
    fitted = fit_calibrators(table, methods)
    for system, cals in fitted.items():
        folder = args.out / "calibrators" / system
        folder.mkdir(parents=True, exist_ok=True)
        for name, cal in cals.items():
            cal.save(folder / (name.replace(" ", "_").replace("/", "_") + ".json"))
    accuracy = {s: float(table.label[table.system == s].mean()) for s in results}
    key = [m.name for m in methods if m.make is None or "exec" in m.name or "SCF" in m.name]
    text = format_tables(results, accuracy, auc_methods=[m for m in key if not m.startswith("scf_product")])
    mps = [m.name for m in methods if m.name.startswith("MPS(SCF")][:1]
    if mps:
        text += "\n\n" + mps_weight_report(fitted, mps[0])
    (args.out / "metrics.json").write_text(json.dumps(
        {"protocol": args.protocol, "fit_on": args.fit_on, "folds": args.folds, "seed": args.seed, "n": len(table),
         "accuracy": accuracy, "results": results}, indent=1))
    (args.out / "tables.md").write_text(text + "\n")
    print(f"{len(table)} predictions, {len(results)} systems, protocol={args.protocol}"
          + (f", fit on {args.fit_on} fold(s)" if args.protocol == "cv" else ""))
    print(text)


def write_tracks(args: argparse.Namespace, table: BaseScores) -> None:
    """tracks.md / tracks.json (see ``model.wholequery.tracks.track_results``)."""
    from model.wholequery.tracks import track_results, tracks_markdown

    results = track_results(table, args.folds, args.seed, progress=not args.no_progress)
    (args.out / "tracks.json").write_text(json.dumps(results, indent=1))
    text = tracks_markdown(results)
    (args.out / "tracks.md").write_text(text + "\n")
    print(text)


def _lm_samples(args, questions, preds, schemas, db_paths) -> dict[str, dict[str, list[str]]]:
    """The CLI's LM-sampled outputs for the questions with predictions and a database; also
    written to `<out>/lm_samples.jsonl` for inspection."""
    import torch

    from model.lm import load_causal_lm

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    model, tokenizer = load_causal_lm(args.lm_model, args.lm_gguf_file)
    model.to(device).eval()
    asked = {p.question_id for p in preds}
    chosen = [q for q in questions if q.question_id in asked and db_paths.get(q.db_id)]
    outputs = generate_lm_samples(model, tokenizer, chosen, schemas, args.lm_samples, n=args.lm_n,
                                  progress=not args.no_progress, top_p=args.lm_top_p,
                                  max_new_tokens=args.lm_max_new_tokens, batch_size=args.lm_batch_size,
                                  seed=args.seed, device=device)
    with (args.out / "lm_samples.jsonl").open("w") as f:
        for source, per_q in outputs.items():
            for qid, samples in per_q.items():
                f.write(json.dumps({"source": source, "question_id": qid, "samples": samples}) + "\n")
    return outputs


if __name__ == "__main__":
    main()
