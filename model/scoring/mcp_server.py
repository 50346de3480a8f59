"""``rat-mcp``: the scorer as an MCP server (the official MCP Python SDK, stdio transport), for
agents that check the SQL they write before running it.

    rat-mcp --data-root ../shared/data/spider            # Spider's schemas and databases, read-only
    rat-mcp --database shop=postgresql://reader@db/shop   # a named connection (repeatable)

Tools: ``score_sql(sql, question, database)`` answers the whole-query confidence, the part to look
at first (its text and ``[start, end)`` span in the SQL), the reasons and the verdict (run |
review | regenerate, with feedback the agent can act on: ``model.scoring.verdict``), and the
parts the model cannot judge (``unfamiliar``: the text of each operator it reads as unknown);
``choose_sql(candidates, question, database)`` chooses one of up to ``MAX_CANDIDATES`` queries
for one question (``Scorer.choose``) and answers it as ``score_sql`` does, with its position
(``chosen``), how many candidates share its tree (``agreeing``) and each candidate's confidence
or error; ``list_databases()`` the database names ``score_sql`` accepts. Databases are configured as for
``rat-serve``: ``--data-root`` (schemas and SQLite files under one folder, opened read-only,
symlinks resolved and kept under it), ``--schema`` (tables.json or a ``.sql`` file of ``CREATE TABLE``
statements: schemas only; not with ``--data-root``) and named
connections ``--database NAME=URL`` (``model.scoring.inputs.named_databases``: PostgreSQL,
MySQL, DuckDB or SQLite, opened read-only, the schema read from the database). A call that
names no database reads the one served where there is only one (as ``rat-score`` reads a row
without a db_id), else is scored without a schema (``scored_with_schema``: false). A bad argument
is a tool error of one line (``isError``), never a crash of the server. ``--policy`` and
``--query-timeout`` (``add_deployment_options``, rat-serve's too) set the verdicts' thresholds and
each database read's time limit. ``--workers`` ``score_sql`` / ``choose_sql`` calls are scored at
once, the others waiting their turn within ``--timeout-s``; ``list_databases`` waits behind none.
SIGTERM ends the server at once, exit 0.
"""

import argparse
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from model.extras import needs_extra
from model.scoring.fields import MAX_NODES, MAX_SQL_CHARS
from model.scoring.inputs import add_deployment_options, deployment_options
from rat.dialects import DIALECTS
from rat.errors import RATError

TIMEOUT_S = 10.0
WORKERS = 2  # score_sql / choose_sql calls scored at once
LISTED = 20  # database names an "unknown database" error shows
MAX_CANDIDATES = 16  # the queries one choose_sql call scores
MAX_LINE_BYTES = 1_000_000  # a longer stdin line is answered with an error, its bytes dropped as they arrive
def _one_line(message: str) -> str:
    return " ".join(message.split())[:300]


class ScoringTools:
    """What the tools do, without the protocol: ``score_sql``, ``choose_sql`` and ``list_databases`` raise
    ``UsageError`` (one line) for a bad argument."""

    def __init__(self, scorer, data_root: Path | None = None, schemas: dict | None = None,
                 dialect: str | None = None, max_sql_chars: int = MAX_SQL_CHARS, max_nodes: int = MAX_NODES,
                 timeout_s: float = TIMEOUT_S, named: dict[str, str] | None = None, policy=None):
        self.scorer, self.schemas, self.dialect = scorer, schemas or {}, dialect
        self.named = dict(named or {})  # name -> URL of the named connections
        self._opened = threading.local()  # each thread's open named connections
        self.root = data_root.resolve() if data_root else None
        self.max_sql_chars, self.max_nodes, self.timeout_s = max_sql_chars, max_nodes, timeout_s
        self.policy = policy if policy is not None else scorer.policy  # (``--policy``, else the model's)
        # a call that names no database reads the one served, where there is only one (rat-score's rule)
        self.only = next(iter(self.schemas)) if len(self.schemas) == 1 else None
        self.workers = WORKERS  # calls scored at once (``--workers``); the others wait their turn

    def late(self):
        """The error of a call not scored within ``timeout_s`` (waiting its turn among them)."""
        from model.errors import UsageError

        return UsageError(f"scoring took longer than {self.timeout_s:g} s")

    def list_databases(self) -> list[str]:
        return sorted(self.schemas)

    def dialects(self) -> dict[str, str]:
        """The SQL each database reads when a query names no dialect (``database_dialects``)."""
        from model.scoring.inputs import database_dialects

        return database_dialects(self.schemas, self.named, self.dialect)

    def _named(self, name: str):
        """This thread's open connection to the named database (opened on first use, read-only)."""
        from model.data.databases import open_database

        opened = self._opened.__dict__.setdefault("open", {})
        if name not in opened:
            opened[name] = open_database(self.named[name], timeout_s=self.scorer.feature_timeout_s,
                                         max_result_bytes=self.scorer.max_result_bytes)
        return opened[name]

    def _checked(self, sql: object, name: str = "sql", blank: bool = False) -> str:
        """``sql`` (a tool argument called ``name``) if it is the SQL text of one query within
        bounds, else ``UsageError``; with ``blank``, empty text too (a candidate the scorer
        answers "no SQL", left out of the choice)."""
        from model.errors import UsageError
        from model.scoring.fields import field_problem

        if not isinstance(sql, str) or not (sql.strip() or blank):
            raise UsageError(f"{name}: expected the SQL text of one query")
        if len(sql) > self.max_sql_chars:
            raise UsageError(f"{name}: {len(sql)} characters; at most {self.max_sql_chars}")
        problem = field_problem("sql", sql)
        if problem:
            raise UsageError(problem.replace("sql", name, 1))
        return sql

    def _row(self, question: str, database: str) -> dict[str, Any]:
        """A row's question, db_id, schema and database (opened read-only) for a tool call,
        checked; without ``database``, those of the one database served where there is only one."""
        from model.errors import UsageError
        from model.scoring.fields import field_problem
        from model.scoring.inputs import database_under

        for name, value in (("question", question), ("db_id", database or None)):
            problem = field_problem(name, value)
            if problem:
                raise UsageError(problem.replace("db_id", "database", 1))
        if database and database not in self.schemas:
            known = self.list_databases()
            shown = ", ".join(known[:LISTED]) + (f" and {len(known) - LISTED} more" if len(known) > LISTED else "")
            raise UsageError(f"database {database!r}: unknown" + (f" (known: {shown})" if known else
                                                                   " (the server has no databases configured)"))
        database = database or self.only
        if database in self.named:
            path = self._named(database)
        else:
            path = database_under(self.root, database) if database and self.root is not None else None
        return {"question": question or "", "db_id": database or None, "schema": self.schemas.get(database),
                "database": path}

    def _limits(self, deadline: float | None = None) -> dict[str, Any]:
        return {"progress": False, "reasons": True, "max_nodes": self.max_nodes, "max_sql_chars": self.max_sql_chars,
                "deadline": deadline or time.monotonic() + self.timeout_s, "dialect": self.dialect}

    def score_sql(self, sql: str, question: str = "", database: str = "",
                  deadline: float | None = None) -> dict[str, Any]:
        from model.data.execution import DeadlineExceeded
        from model.errors import UsageError
        from model.scoring.scorer import RowError

        row = {"sql": self._checked(sql), **self._row(question, database)}
        try:
            (result,) = self.scorer.score_many([row], **self._limits(deadline))
        except DeadlineExceeded:
            raise self.late() from None
        if isinstance(result, RowError):
            raise UsageError(_one_line(result.message))
        return self._answer(result, row["database"], row["db_id"])

    def choose_sql(self, candidates: list[str], question: str = "", database: str = "",
                   deadline: float | None = None) -> dict[str, Any]:
        from model.data.execution import DeadlineExceeded
        from model.errors import UsageError
        from model.scoring.scorer import RowError

        if not isinstance(candidates, list) or not 1 <= len(candidates) <= MAX_CANDIDATES:
            raise UsageError(f"candidates: expected a list of 1 to {MAX_CANDIDATES} SQL queries")
        # an empty candidate is left out as Scorer.choose leaves it out (its error "no SQL"), not refused
        sqls = [self._checked(sql, f"candidates[{i}]", blank=True) for i, sql in enumerate(candidates)]
        row = self._row(question, database)
        try:
            choice = self.scorer.choose(sqls, question=row["question"], schema=row["schema"],
                                        database=row["database"], db_id=row["db_id"], **self._limits(deadline))
        except DeadlineExceeded:
            raise self.late() from None
        except (RATError, TypeError, ValueError, UsageError) as error:  # none could be scored
            raise UsageError(f"no candidate could be scored; the first: {_one_line(str(error))}") from None
        out = {"chosen": choice.index, "sql": choice.chosen.sql, "agreeing": choice.agreeing,
               **self._answer(choice.chosen, row["database"], row["db_id"]),
               "candidates": [{"error": _one_line(s.message)} if isinstance(s, RowError)
                              else {"query_confidence": round(s.query_confidence, 6)} for s in choice.scored]}
        return out

    def _answer(self, result, path, database: str | None) -> dict[str, Any]:
        """What a tool answers of a scored query: its confidence, verdict (or look-here-first
        and reasons without a policy), unfamiliar parts, the database it was read against and
        whether it was scored with a schema and with the database's data."""
        from model.scoring.verdict import verdict_of

        out: dict[str, Any] = {"query_confidence": round(result.query_confidence, 6)}
        if self.policy is not None:
            verdict = verdict_of(result, self.policy, path)
            out.update(verdict.to_dict())
            out["verdict"] = out.pop("action")
        else:
            look = result.nodes[result.look_here_first]
            out["look_here_first"] = {"text": look.text or look.label,
                                      "span": list(look.span) if look.span else None, "label": look.label}
            out["reasons"] = [r.text for n in result.nodes for r in n.reasons]
        # the parts the model reads as an unknown operator: its confidence cannot judge them
        out["unfamiliar"] = [n.text or n.label for n in result.nodes if n.unfamiliar]
        out["database"] = database
        out["scored_with_schema"] = result.schema is not None
        out["scored_with_database"] = path is not None
        return out


def _problems(error, whole: str = "arguments") -> str:
    """A pydantic ``ValidationError`` in one line: each field's path (``whole``: the object
    itself) and what is wrong with it."""
    return "; ".join(f"{'.'.join(str(p) for p in err['loc']) or whole}: {err['msg']}" for err in error.errors())


async def named_params(ctx, call_next):
    """Server middleware: a request whose params fail their schema (``tools/call`` with
    ``arguments`` that are no object, or without ``params``) is answered -32602 naming each
    field and what is wrong with it (the SDK's answer names neither: "Invalid request
    parameters", its data empty); its messages quote no value the client sent."""
    import mcp_types
    from mcp.shared.exceptions import MCPError
    from pydantic import ValidationError

    try:
        return await call_next(ctx)
    except ValidationError as e:
        problems = _problems(e, "params")
        raise MCPError(code=mcp_types.INVALID_PARAMS, message=f"Invalid request parameters: {problems}"[:300],
                       data=problems[:300]) from None


def build_server(tools: ScoringTools):
    """The ``MCPServer`` with the tools ``score_sql``, ``choose_sql`` and ``list_databases``."""
    from typing import Annotated

    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from pydantic import Field, ValidationError

    from model.errors import UsageError
    from model.scoring.fields import unknown_field

    class OneLineErrors(MCPServer):
        """Arguments that fail a tool's input schema answer one line naming each field (the
        SDK's own message is pydantic's, over several lines); an argument the tool does not
        take (the SDK drops it: a misspelt ``databse`` would be scored as if not given) one
        naming it. Every such line, and a bad argument a tool tells (``UsageError``), reads
        ``<tool>: <message>``."""

        async def call_tool(self, name, arguments, context=None):
            tool = self._tool_manager.get_tool(name)
            if tool is not None and isinstance(arguments, dict):
                problem = unknown_field(arguments, tuple(tool.parameters.get("properties", {})), "argument")
                if problem:
                    raise ToolError(f"{name}: {problem}")
            try:
                return await super().call_tool(name, arguments, context)
            except ToolError as e:
                if isinstance(e.__cause__, ToolError):  # a bad argument the tool told: its line, not the SDK's prefix
                    raise ToolError(f"{name}: {e.__cause__}") from None
                if not isinstance(e.__cause__, ValidationError):
                    raise
                raise ToolError(f"{name}: {_problems(e.__cause__)}") from e.__cause__

        async def run_stdio_async(self) -> None:
            await serve_stdio(self._lowlevel_server)

    from importlib.metadata import PackageNotFoundError, version

    try:
        release = version("rat-confidence")
    except PackageNotFoundError:  # (a checkout not installed)
        release = ""
    server = OneLineErrors("rat-confidence", version=release, log_level="WARNING", middleware=[named_params],
                           instructions=(
        "Check SQL before running it: score_sql gives a calibrated confidence that the query is right, "
        "the part to look at first, reasons, and a verdict (run, review or regenerate) with feedback to "
        "rewrite the query. choose_sql chooses one of several queries written for one question. list_databases names the databases score_sql accepts and the SQL dialect of each."))

    # what each argument is, in the tools' input schemas (the bounds are checked by ScoringTools; the
    # module has no `from __future__ import annotations`: the SDK reads these from the signatures)
    Sql = Annotated[str, Field(description="the SQL query to score, one statement, in the database's dialect "
                                           "(list_databases)")]
    Question = Annotated[str, Field(description="the question in the user's words that the SQL answers "
                                                "(optional, but the confidence reads it)")]
    Database = Annotated[str, Field(description="the name of a database from list_databases (optional: without "
                                                "one, the only database where list_databases names one, else "
                                                "no schema or data)")]
    Candidates = Annotated[list[str], Field(description="the SQL queries written for the question, each one "
                                                        "statement", json_schema_extra={"minItems": 1,
                                                                                        "maxItems": MAX_CANDIDATES})]

    turns: list = []  # the limiter of the calls scored at once (made in the server's event loop)

    async def scored(score, *args) -> dict[str, Any]:
        """``score(*args)`` on a worker thread once one of ``tools.workers`` turns is free, its time
        limit counted from the call's arrival: a call still waiting at it is answered ``late``. The
        other calls (list_databases) never wait behind these."""
        import anyio
        import anyio.to_thread

        deadline = time.monotonic() + tools.timeout_s
        if not turns:
            turns.append(anyio.CapacityLimiter(tools.workers))
        with anyio.move_on_after(tools.timeout_s) as waiting:
            await turns[0].acquire()
        try:
            if waiting.cancelled_caught:
                raise tools.late()
            return await anyio.to_thread.run_sync(lambda: score(*args, deadline=deadline))
        except UsageError as e:
            raise ToolError(str(e)) from None
        finally:
            if not waiting.cancelled_caught:
                turns[0].release()

    @server.tool(description="Score one SQL query for a question on a database: the probability it is right, "
                             "the part most likely wrong, reasons, and a verdict (run | review | regenerate) "
                             "with feedback for rewriting it.")
    async def score_sql(sql: Sql, question: Question = "", database: Database = "") -> dict[str, Any]:
        return await scored(tools.score_sql, sql, question, database)

    @server.tool(description="Choose one of several SQL queries written for one question (samples of a model): "
                             "the one most of them agree with, with its confidence, verdict and feedback, "
                             "and each candidate's confidence.")
    async def choose_sql(candidates: Candidates, question: Question = "", database: Database = "") -> dict[str, Any]:
        return await scored(tools.choose_sql, candidates, question, database)

    @server.tool(description="The names of the databases score_sql accepts, and the SQL dialect each reads "
                             "(write the query in it: postgres, mysql, duckdb, sqlite, ...).")
    async def list_databases() -> dict[str, Any]:  # (on the event loop: no scoring call holds it up)
        return {"databases": tools.list_databases(), "dialects": tools.dialects()}

    return server


def rpc_error(ident: str | int | None, code: int, message: str) -> dict:
    """A JSON-RPC error answer."""
    return {"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message}}


def read_line(line: str) -> tuple[Any, dict | None]:
    """A stdin line read once: ``(message, None)`` for a JSON-RPC message MCP reads, else
    ``(None, error)``, the JSON-RPC error that answers it (the SDK's reader drops such a line
    unanswered, and the client waits for ever): not JSON is a parse error (-32700, id null); JSON
    that is no JSON-RPC message MCP reads, a lone surrogate in a string among them, an invalid
    request (-32600) carrying the line's id where it has one; an integer over Python's digits
    (``sys.get_int_max_str_digits``) a parse error too; an id that is not a string or an
    integer (the SDK reads the line as a notification, which has none) is one too, id null; an
    object that gives a key twice (``duplicate_key``) is an invalid request too.

    >>> type(read_line('{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}')[0]).__name__
    'JSONRPCRequest'
    >>> read_line('{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"sql": "SELECT \\\\ud800"}}')[1]
    {'jsonrpc': '2.0', 'id': 7, 'error': {'code': -32600, 'message': 'Invalid Request: a string holds a lone surrogate (not Unicode text)'}}
    >>> read_line("SELECT 1")[1]["error"]["code"], read_line("[1, 2]")[1]["id"]
    (-32700, None)
    >>> read_line('{"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"}')[1]["error"]
    {'code': -32600, 'message': 'Invalid Request: id 1.5 is not a string or an integer'}
    >>> read_line('{"jsonrpc": "2.0", "id": 1, "params": {"a": ' + "9" * 5000 + '}}')[1]["error"]["message"]
    'Parse error: an integer of more than 4300 digits'
    >>> read_line('{"jsonrpc": "2.0", "id": 2, "method": "ping", "params": {"a": 1, "a": 2}}')[1]["error"]
    {'code': -32600, 'message': "Invalid Request: key 'a' given twice in one object"}
    """
    import json

    import mcp_types

    duplicated = duplicate_key(line)
    try:
        if duplicated is not None:  # (read as the SDK would: the last one)
            raise ValueError(duplicated)
        message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        if not isinstance(message, mcp_types.JSONRPCNotification):
            return message, None
        ident = json.loads(line).get("id", ...)  # (a notification, a short line)
        if ident is ...:
            return message, None
        return None, rpc_error(None, mcp_types.INVALID_REQUEST,
                               f"Invalid Request: id {json.dumps(ident)[:40]} is not a string or an integer")
    except ValueError:  # pydantic's ValidationError, as the SDK's reader meets it
        pass
    try:
        message = json.loads(line)
    except json.JSONDecodeError as e:
        return None, rpc_error(None, mcp_types.PARSE_ERROR, f"Parse error: not JSON ({e.msg})")
    except RecursionError:
        return None, rpc_error(None, mcp_types.PARSE_ERROR, "Parse error: not JSON (nested too deeply)")
    except ValueError:  # valid JSON: an integer longer than Python reads
        return None, rpc_error(None, mcp_types.PARSE_ERROR, "Parse error: an integer of more than "
                               f"{sys.get_int_max_str_digits()} digits")
    ident = message.get("id") if isinstance(message, dict) else None
    if isinstance(ident, bool) or not isinstance(ident, (str, int)):
        ident = None
    try:
        json.dumps(message, ensure_ascii=False).encode("utf-8")
        why = "not a JSON-RPC 2.0 request, notification or response that MCP reads"
        if duplicated is not None:
            why = f"key {duplicated[:80]!r} given twice in one object"
    except UnicodeEncodeError:
        why = "a string holds a lone surrogate (not Unicode text)"
    except RecursionError:
        why = "nested too deeply"
    return None, rpc_error(ident, mcp_types.INVALID_REQUEST, f"Invalid Request: {why}")


def duplicate_key(line: str) -> str | None:
    """The first key that an object of the JSON ``line`` gives twice (a JSON reader keeps the
    last one silently; the client meant one of them), else None (not JSON too: ``read_line``
    tells that).

    >>> duplicate_key('{"a": {"sql": 1, "sql": 2}}'), duplicate_key('{"a": 1, "b": {"a": 2}}'), duplicate_key("[")
    ('sql', None, None)
    """
    import json

    found: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict:
        out = dict(items)
        if len(out) < len(items) and not found:
            seen: set[str] = set()
            found.append(next(k for k, _ in items if k in seen or seen.add(k)))
        return out

    try:
        json.loads(line, object_pairs_hook=pairs)
    except (ValueError, RecursionError):
        return None
    return found[0] if found else None


async def read_lines(stream, limit: int = MAX_LINE_BYTES):
    """Each line of the binary ``stream`` (an anyio file), decoded (a byte that is not UTF-8
    read as U+FFFD), without its end; ``None`` for a line over ``limit`` bytes, given as soon as
    it passes the limit, the rest of it read and dropped as it arrives, never held."""
    held, dropping = bytearray(), False
    while chunk := await stream.read1(65536):
        held += chunk
        while (end := held.find(b"\n")) >= 0:
            line = bytes(held[:end])
            del held[:end + 1]
            if not dropping:
                yield line.decode("utf-8", errors="replace") if len(line) <= limit else None
            dropping = False
        if len(held) > limit:
            if not dropping:
                yield None
            held.clear()
            dropping = True
    if held and not dropping:
        yield held.decode("utf-8", errors="replace")


async def serve_stdio(lowlevel_server) -> None:
    """MCP over this process's stdin and stdout, as the SDK's stdio transport
    (``mcp.server.stdio.stdio_server``) serves it, each line read once (``read_line``) and the
    lines the SDK cannot read answered instead of dropped, a line over ``MAX_LINE_BYTES`` too
    (-32600, id null: not read). As the SDK does, fd 1 is pointed at stderr and fd 0 at the null
    device while serving, so stray output of a library misses the wire."""
    import json
    import os
    import signal

    import anyio
    import mcp_types
    from mcp.shared.message import SessionMessage

    wire_in, wire_out = os.dup(0), os.dup(1)
    os.dup2(2, 1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    to_server, read_stream = anyio.create_memory_object_stream(0)
    write_stream, from_server = anyio.create_memory_object_stream(0)
    lock = anyio.Lock()
    async with await anyio.open_file(wire_in, "rb") as stdin, \
            await anyio.open_file(wire_out, "w", encoding="utf-8", newline="\n") as out:

        async def send(text: str) -> None:  # whole lines, one writer at a time
            async with lock:
                await out.write(text + "\n")
                await out.flush()

        async def reader() -> None:
            async with to_server:
                async for line in read_lines(stdin):
                    if line is None:
                        await send(json.dumps(rpc_error(None, mcp_types.INVALID_REQUEST, "Invalid Request: a line "
                                                        f"over {MAX_LINE_BYTES} bytes, not read")))
                        continue
                    if not line.strip():
                        continue
                    message, error = read_line(line)
                    if error is None:
                        await to_server.send(SessionMessage(message))
                    else:
                        await send(json.dumps(error))

        async def writer() -> None:
            async with from_server:
                async for answer in from_server:
                    await send(answer.message.model_dump_json(by_alias=True, exclude_unset=True))

        listening = anyio.CancelScope()

        async def stop_on_sigterm() -> None:
            # a scoring thread cannot be stopped mid-query: the process ends at once, exit 0, once
            # no line is half written (the calls in flight get no answer)
            with listening, anyio.open_signal_receiver(signal.SIGTERM) as signals:
                async for _ in signals:
                    async with lock:
                        sys.stderr.flush()
                        os._exit(0)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(stop_on_sigterm)
            tasks.start_soon(reader)
            tasks.start_soon(writer)
            await lowlevel_server.run(read_stream, write_stream, lowlevel_server.create_initialization_options())
            listening.cancel()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rat-mcp", description=__doc__.split("\n\n")[0].replace("``", ""))
    parser.add_argument("--model", default="pretrained")
    parser.add_argument("--data-root", type=Path, help="schemas and databases (read-only) under this folder")
    parser.add_argument("--schema", type=Path, help="tables.json, or a .sql file of CREATE TABLE statements "
                        "in --dialect: scoring without databases")
    parser.add_argument("--database", action="append", default=[], metavar="NAME=URL",
                        help="a named connection, read-only (repeatable): postgresql://, mysql+pymysql://, duckdb:///, "
                             "sqlite:///")
    parser.add_argument("--dialect", metavar="NAME",
                        help=f"the SQL dialect of the queries: {', '.join(sorted(DIALECTS))} (default: the "
                             "database's own, else sqlite)")
    parser.add_argument("--max-sql-chars", type=int, default=MAX_SQL_CHARS)
    parser.add_argument("--max-nodes", type=int, default=MAX_NODES)
    parser.add_argument("--timeout-s", type=float, default=TIMEOUT_S,
                        help="seconds one score_sql call may take, waiting its turn included")
    parser.add_argument("--workers", type=int, default=WORKERS,
                        help=f"score_sql / choose_sql calls scored at once; the others wait (default {WORKERS})")
    add_deployment_options(parser)
    args = parser.parse_args(argv)
    import logging

    logging.getLogger("sqlglot").setLevel(logging.ERROR)  # its warnings quote the SQL, newlines and all
    with needs_extra("mcp", "rat-mcp"):  # the core install: one line, exit 2
        import mcp.server.mcpserver  # noqa: F401
    from model.errors import UsageError, say_error
    from model.scoring.inputs import check_service_options, load_scorer, read_schemas

    try:
        check_service_options(args, ("max_sql_chars", "max_nodes", "timeout_s", "workers"))
        policy = deployment_options(args)
        schemas = read_schemas(args.schema, args.data_root, args.dialect or "sqlite")
        scorer = load_scorer(args.model)
        if scorer.saved is None:
            raise UsageError(f"--model {args.model}: rat-mcp serves a saved boosted model (model.json)")
        if args.query_timeout is not None:  # (before the named connections are opened)
            scorer.feature_timeout_s = args.query_timeout
        named = {}
        if args.database:  # a database that cannot be opened is a DatabaseError, a UsageError
            from model.scoring.inputs import named_databases

            named = named_databases(args.database, schemas, scorer)
    except UsageError as e:
        say_error("rat-mcp", e)
        return 2
    tools = ScoringTools(scorer, args.data_root, schemas, args.dialect, args.max_sql_chars,
                         args.max_nodes, args.timeout_s, named, policy)
    tools.workers = args.workers
    print(f"rat-mcp: {scorer.description}, {len(schemas)} databases, stdio", file=sys.stderr, flush=True)
    build_server(tools).run("stdio")
    return 0


if __name__ == "__main__":
    sys.exit(main())
