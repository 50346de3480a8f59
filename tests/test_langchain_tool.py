"""The LangChain tool invoked directly (no language model): its arguments, the verdict as text
and as structured output, and unreadable SQL answered as a tool error."""

import pytest

pytest.importorskip("langchain_core")

from langchain_core.messages import ToolMessage

from model import Scorer
from model.scoring.langchain_tool import sql_check_tool
from model.scoring.verdict import Policy
from model.synth.demo import demo_root

TYPO = "SELECT name FROM suppliers WHERE country = 'Germani'"
QUESTION = "Which suppliers are based in Germany?"


@pytest.fixture(scope="module")
def tool():
    database = demo_root() / "database" / "supply_chain" / "supply_chain.sqlite"
    return sql_check_tool(Scorer.pretrained(), database=database)


def test_the_tool_asks_for_question_and_sql(tool):
    assert tool.name == "check_sql" and "run" in tool.description
    assert set(tool.args) == {"question", "sql"}


def test_invoked_it_answers_the_verdict_as_text(tool):
    text = tool.invoke({"question": QUESTION, "sql": TYPO})
    first = text.splitlines()[0]
    assert first.startswith(("verdict: review", "verdict: regenerate")) and "query confidence 0." in first
    assert "the literal 'Germani' is not a value of suppliers.country; closest: 'Germany'" in text


def test_a_tool_call_carries_the_structured_verdict(tool):
    message = tool.invoke({"type": "tool_call", "id": "call-1", "name": "check_sql",
                           "args": {"question": QUESTION, "sql": TYPO}})
    assert isinstance(message, ToolMessage) and message.tool_call_id == "call-1"
    verdict = message.artifact
    assert verdict["action"] in ("review", "regenerate") and verdict["sql"] == TYPO
    start, end = verdict["look_here_first"]["span"]
    assert TYPO[start:end] == "'Germani'" and message.content.startswith(f"verdict: {verdict['action']}")


def test_the_policy_decides_and_unreadable_sql_is_a_tool_error():
    database = demo_root() / "database" / "supply_chain" / "supply_chain.sqlite"
    lenient = sql_check_tool(Scorer.pretrained(), database=database, policy=Policy(run_at=0.0, regenerate_below=0.0))
    assert lenient.invoke({"question": QUESTION, "sql": TYPO}).startswith("verdict: run")
    answer = lenient.invoke({"question": QUESTION, "sql": "SELEC name FROM"})
    assert answer.startswith("cannot parse") and "\n" not in answer


def test_arguments_the_scorer_refuses_and_a_check_past_its_bound_are_tool_errors(tool):
    for args, says in (({"question": QUESTION, "sql": ""}, "no SQL"),
                       ({"question": QUESTION, "sql": "SELECT 1" + " " * 20_000}, "characters"),
                       ({"question": "q" * 5000, "sql": "SELECT 1"}, "question"),
                       ({"question": QUESTION, "sql": "SELECT " + ", ".join(f"c{i}" for i in range(600))
                         + " FROM suppliers"}, "nodes")):
        answer = tool.invoke(args)
        assert says in answer and "\n" not in answer and not answer.startswith("verdict"), answer
    database = demo_root() / "database" / "supply_chain" / "supply_chain.sqlite"
    hurried = sql_check_tool(Scorer.pretrained(), database=database, timeout_s=1e-9)
    assert hurried.invoke({"question": QUESTION, "sql": TYPO}).startswith("the check took longer than")
    with pytest.raises(ValueError, match="timeout_s"):
        sql_check_tool(Scorer.pretrained(), database=database, timeout_s=-1)


def test_arguments_missing_of_the_wrong_type_or_not_taken_are_one_line_tool_errors(tool):
    # they were pydantic's ValidationError, over several lines, raised out of the agent's loop;
    # an argument the tool does not take was dropped: the query checked as if it were not given
    for args, says in (({"question": QUESTION}, "check_sql: sql: Field required"),
                       ({"question": QUESTION, "sql": 5}, "check_sql: sql: Input should be a valid string"),
                       ({"question": QUESTION, "sql": None}, "check_sql: sql: Input should be a valid string"),
                       ({"question": QUESTION, "sql": TYPO, "database": "pets_1"},
                        "check_sql: unknown argument 'database' (known: question, sql)")):
        message = tool.invoke({"type": "tool_call", "id": "c", "name": "check_sql", "args": args})
        assert message.status == "error" and message.content == says, message
        assert tool.invoke(args) == says
    assert tool.invoke("SELECT name FROM suppliers") == "check_sql: sql: Field required"  # (read as the question)


def test_an_unknown_dialect_is_refused_when_the_tool_is_made():
    with pytest.raises(ValueError, match="unknown dialect 'oracle' \\(known: bigquery, "):
        sql_check_tool(Scorer.pretrained(), dialect="oracle")
    assert sql_check_tool(Scorer.pretrained(), dialect="PostgreS").name == "check_sql"
