"""A code LLM's own answers to a split's questions, as a predictions file (``model.train_predictions``).

More wrong queries of the kind today's LLM systems write might teach the site head more
(docs/research.md); Spider train's questions, on databases disjoint from
dev's, have gold but no LLM system's predictions in ``../shared/data``. This writes Qwen2.5-Coder-
1.5B's (``make setup-qwen``; llama.cpp, greedy) answers, one JSON line ``{question_id, db_id,
sql}`` a question, for a random draw of the questions (``--seed``, ``--limit``) taken one database
at a time (llama.cpp reuses the cached schema part of the prompt), appending to ``--out`` and
skipping the questions already there, so a stopped run resumes. The prompt is the database's
``CREATE TABLE`` statements (read-only) and the question; a database comes where its first
question falls in the draw. Progress and the questions a second are printed every 50 questions.

    python scripts/llm_answers.py --split train --out /tmp/qwen_train/qwen_coder.jsonl [--limit 3000]
    python train.py model=features data=spider data.root=../shared/data/spider \\
        'model.train_predictions=/tmp/qwen_train/*.jsonl'

``data/llm_answers/spider_train/qwen_coder.jsonl`` holds its answers to every Spider train
question with a database: ``data=spider``'s ``data.llm_answers``, which ``model=features`` learns from.
"""

import argparse
import json
import os
import re
import sqlite3
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from model.data.datasets import load_questions

SHARED = Path(os.environ.get("RAT_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
SYSTEM = "You are a SQLite expert. Answer with one SQLite query only, no explanation."


def first_query(text: str) -> str:
    """The SQL of a chat answer: inside a ```sql fence if there is one, up to its first ``;``.

    >>> first_query("```sql\\nSELECT name FROM singer;\\n```")
    'SELECT name FROM singer'
    >>> first_query("SELECT count(*)\\nFROM singer")
    'SELECT count(*) FROM singer'
    >>> first_query("```sql\\nSELECT name FROM singer")  # a reply cut before its closing fence
    'SELECT name FROM singer'
    """
    fenced = re.search(r"```(?:sql|sqlite)?\s*(.*?)(?:```|$)", text, re.DOTALL | re.IGNORECASE)
    sql = (fenced.group(1) if fenced else text).split(";")[0]
    return " ".join(sql.split())


def schema_ddl(database: Path) -> str:
    """The ``CREATE TABLE`` statements of a SQLite file, opened read-only.

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "t.sqlite"
    >>> with sqlite3.connect(path) as con:
    ...     _ = con.execute("create table singer (name text, age int)")
    ...     _ = con.executemany("insert into singer values (?, ?)", [("Joe", 52), ("Tim", 32)])
    >>> print(schema_ddl(path))
    CREATE TABLE singer (name text, age int)
    """
    con = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    con.text_factory = lambda b: b.decode(errors="replace")  # a few Spider tables hold non-UTF-8 text
    try:
        return "\n".join(sql for _, sql in con.execute(
            "select name, sql from sqlite_master where type = 'table' and sql is not null"))
    finally:
        con.close()


def by_database(todo: list) -> list:
    """``todo`` with each database's questions in a row (llama.cpp reuses the prompt's cached
    schema), in their own order: the databases in the order of their first question.

    >>> from types import SimpleNamespace as Q
    >>> todo = [Q(question_id=i, db_id=d) for i, d in enumerate("abcab")]
    >>> [(q.db_id, q.question_id) for q in by_database(todo)]
    [('a', 0), ('a', 3), ('b', 1), ('b', 4), ('c', 2)]
    """
    first: dict[str, int] = {}
    return sorted(todo, key=lambda q: first.setdefault(q.db_id, len(first)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", default="train")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--limit", type=int, default=None, help="questions at most (default: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--max-tokens", type=int, default=256)
    args = parser.parse_args()
    if args.limit is not None and args.limit < 1:
        parser.error(f"--limit must be 1 or more; found {args.limit}")
    root = SHARED / "spider"
    if not root.is_dir():
        parser.error(f"Spider not found under {root} (set RAT_SHARED_DATA)")
    try:
        questions = load_questions(root, args.split)
    except (FileNotFoundError, ValueError) as e:
        parser.error(f"--split {args.split}: {e}")
    try:
        from llama_cpp import Llama

        from model.lm.parts import named_gguf

        path = named_gguf("qwen_coder")
    except (ImportError, FileNotFoundError) as e:
        parser.error(f"Qwen2.5-Coder through llama.cpp is not set up ({e}): run `make setup-qwen`")
    order = np.random.default_rng(args.seed).permutation(len(questions))
    done = set()
    if args.out.is_file():
        done = {json.loads(line)["question_id"] for line in args.out.open() if line.strip()}
    todo = [questions[i] for i in order if questions[i].question_id not in done][:args.limit]
    todo = by_database(todo)
    print(f"{len(todo)} questions to answer ({len(done)} already in {args.out})", flush=True)
    llm = Llama(model_path=str(path), n_ctx=4096, n_threads=args.threads, seed=args.seed, verbose=False)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    ddl: dict[str, str | None] = {}  # None: no readable database
    start, written, skipped, no_database = time.perf_counter(), 0, 0, 0
    with args.out.open("a") as out:
        for n, q in enumerate(todo, 1):
            database = root / "database" / q.db_id / f"{q.db_id}.sqlite"
            try:  # a few Spider databases are not shipped: counted, not answered
                if q.db_id not in ddl:
                    ddl[q.db_id] = schema_ddl(database) if database.is_file() else None
            except sqlite3.Error:
                ddl[q.db_id] = None
            if ddl[q.db_id] is None:
                no_database += 1
            else:
                messages = [{"role": "system", "content": SYSTEM},
                            {"role": "user", "content": f"{ddl[q.db_id]}\n\n"
                             f"-- Question: {q.question}\nWrite the SQLite query."}]
                try:
                    reply = llm.create_chat_completion(messages=messages, max_tokens=args.max_tokens,
                                                       temperature=0.0)
                    sql = first_query(reply["choices"][0]["message"]["content"])
                    out.write(json.dumps({"question_id": q.question_id, "db_id": q.db_id, "sql": sql}) + "\n")
                    out.flush()
                    written += 1
                except ValueError:  # the prompt does not fit the context
                    skipped += 1
            if n % 50 == 0 or n == len(todo):
                rate = n / (time.perf_counter() - start)
                print(f"  {n}/{len(todo)} questions, {rate:.2f} a second, {skipped} too long for the context, "
                      f"{no_database} without a readable database", flush=True)
    print(f"{written} answers written to {args.out}; {skipped} questions too long for the context, "
          f"{no_database} without a readable database (not answered)")


if __name__ == "__main__":
    from model.errors import user_errors

    with user_errors():  # a data root of another layout: one line
        main()
