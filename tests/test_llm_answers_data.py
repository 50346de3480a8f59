"""The committed code-LLM answers to Spider train questions (benchmarks/llm_answers/): they load
as data.train_predictions does, name real train questions and their databases, and run."""

from collections import Counter
from pathlib import Path

import pytest

from model.data.datasets import load_questions
from model.data.predictions import load_predictions

pytestmark = pytest.mark.data

ANSWERS = Path(__file__).resolve().parents[1] / "benchmarks" / "llm_answers" / "spider_train" / "qwen_coder.jsonl"


def test_qwen_answers_load_as_train_predictions(shared_data: Path) -> None:
    questions = load_questions(shared_data / "spider", "train")
    skipped: Counter[str] = Counter()
    answers = load_predictions(ANSWERS, questions, "qwen_coder", skipped, allow_partial=True)
    assert len(answers) == 8563 and not skipped
    by_id = {q.question_id: q for q in questions}
    assert all(a.db_id == by_id[a.question_id].db_id for a in answers)
    assert len({a.question_id for a in answers}) == len(answers)
    assert all(a.sql.strip() for a in answers)
