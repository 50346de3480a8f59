"""The verdict as a LangChain tool (``pip install 'rat-confidence[langchain]'``: langchain-core
only): an agent calls it with (question, sql) and reads what to do with the query.

    from model.scoring.langchain_tool import sql_check_tool
    tool = sql_check_tool(database="shop.sqlite")      # bind it to an agent, or call it yourself
    tool.invoke({"question": "Suppliers in Germany?", "sql": "SELECT ..."})

The tool answers the verdict as text (``content``: the action, the confidence and the feedback)
and as structured output (``artifact``: ``Verdict.to_dict()``), LangChain's
``content_and_artifact``; invoked with a tool call, the ``ToolMessage`` carries both. SQL the
scorer cannot read, an argument the scorer refuses (empty SQL, SQL or a question over its
limits) and a check past ``timeout_s`` (default 10 s) come back as one line of text (a tool error
the agent can read), not an exception; so do arguments that are missing, of the wrong type or
that the tool does not take (``check_sql: sql: Field required``, ``check_sql: unknown argument
'database' (known: question, sql)``), as rat-mcp answers them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from model.extras import needs_extra

with needs_extra("langchain", "model.scoring.langchain_tool"):
    from langchain_core.tools import StructuredTool, ToolException
    from pydantic import BaseModel, ConfigDict, Field, ValidationError

TIMEOUT_S = 10.0  # seconds one check may take, as rat-mcp's score_sql
DESCRIPTION = ("Check a SQL query before running it. Give the user's question and the SQL you wrote; "
               "the answer is a verdict: run (likely right), review (ask a person) or regenerate (likely "
               "wrong), with the query's confidence and feedback naming the part to fix.")


class CheckSQL(BaseModel):
    """The tool's arguments; one it does not take is refused, not dropped (a misspelt or invented
    ``database`` would be checked as if not given)."""

    model_config = ConfigDict(extra="forbid")
    question: str = Field(description="the question the SQL answers, in the user's words")
    sql: str = Field(description="the SQL query to check")


def verdict_text(verdict) -> str:
    """The tool's text answer: the action and the confidence, then the feedback."""
    return f"verdict: {verdict.action} (query confidence {verdict.query_confidence:.2f})\n{verdict.feedback}"


def arguments_problem(name: str, error: ValidationError) -> str:
    """The tool error for arguments that fail ``CheckSQL``: one line naming each field, as
    rat-mcp's.

    >>> try:
    ...     CheckSQL.model_validate({"sql": 5, "database": "x"})
    ... except ValidationError as e:
    ...     print(arguments_problem("check_sql", e))
    check_sql: question: Field required; sql: Input should be a valid string; unknown argument 'database' (known: question, sql)
    """
    from model.scoring.fields import unknown_field

    def told(err) -> str:
        field = ".".join(str(p) for p in err["loc"]) or "arguments"
        if err["type"] == "extra_forbidden":
            return unknown_field([field], tuple(CheckSQL.model_fields), "argument")
        return f"{field}: {err['msg']}"

    return " ".join(f"{name}: {'; '.join(told(err) for err in error.errors())}".split())[:300]


def sql_check_tool(scorer=None, *, database: str | Path | None = None, schema=None, db_id: str | None = None,
                   dialect: str | None = None, policy=None, name: str = "check_sql",
                   timeout_s: float | None = TIMEOUT_S) -> StructuredTool:
    """A LangChain tool that checks (question, sql) on one database with ``scorer`` (default: the
    shipped model) and ``policy`` (default: the scorer's): ``Scorer.check``, each call bounded by
    ``timeout_s`` (None: unbounded). An unknown ``dialect`` is a ``UsageError`` here, not at
    every call."""
    import rat
    from model.errors import check_seconds
    from model.scoring.fields import dialect_name

    check_seconds(timeout_s)
    dialect = dialect_name(dialect) if dialect is not None else None
    state: dict[str, Any] = {"scorer": scorer}

    def check_sql(question: str, sql: str) -> tuple[str, dict]:
        if state["scorer"] is None:
            from model.scoring.scorer import Scorer

            state["scorer"] = Scorer.pretrained()
        try:
            verdict = state["scorer"].check(sql, question=question, schema=schema, database=database,
                                            db_id=db_id, dialect=dialect, policy=policy, timeout_s=timeout_s)
        except (rat.RATError, ValueError, TypeError) as e:  # UsageError and DatabaseError are ValueErrors
            raise ToolException(" ".join(str(e).split())[:300]) from None
        except TimeoutError:  # DeadlineExceeded
            raise ToolException(f"the check took longer than {timeout_s:g} s; the query was not checked") from None
        return verdict_text(verdict), verdict.to_dict()

    return StructuredTool.from_function(check_sql, name=name, description=DESCRIPTION, args_schema=CheckSQL,
                                        response_format="content_and_artifact", handle_tool_error=True,
                                        handle_validation_error=lambda e: arguments_problem(name, e))
