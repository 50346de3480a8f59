"""CPU time per ``rat-serve`` request, measured in-process, of this tree's scorer and (with
``--baseline``) of another copy of the repository, taking turns in one run, and whether both
give the same confidences.

The requests are ``serve_load.py``'s: one query each (Spider dev questions, gold SQL, with
their databases), scored as ``rat-serve`` scores them (``Scorer.score_many([row], reasons=True,
deadline=..., max_nodes=500)``, one thread). The CPU time is the scoring thread's
(``time.thread_time``), so it depends less on other work on the machine than wall-clock
latency does; the HTTP layer is not in it. Besides the timed mix, ``--predictions`` system
answers (evenly over the systems' files, wrong ones included) are scored once for the check.

    python benchmarks/request_cpu.py [--data-root ../shared/data/spider --turns 3]
    git archive <commit> | tar -x -C /tmp/base   # (the shipped model files come with it)
    python benchmarks/request_cpu.py --baseline /tmp/base
    python benchmarks/request_cpu.py --beside-heavy 6   # the heavy lane's pacing, 6 s windows

Each copy runs in its own process (its own ``model`` package), loaded once; the turns
alternate between them, so both see the same load. The check compares every row as
``rat-serve`` answers it (confidences, site scores and reasons' gains to 6 decimals, spans,
look-here-first; an error row's message).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("RAT_SHARED_DATA", REPO.parent / "shared" / "data"))


def request_rows(data_root: Path, queries: int, predictions: int) -> tuple[list[dict], list[dict]]:
    """(the timed mix, the predictions checked once), as plain {db_id, question, sql}."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from serve_load import normal_queries

    from model.data.datasets import database_path, load_questions
    from model.data.predictions import load_predictions

    mix = normal_queries(data_root, queries)
    folder = data_root.parent / "predictions" / f"{data_root.name}_dev"
    if not folder.is_dir():
        folder = data_root / "predictions"
    questions = load_questions(data_root, "dev")
    by_id = {q.question_id: q for q in questions}
    answers = [{"db_id": p.db_id, "question": by_id[p.question_id].question, "sql": p.sql}
               for f in sorted(folder.iterdir()) for p in load_predictions(f, questions)
               if database_path(data_root, p.db_id) is not None] if predictions and folder.is_dir() else []
    step = max(1, len(answers) // predictions) if predictions else 1
    return mix, answers[::step][:predictions]


def worker(repo: Path, data_root: Path, rows_file: Path) -> int:
    """Load ``repo``'s scorer; for each line on stdin score the rows and print one JSON line."""
    sys.path.insert(0, str(repo))
    from model.scoring.inputs import database_under, load_scorer, read_schemas
    from model.scoring.scorer import RowError

    root = data_root.resolve()
    schemas = read_schemas(None, root)
    scorer = load_scorer("pretrained")
    mix, sample = json.loads(rows_file.read_text())

    def score(q: dict):
        row = {"sql": q["sql"], "question": q["question"], "db_id": q["db_id"], "question_id": None,
               "schema": schemas.get(q["db_id"]), "dialect": None, "database": database_under(root, q["db_id"])}
        (result,) = scorer.score_many([row], False, True, deadline=time.monotonic() + 60, max_nodes=500)
        return result.message if isinstance(result, RowError) else result.to_dict()

    for q in mix[:30]:  # lazily loaded parts, compiled trees
        score(q)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        task = line.strip()
        if task == "time":
            start = time.thread_time()
            for q in mix:
                score(q)
            print(json.dumps({"cpu_ms": 1000 * (time.thread_time() - start) / len(mix)}), flush=True)
        elif task == "check":
            print(json.dumps({"results": [score(q) for q in mix + sample]}), flush=True)
    return 0


def beside_heavy(data_root: Path, mix: list[dict], seconds: float, turns: int) -> None:
    """rat-serve's heavy lane in one process: a thread scoring the mix back to back, alone or
    beside a thread scoring serve_load's 160-term OR query in a loop, unpaced or paced as the
    heavy lane paces it; per window the normal thread's requests/s and its share of the two
    threads' CPU time (which the machine's other load does not move)."""
    import threading

    from threadpoolctl import threadpool_limits

    from model.data.execution import paced
    from model.scoring.inputs import database_under, load_scorer, read_schemas
    from model.scoring.service import HEAVY_SHARE

    root = data_root.resolve()
    schemas = read_schemas(None, root)
    scorer = load_scorer("pretrained")
    db_id = "concert_singer" if "concert_singer" in schemas else mix[0]["db_id"]
    table = "singer" if db_id == "concert_singer" else next(iter(schemas[db_id].tables))
    column = "age" if db_id == "concert_singer" else schemas[db_id].tables[table][0]
    heavy = {"db_id": db_id, "question": "",
             "sql": f"SELECT name FROM {table} WHERE " + " OR ".join(f"{column} = {i}" for i in range(160))}

    def score(q: dict) -> None:
        row = {"sql": q["sql"], "question": q["question"], "db_id": q["db_id"], "schema": schemas.get(q["db_id"]),
               "database": database_under(root, q["db_id"])}
        scorer.score_many([row], False, True, deadline=time.monotonic() + 60, max_nodes=500, label_shift=False)

    for q in mix[:30] + [heavy]:
        score(q)

    def window(mode: str) -> dict:
        stop, out = threading.Event(), {}

        def normal() -> None:
            threadpool_limits(1, user_api="openmp")
            start, cpu, k = time.monotonic(), time.thread_time(), 0
            while not stop.is_set():
                score(mix[k % len(mix)])
                k += 1
            out["normal"] = (k / (time.monotonic() - start), time.thread_time() - cpu)

        def hostile() -> None:
            threadpool_limits(1, user_api="openmp")
            cpu = time.thread_time()
            while not stop.is_set():
                if mode == "paced":
                    with paced(HEAVY_SHARE, only_while=lambda: True):
                        score(heavy)
                else:
                    score(heavy)
            out["heavy"] = time.thread_time() - cpu

        threads = [threading.Thread(target=normal)] + ([threading.Thread(target=hostile)] if mode != "alone" else [])
        for t in threads:
            t.start()
        time.sleep(seconds)
        stop.set()
        for t in threads:
            t.join()
        per_s, cpu = out["normal"]
        return {"requests_per_s": per_s, "cpu_share": cpu / (cpu + out.get("heavy", 0.0))}

    print("\n| window | normal requests/s | normal thread's share of the CPU |\n|---|---|---|")
    for _ in range(turns):
        for mode in ("alone", "unpaced", "paced"):
            r = window(mode)
            print(f"| {mode} | {r['requests_per_s']:.1f} | {r['cpu_share']:.2f} |", flush=True)


class Copy:
    """A worker process scoring with one copy of the repository."""

    def __init__(self, name: str, repo: Path, data_root: Path, rows_file: Path):
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
               "PYTHONPATH": str(repo)}
        self.name = name
        self.process = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--worker", str(repo),
                                         "--data-root", str(data_root), "--rows", str(rows_file)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=repo)

    def ask(self, task: str | None = None) -> dict:
        if task is not None:
            self.process.stdin.write(task + "\n")
            self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"request_cpu: error: the {self.name} worker ended (exit {self.process.wait()})")
        return json.loads(line)

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=60)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-root", type=Path, default=SHARED / "spider")
    parser.add_argument("--queries", type=int, default=300, help="requests in the timed mix (serve_load's 300)")
    parser.add_argument("--predictions", type=int, default=300, help="system answers scored for the check")
    parser.add_argument("--turns", type=int, default=3, help="timed passes over the mix, per copy")
    parser.add_argument("--baseline", type=Path, help="another copy of the repository to compare with")
    parser.add_argument("--beside-heavy", type=float, metavar="SECONDS",
                        help="instead: the heavy lane's pacing, --turns windows of each kind this long")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--rows", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args.worker, args.data_root, args.rows)
    if not (args.data_root / "tables.json").is_file():
        print(f"request_cpu: error: --data-root {args.data_root}: no tables.json", file=sys.stderr)
        return 2
    if args.baseline and not (args.baseline / "model" / "scoring").is_dir():
        print(f"request_cpu: error: --baseline {args.baseline}: not a copy of this repository", file=sys.stderr)
        return 2
    if args.queries < 1 or args.turns < 1 or args.predictions < 0:
        print("request_cpu: error: --queries and --turns >= 1, --predictions >= 0", file=sys.stderr)
        return 2
    sys.path.insert(0, str(REPO))
    args.data_root = args.data_root.resolve()  # the workers run in their own copy's folder
    mix, sample = request_rows(args.data_root, args.queries, args.predictions)
    if args.beside_heavy:
        print(f"cpus: {os.cpu_count()}, load average before: {os.getloadavg()[0]:.1f}", flush=True)
        beside_heavy(args.data_root, mix, args.beside_heavy, args.turns)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        rows_file = Path(tmp) / "rows.json"
        rows_file.write_text(json.dumps([mix, sample]))
        copies = [Copy("current", REPO, args.data_root, rows_file)]
        if args.baseline:
            copies.append(Copy("baseline", args.baseline.resolve(), args.data_root, rows_file))
        for c in copies:
            c.ask()  # loaded and warm
        print(f"cpus: {os.cpu_count()}, load average before: {os.getloadavg()[0]:.1f}; {len(mix)} requests "
              f"timed ({args.data_root.name} dev gold with databases), {len(sample)} system answers checked",
              flush=True)
        times: dict[str, list[float]] = {c.name: [] for c in copies}
        for turn in range(args.turns):
            for c in copies if turn % 2 == 0 else copies[::-1]:
                times[c.name].append(c.ask("time")["cpu_ms"])
            print(" ".join(f"{name} {t[-1]:.2f} ms" for name, t in times.items()), flush=True)
        checked = [c.ask("check")["results"] for c in copies]
        for c in copies:
            c.close()
    print("\n| copy | CPU ms per request (turns) | mean |")
    print("|---|---|---|")
    for name, t in times.items():
        print(f"| {name} | {', '.join(f'{v:.2f}' for v in t)} | {sum(t) / len(t):.2f} |")
    if len(copies) == 2:
        now, base = (sum(t) / len(t) for t in times.values())
        same = sum(a == b for a, b in zip(*checked))
        print(f"\nbaseline / current: {base / now:.2f}x; identical results (6 decimals): {same} of "
              f"{len(checked[0])} queries")
        return 0 if same == len(checked[0]) else 1
    return 0


if __name__ == "__main__":
    from model.errors import user_errors

    with user_errors():  # a data root of another layout: one line
        sys.exit(main())
