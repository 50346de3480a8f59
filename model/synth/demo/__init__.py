"""The embedded demo corpus: small SQLite databases, templated questions and pseudo-system predictions.

Everything is generated here from `demo_corpus/schemas.json` and `demo_corpus/hand_written.json`
with fixed seeds, so every checkout builds the same corpus, in Spider format, in a few seconds:

    root/tables.json, root/train.json, root/dev.json, root/database/<db>/<db>.sqlite,
    root/predictions/<system>.jsonl   (question_id, db_id, sql, samples)

Every gold query is executed during the build and kept only if it runs and returns a non-empty,
non-NULL result. Both splits cover all five databases, so a trainer can split by `db_id`
(schema-disjoint train/val/test) within either split.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import sqlite3
import tempfile
from pathlib import Path

from model.data.cache import cache_dir as project_cache_dir
from model.synth.demo.databases import (
    CORPUS_DIR,
    generate_rows,
    load_database_specs,
    spider_table_entry,
    write_database,
)
from model.synth.demo.questions import generate_questions, non_empty
from model.synth.demo.systems import (
    DEMO_SYSTEMS,
    SAMPLES_PER_PREDICTION,
    make_predictions,
    template_difficulty,
)

__all__ = ["DEMO_SYSTEMS", "SAMPLES_PER_PREDICTION", "build_demo", "demo_root"]

BUILDER_VERSION = "1"
DEV_FRACTION = 0.4

# ---------------------------------------------------------------------------------------------
# Build


def _source_digest() -> str:
    """Changes whenever the builder, the perturbation engine or the corpus assets change."""
    h = hashlib.sha256(BUILDER_VERSION.encode())
    here = Path(__file__).resolve().parent
    files = [*sorted(here.glob("*.py")), here.parent / "perturb.py", *sorted(CORPUS_DIR.glob("*"))]
    for path in files:
        if path.is_file():
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def build_demo(root: Path, seed: int = 0) -> Path:
    """Write the demo corpus in Spider format under `root` and return `root`."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    specs = load_database_specs()
    hand = json.loads((CORPUS_DIR / "hand_written.json").read_text())["questions"]
    tables, train, dev, dev_difficulty, hand_by_index = [], [], [], [], {}
    db_paths = {}
    split_rng = random.Random(f"split:{seed}")
    for db_id, db in specs.items():
        path = root / "database" / db_id / f"{db_id}.sqlite"
        write_database(db, generate_rows(db, seed), path)
        db_paths[db_id] = path
        tables.append(spider_table_entry(db))
        conn = sqlite3.connect(path)
        try:
            for gq in generate_questions(db, conn, seed):
                record = {"db_id": db_id, "question": gq.question, "query": gq.query}
                if split_rng.random() < DEV_FRACTION:
                    dev.append(record)
                    dev_difficulty.append(template_difficulty(gq.template))
                else:
                    train.append(record)
            for item in (h for h in hand if h["db_id"] == db_id):
                for sql in [item["query"], *item["right"], *item["wrong"]]:
                    conn.execute(sql).fetchall()  # hand-written SQL must at least run
                if not non_empty(conn, item["query"]):
                    raise ValueError(f"hand-written gold returns nothing: {item['query']}")
                hand_by_index[len(dev)] = item
                dev.append({"db_id": db_id, "question": item["question"], "query": item["query"]})
                dev_difficulty.append(item.get("difficulty", 0.5))
        finally:
            conn.close()
    (root / "tables.json").write_text(json.dumps(tables, indent=1))
    (root / "train.json").write_text(json.dumps(train, indent=1))
    (root / "dev.json").write_text(json.dumps(dev, indent=1))
    schemas = {t["db_id"]: t for t in tables}
    predictions = make_predictions(dev, schemas, db_paths, dev_difficulty, hand_by_index, seed)
    (root / "predictions").mkdir(exist_ok=True)
    for system, rows in predictions.items():
        with open(root / "predictions" / f"{system}.jsonl", "w") as f:
            f.writelines(json.dumps(row) + "\n" for row in rows)
    (root / "VERSION").write_text(_source_digest() + "\n")
    return root


def demo_root() -> Path:
    """The demo corpus, built once into <cache>/demo and rebuilt when the builder changes."""
    root = project_cache_dir("demo")
    version = root / "VERSION"
    if version.exists() and version.read_text().strip() == _source_digest():
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    # Build beside the target and swap it in, so concurrent builders never see half a corpus.
    tmp = Path(tempfile.mkdtemp(prefix="demo-", dir=root.parent))
    build_demo(tmp)
    if version.exists() and version.read_text().strip() == _source_digest():
        shutil.rmtree(tmp)  # another process finished first
        return root
    old = root.with_name(f"demo-old-{os.getpid()}")
    if root.exists():
        root.rename(old)
    try:
        tmp.rename(root)
    except OSError:  # lost a race to another builder; theirs is equally good
        shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(old, ignore_errors=True)
    return root
