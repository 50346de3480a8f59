"""rat-serve under load, on loopback only and bounded in time: requests/s, p50/p95 latency and
5xx of clients sending one-query requests (Spider dev questions with their databases), with and
without one hostile client among them, plus ``/health`` p95 and the server's RSS.

    python benchmarks/serve_load.py --data-root ../shared/data/spider --clients 16 --seconds 30

Two phases, each ``--seconds`` long: ``normal`` (``--clients`` normal clients) and ``hostile``
(the same, one of them replaced by a client that sends, in turn, the 1,000-term OR query, a
160-term one just under the node limit (485 nodes), ``SELECT randomblob(1000000000)``, a 100,000-deep JSON
body, lone surrogates and an over-long db_id). A third phase, ``flood`` (``--phases
normal,hostile,flood``), has every client send the largest body the service reads (64 queries,
each 10,000 characters of SQL and a 3,000-character question: about 0.8 MB) as fast as it is
answered. A poller asks ``/health`` every 50 ms throughout.
Each normal client keeps one connection open. The server starts here (``rat-serve`` with
``--model``, ``--workers``, ``--processes``) on a free port of 127.0.0.1 and is stopped at the
end. RSS is summed over the server's processes (shared pages counted in each); PSS splits them.
Server CPU per request: the server processes' CPU time over the phase, over every request sent
(normal and hostile).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from model.cli_types import positive_int
from model.metrics import percentile
from tests.servers import free_port


def rss_mb(pid: int) -> tuple[float, float]:
    """(current RSS, peak RSS) in MB, from /proc, of a process and its child processes (``rat-serve
    --processes``: each process's own, summed; the pages they share count once per process)."""
    current = peak = 0.0
    for p in [pid, *_children(pid)]:
        try:
            status = Path(f"/proc/{p}/status").read_text()
        except OSError:  # ended meanwhile
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        current += int(fields["VmRSS"].split()[0]) / 1024
        peak += int(fields["VmHWM"].split()[0]) / 1024
    return current, peak


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) used so far by a process and its child processes."""
    total = 0.0
    for p in [pid, *_children(pid)]:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def pss_mb(pid: int) -> float:
    """Proportional set size in MB of a process and its child processes: shared pages split
    between them, so the sum is what they take together."""
    total = 0.0
    for p in [pid, *_children(pid)]:
        try:
            rollup = Path(f"/proc/{p}/smaps_rollup").read_text()
        except OSError:
            continue
        total += sum(int(line.split()[1]) for line in rollup.splitlines() if line.startswith("Pss:")) / 1024
    return total


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


def normal_queries(data_root: Path, limit: int = 300) -> list[dict]:
    from model.data.datasets import database_path, load_questions

    out = []
    for q in load_questions(data_root, "dev"):
        if database_path(data_root, q.db_id) is not None:
            out.append({"db_id": q.db_id, "question": q.question, "sql": q.gold_sql})
        if len(out) == limit:
            break
    return out


def hostile_bodies(db_id: str) -> list[bytes]:
    def one(**query) -> bytes:
        return json.dumps({"queries": [{"db_id": db_id, **query}]}).encode()

    ors = lambda n: "SELECT name FROM singer WHERE " + " OR ".join(f"age = {i}" for i in range(n))
    return [one(sql=ors(1000)), one(sql=ors(160)), one(sql="SELECT randomblob(1000000000)"),
            b"[" * 100_000 + b"]" * 100_000, one(sql="SELECT 1", question=chr(0xD800)),
            json.dumps({"queries": [{"db_id": "d" * 300, "sql": "SELECT 1"}]}).encode()]


class Client(threading.Thread):
    """Sends requests on one kept-alive connection until ``stop``; records (latency, status).
    It writes each request as prepared bytes and reads the status line, the headers and a
    content-length body itself: ``http.client`` took about 0.4 ms of CPU per request, on the
    cores the server shares."""

    def __init__(self, port: int, bodies: list[bytes], stop: threading.Event, seed: int):
        super().__init__(daemon=True)
        self.port, self.stop, self.rng = port, stop, random.Random(seed)
        self.bodies = bodies
        self.requests = [b"POST /score HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (port, len(body), body) for body in bodies]
        self.results: list[tuple[float, int]] = []

    def run(self) -> None:
        connection = None
        k = self.rng.randrange(len(self.requests))
        while not self.stop.is_set():
            request = self.requests[k % len(self.requests)]
            k += 1
            start = time.perf_counter()
            try:
                if connection is None:
                    connection = socket.create_connection(("127.0.0.1", self.port), timeout=60)
                    reader = connection.makefile("rb")
                connection.sendall(request)
                status, keep = read_response(reader)
            except (OSError, ValueError):
                status, keep = 0, False  # no answer: the connection failed
            if not keep and connection is not None:
                reader.close()
                connection.close()
                connection = None
            self.results.append((time.perf_counter() - start, status))
        if connection is not None:
            reader.close()
            connection.close()


def read_response(reader) -> tuple[int, bool]:
    """(status, whether the connection stays open) of one HTTP/1.1 response, its body read:
    by its content-length, else to the end of the connection."""
    head = reader.readline().split(b" ", 2)  # HTTP/1.1 200 OK
    if len(head) < 2:
        raise ValueError("the connection ended before a response")
    status = int(head[1])
    length, keep = None, True
    while (line := reader.readline()) not in (b"\r\n", b"\n", b""):
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"connection" and value.strip().lower() == b"close":
            keep = False
    if length is None:
        reader.read()
        return status, False
    if len(reader.read(length)) != length:
        raise ValueError("the connection ended inside a response")
    return status, keep


def health_poller(port: int, stop: threading.Event, out: list[float]) -> None:
    while not stop.is_set():
        start = time.perf_counter()
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            connection.request("GET", "/health")
            connection.getresponse().read()
            connection.close()
            out.append(time.perf_counter() - start)
        except (OSError, http.client.HTTPException):
            out.append(float("inf"))
        time.sleep(0.05)


def flood_body(db_id: str) -> bytes:
    """The largest body ``rat-serve`` reads by default: 64 queries of 10,000 characters of SQL,
    each with a 3,000-character question."""
    sql = ("SELECT " + "a + " * 2495 + "1 FROM t")[:10_000]
    return json.dumps({"queries": [{"db_id": db_id, "question": "q" * 3000, "sql": sql}] * 64}).encode()


def phase(name: str, port: int, pid: int, queries: list[dict], clients: int, seconds: float,
          hostile: bool) -> dict:
    bodies = [json.dumps({"queries": [q]}).encode() for q in queries]
    stop = threading.Event()
    flood = name == "flood"  # every client sends the largest body, counted as hostile
    normal = [] if flood else [Client(port, bodies, stop, seed) for seed in range(clients - int(hostile))]
    bad = [Client(port, [flood_body(queries[0]["db_id"])], stop, seed) for seed in range(clients)] if flood \
        else [Client(port, hostile_bodies(queries[0]["db_id"]), stop, 99)] if hostile else []
    health: list[float] = []
    poller = threading.Thread(target=health_poller, args=(port, stop, health), daemon=True)
    rss_before, _ = rss_mb(pid)
    cpu_before = cpu_s(pid)
    for thread in [*normal, *bad, poller]:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in [*normal, *bad, poller]:
        thread.join(timeout=70)
    rss_after, peak = rss_mb(pid)
    pss_after = pss_mb(pid)
    server_cpu = cpu_s(pid) - cpu_before
    results = [r for c in normal for r in c.results]
    latencies = [t for t, s in results if s == 200]
    return {"phase": name, "clients": clients, "hostile_clients": len(bad), "seconds": seconds,
            "normal_requests": len(results), "requests_per_s": len(results) / seconds,
            "normal_ok": len(latencies), "normal_5xx": sum(500 <= s < 600 for _, s in results),
            "normal_no_answer": sum(s == 0 for _, s in results),
            "p50_ms": 1000 * percentile(latencies, 50), "p95_ms": 1000 * percentile(latencies, 95),
            "hostile_requests": sum(len(c.results) for c in bad),
            "hostile_statuses": dict(sorted(_count(s for c in bad for _, s in c.results).items())),
            "hostile_max_s": max((t for c in bad for t, _ in c.results), default=float("nan")),
            "health_requests": len(health), "health_p95_ms": 1000 * percentile(health, 95),
            "health_max_ms": 1000 * max(health, default=float("nan")),
            "server_cpu_ms_per_request": 1000 * server_cpu / max(1, len(results) + sum(len(c.results) for c in bad)),
            "rss_before_mb": rss_before, "rss_after_mb": rss_after, "rss_peak_mb": peak, "pss_after_mb": pss_after}


def _count(values) -> dict:
    out: dict = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return out


def default_processes() -> int:
    from model.scoring.service import default_processes

    return default_processes()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-root", type=Path, default=REPO.parent / "shared" / "data" / "spider")
    parser.add_argument("--model", default="pretrained")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=30.0, help="length of each phase (at most 600)")
    parser.add_argument("--workers", type=positive_int, default=2, help="rat-serve --workers")
    parser.add_argument("--processes", type=positive_int, help="rat-serve --processes (default: rat-serve's, here "
                        f"{default_processes()})")
    parser.add_argument("--phases", default="normal,hostile")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    args.processes = args.processes or default_processes()
    if not (args.data_root / "tables.json").is_file():
        parser.error(f"--data-root {args.data_root}: no tables.json")
    # a model rat-serve would refuse: told here, not as "rat-serve exited" (Scorer.load's names and paths)
    if not (args.model == "pretrained" or args.model.startswith("pretrained:") or Path(args.model).exists()):
        parser.error(f"--model {args.model}: no such model (a <run>/model folder, a neural run or .ckpt, "
                     "or pretrained)")
    if not set(args.phases.split(",")) <= {"normal", "hostile", "flood"}:
        parser.error(f"--phases {args.phases}: expected names among normal, hostile, flood")
    if not 0 < args.seconds <= 600 or args.clients < 2:
        parser.error("--seconds in (0, 600], --clients >= 2")
    queries = normal_queries(args.data_root)
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    server = subprocess.Popen([sys.executable, "-m", "model.scoring.service", "--model", args.model,
                               "--data-root", str(args.data_root), "--host", "127.0.0.1", "--port", str(port),
                               "--workers", str(args.workers), "--processes", str(args.processes)],
                              env=env, cwd=REPO)
    try:
        for _ in range(1200):
            try:
                http.client.HTTPConnection("127.0.0.1", port, timeout=1).request("GET", "/health")
                break
            except OSError:
                if server.poll() is not None:
                    print("serve_load: error: rat-serve exited", file=sys.stderr)
                    return 1
                time.sleep(0.1)
        warm = Client(port, [json.dumps({"queries": [q]}).encode() for q in queries[:20 * args.processes]],
                      threading.Event(), 0)
        for body in warm.bodies:  # first requests load lazily imported parts
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            c.request("POST", "/score", body, {"Content-Type": "application/json"})
            c.getresponse().read()
            c.close()
        print(f"cpus: {os.cpu_count()}, load average before: {os.getloadavg()[0]:.1f}; rat-serve --workers "
              f"{args.workers} --processes {args.processes}; {len(queries)} Spider dev questions with databases",
              flush=True)
        rows = []
        for name in args.phases.split(","):
            row = phase(name, port, server.pid, queries, args.clients, args.seconds, hostile=name == "hostile")
            row["load_average_after"] = os.getloadavg()[0]
            rows.append(row)
            print(json.dumps({k: round(v, 1) if isinstance(v, float) else v for k, v in row.items()}), flush=True)
        print("\n| phase | req/s | p50 ms | p95 ms | 5xx | no answer | /health p95 ms | RSS MB (before -> after, peak) "
              "| PSS MB after | server CPU ms / request |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['phase']} ({r['clients'] - r['hostile_clients']} normal + {r['hostile_clients']} hostile) "
                  f"| {r['requests_per_s']:.1f} | {r['p50_ms']:.0f} | {r['p95_ms']:.0f} | {r['normal_5xx']} "
                  f"| {r['normal_no_answer']} | {r['health_p95_ms']:.0f} | {r['rss_before_mb']:.0f} -> "
                  f"{r['rss_after_mb']:.0f}, {r['rss_peak_mb']:.0f} | {r['pss_after_mb']:.0f} "
                  f"| {r['server_cpu_ms_per_request']:.1f} |")
        for r in rows:
            if r["hostile_requests"]:
                print(f"{r['phase']}: {r['hostile_requests']} hostile requests answered {r['hostile_statuses']}, "
                      f"the slowest in {r['hostile_max_s']:.1f} s; /health max {r['health_max_ms']:.0f} ms")
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1))
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
    return 0


if __name__ == "__main__":
    from model.errors import user_errors

    with user_errors():  # a data root of another layout: one line
        sys.exit(main())
