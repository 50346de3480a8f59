"""Scoring new SQL, side by side in one run: batch throughput of the pretrained boosted model
(with databases, without, with reasons) vs a neural checkpoint, and one-query latency through
``rat-serve`` (warm; p50/p95), then 8 concurrent clients for ``--load-seconds``.

Items: ``--queries`` Spider dev predictions taken evenly over the 11 systems' files (the demo
corpus when ../shared/data is absent). Nothing is cached between runs: the scorer computes every
feature (no feature cache) and runs every query on its database.

    python benchmarks/scorer_speed.py [--queries 1000 --neural outputs/train/<run> --load-seconds 60]
    python benchmarks/scorer_speed.py --against <model dir> --turns 3 ...  # the shipped model against another

``--against``: another saved model scored on the same rows, each setting taking turns with the
shipped one ``--turns`` times (the ratio of their means is what to read on a noisy machine).
"""

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from model.cli_types import existing_path, positive_float, positive_int
from model.data.datasets import database_path, load_questions, load_schemas
from model.data.predictions import load_predictions
from model.metrics import percentile
from model.scoring import RowError, Scorer
from tests.servers import free_port

SHARED = Path(os.environ.get("RAT_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
REPO = Path(__file__).resolve().parents[1]


def dataset(n: int) -> tuple[Path, list[dict]]:
    if (SHARED / "spider" / "dev.json").exists():
        root, files = SHARED / "spider", sorted((SHARED / "predictions" / "spider_dev").iterdir())
    else:
        from model.synth.demo import demo_root

        root = demo_root()
        files = sorted((root / "predictions").glob("*.jsonl"))
    questions = load_questions(root, "dev")
    by_id = {q.question_id: q for q in questions}
    schemas = load_schemas(root)
    rows = []
    for f in files:
        for p in load_predictions(f, questions):
            rows.append({"sql": p.sql, "question": by_id[p.question_id].question, "db_id": p.db_id,
                         "question_id": p.question_id, "schema": schemas.get(p.db_id),
                         "database": database_path(root, p.db_id)})
    step = max(1, len(rows) // n)
    return root, rows[::step][:n]


def throughput(scorer: Scorer, rows: list[dict], **options) -> tuple[float, int]:
    start = time.perf_counter()
    results = scorer.score_many(rows, progress=False, **options)
    seconds = time.perf_counter() - start
    return len(rows) / seconds, sum(isinstance(r, RowError) for r in results)


def frozen_heap_effect(scorer: Scorer, rows: list[dict], turns: int = 3) -> str:
    """Scoring without databases in this process (one worker), the objects alive before scoring
    left out of the garbage collector's passes (``score_many``'s ``_heap_frozen``) or not,
    taking turns: queries/s and the share of the time spent collecting garbage."""
    import contextlib
    import gc

    import model.scoring.scorer as scoring

    frozen, spent, started = scoring._heap_frozen, [0.0], [0.0]

    def clock(phase: str, _info: dict) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            spent[0] += time.perf_counter() - started[0]

    runs: dict[str, list[tuple[float, float]]] = {"not frozen": [], "frozen": []}
    gc.callbacks.append(clock)
    try:
        for _ in range(turns):
            for name, measured in runs.items():
                scoring._heap_frozen = frozen if name == "frozen" else contextlib.nullcontext
                spent[0] = 0.0
                start = time.perf_counter()
                scorer.score_many(rows, progress=False, workers=1)
                seconds = time.perf_counter() - start
                measured.append((len(rows) / seconds, spent[0] / seconds))
    finally:
        scoring._heap_frozen = frozen
        gc.callbacks.remove(clock)
    return "; ".join(f"{name}: " + ", ".join(f"{q:.0f} q/s ({g:.0%} in gc)" for q, g in v)
                     for name, v in runs.items())


def newest_neural_run() -> Path | None:
    runs = sorted((REPO / "outputs" / "train").glob("*/checkpoints"), key=lambda p: p.stat().st_mtime)
    return runs[-1].parent if runs else None


def post(url: str, query: dict) -> tuple[int, float]:
    body = json.dumps({"queries": [query]}).encode()
    start = time.perf_counter()
    try:
        request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as r:
            r.read()
            status = r.status
    except Exception:  # noqa: BLE001  (a failed request is counted, whatever it was)
        status = 0
    return status, time.perf_counter() - start


def service(root: Path, rows: list[dict], n_latency: int, load_seconds: float) -> dict:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "model.scoring.service", "--model", "pretrained",
                             "--data-root", str(root), "--port", str(port)], cwd=REPO,
                            stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(base + "/health", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        queries = [{"db_id": r["db_id"], "question": r["question"], "sql": r["sql"]} for r in rows]
        for q in queries[:20]:  # warm
            post(base + "/score", q)
        latencies = [post(base + "/score", q)[1] for q in queries[:n_latency]]
        deadline = time.perf_counter() + load_seconds

        def client(k: int) -> tuple[int, int]:
            ok = failed = 0
            i = k
            while time.perf_counter() < deadline:
                status, _ = post(base + "/score", queries[i % len(queries)])
                ok, failed = ok + (status == 200), failed + (status != 200)
                i += 8
            return ok, failed

        with ThreadPoolExecutor(8) as pool:
            counts = list(pool.map(client, range(8)))
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    ms = np.array(latencies) * 1000
    return {"p50_ms": percentile(ms, 50), "p95_ms": percentile(ms, 95),
            "requests": sum(c[0] + c[1] for c in counts), "failed": sum(c[1] for c in counts),
            "load_rps": sum(c[0] for c in counts) / load_seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=positive_int, default=1000)
    parser.add_argument("--neural", type=existing_path, default=None,
                        help="a neural run (default: newest outputs/train run)")
    parser.add_argument("--neural-queries", type=positive_int, default=100)
    parser.add_argument("--latency-queries", type=positive_int, default=300)
    parser.add_argument("--load-seconds", type=positive_float, default=60)
    parser.add_argument("--against", type=Path, default=None, help="another saved model, taking turns with the shipped one")
    parser.add_argument("--turns", type=positive_int, default=3, help="turns each with --against (default 3)")
    args = parser.parse_args()
    if args.against is not None:
        try:
            other = Scorer.load(args.against)
        except (OSError, ValueError) as error:
            parser.error(f"--against {args.against}: {error}")
    root, rows = dataset(args.queries)
    scorer = Scorer.pretrained()
    scorer.score_many(rows[:50], progress=False)  # imports and first-call work
    no_db = [{**r, "database": None} for r in rows]
    print(f"{len(rows)} predictions from {root}; pretrained model ({scorer.description}); "
          f"{os.cpu_count()} CPUs\n")
    print("| scorer | setting | queries/s | not scored |\n|---|---|---|---|")
    measured = {}
    for name, items, options in (("with databases", rows, {}), ("without databases", no_db, {}),
                                 ("with databases, + reasons", rows, {"reasons": True}),
                                 ("without databases, no spans", no_db, {"spans": False})):
        if args.against is None:
            rate, bad = throughput(scorer, items, **options)
        else:
            other.score_many(items[:50], progress=False, **options)
            rates = {"shipped": [], "against": []}
            for _ in range(args.turns):
                for who, s in (("shipped", scorer), ("against", other)):
                    r, bad = throughput(s, items, **options)
                    rates[who].append(r)
            rate = float(np.mean(rates["shipped"]))
            print(f"| {args.against} | {name} | {np.mean(rates['against']):,.0f} "
                  f"({', '.join(f'{r:,.0f}' for r in rates['against'])}) | {bad} |", flush=True)
            print(f"| pretrained boosted | {name} | {rate:,.0f} ({', '.join(f'{r:,.0f}' for r in rates['shipped'])}); "
                  f"{rate / np.mean(rates['against']):.2f}x | {bad} |", flush=True)
            measured[name] = rate
            continue
        measured[name] = rate
        print(f"| pretrained boosted | {name} | {rate:,.0f} | {bad} |", flush=True)
    print("\nheap frozen while scoring, one process, without databases, taking turns: "
          + frozen_heap_effect(scorer, no_db), flush=True)
    neural = args.neural or newest_neural_run()
    if neural is not None:
        try:
            neural_scorer = Scorer.load(neural)
        except (OSError, ValueError) as error:  # loaded here, not up front: it would weigh on the timings above
            parser.error(f"--neural {neural}: {error}")
        sample = rows[:args.neural_queries]
        neural_scorer.score_many(sample[:4], progress=False)
        rate, bad = throughput(neural_scorer, sample)
        print(f"| neural checkpoint ({neural.name}) | {len(sample)} queries | {rate:,.1f} | {bad} |")
        print(f"\nboosted with databases / neural: {measured['with databases'] / rate:.0f}x; "
              f"without databases / neural: {measured['without databases'] / rate:.0f}x")
    else:
        print("\n(no neural run: `make train` makes one under outputs/train/; or pass --neural)")
    s = service(root, rows, args.latency_queries, args.load_seconds)
    print(f"\nrat-serve, one query per request, warm, {args.latency_queries} sequential requests: "
          f"p50 {s['p50_ms']:.1f} ms, p95 {s['p95_ms']:.1f} ms")
    print(f"8 concurrent clients for {args.load_seconds:g} s: {s['requests']} requests, "
          f"{s['failed']} failed, {s['load_rps']:.0f} requests/s")


if __name__ == "__main__":
    from model.errors import user_errors

    with user_errors():  # a data root of another layout: one line
        main()
