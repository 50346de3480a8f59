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
from tests.test_scorer import boosted_model  # noqa: F401  (the fixture)

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def service(boosted_model):  # noqa: F811
    folder, objects = boosted_model
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "model.scoring.service", "--model", str(folder),
                             "--data-root", str(objects["table"].root), "--port", str(port),
                             "--max-queries", "16"], env=ENV, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            urllib.request.urlopen(url + "/health", timeout=1)
            break
        except OSError:
            if proc.poll() is not None:
                pytest.fail(proc.stderr.read())
            time.sleep(0.1)
    yield url, objects
    proc.terminate()
    proc.wait(timeout=10)


def post(url: str, body, raw: bytes | None = None) -> tuple[int, dict]:
    data = raw if raw is not None else json.dumps(body).encode()
    request = urllib.request.Request(url + "/score", data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_health_and_databases(service):
    url, objects = service
    health = json.loads(urllib.request.urlopen(url + "/health").read())
    assert health["status"] == "ok" and health["feature_version"].startswith("nf-")
    dbs = json.loads(urllib.request.urlopen(url + "/databases").read())["databases"]
    assert {e.db_id for e in objects["table"].examples} <= set(dbs)


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
    ({"queries": []}, 400, "non-empty list"),
    ({"queries": [{"question": "no sql"}]}, 400, "queries[0]: needs a \"sql\" string"),
    ([1, 2], 400, "body must be a JSON object"),
])
def test_bad_requests_are_4xx_with_a_message(service, body, status, message):
    got, answer = post(service[0], body)
    assert got == status and message in answer["detail"]


def test_invalid_json_and_oversized_bodies(service):
    assert post(service[0], None, raw=b"{not json")[0] == 400
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
    assert "<form" in page and "/score" in page


def _page_dom(chromium: str, url: str, query: dict, profile) -> str:
    """The page's DOM after its scripts ran (the page scores a link's sql at once)."""
    done = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--disable-background-networking", "--disable-component-update", "--disable-sync",
                           f"--user-data-dir={profile}", "--virtual-time-budget=15000", "--dump-dom",
                           f"{url}/?{urllib.parse.urlencode(query)}"], check=False, capture_output=True, text=True,
                          timeout=120)
    return done.stdout


def test_page_shows_the_coloured_sql_in_headless_chromium(service, tmp_path):
    # .ci/run installs Debian's chromium where it can; elsewhere this is skipped
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    url, objects = service
    e = objects["table"].examples[0]
    dom = _page_dom(chromium, url, {"db_id": e.db_id, "question": e.question, "sql": e.sql}, tmp_path / "a")
    assert 'id="sql"' in dom and 'class="s' in dom and "Look here first" in dom, dom[-2000:]
    assert f'<option value="{e.db_id}">' in dom and "← look here first" in dom  # the databases, the tree's mark
    assert dom.count('<li><span class="c" style="background:hsl(') == len(e.node_names)  # one tree item a node
    bad = _page_dom(chromium, url, {"db_id": e.db_id, "question": "q", "sql": "SELECT * FROM ("}, tmp_path / "b")
    assert '<p class="err">' in bad and "cannot parse" in bad, bad[-2000:]
