"""rat-serve's life as an operator sees it, started for real on the demo databases: how it stops
(exit 0 on SIGTERM and SIGINT, /health "draining", answers that close their connection), its
processes ending with their parent, a refused body answered rather than reset, the access log,
and a db_id whose database file is missing told in the rows, the startup line and /health."""

import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request

import pytest

from tests import servers

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
# a query that runs until its read's time limit (--query-timeout 0.1): a request of n of them is
# being scored for about n / 10 s
SLOW = {"db_id": "supply_chain", "question": "How many orders?",
        "sql": "SELECT count(*) FROM orders AS a, orders AS b, orders AS c, orders AS d, orders AS e"}


def demo_root():
    from model.synth.demo import demo_root

    return demo_root()


def start(*options: str, root=None) -> tuple[subprocess.Popen, str, str]:
    """The shipped model served on ``root`` (the demo's databases), its URL and its startup line."""
    proc, url = servers.start_service("--model", "pretrained", "--data-root", str(root or demo_root()),
                                      *options, env=ENV)
    line = proc.stderr.readline()
    while line and "http://" not in line:
        line = proc.stderr.readline()
    return proc, url, line


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=10)


def children(pid: int) -> set[int]:
    from pathlib import Path

    try:
        return {int(c) for task in Path(f"/proc/{pid}/task").glob("*")
                for c in (task / "children").read_text().split()}
    except OSError:
        return set()


def running(pid: int) -> bool:
    """Whether ``pid`` is a process that has not ended (a zombie has)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def request(url: str, method: str, path: str, body=None) -> tuple[int, dict, dict]:
    """Status, headers (lower-case names) and JSON answer of one request on its own connection."""
    where = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(where.hostname, where.port, timeout=30)
    try:
        data = None if body is None else json.dumps(body).encode()
        conn.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
        answer = conn.getresponse()
        return answer.status, {k.lower(): v for k, v in answer.getheaders()}, json.loads(answer.read() or b"null")
    finally:
        conn.close()


def in_flight(url: str, body) -> tuple[threading.Thread, dict]:
    """``body`` POSTed to /score in a thread: its answer lands in the dict."""
    got: dict = {}

    def post() -> None:
        try:
            got["status"], got["headers"], got["body"] = request(url, "POST", "/score", body)
        except (OSError, http.client.HTTPException, ValueError) as e:  # (the test reads it)
            got["error"] = repr(e)

    thread = threading.Thread(target=post)
    thread.start()
    return thread, got


def sent_and_answered(url: str, head: bytes, body: bytes, piece: int = 65536) -> bytes | str:
    """What the server answers to ``head`` and ``body``, the body sent in pieces as fast as an
    async client writes them; the error (a string) where the server reset the connection before
    the whole body was sent (a client such as httpx then raises instead of reading the answer)."""
    where = urllib.parse.urlsplit(url)
    with socket.create_connection((where.hostname, where.port), timeout=15) as s:
        try:
            s.sendall(head)
            for k in range(0, len(body), piece):
                s.sendall(body[k:k + piece])
                time.sleep(0.002)
        except OSError as e:
            return repr(e)
        answer = b""
        try:
            while chunk := s.recv(65536):
                answer += chunk
        except (TimeoutError, ConnectionResetError) as e:
            return f"{answer[:200]!r} then {e!r}"
        return answer


@pytest.fixture(scope="module")
def missing(tmp_path_factory):
    """rat-serve on the demo's databases, one database file gone and another a folder, with
    --access-log and --drain-s 2: (process, URL, startup line)."""
    root = tmp_path_factory.mktemp("lifecycle") / "demo"
    shutil.copytree(demo_root(), root)
    (root / "database" / "library" / "library.sqlite").unlink()
    clinic = root / "database" / "clinic" / "clinic.sqlite"
    clinic.unlink()
    clinic.mkdir()
    proc, url, line = start("--processes", "1", "--access-log", "--drain-s", "2", "--query-timeout", "0.1",
                            root=root)
    yield proc, url, line
    stop(proc)


def test_rows_startup_and_health_tell_schemas_without_their_database_file(missing):
    _, url, line = missing
    assert ", 5 schemas, 3 with databases" in line, line
    status, _, health = request(url, "GET", "/health")
    assert status == 200 and health["status"] == "ok" and (health["databases"], health["with_databases"]) == (5, 3)
    rows = [{"db_id": "library", "question": "Books?", "sql": "SELECT title FROM books"},
            {"db_id": "clinic", "question": "Patients?", "sql": "SELECT name FROM patients"},
            {"db_id": "supply_chain", "question": "Suppliers?", "sql": "SELECT name FROM suppliers"}]
    status, _, answer = request(url, "POST", "/score", {"queries": rows})
    assert status == 200, answer
    assert [r["scored_with_database"] for r in answer["results"]] == [False, False, True], answer
    status, _, both = request(url, "POST", "/score", {"queries": rows[:1], "verdicts": True})
    (row,) = both["results"]
    assert status == 200 and row["scored_with_database"] is False and row["verdict"]["scored_with_database"] is False


def test_a_body_over_the_limit_is_read_before_its_413_closes_the_connection(missing):
    url = missing[1]
    head = b"POST /score HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n%s\r\n\r\n"
    body = b'{"sql": "' + b"x" * 1_500_000 + b'"}'
    for _ in range(2):  # refused for its Content-Length, before a byte of it is read
        answer = sent_and_answered(url, head % b"Content-Length: %d" % len(body), body)
        assert isinstance(answer, bytes) and answer.startswith(b"HTTP/1.1 413"), answer
    # over the limit while it arrives (chunked: no length told up front)
    chunk = b"%x\r\n%s\r\n" % (65536, b" " * 65536)
    answer = sent_and_answered(url, head % b"Transfer-Encoding: chunked", chunk * 24 + b"0\r\n\r\n")
    assert isinstance(answer, bytes) and answer.startswith(b"HTTP/1.1 413") and b"request body over" in answer, answer


def test_sigterm_drains_then_exits_0_and_the_access_log_has_a_line_a_request(missing):
    proc, url, _ = missing
    thread, got = in_flight(url, {"queries": [SLOW] * 10})
    time.sleep(0.4)  # (being scored)
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.2)
    status, headers, health = request(url, "GET", "/health")  # still taking connections for --drain-s
    assert status == 503 and health["status"] == "draining" and headers.get("connection") == "close"
    status, headers, _ = request(url, "POST", "/score", {"sql": "SELECT 1"})
    assert status == 200 and headers.get("connection") == "close"
    thread.join(timeout=20)
    assert got.get("status") == 200 and got["headers"].get("connection") == "close", got
    assert proc.wait(timeout=20) == 0
    log = proc.stderr.read()
    lines = log.splitlines()
    score = [x for x in lines if " POST /score 200 " in x]
    assert len(score) >= 4 and any(x.endswith(" 10 queries") for x in score), log  # (this test's and the others')
    assert any(" GET /health 503 " in x for x in lines) and any(" POST /score 413 " in x for x in lines), log
    assert "SELECT" not in log and "Books?" not in log  # never the SQL nor the question


def test_without_drain_an_answer_in_flight_closes_its_connection_and_sigint_exits_0():
    proc, url, _ = start("--processes", "1", "--query-timeout", "0.1", "--timeout-s", "2")
    try:
        status, _, answer = request(url, "POST", "/score", {"queries": [SLOW] * 40})  # past --timeout-s
        assert status == 503 and "longer than 2 s" in answer["detail"]
        assert request(url, "POST", "/score", SLOW)[0] == 200
        thread, got = in_flight(url, {"queries": [SLOW] * 8})
        time.sleep(0.4)
        proc.send_signal(signal.SIGINT)
        thread.join(timeout=20)
        assert got.get("status") == 200 and got["headers"].get("connection") == "close", got
        assert proc.wait(timeout=20) == 0
        lines = proc.stderr.read().splitlines()
        # without --access-log: only the 503, at warning level, one line without its body
        assert len(lines) == 1 and "WARNING" in lines[0] and " POST /score 503 " in lines[0], lines
    finally:
        stop(proc)


def test_the_processes_end_with_their_parent_and_free_the_port():
    proc, url, _ = start("--processes", "2")
    workers = children(proc.pid)
    try:
        assert len(workers) == 2
        proc.kill()  # no signal handler runs: the parent cannot stop them
        proc.wait(timeout=10)
        for _ in range(100):
            if not any(running(pid) for pid in workers):
                break
            time.sleep(0.1)
        assert not any(running(pid) for pid in workers)
        port = urllib.parse.urlsplit(url).port
        with socket.socket() as s:  # as rat-serve listens again
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", port))
            s.listen()
    finally:
        for pid in workers:
            if running(pid):
                os.kill(pid, signal.SIGKILL)
