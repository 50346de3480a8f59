"""How much the scorer LM would read for the node features' lm group (``model.lm=true``): tokens
of the scorer's prompt (``model.lm.scoring.prompt_text``: schema, question with BIRD's evidence
joined as the node features read it) plus the SQL, for every dev prediction of Spider and BIRD.
The cost of ``model.lm=true`` is one LM forward pass over these tokens per distinct prediction.

    python benchmarks/lm_prompt_tokens.py
"""

import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np

from model.data.datasets import load_schemas
from model.lm import load_tokenizer
from model.lm.scoring import prompt_text
from model.nodes.examples import build_examples

SHARED = Path(os.environ.get("RAT_SHARED_DATA", REPO.parent / "shared" / "data"))


def main() -> None:
    tokenizer = load_tokenizer()
    for name, evidence in (("bird", True), ("spider", False)):
        root = SHARED / name
        files = sorted((SHARED / "predictions" / f"{name}_dev").iterdir())
        examples, _ = build_examples(root, "dev", prediction_files=files, require_database=False,
                                     evidence=evidence, verbose=False)
        schemas = load_schemas(root)
        n = np.array([len(tokenizer(prompt_text(e.question, schemas[e.db_id].tables) + " " + e.sql)["input_ids"])
                      for e in examples])
        print(f"{name}: {len(examples)} predictions, prompt+SQL tokens mean {n.mean():.0f}, "
              f"median {np.median(n):.0f}, max {n.max()}, total {n.sum()}")


if __name__ == "__main__":
    main()
