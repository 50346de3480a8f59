"""rat-mcp under load, started for real over stdio: slow score_sql calls are scored a few at a
time (``--workers``) and list_databases answers at once beside them; SIGTERM ends it with exit 0."""

import json
import queue
import signal
import subprocess
import threading
import time

import pytest

pytest.importorskip("mcp")

from model.synth.demo import demo_root
from tests.test_mcp_server import ENV, rat_mcp

# a cross join the database stops at --query-timeout: each call takes about that long
SLOW = {"sql": "SELECT count(*) FROM orders AS a, orders AS b, orders AS c, orders AS d, orders AS e",
        "question": "How many orders?", "database": "supply_chain"}


class Server:
    """rat-mcp over raw JSON-RPC lines: each answer by id, with the time it came."""

    def __init__(self, *options: str):
        self.proc = subprocess.Popen([rat_mcp(), "--data-root", str(demo_root()), *options], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
        self.answers: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: [self.answers.put((time.monotonic(), json.loads(x))) for x in self.proc.stdout],
                         daemon=True).start()
        hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
        self.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello})
        assert self.answers.get(timeout=120)[1]["id"] == 0
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict) -> None:
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def call(self, ident: int, tool: str, arguments: dict) -> None:
        self.send({"jsonrpc": "2.0", "id": ident, "method": "tools/call",
                   "params": {"name": tool, "arguments": arguments}})

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)


def test_list_databases_answers_at_once_beside_slow_calls_and_waiting_calls_time_out():
    server = Server("--query-timeout", "1", "--timeout-s", "2.5", "--workers", "2")
    try:
        sent = time.monotonic()
        for ident in range(100, 140):  # forty slow calls at once (anyio's threads): two scored at a time
            server.call(ident, "score_sql", SLOW)
        time.sleep(0.3)
        server.call(99, "list_databases", {})
        got = {}
        while len(got) < 41:
            at, answer = server.answers.get(timeout=60)
            got[answer["id"]] = (at - sent, answer)
        waited, listed = got[99]
        assert "supply_chain" in listed["result"]["structuredContent"]["databases"]
        assert waited < 1.5, waited  # not behind the slow calls (each ~1 s)
        slow = [got[i][1]["result"] for i in range(100, 140)]
        scored = [r for r in slow if not r.get("isError")]
        late = [r["content"][0]["text"] for r in slow if r.get("isError")]
        assert 2 <= len(scored) <= 6, len(scored)  # at most two at a time within the 2.5 s
        assert late and all(t == "score_sql: scoring took longer than 2.5 s" for t in late), late
        assert max(at for at, _ in got.values()) < 6  # the waiting ones answered at their time limit
        assert server.proc.poll() is None
    finally:
        server.close()


def test_sigterm_ends_the_server_with_exit_0_mid_call():
    server = Server("--query-timeout", "5", "--timeout-s", "10")
    try:
        server.call(1, "score_sql", SLOW)
        time.sleep(1)
        stopped = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(timeout=20) == 0
        assert time.monotonic() - stopped < 3
        assert server.answers.empty()  # nothing written after it, and no half a line
        assert b"Traceback" not in server.proc.stderr.read()
    finally:
        server.close()
