"""A code LLM's own answers to a split's questions, as a predictions file (``model.train_predictions``).

More wrong queries of the kind today's LLM systems write might teach the site head more
(docs/research.md); Spider train's questions, on databases disjoint from
dev's, have gold but no LLM system's predictions in ``../shared/data``. This writes Qwen2.5-Coder-
1.5B's (``make setup-qwen``; llama.cpp, greedy, or sampled with ``--temperature``) answers, one JSON line ``{question_id, db_id,
sql}`` a question, for a random draw of the questions (``--seed``, ``--limit``) taken one database
at a time (llama.cpp reuses the cached schema part of the prompt), appending to ``--out`` and
skipping the questions already there, so a stopped run resumes. The prompt is the database's
``CREATE TABLE`` statements (read-only) and the question; ``--rows 3`` adds three rows of each
table, as DAIL-SQL's and C3's prompts do (a second "system" of Qwen's: different answers);
``--shots K`` adds K other questions of the same database with their gold SQL (the same K for
every question of a database, drawn by ``--seed``, so the cached prefix still holds; a question
among them gets the next one instead): answers in Spider's own style, as a system fine-tuned on
Spider writes them, whose wrong queries depart from gold in fewer places.
``--shuffle-databases`` answers whole databases in a seeded order (by default a database comes
where its first question falls in the draw, so the largest, geo's 564 questions, come first).
Progress and the questions a second are printed every 50 questions.

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
import zlib
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
    >>> first_query("```sql\\nSELECT name FROM singer")  # a reply stopped at its ; (--shots)
    'SELECT name FROM singer'
    """
    fenced = re.search(r"```(?:sql|sqlite)?\s*(.*?)(?:```|$)", text, re.DOTALL | re.IGNORECASE)
    sql = (fenced.group(1) if fenced else text).split(";")[0]
    return " ".join(sql.split())


def answer_seed(seed: int, question_id: str) -> int:
    """The sampling seed of one question's answer: the same in a resumed run, whatever the order.

    >>> answer_seed(0, "train_12") == answer_seed(0, "train_12") != answer_seed(1, "train_12")
    True
    """
    return (seed * 1_000_003 + zlib.crc32(str(question_id).encode())) % 2**31


def schema_ddl(database: Path, rows: int = 0) -> str:
    """The ``CREATE TABLE`` statements of a SQLite file, opened read-only; with ``rows``, each
    followed by that many of its rows in a comment (the "CREATE TABLE + SELECT 3" prompt of
    DAIL-SQL and C3, values cut to 40 characters).

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "t.sqlite"
    >>> with sqlite3.connect(path) as con:
    ...     _ = con.execute("create table singer (name text, age int)")
    ...     _ = con.executemany("insert into singer values (?, ?)", [("Joe", 52), ("Tim", 32)])
    >>> print(schema_ddl(path))
    CREATE TABLE singer (name text, age int)
    >>> print(schema_ddl(path, rows=1))
    CREATE TABLE singer (name text, age int)
    /*
    1 example rows:
    SELECT * FROM singer LIMIT 1;
    name age
    Joe 52
    */
    """
    con = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    con.text_factory = lambda b: b.decode(errors="replace")  # a few Spider tables hold non-UTF-8 text
    try:
        parts = []
        for name, sql in con.execute(
                "select name, sql from sqlite_master where type = 'table' and sql is not null"):
            parts.append(sql)
            if rows:
                quoted = name.replace('"', '""')
                cursor = con.execute(f'select * from "{quoted}" limit {int(rows)}')
                lines = [" ".join(d[0] for d in cursor.description)]
                lines += [" ".join(str(v)[:40] for v in row) for row in cursor.fetchall()]
                parts.append(f"/*\n{rows} example rows:\nSELECT * FROM {name} LIMIT {rows};\n"
                             + "\n".join(lines) + "\n*/")
        return "\n".join(parts)
    finally:
        con.close()


def shots_of(questions: list, k: int, seed: int = 0) -> dict[str, list]:
    """For each database, ``k + 1`` of its questions in a seeded order: the first ``k`` are the
    examples of its prompt; a question among them has the ``k + 1``-th in its place (``examples``).

    >>> from types import SimpleNamespace as Q
    >>> qs = [Q(question_id=f"q{i}", db_id="a") for i in range(5)]
    >>> [q.question_id for q in shots_of(qs, 2)["a"]]
    ['q2', 'q4', 'q3']
    """
    order = np.random.default_rng(seed).permutation(len(questions))
    by_db: dict[str, list] = {}
    for i in order:
        q = questions[i]
        if len(by_db.setdefault(q.db_id, [])) <= k:
            by_db[q.db_id].append(q)
    return by_db


def examples(question, drawn: list, k: int) -> str:
    """The prompt's ``k`` worked examples for ``question`` (never itself), as SQL comments and queries.

    >>> from types import SimpleNamespace as Q
    >>> drawn = [Q(question_id="a", question="How many?", gold_sql="SELECT count(*) FROM t"),
    ...          Q(question_id="b", question="Names?", gold_sql="SELECT name FROM t")]
    >>> examples(drawn[0], drawn, 1)
    '-- Question: Names?\\nSELECT name FROM t;\\n\\n'
    """
    chosen = [q for q in drawn if q.question_id != question.question_id][:k]
    return "".join(f"-- Question: {q.question}\n{q.gold_sql};\n\n" for q in chosen)


def by_database(todo: list, seed: int | None = None) -> list:
    """``todo`` with each database's questions in a row (llama.cpp reuses the prompt's cached
    schema), in their own order: the databases in the order of their first question, or with
    ``seed`` in a seeded order (``--shuffle-databases``).

    >>> from types import SimpleNamespace as Q
    >>> todo = [Q(question_id=i, db_id=d) for i, d in enumerate("abcab")]
    >>> [(q.db_id, q.question_id) for q in by_database(todo)]
    [('a', 0), ('a', 3), ('b', 1), ('b', 4), ('c', 2)]
    >>> shuffled = by_database(todo, seed=0)
    >>> sorted(shuffled, key=id) == sorted(todo, key=id), [q.db_id for q in shuffled]
    (True, ['c', 'a', 'a', 'b', 'b'])
    """
    first: dict[str, int] = {}
    if seed is not None:
        ids = sorted({q.db_id for q in todo})
        first = {ids[i]: n for n, i in enumerate(np.random.default_rng(seed).permutation(len(ids)))}
    return sorted(todo, key=lambda q: first.setdefault(q.db_id, len(first)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="train")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--limit", type=int, default=None, help="questions at most (default: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--rows", type=int, default=0,
                        help="example rows of each table in the prompt (0: the schema only, the committed answers)")
    parser.add_argument("--shots", type=int, default=0,
                        help="other questions of the database with their gold SQL in the prompt (0: none, the committed answers)")
    parser.add_argument("--shuffle-databases", action="store_true",
                        help="answer the databases in a seeded order, each in full (default: in the order of "
                             "their first question in the draw, which puts the largest first)")
    parser.add_argument("--temperature", type=float, default=0.0,
                        help="0: greedy (the committed answers); above 0: sampled, seeded by --seed")
    args = parser.parse_args()
    if args.limit is not None and args.limit < 1:
        parser.error(f"--limit must be 1 or more; found {args.limit}")
    if args.rows < 0:
        parser.error(f"--rows must be 0 or more; found {args.rows}")
    if args.shots < 0:
        parser.error(f"--shots must be 0 or more; found {args.shots}")
    if args.temperature < 0:
        parser.error(f"--temperature must be 0 or more; found {args.temperature}")
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
    drawn = shots_of(questions, args.shots, args.seed) if args.shots else {}
    order = np.random.default_rng(args.seed).permutation(len(questions))
    done = set()
    if args.out.is_file():
        done = {json.loads(line)["question_id"] for line in args.out.open() if line.strip()}
    todo = [questions[i] for i in order if questions[i].question_id not in done][:args.limit]
    todo = by_database(todo, args.seed if args.shuffle_databases else None)
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
                    ddl[q.db_id] = schema_ddl(database, args.rows) if database.is_file() else None
            except sqlite3.Error:
                ddl[q.db_id] = None
            if ddl[q.db_id] is None:
                no_database += 1
            else:
                messages = [{"role": "system", "content": SYSTEM},
                            {"role": "user", "content": f"{ddl[q.db_id]}\n\n"
                             f"{examples(q, drawn[q.db_id], args.shots) if args.shots else ''}"
                             f"-- Question: {q.question}\nWrite the SQLite query."}]
                try:
                    reply = llm.create_chat_completion(messages=messages, max_tokens=args.max_tokens,
                                                       temperature=args.temperature,
                                                       seed=answer_seed(args.seed, q.question_id),
                                                       # with worked examples the model goes on to
                                                       # write the next one: stop at the first ;
                                                       stop=[";"] if args.shots else None)
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
    main()
