"""rat-serve started for real on 127.0.0.1 and called over HTTP: scores, bounds, refusals,
concurrent clients, and (slow) the page in headless Chromium."""

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from model.nodes.outputs import tree_of
from model.scoring.scorer import UNFAMILIAR
from tests import servers
from tests.test_scorer import boosted_model  # noqa: F401  (the fixture)

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
TYPO = "SELECT name FROM suppliers WHERE country = 'Germani'"


def start_service(folder, data_root, *options: str) -> tuple[subprocess.Popen, str]:
    """rat-serve with the model ``folder`` on ``data_root`` (``tests.servers.start_service``)."""
    return servers.start_service("--model", str(folder), "--data-root", str(data_root), "--max-queries", "16",
                                 *options, env=ENV)


@pytest.fixture(scope="module")
def service(boosted_model):  # noqa: F811
    folder, objects = boosted_model
    proc, url = start_service(folder, objects["table"].root, "--header-timeout-s", "2")
    yield url, objects
    proc.terminate()
    proc.wait(timeout=10)


def post(url: str, body, raw: bytes | None = None, path: str = "/score") -> tuple[int, dict]:
    data = raw if raw is not None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_health_and_databases(service):
    url, objects = service
    health = json.loads(urllib.request.urlopen(url + "/health").read())
    assert health["status"] == "ok" and health["feature_version"].startswith("nf-")
    listed = json.loads(urllib.request.urlopen(url + "/databases").read())
    dbs = listed["databases"]
    assert {e.db_id for e in objects["table"].examples} <= set(dbs)
    assert listed["dialects"] == dict.fromkeys(dbs, "sqlite")  # a --data-root's SQLite files
    for path in ("/health", "/databases", "/"):  # HEAD wherever GET is answered: the head, no body
        with urllib.request.urlopen(urllib.request.Request(url + path, method="HEAD")) as r:
            assert r.status == 200 and r.read() == b""


def test_an_error_row_names_a_file_as_the_client_did_not_the_servers_folder(service):
    url, objects = service
    status, body = post(url, {"sql": "SELECT 1", "database": "tables.json"})
    error = body["results"][0]["error"]
    root = objects["table"].root
    assert status == 200 and error.startswith("tables.json: "), error
    assert str(root) not in error and str(root.resolve()) not in error


def test_score_answers_rows_like_the_cli(service):
    url, objects = service
    e = objects["table"].examples[0]
    status, body = post(url, {"queries": [{"db_id": e.db_id, "question": e.question, "sql": e.sql},
                                          {"db_id": e.db_id, "question": "q", "sql": "SELECT * FROM ("},
                                          {"db_id": "nope", "question": "q", "sql": "SELECT 1"}]})
    assert status == 200 and len(body["results"]) == 3
    first, bad, unknown = body["results"]
    assert [n["label"] for n in first["nodes"]] == list(e.node_names)
    assert {"query_confidence", "look_here_first", "look_here_reliability", "nodes"} <= set(first)
    reliability = first["look_here_reliability"]  # the run's out-of-fold rate for the pointed score's bin
    assert reliability is None or 0 <= reliability <= 1
    assert "cannot parse" in bad["error"] and unknown["error"] == "unknown db_id 'nope'"
    status, one = post(url, {"db_id": e.db_id, "question": e.question, "sql": e.sql})  # one query
    assert status == 200 and one["results"][0]["nodes"] == first["nodes"]


@pytest.mark.parametrize("body, status, message", [
    ({"queries": [{"sql": "SELECT 1"}] * 17}, 413, "at most 16"),
    ({"queries": [{"sql": "SELECT 1", "database": "../../../etc/passwd"}]}, 400, "not a file under the configured root"),
    ({"queries": [{"sql": "SELECT 1", "db_id": "../x"}]}, 400, "not a database name"),
    ({"queries": [{"sql": "SELECT 1", "db_id": "d" * 300}]}, 400, "queries[0].db_id: longer than 128 characters"),
    ({"queries": [{"sql": "SELECT 1", "db_id": ["x"]}]}, 400, "queries[0].db_id: expected a string, found list"),
    ({"queries": [{"sql": "SELECT 1", "database": "a\u0000b"}]}, 400, "queries[0].database: a NUL character"),
    ({"queries": [{"sql": "SELECT 1", "question": "\ud800"}]}, 400, "queries[0].question: not valid Unicode"),
    ({"queries": [{"sql": "SELECT 1", "question_id": "\udfff"}]}, 400, "queries[0].question_id: not valid"),
    ({"queries": [{"sql": "SELECT '\ud800'"}]}, 400, "queries[0].sql: not valid Unicode"),
    ({"queries": [{"sql": "SELECT 1", "question_id": {"a": [1]}}]}, 400, "queries[0].question_id: expected"),
    ({"queries": [{"sql": "SELECT 1", "database": "x" * 300}]}, 400, "not a file under the configured root"),
    ({"queries": [{"sql": "SELECT 1 OR " * 1000 + "1"}]}, 413, "queries[0].sql: 12001 characters; at most 10000"),
    ({"queries": []}, 400, "non-empty list"),
    ({"queries": [{"question": "no sql"}]}, 400, "queries[0].sql: needs a string"),
    ({"queries": ["SELECT 1"]}, 400, "queries[0]: expected a query (an object with \"sql\")"),
    # one query at the body's top: its fields named as the client wrote them (not queries[0])
    ({"db_id": "concert_singer", "sql": None}, 400, "sql: needs a string"),
    ({"db_id": "concert_singer"}, 400, "sql: missing (one query's fields"),
    ({"sql": 1}, 400, "sql: expected a string, found int"),  # the field as the client wrote it
    ({"queries": [{"sql": ["SELECT 1"]}]}, 400, "queries[0].sql: expected a string, found list"),
    ({"sql": "SELECT 1", "database": "mysql+pymysql://u:pw@h/db"}, 400, "database: a URL is not taken in a request"),
    ({"queries": [{"sql": "SELECT 1", "database": "postgresql://h/db"}]}, 400, "queries[0].database: a URL is not"),
    ([1, 2], 400, "body must be a JSON object"),
    ({"queries": [{"sql": "SELECT 1"}], "sql": "SELECT 2"}, 400, "both \"queries\" and \"sql\""),
    # a key nothing reads (a misspelt field) is named, not dropped: the query is not scored without it
    ({"queries": [{"sql": "SELECT 1", "databse": "x"}]}, 400,
     "queries[0]: unknown field 'databse' (known: sql, question, evidence, system, db_id, question_id, database, "),
    ({"sql": "SELECT 1", "dialekt": "postgres"}, 400, "unknown field 'dialekt' (known: sql, "),
    ({"queries": [{"sql": "SELECT 1"}], "verdict": True}, 400, "unknown field 'verdict' (known: queries, verdicts)"),
    ({"queries": [{"sql": "SELECT 1", "verdicts": True}]}, 400, "queries[0]: unknown field 'verdicts'"),
])
def test_bad_requests_are_4xx_with_a_message(service, body, status, message):
    got, answer = post(service[0], body)
    assert got == status and message in answer["detail"]


def test_choose_answers_each_candidate_and_the_one_most_share(service):
    """POST /choose: the candidates of one question scored as /score scores them, and the one
    Scorer.choose chooses (the tree most candidates share; the demo model reads no other answers)."""
    url, objects = service
    e = objects["table"].examples[0]
    table, columns = next(iter(e.schema_tables.items()))
    candidates = [f"SELECT {columns[0]} FROM {table}", e.sql, "SELECT * FROM (", f"  {e.sql}\n"]
    status, body = post(url, {"candidates": candidates, "db_id": e.db_id, "question": e.question}, path="/choose")
    assert status == 200 and len(body["results"]) == 4, body
    assert "cannot parse" in body["results"][2]["error"]
    trees = [tree_of({"node_names": [n["label"] for n in r["nodes"]],
                      "node_arity": [len(n["children"]) for n in r["nodes"]]}).hash if "nodes" in r else None
             for r in body["results"]]
    sharing = [i for i, t in enumerate(trees) if t == trees[1]]
    assert body["chosen"] in sharing and body["agreeing"] == len(sharing) and sharing[-1] == 3
    status, checked = post(url, {"candidates": candidates, "db_id": e.db_id, "question": e.question,
                                 "verdicts": True}, path="/choose")
    assert status == 200 and checked["chosen"] == body["chosen"]
    status, unknown = post(url, {"candidates": ["SELECT 1"], "db_id": "nope"}, path="/choose")
    assert status == 200 and unknown["chosen"] is None and unknown["results"][0]["error"] == "unknown db_id 'nope'"
    for bad, code, message in (({"candidates": []}, 400, "candidates: a non-empty list of SQL strings"),
                               ({"candidates": ["SELECT 1", 2]}, 400, "candidates[1]: expected a string of SQL, found int"),
                               ({"sql": "SELECT 1"}, 400, "candidates: a non-empty list of SQL strings"),
                               ({"candidates": ["SELECT 1"] * 17}, 413, "17 candidates in one request; at most 16"),
                               ({"candidates": ["SELECT 1", "SELECT '\ud800'"]}, 400, "candidates[1]: not valid"),
                               ({"candidates": ["SELECT 1", "SELECT '\x00'"]}, 400, "candidates[1]: a NUL character"),
                               ({"candidates": ["SELECT 1"], "database": "../../etc/passwd"}, 400,
                                "database '../../etc/passwd': not a file under the configured root"),
                               ({"candidates": ["SELECT 1"], "database": "a\x00b"}, 400, "database: a NUL character"),
                               ({"candidates": ["SELECT 1 OR " * 1000 + "1"]}, 413, "candidates[0]: 12001 characters"),
                               ({"candidates": ["SELECT 1"], "question": "q" * 4001}, 400, "question: 4001 characters"),
                               ({"candidates": ["SELECT 1"], "dialekt": "mysql"}, 400,
                                "unknown field 'dialekt' (known: candidates, db_id, question, evidence, dialect, "),
                               ([1], 400, "body must be a JSON object")):
        got, answer = post(url, bad, path="/choose")
        assert got == code and answer["detail"].startswith(message), (bad, answer)


def test_links_are_read_by_one_rule_and_choose_takes_at_most_max_candidates(boosted_model, tmp_path):  # noqa: F811
    """A ``database`` path and a db_id's folder are read by one rule (``file_under``): a link
    that stays under --data-root is read, one that leads out of it is not (a path: 400), and a
    loop of links is a 400, not a 500; /choose takes at most ``MAX_CANDIDATES`` candidates,
    whatever --max-queries allows."""
    import sqlite3

    from model.scoring.choice import MAX_CANDIDATES
    from model.synth.demo import demo_root

    folder, _ = boosted_model
    root, outside = tmp_path / "root", tmp_path / "outside"
    shutil.copytree(demo_root(), root)
    shutil.move(root / "database" / "supply_chain", outside)  # its folder a link out of the root
    (root / "database" / "supply_chain").symlink_to(outside)
    (root / "inside.sqlite").symlink_to(root / "database" / "clinic" / "clinic.sqlite")
    (root / "loop.sqlite").symlink_to(root / "loop.sqlite")
    assert sqlite3.connect(outside / "supply_chain.sqlite").execute("SELECT count(*) FROM suppliers").fetchone()[0]
    proc, url = start_service(folder, root, "--max-queries", str(MAX_CANDIDATES + 10))
    try:
        for given in ("loop.sqlite", "database/supply_chain/supply_chain.sqlite"):
            status, answer = post(url, {"sql": "SELECT 1", "database": given})
            assert status == 400 and answer["detail"] == f"database {given!r}: not a file under the configured root"
        status, inside = post(url, {"sql": "SELECT 1", "database": "inside.sqlite"})
        assert status == 200 and "error" not in inside["results"][0]
        status, checked = post(url, {"db_id": "supply_chain", "question": "Suppliers in Germany?", "sql": TYPO},
                               path="/check")  # its schema known, its file out of the root: not read
        assert status == 200 and not any("not a value of" in r for r in checked["results"][0]["reasons"])
        many = {"candidates": ["SELECT 1"] * (MAX_CANDIDATES + 1)}
        status, answer = post(url, many, path="/choose")
        assert status == 413 and answer["detail"] == f"{MAX_CANDIDATES + 1} candidates in one request; at most 64"
        assert post(url, {"queries": [{"sql": "SELECT 1"}] * (MAX_CANDIDATES + 1)})[0] == 200  # /score: --max-queries
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_invalid_json_and_oversized_bodies(service):
    assert post(service[0], None, raw=b"{not json")[0] == 400
    # a key given twice: the client meant one of them (json would keep the last silently)
    status, answer = post(service[0], None, raw=b'{"queries": [{"sql": "SELECT 1", "sql": "SELECT 2"}]}')
    assert status == 400 and answer["detail"] == "key 'sql' given twice in one object", answer
    # valid JSON, but an integer longer than Python reads (sys.get_int_max_str_digits)
    status, answer = post(service[0], None, raw=b'{"sql": "SELECT 1", "question_id": ' + b"9" * 5000 + b"}")
    assert status == 400 and answer["detail"] == "body has an integer of more than 4300 digits", answer
    # refused on its content-length, before the body is read: the client sends only the headers
    # (sending 1.1 MB races the server's early answer and can end in a broken pipe)
    import http.client
    import urllib.parse

    where = urllib.parse.urlsplit(service[0])
    connection = http.client.HTTPConnection(where.hostname, where.port, timeout=60)
    connection.putrequest("POST", "/score")
    connection.putheader("Content-Type", "application/json")
    connection.putheader("Content-Length", "1100000")
    connection.endheaders()
    response = connection.getresponse()
    assert response.status == 413 and "bytes" in json.loads(response.read())["detail"]
    connection.close()


def _exchange(url: str, body: bytes, headers: dict) -> tuple[int, dict]:
    """POST ``body`` to /score with exactly ``headers`` (urllib would add a Content-Type)."""
    import http.client

    where = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(where.hostname, where.port, timeout=60)
    connection.putrequest("POST", "/score", skip_host="Host" in headers)
    for name, value in {"Content-Length": str(len(body)), **headers}.items():
        connection.putheader(name, value)
    connection.endheaders(body)
    response = connection.getresponse()
    answer = response.status, json.loads(response.read())
    connection.close()
    return answer


def test_only_json_from_loopback_names_is_answered(service):
    url, objects = service
    e = objects["table"].examples[0]
    body = json.dumps({"db_id": e.db_id, "question": e.question, "sql": e.sql}).encode()
    port = urllib.parse.urlsplit(url).port
    json_type = {"Content-Type": "application/json; charset=utf-8"}
    assert _exchange(url, body, json_type)[0] == 200
    assert _exchange(url, body, {**json_type, "Host": f"localhost:{port}"})[0] == 200
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
        status, answer = _exchange(url, body, {"Content-Type": content_type})
        assert status == 415 and "application/json" in answer["detail"]
    status, answer = _exchange(url, body, {})
    assert status == 415 and "(none)" in answer["detail"]
    import gzip  # a compressed body is refused, not opened (no bombs), and not called "not valid JSON"

    status, answer = _exchange(url, gzip.compress(body), {**json_type, "Content-Encoding": "gzip"})
    assert status == 415 and answer["detail"].startswith("Content-Encoding 'gzip': "), answer
    assert _exchange(url, body, {"Content-Type": 'Application/JSON; Charset="UTF-8"'})[0] == 200
    for charset in ("latin-1", "utf-16"):  # JSON is UTF-8: another charset is refused, not read as UTF-8
        status, answer = _exchange(url, body, {"Content-Type": f"application/json; charset={charset}"})
        assert status == 415 and answer["detail"] == f"charset {charset!r}: the body must be UTF-8", answer
    # a page of another site whose name resolves to 127.0.0.1 (DNS rebinding)
    status, answer = _exchange(url, body, {**json_type, "Host": f"evil.example:{port}"})
    assert status == 400 and "evil.example" in answer["detail"]


def test_a_long_question_is_refused_and_evidence_is_read(service):
    url, objects = service
    e = objects["table"].examples[0]
    query = {"db_id": e.db_id, "question": e.question, "sql": e.sql}
    status, answer = post(url, {"queries": [{**query, "question": "name " * 1000}]})
    assert status == 400 and answer["detail"] == "queries[0].question: 5000 characters; at most 4000"
    status, answer = post(url, {"queries": [{**query, "evidence": "e" * 4001}]})
    assert status == 400 and "queries[0].evidence: 4001 characters" in answer["detail"]
    from model.data.datasets import load_schemas

    tables = load_schemas(objects["table"].root)[e.db_id].tables
    evidence = " ".join(f"{t} {' '.join(c)}" for t, c in tables.items())
    plain, read = (post(url, {"queries": [q]})[1]["results"][0]
                   for q in (query, {**query, "evidence": evidence}))
    assert [n["confidence"] for n in plain["nodes"]] != [n["confidence"] for n in read["nodes"]]


def test_concurrent_clients_all_succeed(service):
    url, objects = service
    examples = objects["table"].examples[:40]

    def call(e):
        return post(url, {"queries": [{"db_id": e.db_id, "question": e.question, "sql": e.sql}]})

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(call, examples))
    assert [s for s, _ in answers] == [200] * len(examples)
    for e, (_, body) in zip(examples, answers):
        assert [n["label"] for n in body["results"][0]["nodes"]] == list(e.node_names)


def test_page_is_served(service):
    page = urllib.request.urlopen(service[0] + "/").read().decode()
    assert "<form" in page and "/score" in page and "{{" not in page


def test_page_shows_the_coloured_sql_in_headless_chromium(service, tmp_path):
    # .ci/run installs Debian's chromium where it can; elsewhere this is skipped
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    url, objects = service
    e = objects["table"].examples[0]
    dom = servers.page_dom(chromium, url, {"db_id": e.db_id, "question": e.question, "sql": e.sql}, tmp_path / "a")
    assert 'id="sql"' in dom and 'class="s' in dom and "Look here first" in dom, dom[-2000:]
    assert f'<option value="{e.db_id}">' in dom and "← look here first" in dom  # the databases, the tree's mark
    assert dom.count('<li><span class="c" style="background:hsl(') == len(e.node_names)  # one tree item a node
    assert '<p id="verdict"><b>Verdict: ' in dom and '<pre class="feedback">' in dom  # (POST /check)
    bad = servers.page_dom(chromium, url, {"db_id": e.db_id, "question": "q", "sql": "SELECT * FROM ("}, tmp_path / "b")
    assert '<p class="err">' in bad and "cannot parse" in bad, bad[-2000:]
    # spans count code points; JavaScript strings count UTF-16 units, two for an emoji
    table, columns = next(iter(e.schema_tables.items()))
    sql = f"SELECT {columns[0]} FROM {table} WHERE {columns[0]} = '\U0001F600\U0001F600' OR {columns[0]} = 'zq'"
    emoji = servers.page_dom(chromium, url, {"db_id": e.db_id, "question": "q", "sql": sql}, tmp_path / "c")
    assert ">'\U0001F600\U0001F600'</span>" in emoji and "\ufffd" not in emoji, emoji[-2000:]
    assert ">'zq'</span>" in emoji, emoji[-2000:]  # a span after the emoji is where it was
    assert emoji.count(f"· {UNFAMILIAR.format(kind='Or')}") == 1  # (nodes[].unfamiliar, as rat-score says it)
    bidi = servers.page_dom(chromium, url, {"db_id": e.db_id, "question": "q", "sql": sql.replace("'zq'", "'z\u202eq'")},
                     tmp_path / "d")
    assert "&lt;U+202E&gt;" in bidi and "\u202e" not in bidi, bidi[-2000:]  # shown, not obeyed


def test_a_deeply_nested_body_is_a_400(service):
    status, answer = post(service[0], None, raw=b"[" * 100_000 + b"]" * 100_000)
    assert status == 400 and answer["detail"] == "body is nested too deeply"


def _or_query(objects, terms: int) -> tuple[str, str]:
    """(db_id, a query ORing ``terms`` comparisons on one column of the first example's database)."""
    from model.data.datasets import load_schemas

    e = objects["table"].examples[0]
    schema = load_schemas(objects["table"].root)[e.db_id]
    table = next(iter(schema.tables))
    column = schema.tables[table][0]
    return e.db_id, f"SELECT {column} FROM {table} WHERE " + " OR ".join(f"{column} = {i}" for i in range(terms))


def test_the_hostile_or_query_is_answered_within_the_limit_and_health_stays_quick(service):
    url, objects = service
    db_id, huge = _or_query(objects, 1000)  # the 1,000 terms: over the SQL size limit
    start = time.monotonic()
    status, answer = post(url, {"queries": [{"db_id": db_id, "sql": huge}]})
    assert status == 413 and "at most 10000" in answer["detail"] and time.monotonic() - start < 5
    db_id, many = _or_query(objects, 200)  # under the size limit, over the node limit: an error row
    start = time.monotonic()
    status, answer = post(url, {"queries": [{"db_id": db_id, "sql": many}]})
    assert status == 200 and "nodes; at most 500 are scored" in answer["results"][0]["error"]
    assert time.monotonic() - start < 5
    # heavy queries just under the node limit, 6 at once and 18 in all (the service scores 2 at a
    # time; 18 keep it busy long enough on a quiet machine for /health to be asked 5+ times):
    # /health answers at once all along
    db_id, heavy = _or_query(objects, 160)
    latencies = []
    with ThreadPoolExecutor(6) as pool:
        calls = [pool.submit(post, url, {"queries": [{"db_id": db_id, "sql": heavy}]}) for _ in range(18)]
        while not all(c.done() for c in calls):
            start = time.monotonic()
            urllib.request.urlopen(url + "/health", timeout=10).read()
            latencies.append(time.monotonic() - start)
            time.sleep(0.05)
        statuses = [c.result()[0] for c in calls]
    assert set(statuses) <= {200, 503} and len(latencies) >= 5
    assert sorted(latencies)[int(0.95 * (len(latencies) - 1))] < 0.25, latencies


def _raw_exchange(url: str, head: bytes, body_chunks=(), wait_s: float = 20) -> bytes:
    """What the server answers to a raw request head (and chunks), read until it closes, its
    answer is complete or ``wait_s`` passes."""
    where = urllib.parse.urlsplit(url)
    with socket.create_connection((where.hostname, where.port), timeout=wait_s) as s:
        s.sendall(head)
        try:
            for chunk in body_chunks:
                s.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        answer = b""
        try:
            while data := s.recv(65536):
                answer += data
                head_end = answer.find(b"\r\n\r\n")
                if head_end >= 0 and b"content-length: " in answer[:head_end].lower():
                    length = int(answer[:head_end].lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                    if len(answer) >= head_end + 4 + length:
                        break
        except (TimeoutError, ConnectionResetError):
            pass
        return answer


def test_a_chunked_body_is_refused_while_it_is_read(service):
    # 1.5 MB sent in chunks, and then the body never ends: the 413 has to come from counting
    # the chunks as they arrive, since the server cannot wait for the end of the body
    head = b"POST /score HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    chunk = b"%x\r\n%s\r\n" % (65536, b" " * 65536)
    start = time.monotonic()
    answer = _raw_exchange(service[0], head, [chunk] * 24, wait_s=15)
    assert answer.startswith(b"HTTP/1.1 413") and b"request body over" in answer, answer[:300]
    assert time.monotonic() - start < 10


def test_slow_bodies_hold_up_no_other_request_and_bodies_held_at_once_are_bounded(boosted_model):  # noqa: F811
    """Bodies are received before they wait for anything: clients that send a head and part of
    a body, then stop, leave the others' requests unhindered and are answered 408 at their
    deadline. The bytes of bodies being received in a process are bounded (16 bodies of the
    largest size): past them a request is a 503 at once, until those clients go. A client that
    goes away mid-body is no traceback in the log."""
    folder, objects = boosted_model
    proc, url = start_service(folder, objects["table"].root, "--processes", "1", "--timeout-s", "4")
    e = objects["table"].examples[0]
    query = {"db_id": e.db_id, "question": e.question, "sql": e.sql}
    where = urllib.parse.urlsplit(url)

    def partial_body(length: int, sent: bytes) -> socket.socket:
        s = socket.create_connection((where.hostname, where.port), timeout=10)
        s.sendall(b"POST /score HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n%s" % (length, sent))
        return s

    try:
        slow = [partial_body(1000, b"{") for _ in range(8)]
        time.sleep(0.3)
        start = time.monotonic()
        status, answer = post(url, query)
        assert status == 200 and time.monotonic() - start < 1.5, (status, answer)
        for s in slow:
            answer = b""
            while data := s.recv(65536):  # until the server closes the connection
                answer += data
            assert answer.startswith(b"HTTP/1.1 408") and b"request body not received within 4 s" in answer, answer
            s.close()
        big = [partial_body(1_000_000, b" " * 999_999) for _ in range(16)]
        deadline, refused = time.monotonic() + 2, None
        while refused is None and time.monotonic() < deadline:  # until the server has received them
            start = time.monotonic()
            status, answer = post(url, query)
            refused = (answer, time.monotonic() - start) if status == 503 else None
        assert refused is not None and refused[1] < 1, refused
        assert refused[0]["detail"].startswith("busy: 16000000 bytes of request bodies"), refused
        for s in big:
            s.close()
        time.sleep(0.3)
        assert post(url, query)[0] == 200
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    log = proc.stderr.read()
    assert "Traceback" not in log and "ClientDisconnect" not in log, log[-3000:]


def test_a_connection_that_never_finishes_its_head_is_closed(service):
    start = time.monotonic()
    answer = _raw_exchange(service[0], b"POST /score HTTP/1.1\r\nHost: x\r\nX-Slow: ", wait_s=20)
    assert answer == b"" and time.monotonic() - start < 6  # the fixture's --header-timeout-s 2


def test_a_body_trickling_in_after_its_response_does_not_hold_the_connection(service):
    # /health reads no body: uvicorn would go on reading one announced as 900 KB for as long as
    # it trickles in; the connection is closed a head timeout (the fixture's 2 s) after the answer
    where = urllib.parse.urlsplit(service[0])
    with socket.create_connection((where.hostname, where.port), timeout=0.5) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 900000\r\n\r\n")
        start, answer, closed = time.monotonic(), b"", False
        while not closed and time.monotonic() - start < 20:
            try:
                s.sendall(b" ")
                data = s.recv(65536)
                closed, answer = not data, answer + data
            except TimeoutError:
                pass
            except (BrokenPipeError, ConnectionResetError):
                closed = True
    assert answer.startswith(b"HTTP/1.1 200") and closed and time.monotonic() - start < 8


def test_bad_options_and_a_port_it_cannot_listen_on_are_one_line_and_exit_2():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        for options, says in ((["--port", "99999"], "--port 99999: expected a port number from 0 to 65535"),
                              (["--port", port], f"--host 127.0.0.1 --port {port}: cannot listen there"),
                              (["--host", "999.1.1.1", "--port", "0", "--public"], "--host 999.1.1.1 --port 0: cannot listen"),
                              (["--timeout-s", "nan"], "--timeout-s must be a positive number, found nan"),
                              (["--header-timeout-s", "inf"], "--header-timeout-s must be a positive number"),
                              (["--allowed-host", ""], "--allowed-host: an empty name"),
                              (["--host", "0.0.0.0", "--port", "0"], "--host 0.0.0.0: anyone who reaches the port"),
                              (["--token-file", "/nonexistent"], "--token-file /nonexistent: cannot be read")):
            done = subprocess.run([sys.executable, "-m", "model.scoring.service", *options], env=ENV,
                                  capture_output=True, text=True, timeout=120, check=False)
            assert done.returncode == 2 and done.stderr.startswith(f"rat-serve: error: {says}"), done.stderr
            assert done.stderr.count("\n") == 1, done.stderr


def test_a_token_is_asked_of_every_request_but_health_and_the_page(boosted_model, tmp_path):  # noqa: F811
    """With a token (--token-file; needed beyond the loopback interface), a request without
    ``Authorization: Bearer <token>``, or with another token, is a 401 naming what it needs;
    /health and the page answer without it, and the page asks for it (headless Chromium)."""
    folder, objects = boosted_model
    token = "k3y-" + "x" * 28
    (tmp_path / "token").write_text(token + "\n")
    (tmp_path / "short").write_text("x" * 15)
    done = subprocess.run([sys.executable, "-m", "model.scoring.service", "--token-file", str(tmp_path / "short")],
                          env=ENV, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2 and "a token of at least 16 visible ASCII characters" in done.stderr, done.stderr
    done = subprocess.run([sys.executable, "-m", "model.scoring.service", "--token-file", str(tmp_path / "token"),
                           "--public"], env=ENV, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2 and done.stderr.startswith("rat-serve: error: --public and a token"), done.stderr
    proc, url = start_service(folder, objects["table"].root, "--token-file", str(tmp_path / "token"))
    try:
        e = objects["table"].examples[0]
        body = json.dumps({"db_id": e.db_id, "question": e.question, "sql": e.sql}).encode()

        def call(path: str, given: str | None, data: bytes | None = None) -> tuple:
            headers = {"Content-Type": "application/json", **({"Authorization": given} if given else {})}
            request = urllib.request.Request(url + path, data=data, headers=headers)
            try:
                with urllib.request.urlopen(request, timeout=60) as r:
                    return r.status, json.loads(r.read()) if path != "/" else {}, r.headers
            except urllib.error.HTTPError as error:
                return error.code, json.loads(error.read()), error.headers

        for given in (None, "Bearer " + "y" * len(token), token, "Bearer " + token[:-1], "Basic " + token):
            for path, data in (("/databases", None), ("/score", body)):
                status, answer, headers = call(path, given, data)
                assert status == 401 and headers["WWW-Authenticate"] == "Bearer", (path, given)
                assert answer["detail"] == "this service needs its token: Authorization: Bearer <token>"
        assert call("/health", None)[0] == 200 and call("/", None)[0] == 200
        status, answer, _ = call("/score", "Bearer " + token, body)
        assert status == 200 and [n["label"] for n in answer["results"][0]["nodes"]] == list(e.node_names)
        for given in ("bearer " + token, "BEARER  " + token):  # the scheme in any case (RFC 7235)
            assert call("/score", given, body)[0] == 200, given
        assert e.db_id in call("/databases", "Bearer " + token)[1]["databases"]
        chromium = shutil.which("chromium") or shutil.which("chromium-browser")
        if chromium is not None:  # the page shows the token field and the 401's message
            dom = servers.page_dom(chromium, url, {"db_id": e.db_id, "question": e.question, "sql": e.sql}, tmp_path / "p")
            assert '<label id="auth">' in dom, dom[:3000]
            assert '<div id="out"><p class="err">this service needs its token: Authorization' in dom, dom[:3000]
            # a link with the token after #: the page keeps it for the tab and scores
            query = {"db_id": e.db_id, "question": e.question, "sql": e.sql}
            dom = servers.page_dom(chromium, url, query, tmp_path / "q", fragment=f"#token={token}")
            assert dom.count('<li><span class="c" style="background:hsl(') == len(e.node_names), dom[-3000:]
            assert '<label id="auth" hidden="">' in dom and f"<option value=\"{e.db_id}\">" in dom
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_check_answers_verdicts_under_the_models_policy(service):
    """POST /check: each query's verdict (run | review | regenerate) under the model's policy,
    with its feedback and the part to look at, a literal not stored in its column named with the
    closest stored values (the shipped model, a named connection); a bad row is an error row."""
    url, _ = service
    request = urllib.request.Request(url + "/check", headers={"Content-Type": "application/json"}, data=json.dumps(
        {"queries": [{"db_id": "supply_chain", "question": "Suppliers in Germany?", "sql": TYPO},
                     {"db_id": "supply_chain", "question": "q", "sql": "SELECT * FROM ("}]}).encode())
    with urllib.request.urlopen(request, timeout=60) as r:
        assert r.status == 200
        verdict, bad = json.loads(r.read())["results"]
    assert verdict["action"] in ("run", "review", "regenerate") and verdict["db_id"] == "supply_chain"
    assert TYPO[slice(*verdict["look_here_first"]["span"])] == verdict["look_here_first"]["text"]
    assert verdict["feedback"] and verdict["policy"] and verdict["sql"] == TYPO
    assert "cannot parse" in bad["error"]
    status, plain = post(url, {"db_id": "supply_chain", "question": "Suppliers in Germany?", "sql": TYPO})
    assert status == 200 and plain["results"][0]["query_confidence"] == verdict["query_confidence"]
    assert "verdict" not in plain["results"][0]
    # /score with "verdicts": the scored row and its verdict beside it (what the page asks: scored once)
    status, both = post(url, {"db_id": "supply_chain", "question": "Suppliers in Germany?", "sql": TYPO,
                              "verdicts": True})
    row = both["results"][0]
    assert status == 200 and row["nodes"] and row["verdict"] == {k: v for k, v in verdict.items()
                                                                 if k not in ("sql", "db_id")}
    status, answer = post(url, {"sql": TYPO, "verdicts": "yes"})
    assert status == 400 and answer["detail"] == "verdicts: true or false"
    # the shipped model, a named connection: the literal looked up in the database, in the scoring thread
    from model.synth.demo import demo_root

    database = demo_root() / "database" / "supply_chain" / "supply_chain.sqlite"
    proc, shipped = servers.start_service("--model", "pretrained", "--database", f"shop=sqlite:///{database}", env=ENV)
    try:
        request = urllib.request.Request(shipped + "/check", headers={"Content-Type": "application/json"},
                                         data=json.dumps({"db_id": "shop", "question": "Suppliers in Germany?",
                                                          "sql": TYPO}).encode())
        with urllib.request.urlopen(request, timeout=60) as r:
            (verdict,) = json.loads(r.read())["results"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert verdict["action"] in ("review", "regenerate") and verdict["look_here_first"]["text"] == "'Germani'"
    assert "the literal 'Germani' is not a value of suppliers.country; closest: 'Germany'" in verdict["reasons"]


def test_api_docs_are_off_and_the_page_has_a_content_security_policy(service):
    for path in ("/docs", "/redoc", "/openapi.json"):
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(service[0] + path)
        assert e.value.code == 404
    with urllib.request.urlopen(service[0] + "/") as r:
        policy = r.headers["Content-Security-Policy"]
    scripts = policy.split("script-src ")[1].split(";")[0]
    assert scripts.startswith("'sha256-") and "unsafe" not in scripts and "default-src 'none'" in policy


def test_api_docs_describe_each_operation_once_with_its_body_and_errors(boosted_model, tmp_path):  # noqa: F811
    """With --api-docs, /openapi.json is a valid spec a client generator reads: one operation id
    each (GET and HEAD of one route were two operations of one id), the JSON body each POST
    reads (its handler reads the raw request: FastAPI knew none) and the errors it answers."""
    import jsonschema

    folder, objects = boosted_model
    proc, url = start_service(folder, objects["table"].root, "--api-docs")
    try:
        spec = json.loads(urllib.request.urlopen(url + "/openapi.json").read())
        e = objects["table"].examples[0]
        good = {"/score": [{"queries": [{"db_id": e.db_id, "question": e.question, "sql": e.sql}]},
                           {"db_id": e.db_id, "sql": e.sql, "question_id": 7, "verdicts": True}],
                "/choose": [{"candidates": ["SELECT 1", "SELECT 2"], "db_id": e.db_id, "question": "q"}]}
        for path, bodies in good.items():  # what the spec allows, the service takes
            schema = spec["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
            for body in bodies:
                jsonschema.validate(body, schema)
                assert post(url, body, path=path)[0] == 200
            wrong = {**bodies[0], "databse": "x"}  # and what it refuses, the spec does not allow
            assert post(url, wrong, path=path)[0] == 400
            with pytest.raises(jsonschema.ValidationError):
                jsonschema.validate(wrong, schema)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    ids = [op["operationId"] for methods in spec["paths"].values() for op in methods.values()]
    assert len(ids) == len(set(ids)) == 6 and "Duplicate Operation ID" not in proc.stderr.read()
    for path in ("/score", "/check", "/choose"):
        operation = spec["paths"][path]["post"]
        assert operation["requestBody"]["required"] is True
        assert {"400", "408", "413", "415", "503"} <= set(operation["responses"]), operation["responses"]
    assert "404" in spec["paths"]["/check"]["post"]["responses"]
    validator = pytest.importorskip("openapi_spec_validator")
    validator.validate(spec)


def test_hostile_labels_run_no_handler_in_headless_chromium(service, tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    url, objects = service
    db_id, _ = _or_query(objects, 1)
    from model.data.datasets import load_schemas

    schema = load_schemas(objects["table"].root)[db_id]
    table = next(iter(schema.tables))
    column = schema.tables[table][0]
    # the literal breaks out of a double-quoted attribute and focuses itself; another is markup
    hostile = 'x" autofocus tabindex="1" onfocus="document.body.dataset.pwned=1" y="'
    markup = "<img src=x onerror=document.body.dataset.pwned=2>"
    sql = f"SELECT {column} FROM {table} WHERE {column} = '{hostile}' OR {column} = '{markup}'"
    status, answer = post(url, {"queries": [{"db_id": db_id, "sql": sql}]})
    assert status == 200 and any(hostile in n["label"] for n in answer["results"][0]["nodes"])
    dom = servers.page_dom(chromium, url, {"db_id": db_id, "question": "q", "sql": sql}, tmp_path / "p")
    assert 'id="sql"' in dom and "Look here first" in dom, dom[-2000:]
    assert "pwned" in dom  # the labels are shown, as text
    tags, attributes = _markup(dom)
    assert "img" not in tags and not attributes & {"onfocus", "onerror", "autofocus", "data-pwned"}, dom[-3000:]


def _markup(dom: str) -> tuple[set[str], set[str]]:
    """The element names and attribute names of a page's DOM."""
    from html.parser import HTMLParser

    tags: set[str] = set()
    attributes: set[str] = set()

    class Reader(HTMLParser):
        def handle_starttag(self, tag, attrs):
            tags.add(tag)
            attributes.update(name for name, _ in attrs)

    Reader().feed(dom)
    return tags, attributes


def _children(pid: int) -> set[int]:
    from pathlib import Path

    return {int(c) for task in Path(f"/proc/{pid}/task").glob("*")
            for c in (task / "children").read_text().split()}


def test_processes_answer_like_one_keep_the_bounds_and_stop_together(service, boosted_model):  # noqa: F811
    import signal

    url_one, objects = service
    folder, _ = boosted_model
    proc, url = start_service(folder, objects["table"].root, "--processes", "2")
    try:
        first = _children(proc.pid)
        assert len(first) == 2
        examples = objects["table"].examples[:24]
        bodies = [{"queries": [{"db_id": e.db_id, "question": e.question, "sql": e.sql}]} for e in examples]
        with ThreadPoolExecutor(8) as pool:  # 8 connections at once: both processes take some
            many = list(pool.map(lambda b: post(url, b), bodies))
            bounds = list(pool.map(lambda b: post(url, b), [{"queries": [{"sql": "SELECT 1"}] * 17}] * 8))
        assert many == [post(url_one, b) for b in bodies]  # the same answers as one process gives
        assert all(s == 413 and "at most 16" in a["detail"] for s, a in bounds)
        os.kill(min(first), signal.SIGKILL)  # a process that dies is replaced
        for _ in range(100):
            if len(_children(proc.pid) - first) == 1:
                break
            time.sleep(0.1)
        assert len(_children(proc.pid)) == 2 and len(_children(proc.pid) - first) == 1
        assert all(post(url, b)[0] == 200 for b in bodies[:4])
        children = _children(proc.pid)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
        assert not any(os.path.exists(f"/proc/{c}") for c in children)  # none left behind
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_heavy_requests_are_scored_in_their_own_paced_lane_with_the_same_answer():
    """A request whose SQL has more than ``heavy_words`` words and signs (one long query, or many
    short ones) is scored in the heavy lane: its own thread, paced; the answer is the one the
    normal lane gives. Every scoring thread runs scikit-learn's OpenMP loops on itself alone."""
    import threading

    from fastapi.testclient import TestClient
    from sklearn.utils._openmp_helpers import _openmp_effective_n_threads

    from model.data import execution
    from model.data.datasets import load_schemas
    from model.scoring import Scorer
    from model.scoring.service import LITERAL_WORDS_PER_MB, SQL_WORDS, create_app
    from model.synth.demo import demo_root

    class Noting:  # the real scorer, noting where each request is scored
        def __init__(self, scorer):
            self.scorer, self.seen = scorer, []

        def __getattr__(self, name):
            return getattr(self.scorer, name)

        def score_many(self, *args, **options):
            self.seen.append((threading.current_thread().name.rsplit("_", 1)[0],
                              getattr(execution._PACE, "share", None), _openmp_effective_n_threads()))
            return self.scorer.score_many(*args, **options)

    root = demo_root()
    schemas = load_schemas(root)
    db_id = min(schemas)
    table = next(iter(schemas[db_id].tables))
    column = schemas[db_id].tables[table][0]
    small = {"db_id": db_id, "sql": f"SELECT {column} FROM {table} WHERE {column} = 1"}
    big = {"db_id": db_id, "sql": f"SELECT {column} FROM {table} WHERE "
                                  + " OR ".join(f"{column} = {i}" for i in range(80))}
    words = lambda queries: sum(len(SQL_WORDS.findall(q["sql"])) for q in queries)
    assert words([small]) < 300 < words([big]) and words([small] * 40) > 300
    scorer = Noting(Scorer.pretrained())
    client = TestClient(create_app(scorer, root, schemas, heavy_words=300))
    answers = [client.post("/score", json={"queries": q}) for q in ([small], [big], [small] * 40)]
    assert [a.status_code for a in answers] == [200] * 3
    assert [s[:2] for s in scorer.seen] == [("rat-score", None), ("rat-score-heavy", 0.25), ("rat-score-heavy", 0.25)]
    assert {s[2] for s in scorer.seen} == {1}
    # a string literal of a query scored with a database weighs its search of the database: the
    # same query, three literals, goes to the heavy lane with its database and not without one
    from model.scoring import service

    literals = f"SELECT {column} FROM {table} WHERE " + " OR ".join(f"{column} = 'v{i}'" for i in range(3))
    assert words([{"sql": literals}]) < 40
    service.LITERAL_WORDS_PER_MB = 1e6  # (the demo's files are small: each literal weighs its file's bytes)
    try:
        lanes = TestClient(create_app(scorer, root, schemas, heavy_words=40))
        for query in ({"db_id": db_id, "sql": literals}, {"sql": literals}):
            assert lanes.post("/score", json=query).status_code == 200
    finally:
        service.LITERAL_WORDS_PER_MB = LITERAL_WORDS_PER_MB
    assert [s[0] for s in scorer.seen[-2:]] == ["rat-score-heavy", "rat-score"]
    normal_lane = TestClient(create_app(scorer, root, schemas, heavy_words=10_000))
    assert normal_lane.post("/score", json={"queries": [big]}).json() == answers[1].json()
    assert scorer.seen[-1][:2] == ("rat-score", None)


def test_the_work_of_clients_that_go_is_dropped(boosted_model):  # noqa: F811
    """A client that closes its connection while its request is queued or scored leaves no work
    behind: queued, the request is dropped; running, it stops at its next deadline check. After
    slow requests whose clients went, a quick one is answered at once, not after them."""
    folder, objects = boosted_model
    proc, url = start_service(folder, objects["table"].root, "--processes", "1", "--workers", "1",
                              "--heavy-words", "1000000", "--timeout-s", "60")
    db_id, heavy = _or_query(objects, 160)
    body = json.dumps({"queries": [{"db_id": db_id, "sql": heavy}] * 16}).encode()
    e = objects["table"].examples[0]
    where = urllib.parse.urlsplit(url)
    try:
        start = time.monotonic()
        assert post(url, json.loads(body))[0] == 200
        one = time.monotonic() - start  # one slow request, alone
        clients = []
        for _ in range(6):
            s = socket.create_connection((where.hostname, where.port), timeout=10)
            s.sendall(b"POST /score HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            clients.append(s)
        time.sleep(0.5)
        for s in clients:
            s.close()
        start = time.monotonic()
        status, _ = post(url, {"db_id": e.db_id, "question": e.question, "sql": e.sql})
        waited = time.monotonic() - start
        assert status == 200 and waited < max(1.5, 2 * one), (waited, one)  # not the 6 slow ones' time
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    log = proc.stderr.read()
    assert "Traceback" not in log, log[-3000:]


SHOP = "CREATE TABLE suppliers (id INTEGER PRIMARY KEY, name TEXT, country TEXT);\n"
VENDORS = "SELECT count(*) FROM vendors"  # no such table in SHOP


def test_a_query_without_db_id_is_read_against_the_one_schema_served(tmp_path):
    """Serving one schema (``--schema shop.sql``), a query that names no db_id is read against
    it, as rat-score reads such a row (a table it lacks sends the query back), and the row names
    it as its db_id."""
    (tmp_path / "shop.sql").write_text(SHOP)
    question = "How many suppliers are there?"
    proc, url = servers.start_service("--model", "pretrained", "--schema", str(tmp_path / "shop.sql"), env=ENV)
    try:
        status, checked = post(url, {"sql": VENDORS, "question": question}, path="/check")
        assert status == 200 and checked["results"][0]["db_id"] == "shop", checked
        assert checked["results"][0]["action"] == "regenerate", checked
        named = post(url, {"sql": VENDORS, "question": question, "db_id": "shop"}, path="/check")[1]
        assert named["results"][0]["query_confidence"] == checked["results"][0]["query_confidence"]
        status, scored = post(url, {"queries": [{"sql": VENDORS, "question": question}]})
        assert status == 200 and scored["results"][0]["db_id"] == "shop"
        status, chosen = post(url, {"candidates": [VENDORS, "SELECT count(*) FROM suppliers"], "question": question},
                              path="/choose")
        assert status == 200 and chosen["chosen"] == 1 and [r["db_id"] for r in chosen["results"]] == ["shop"] * 2
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def deployed():
    """The shipped model on the demo databases with thresholds and a read time limit of the
    deployment's own (``--policy``, ``--query-timeout``)."""
    from model.synth.demo import demo_root

    proc, url = servers.start_service("--model", "pretrained", "--data-root", str(demo_root()), "--processes", "1",
                                      "--policy", "1,1", "--query-timeout", "0.5", env=ENV)
    yield url
    proc.terminate()
    proc.wait(timeout=10)


def test_policy_option_sets_the_thresholds_of_the_verdicts(deployed):
    right = {"db_id": "supply_chain", "question": "Suppliers in Germany?",
             "sql": "SELECT name FROM suppliers WHERE country = 'Germany'"}
    status, checked = post(deployed, right, path="/check")
    (verdict,) = checked["results"]
    assert status == 200 and verdict["action"] == "regenerate", verdict  # nothing reaches 1: all sent back
    assert verdict["policy"].startswith("thresholds given (run at 1.00 or above, regenerate below 1.00)")
    status, both = post(deployed, {**right, "verdicts": True})
    assert status == 200 and both["results"][0]["verdict"]["action"] == "regenerate"
    for options, says in ((["--policy", "0.3,0.5"], "--policy 0.3,0.5: regenerate_below 0.5 is above run_at 0.3"),
                          (["--policy", "0.9"], "--policy 0.9: expected RUN_AT,REGENERATE_BELOW"),
                          (["--policy", "0.9,x"], "--policy 0.9,x: 'x' is not a number"),
                          (["--policy", "1.5,0.2"], "--policy 1.5,0.2: run_at: expected a number in [0, 1], found 1.5"),
                          (["--query-timeout", "0"], "--query-timeout 0: expected seconds from 0.1 to --timeout-s (10)"),
                          (["--query-timeout", "30"], "--query-timeout 30: expected seconds from 0.1 to --timeout-s"),
                          (["--query-timeout", "nan"], "--query-timeout nan: expected seconds")):
        done = subprocess.run([sys.executable, "-m", "model.scoring.service", *options], env=ENV,
                              capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 2 and done.stderr.startswith(f"rat-serve: error: {says}") and done.stderr.count("\n") == 1, done.stderr


def test_query_timeout_option_bounds_each_read_of_the_database(deployed):
    slow = "SELECT count(*) FROM orders AS a, orders AS b, orders AS c, orders AS d, orders AS e"
    status, scored = post(deployed, {"db_id": "supply_chain", "question": "How many orders?", "sql": slow})
    assert status == 200 and scored["results"][0]["execution_error"] == "timeout after 0.5 s", scored


def test_rat_serve_accepts_a_connection_as_soon_as_it_prints_its_url():
    """The URL line means the port takes connections: a client that connects at once waits
    for its answer instead of being refused (the socket listened only once uvicorn started)."""
    proc = subprocess.Popen([sys.executable, "-m", "model.scoring.service", "--port", "0"], stderr=subprocess.PIPE,
                            text=True, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        lines = [proc.stderr.readline() for _ in range(1)]
        while "http://" not in lines[-1] and lines[-1] and len(lines) < 50:
            lines.append(proc.stderr.readline())
        url = lines[-1].strip().rsplit(" ", 1)[-1].rstrip("/")
        assert url.startswith("http://"), lines
        with urllib.request.urlopen(url + "/health", timeout=60) as answer:
            assert json.loads(answer.read())["status"] == "ok"
    finally:
        proc.terminate()  # (it ends its serving processes; a kill would leave them)
        proc.wait(timeout=30)
