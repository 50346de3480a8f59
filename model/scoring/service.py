"""``rat-serve``: the scorer as an HTTP service (FastAPI + uvicorn).

    rat-serve --model pretrained --data-root ../shared/data/spider --port 8000

``POST /score`` with ``{"queries": [{"db_id", "question", "sql"}, ...]}`` (or one query object)
answers ``{"results": [row, ...]}``, each row as ``rat-score`` writes it, or ``{"error": ...}``
for a query that cannot be scored. ``GET /health``; ``GET /databases``; ``GET /`` is a page where
a person pastes a question and SQL, picks a database and sees the coloured SQL, the tree and
"look here first".

Bounds: a request body over ``max_body_bytes`` is refused (413), more than ``max_queries``
queries too (413), and scoring that takes longer than ``timeout_s`` answers 503. Databases are
opened read-only (``model.data.execution``) and only under ``--data-root``: a ``database`` path
outside it, or a ``db_id`` that is not a plain name, is refused (400).
"""

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

PAGE = Path(__file__).resolve().parent / "page.html"


def create_app(scorer, data_root: Path | None = None, schemas: dict | None = None,
               max_queries: int = 64, max_body_bytes: int = 1_000_000, timeout_s: float = 10.0,
               use_databases: bool = True):
    """The FastAPI application around a ``Scorer``."""
    from fastapi import FastAPI, HTTPException, Request
    from fastapi.concurrency import run_in_threadpool
    from fastapi.responses import HTMLResponse, JSONResponse
    from model.data.datasets import database_path

    from model.scoring.scorer import RowError

    root = data_root.resolve() if data_root else None
    schemas = schemas or {}
    app = FastAPI(title="rat-confidence scorer", description="Per-node confidence for SQL queries")

    @app.middleware("http")
    async def bound_body(request: Request, call_next):
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > max_body_bytes):
            return JSONResponse({"detail": f"request body over {max_body_bytes} bytes"}, status_code=413)
        return await call_next(request)

    def database_of(query: dict) -> Path | None:
        given = query.get("database")
        if given is not None:
            if root is None:
                raise HTTPException(400, "database paths need the service to run with --data-root")
            path = (root / str(given)).resolve()
            if not path.is_relative_to(root) or not path.is_file():
                raise HTTPException(400, f"database {given!r}: not a file under the configured root")
            return path
        db_id = query.get("db_id")
        if not use_databases or root is None or not db_id:
            return None
        return database_path(root, db_id)

    def rows_of(body: Any) -> list[dict]:
        if not isinstance(body, dict):
            raise HTTPException(400, "body must be a JSON object: {\"queries\": [...]} or one query")
        queries = body.get("queries", [body] if "sql" in body else None)
        if not isinstance(queries, list) or not queries:
            raise HTTPException(400, "body needs \"queries\": a non-empty list of {db_id, question, sql}")
        if len(queries) > max_queries:
            raise HTTPException(413, f"{len(queries)} queries in one request; at most {max_queries}")
        rows = []
        for k, q in enumerate(queries):
            if not isinstance(q, dict) or not isinstance(q.get("sql"), str):
                raise HTTPException(400, f"queries[{k}]: needs a \"sql\" string")
            db_id = q.get("db_id")
            if db_id is not None and (not isinstance(db_id, str) or "/" in db_id or "\\" in db_id
                                      or db_id.startswith(".")):
                raise HTTPException(400, f"queries[{k}].db_id {db_id!r}: not a database name")
            rows.append({"sql": q["sql"], "question": str(q.get("question") or ""), "db_id": db_id,
                         "question_id": q.get("question_id"), "schema": schemas.get(db_id),
                         "database": database_of(q),
                         "_unknown": bool(schemas) and db_id is not None and db_id not in schemas})
        return rows

    @app.get("/health")
    def health() -> dict:
        info = scorer.saved.info_ if scorer.saved is not None else {}
        return {"status": "ok", "model": scorer.description,
                "feature_version": info.get("feature_version"), "databases": len(schemas)}

    @app.get("/databases")
    def databases() -> dict:
        return {"databases": sorted(schemas)}

    @app.get("/", response_class=HTMLResponse)
    def page() -> str:
        return PAGE.read_text(encoding="utf-8")

    @app.post("/score")
    async def score(request: Request) -> dict:
        raw = await request.body()
        if len(raw) > max_body_bytes:  # a chunked body has no content-length to check up front
            raise HTTPException(413, f"request body over {max_body_bytes} bytes")
        try:
            import json

            body = json.loads(raw)
        except ValueError:
            raise HTTPException(400, "body is not valid JSON") from None
        rows = rows_of(body)
        known = [r for r in rows if not r["_unknown"]]
        try:
            results = await asyncio.wait_for(
                run_in_threadpool(scorer.score_many, known, False, True), timeout_s)
        except TimeoutError:
            raise HTTPException(503, f"scoring took longer than {timeout_s:g} s") from None
        it = iter(results)
        out = []
        for r in rows:
            if r["_unknown"]:
                out.append({"error": f"unknown db_id {r['db_id']!r}", "db_id": r["db_id"]})
                continue
            result = next(it)
            out.append({"error": result.message, "db_id": r["db_id"]} if isinstance(result, RowError)
                       else result.to_dict())
        return {"results": out}

    return app


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rat-serve", description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="pretrained")
    parser.add_argument("--data-root", type=Path, help="schemas and databases (read-only) under this folder")
    parser.add_argument("--schema", type=Path, help="tables.json only: scoring without databases")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--max-queries", type=int, default=64)
    parser.add_argument("--timeout-s", type=float, default=10.0)
    args = parser.parse_args(argv)
    from model.extras import needs_extra

    with needs_extra("serve", "rat-serve"):  # the core install: one line, exit 2
        import fastapi  # noqa: F401  (create_app's)
        import uvicorn
    from model.errors import UsageError

    from model.scoring.cli import _load_scorer, _schemas

    try:
        if args.data_root and not args.data_root.is_dir():
            raise UsageError(f"--data-root {args.data_root}: no such directory")
        if args.schema and not args.schema.is_file():
            raise UsageError(f"--schema {args.schema}: no such file")
        schemas = _schemas(args)
        scorer = _load_scorer(args.model)
    except UsageError as e:
        print(f"rat-serve: error: {e}", file=sys.stderr)
        return 2
    app = create_app(scorer, args.data_root, schemas, max_queries=args.max_queries, timeout_s=args.timeout_s)
    print(f"rat-serve: {scorer.description}, {len(schemas)} schemas, http://{args.host}:{args.port}/",
          file=sys.stderr, flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
