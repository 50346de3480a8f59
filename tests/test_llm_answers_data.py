"""The committed code-LLM answers to Spider train questions (data/llm_answers/, what data=spider's
data.llm_answers names; greedy): they load as data.train_predictions does, each question once,
naming real train questions and their databases, with no empty SQL."""

from collections import Counter
from pathlib import Path

import pytest

from model.data.datasets import load_questions
from model.data.predictions import load_predictions

pytestmark = pytest.mark.data

LLM_ANSWERS = Path(__file__).resolve().parents[1] / "data" / "llm_answers"
ANSWERS = {  # file: how many answers it holds
    LLM_ANSWERS / "spider_train" / "qwen_coder.jsonl": 8563,  # data=spider's data.llm_answers
}


@pytest.mark.parametrize("path", sorted(ANSWERS), ids=lambda p: p.parent.name)
def test_qwen_answers_load_as_train_predictions(shared_data: Path, path: Path) -> None:
    questions = load_questions(shared_data / "spider", "train")
    skipped: Counter[str] = Counter()
    answers = load_predictions(path, questions, path.stem, skipped, allow_partial=True)
    assert len(answers) == ANSWERS[path] and not skipped
    by_id = {q.question_id: q for q in questions}
    assert all(a.db_id == by_id[a.question_id].db_id for a in answers)
    assert len({a.question_id for a in answers}) == len(answers)
    assert all(a.sql.strip() for a in answers)
