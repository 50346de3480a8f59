"""rat-mcp started for real (the console script) and called with the MCP SDK's own client over
stdio: the tools it lists, a score_sql answer with its verdict and span, the databases, and bad
arguments answered as one-line tool errors by a server that keeps answering."""

import asyncio
import json
import os
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from mcp import Client
from mcp.client.stdio import StdioServerParameters

from model.synth.demo import demo_root

TYPO = "SELECT name FROM suppliers WHERE country = 'Germani'"
# three spellings of one tree, one other query and one that cannot be read
CANDIDATES = ["SELECT name FROM suppliers", "SELECT s.name FROM suppliers AS s WHERE 'Germany' = s.country",
              "SELEC name", "SELECT name FROM suppliers WHERE country = 'Germany'",
              "select NAME from SUPPLIERS where COUNTRY = 'Germany'"]
ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
       **{k: os.environ[k] for k in ("RAT_CACHE", "PATH", "HOME") if k in os.environ}}


def rat_mcp() -> str:
    return shutil.which("rat-mcp", path=str(Path(sys.executable).parent)) or "rat-mcp"


def session(calls, *options: str):
    """Start rat-mcp with ``options``, run ``calls(client)`` in a client session, return its value."""
    params = StdioServerParameters(command=rat_mcp(), args=list(options), env=ENV)

    async def main():
        async with Client(params, read_timeout_seconds=120) as client:
            return await calls(client)

    return asyncio.run(main())


@pytest.fixture(scope="module")
def answers():
    root = demo_root()

    async def calls(client):
        tools = await client.list_tools()
        out = {"tools": {t.name: t for t in tools.tools}}
        out["typo"] = await client.call_tool("score_sql", {"sql": TYPO, "question": "Suppliers in Germany?",
                                                           "database": "supply_chain"})
        out["no_database"] = await client.call_tool("score_sql", {"sql": "SELECT count(*) FROM suppliers"})
        out["upper"] = await client.call_tool("score_sql", {"sql": "SELECT upper(name) FROM suppliers",
                                                            "database": "supply_chain"})
        out["databases"] = await client.call_tool("list_databases", {})
        out["bad"] = [await client.call_tool("score_sql", args) for args in (
            {"sql": "SELEC name FROM"}, {"sql": "SELECT 1", "database": "nowhere"}, {"sql": 5}, {},
            {"sql": "SELECT 1", "database": "../supply_chain"}, {"sql": "SELECT 1 " + " " * 20_000},
            {"sql": "SELECT 1", "question": "bad\x00text"}, {"sql": "SELECT 1", "question": "q " * 2001},
            {"sql": "SELECT 1", "databse": "supply_chain"})]
        out["choose"] = await client.call_tool("choose_sql", {"candidates": CANDIDATES, "database": "supply_chain",
                                                              "question": "Suppliers in Germany?"})
        out["choose_bad"] = [await client.call_tool("choose_sql", args) for args in (
            {"candidates": []}, {"candidates": ["SELECT 1"] * 17}, {"candidates": ["SELECT 1", 5]},
            {"candidates": ["SELECT 1", "x" * 20_000]}, {"candidates": ["SELEC name FROM", "SELECT * FROM ("]},
            {"candidates": "SELECT 1"}, {"candidates": ["SELECT 1"], "dialect": "mysql"})]
        out["choose_empty"] = [await client.call_tool("choose_sql", {"candidates": candidates, "database": "supply_chain"})
                               for candidates in (["", CANDIDATES[3], "  "], ["", " \n"])]
        out["after"] = await client.call_tool("score_sql", {"sql": "SELECT name FROM suppliers",
                                                            "database": "supply_chain"})
        return out

    return session(calls, "--data-root", str(root))


def test_lists_its_three_tools_with_their_arguments(answers):
    tools = answers["tools"]
    assert set(tools) == {"score_sql", "choose_sql", "list_databases"}
    assert tools["choose_sql"].input_schema["required"] == ["candidates"]
    assert set(tools["score_sql"].input_schema["properties"]) == {"sql", "question", "database"}
    assert tools["score_sql"].input_schema["required"] == ["sql"]
    for tool in ("score_sql", "choose_sql"):  # each argument says what it is
        properties = tools[tool].input_schema["properties"]
        assert all(p.get("description") for p in properties.values()), properties
        assert "list_databases" in properties["database"]["description"]
    candidates = tools["choose_sql"].input_schema["properties"]["candidates"]
    assert (candidates["minItems"], candidates["maxItems"]) == (1, 16)  # the bounds choose_sql keeps


def test_score_sql_gives_confidence_span_reasons_and_verdict(answers):
    result = answers["typo"]
    assert not result.is_error
    body = result.structured_content
    assert json.loads(result.content[0].text) == body
    assert 0 < body["query_confidence"] < 1 and body["verdict"] in ("review", "regenerate")
    start, end = body["look_here_first"]["span"]
    assert TYPO[start:end] == body["look_here_first"]["text"] == "'Germani'"
    assert "the literal 'Germani' is not a value of suppliers.country; closest: 'Germany'" in body["reasons"]
    assert body["feedback"].startswith("The query ") and body["scored_with_database"] is True
    assert "5% wrong among the queries run" in body["policy"]
    unseen = answers["no_database"].structured_content
    assert unseen["verdict"] != "run" and unseen["scored_with_database"] is False
    # several databases served, none named: scored without a schema, and the answer says so
    assert unseen["database"] is None and unseen["scored_with_schema"] is False and body["scored_with_schema"] is True
    assert body["unfamiliar"] == [] and answers["upper"].structured_content["unfamiliar"] == ["upper(name)"]


def test_choose_sql_chooses_the_tree_most_candidates_share_and_answers_it_as_score_sql(answers):
    result = answers["choose"]
    assert not result.is_error, result.content[0].text
    body = result.structured_content
    assert body["chosen"] in (1, 3, 4) and body["agreeing"] == 3 and body["sql"] == CANDIDATES[body["chosen"]]
    assert body["verdict"] in ("run", "review", "regenerate") and body["scored_with_database"] is True
    assert len(body["candidates"]) == 5 and body["candidates"][2]["error"].startswith("not a query")
    assert body["candidates"][body["chosen"]]["query_confidence"] == body["query_confidence"]
    says = ["candidates: expected a list of 1 to 16 SQL queries", "candidates: expected a list of 1 to 16",
            "candidates.1: Input should be a valid string", "candidates[1]: 20000 characters; at most 10000",
            "no candidate could be scored; the first: cannot parse", "candidates: Input should be a valid list",
            "choose_sql: unknown argument 'dialect' (known: candidates, question, database)"]
    for bad, expected in zip(answers["choose_bad"], says, strict=True):
        text = bad.content[0].text
        assert bad.is_error and text.startswith("choose_sql: ") and expected in text and "\n" not in text, text


def test_choose_sql_leaves_out_an_empty_candidate_as_scorer_choose_does(answers):
    some, none = answers["choose_empty"]
    assert not some.is_error, some.content[0].text
    body = some.structured_content
    assert body["chosen"] == 1 and body["sql"] == CANDIDATES[3]
    assert body["candidates"][0] == body["candidates"][2] == {"error": "no SQL"}
    assert none.is_error and none.content[0].text == "choose_sql: no candidate could be scored; the first: no SQL"


def test_list_databases_names_the_data_root(answers):
    assert answers["databases"].structured_content["databases"] == sorted(
        e["db_id"] for e in json.loads((demo_root() / "tables.json").read_text()))


def test_bad_arguments_are_one_line_tool_errors_and_the_server_goes_on(answers):
    says = ["cannot parse", "database 'nowhere': unknown (known: clinic,", "sql: Input should be a valid string",
            "sql: Field required", "database: not a database name", "characters; at most 10000",
            "question: a NUL character", "question: 4002 characters; at most 4000",
            "score_sql: unknown argument 'databse' (known: sql, question, database)"]  # not dropped
    for result, expected in zip(answers["bad"], says, strict=True):  # one form: "<tool>: <message>"
        text = result.content[0].text
        assert result.is_error and text.startswith("score_sql: ") and expected in text and "\n" not in text, text
    assert not answers["after"].is_error and answers["after"].structured_content["verdict"] in ("run", "review",
                                                                                               "regenerate")


def test_bad_options_are_one_line_and_exit_2(tmp_path):
    for options, says in ((["--data-root", str(tmp_path / "none")], "no such directory"),
                          (["--model", str(tmp_path)], "--model"), (["--dialect", "oracle"], "unknown dialect"),
                          (["--timeout-s", "nan"], "--timeout-s must be a positive number, found nan"),
                          (["--policy", "0.3,0.5"], "--policy 0.3,0.5: regenerate_below 0.5 is above run_at 0.3"),
                          (["--policy", "none,-1"], "--policy none,-1: regenerate_below: expected a number in [0, 1]"),
                          (["--query-timeout", "20"], "--query-timeout 20: expected seconds from 0.1 to --timeout-s (10)")):
        done = subprocess.run([rat_mcp(), *options], capture_output=True, text=True, timeout=120, check=False,
                              env=ENV, stdin=subprocess.DEVNULL)
        assert done.returncode == 2 and says in done.stderr and done.stderr.count("\n") == 1, done.stderr


def test_a_named_connection_is_a_database_name(tmp_path):
    database = demo_root() / "database" / "supply_chain" / "supply_chain.sqlite"

    async def calls(client):
        listed = await client.call_tool("list_databases", {})
        scored = await client.call_tool("score_sql", {"sql": TYPO, "question": "Suppliers in Germany?",
                                                      "database": "shop"})
        return listed.structured_content, scored.structured_content

    from model.data.copy_database import copy_database

    duck = copy_database(database, f"duckdb:///{tmp_path}/").url  # the same rows in DuckDB
    listed, scored = session(calls, "--database", f"shop=sqlite:///{database}", "--database", f"crm={duck}")
    assert listed == {"databases": ["crm", "shop"], "dialects": {"crm": "duckdb", "shop": "sqlite"}}
    assert scored["scored_with_database"] is True
    assert "the literal 'Germani' is not a value of suppliers.country; closest: 'Germany'" in scored["reasons"]
    done = subprocess.run([rat_mcp(), "--database", f"shop=sqlite:///{tmp_path / 'none.sqlite'}"], capture_output=True,
                          text=True, timeout=120, check=False, env=ENV, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "no such database file" in done.stderr


def test_a_line_the_sdk_cannot_read_is_answered_and_the_server_goes_on():
    # The SDK drops such a line unanswered (its client then waits for ever); each is answered
    # with a JSON-RPC error carrying the line's id where it has one.
    import queue
    import threading

    proc = subprocess.Popen([rat_mcp(), "--data-root", str(demo_root())], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=ENV)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(json.loads(x)) for x in proc.stdout], daemon=True).start()

    def exchange(raw: bytes) -> dict:
        proc.stdin.write(raw + b"\n")
        proc.stdin.flush()
        return lines.get(timeout=120)

    try:
        hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
        greeting = exchange(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}).encode())
        assert greeting["id"] == 1 and greeting["result"]["serverInfo"]["version"] == version("rat-confidence")
        proc.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n\n')  # and a blank line
        call = '{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "score_sql", ' \
               '"arguments": {"sql": "SELECT \\ud800"}}}'
        # params the SDK cannot read are named (its answer: "Invalid request parameters", data
        # empty); a key given twice is refused, not read as its last value
        not_a_dict = b'{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "score_sql", ' \
                     b'"arguments": "notadict"}}'
        twice = b'{"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "score_sql", "arguments": ' \
                b'{"sql": "SELECT 1", "sql": "SELECT 2"}}}'
        for raw, ident, code, says in ((call.encode(), 7, -32600, "lone surrogate"),
                                       (not_a_dict, 4, -32602,
                                        "Invalid request parameters: params.arguments: Input should be a "),
                                       (b'{"jsonrpc": "2.0", "id": 5, "method": "tools/call"}', 5, -32602,
                                        "Invalid request parameters: params: Field required"),
                                       (twice, 6, -32600, "Invalid Request: key 'sql' given twice in one object"),
                                       (b"\xff\xfe{", None, -32700, "Parse error: not JSON"),
                                       (b"[" * 100_000, None, -32700, "nested too deeply"),
                                       (b'{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"a": %s}}'
                                        % (b"9" * 5000), None, -32700, "an integer of more than 4300 digits"),
                                       (b'{"jsonrpc": "2.0", "id": "x", "params": 3}', "x", -32600, "Invalid Request"),
                                       (b"[1, 2]", None, -32600, "Invalid Request"),
                                       *((b'{"jsonrpc": "2.0", "id": %s, "method": "tools/list"}' % bad, None, -32600,
                                          "Invalid Request: id") for bad in (b'{"a": 1}', b"true", b"1.5", b"null",
                                                                              b"[7]", b"1e400"))):
            answer = exchange(raw)
            assert answer["id"] == ident and answer["error"]["code"] == code and says in answer["error"]["message"], (
                raw[:60], answer)
        # a line over the bound is answered once it passes it, and the rest of it read and dropped
        # as it arrives: the server's memory does not grow with it
        def peak_mb() -> float:
            return int(Path(f"/proc/{proc.pid}/status").read_text().split("VmHWM:")[1].split()[0]) / 1024

        before = peak_mb()
        answer = exchange(b'{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "score_sql", '
                          b'"arguments": {"sql": "' + b"x" * 32_000_000 + b'"}}}')
        assert answer["id"] is None and answer["error"]["code"] == -32600, answer
        assert "a line over 1000000 bytes" in answer["error"]["message"], answer
        assert peak_mb() - before < 16, (before, peak_mb())
        listed = exchange(b'{"jsonrpc": "2.0", "id": 8, "method": "tools/list"}')
        assert listed["id"] == 8 and {t["name"] for t in listed["result"]["tools"]} == {"score_sql", "choose_sql", "list_databases"}
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    assert proc.returncode == 0


def test_a_call_without_a_database_reads_the_one_served(tmp_path):
    """Serving one schema, score_sql without ``database`` reads the SQL against it (a table it
    lacks sends the query back), as rat-score reads a row without a db_id."""
    (tmp_path / "shop.sql").write_text("CREATE TABLE suppliers (id INTEGER PRIMARY KEY, name TEXT, country TEXT);\n")

    async def calls(client):
        return (await client.call_tool("score_sql", {"sql": "SELECT count(*) FROM vendors",
                                                     "question": "How many suppliers are there?"})).structured_content

    body = session(calls, "--schema", str(tmp_path / "shop.sql"))
    assert body["verdict"] == "regenerate" and body["database"] == "shop" and body["scored_with_schema"] is True, body


def test_policy_and_query_timeout_options():
    """--policy sets the verdicts' thresholds; --query-timeout each database read's time limit
    (a slow cross join, stopped at 0.5 s, fits a 3 s call: at the default 5 s it would not)."""
    slow = "SELECT count(*) FROM orders AS a, orders AS b, orders AS c, orders AS d, orders AS e"

    async def calls(client):
        right = await client.call_tool("score_sql", {"sql": "SELECT name FROM suppliers WHERE country = 'Germany'",
                                                     "question": "Suppliers in Germany?", "database": "supply_chain"})
        stopped = await client.call_tool("score_sql", {"sql": slow, "question": "How many orders?",
                                                       "database": "supply_chain"})
        return right, stopped

    right, stopped = session(calls, "--data-root", str(demo_root()), "--policy", "1,1", "--query-timeout", "0.5",
                             "--timeout-s", "3")
    assert right.structured_content["verdict"] == "regenerate", right.content[0].text  # nothing reaches 1
    assert right.structured_content["policy"].startswith("thresholds given (run at 1.00 or above, regenerate below 1.00)")
    assert not stopped.is_error, stopped.content[0].text
