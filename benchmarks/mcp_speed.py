"""rat-mcp's score_sql, warm: the latency of sequential calls from the MCP SDK's own client over
stdio (one query with its database; p50 / p95) and the calls that failed, beside the same check
in process (``Scorer.check``) in the same run.

    python benchmarks/mcp_speed.py --data-root ../shared/data/spider --calls 1000

The server (``rat-mcp --data-root``) starts here and is warmed with ``--warmup`` calls first.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from model.cli_types import non_negative_int, positive_int
from model.metrics import percentile

DB = "concert_singer"
SQL = "SELECT name, country FROM singer WHERE age > 20 ORDER BY age DESC"
QUESTION = "Names and countries of singers older than 20, oldest first?"


async def over_stdio(data_root: Path, calls: int, warmup: int) -> tuple[list[float], int]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    command = shutil.which("rat-mcp", path=str(Path(sys.executable).parent)) or "rat-mcp"
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "RAT_CACHE")}
    params = StdioServerParameters(command=command, args=["--data-root", str(data_root)],
                                   env={**env, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"})
    arguments = {"sql": SQL, "question": QUESTION, "database": DB}
    times, failures = [], 0
    async with Client(params, read_timeout_seconds=60) as client:
        for _ in range(warmup):
            await client.call_tool("score_sql", arguments)
        for _ in range(calls):
            start = time.perf_counter()
            try:
                result = await client.call_tool("score_sql", arguments)
                failures += bool(result.is_error)
            except Exception:  # noqa: BLE001  (a failed call is counted, the run goes on)
                failures += 1
            times.append(time.perf_counter() - start)
    return times, failures


def in_process(data_root: Path, calls: int) -> list[float]:
    from model import Scorer
    from model.data.datasets import load_schemas

    scorer = Scorer.pretrained()
    schema = load_schemas(data_root)[DB]
    database = data_root / "database" / DB / f"{DB}.sqlite"
    times = []
    for _ in range(calls + 5):
        start = time.perf_counter()
        scorer.check(SQL, question=QUESTION, schema=schema, database=database, db_id=DB)
        times.append(time.perf_counter() - start)
    return times[5:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-root", type=Path, default=REPO.parent / "shared" / "data" / "spider")
    parser.add_argument("--calls", type=positive_int, default=1000)
    parser.add_argument("--warmup", type=non_negative_int, default=20)
    parser.add_argument("--in-process-calls", type=positive_int, default=200)
    args = parser.parse_args(argv)
    if not (args.data_root / "database" / DB).is_dir():
        parser.error(f"no {DB} database under --data-root {args.data_root}")
    times, failures = asyncio.run(over_stdio(args.data_root, args.calls, args.warmup))
    local = in_process(args.data_root, args.in_process_calls)
    p50, local_p50 = percentile(times, 50), percentile(local, 50)
    print(f"rat-mcp score_sql over stdio, {args.calls} sequential calls ({DB}, with its database): "
          f"p50 {p50 * 1000:.1f} ms, p95 {percentile(times, 95) * 1000:.1f} ms, failures {failures}")
    print(f"Scorer.check in process, {args.in_process_calls} calls: p50 {local_p50 * 1000:.1f} ms, "
          f"p95 {percentile(local, 95) * 1000:.1f} ms; MCP / in process {p50 / local_p50:.2f}x")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    from model.errors import user_errors

    with user_errors():  # a data root of another layout: one line
        sys.exit(main())
