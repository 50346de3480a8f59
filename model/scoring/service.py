"""``rat-serve``: the scorer as an HTTP service (FastAPI + uvicorn).

    rat-serve --model pretrained --data-root ../shared/data/spider --port 8000

``POST /score`` with ``{"queries": [{"db_id", "question", "sql"}, ...]}`` (or one query object;
optional fields ``evidence``, BIRD's, read as part of the question, ``question_id``, ``dialect``;
a query without ``db_id`` or ``database`` is read against the one schema served where there is
only one, as ``rat-score`` reads such a row, else without a schema)
answers ``{"results": [row, ...]}``, each row as ``rat-score`` writes it, or ``{"error": ...}``
for a query that cannot be scored (with ``"verdicts": true`` in the body, each row's verdict
beside it where the model has a policy). ``POST /check``, with the same body, answers each query's
verdict under the model's policy, or ``--policy``'s thresholds, instead (run | review | regenerate,
with feedback for the model that wrote it: ``model.scoring.verdict``; 404 without a policy). ``POST
/choose`` with ``{"candidates": [sql, ...], "db_id", "question"}`` (several queries for one
question) answers each candidate's row and the one ``Scorer.choose`` chooses (``"chosen"``, its
position; ``"agreeing"``).
``GET /health``; ``GET /databases``; ``GET /`` is a page where
a person pastes a question and SQL, picks a database and sees the coloured SQL, the tree and
"look here first". There is no API browser: ``/docs``, ``/redoc`` and ``/openapi.json`` are off
unless ``--api-docs`` turns them on (then anyone who reaches the port can read them).

Bounds, each answered with a 4xx or 503 that names it: a request body over ``max_body_bytes`` is
refused (413) while it is read (chunked bodies too), more than ``max_queries`` queries too
(413), and a query's SQL over ``max_sql_chars`` (413); a body that is not ``application/json``
is 415 (a form or plain text is what a page of another site can send without asking), as is a
charset other than UTF-8 and a ``Content-Encoding`` (a compressed body is not opened); a key given
twice in one object, a field
of the wrong type, a db_id that is not a plain name (or over 128 characters), a question or
evidence over 4,000 characters, text with NUL or a lone surrogate, a body nested too deeply is
400 naming the field. On a loopback ``--host`` the service answers only requests whose Host is
a loopback name (400 otherwise: DNS rebinding); ``--allowed-host`` names others. A query whose
tree has more than ``max_nodes`` nodes comes back as an error row. Every request has ``timeout_s`` from its arrival: the work checks the
deadline as it goes (each query, each database read, before the model and the reasons) and
stops there, so no request holds a worker past it, and the request answers 503 (408 for a body
that has not arrived by then). A client that closes its connection does so too: its request,
queued, is dropped; running, it stops at its next check. A body is received as it arrives, waiting for nothing else (a
client that sends part of one and stops holds up no other request), then parsed and checked
off the event loop, one at a time in each process; the bytes of bodies received and not yet
parsed are at most ``RECEIVING`` bodies of the largest size in each process (beyond them a
request is refused, 503, at once): a flood of maximum-size bodies neither holds more memory
than that nor keeps ``/health`` waiting. At most
``workers`` requests are scored at once in each of ``--processes`` processes (forked copies that
accept on one port and share the loaded model's pages); ``/health`` never waits for them, nor do
the bounds differ between processes. A heavy request (its queries' SQL more than
``--heavy-words`` words and signs together: a query near the node limit, or many queries; each
string literal of a query scored with a database counts as the words its search of the database
costs, ``LITERAL_WORDS_PER_MB``: many literals compared with columns of a large database) is
scored in the heavy lane instead: one at a time in each process and, while other requests are
being scored there, paused at each deadline check so that it takes at most a quarter of the
CPU; a client sending such requests leaves the workers, and most of the CPU, to the others.
Databases are opened read-only (``model.data.execution``: results and values bounded in rows
and bytes) and only under ``--data-root``, symlinks resolved:
a ``database`` path or ``db_id`` folder that leads outside it is refused (400) or not read. A
connection that has not sent a whole request head within ``--header-timeout-s`` is closed.

Access: the answers tell what the databases store (whether a literal is in its column; /check
names the closest stored values), so a service that listens beyond the loopback interface needs a token (``--token-file`` or
``$RAT_SERVE_TOKEN``, at least ``MIN_TOKEN_CHARS`` characters), or ``--public`` to go without one;
with a token every request but ``/health`` and the page itself carries ``Authorization: Bearer
<token>`` (the scheme in any case; 401 otherwise; the page asks for it).

Stopping: on SIGTERM or SIGINT ``/health`` answers 503 ``{"status": "draining"}`` and every
answer closes its connection; after ``--drain-s`` (0 by default) the service stops taking
connections, sends the answers in flight and exits 0 (``StoppingServer``); the processes of
``--processes`` end with their parent, even one killed (``end_with_parent``). A refused body is
read and dropped after its answer, within bounds, so the client reads the answer instead of a
reset (``BoundBody``). Each 503 but /health's is logged (WARNING), each request with
``--access-log`` (``AccessLog``: never the SQL, question or body). A row scored without its
database (its db_id's file not under ``--data-root``) says so: ``scored_with_database``.

Named connections: ``--database shop=postgresql://scorer:pw@db:5432/shop`` (repeatable; any URL
``model.data.databases.open_database`` takes) makes ``db_id: "shop"`` read that database,
read-only, its schema read from it at start unless ``--schema`` / ``--data-root`` has one. Each
is opened once at start (a bad URL, host or password: one line, exit 2), then once per scoring
thread of each process, kept open; a request can name only these, never a URL of its own.
"""

import argparse
import asyncio
import base64
import hashlib
import hmac
import json
import math
import os
import re
import socket
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

from model.extras import needs_extra
from model.scoring.fields import MAX_NODES, MAX_SQL_CHARS
from model.scoring.inputs import add_deployment_options, deployment_options
from model.scoring.scorer import UNFAMILIAR
from rat.dialects import DIALECTS

with needs_extra("serve", "rat-serve"):  # the core install: one line, exit 2
    from uvicorn import Server
    from uvicorn.protocols.http.h11_impl import H11Protocol

PAGE = Path(__file__).resolve().parent / "page.html"
HEADER_TIMEOUT_S = 10.0
# the heavy lane: a request whose SQL has more words and signs than this (Spider dev's longest gold
# query has 92, BIRD dev's 389) is scored one at a time per process, paced to this share of the CPU
HEAVY_WORDS, HEAVY_SHARE = 400, 0.25
# a string literal of a query scored with a database file is looked for in each of its text columns
# (``DatabaseProbe.columns_holding``): it weighs as many words as that search costs, which grows with
# the data read. On Spider's flight_4 (3.1 MB, 340,000 text cells) a search takes ~110 ms and a word
# ~0.33 ms: a literal weighs ~330 words; on world_1 (0.3 MB) ~30, on most Spider databases (under 0.1
# MB) 1 to 10. So: LITERAL_WORDS_PER_MB words per MB of the file, at least 1, at most
# MAX_LITERAL_WORDS (a search reads at most SCAN_BUDGET rows, however large the database: a query
# of a few literals on a large one stays in the normal lane, one of many goes to the heavy lane);
# that most for a named connection (its size unknown here)
LITERAL_WORDS_PER_MB, MAX_LITERAL_WORDS = 100, 100
SQL_LITERALS = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"")  # (a double-quoted name counts too)
# the bytes of request bodies a process holds while they arrive and wait to be parsed, in bodies
# of the largest size (max_body_bytes): past them a request is refused (503) until some are parsed
RECEIVING = 16
# an answer that closes its connection before the request's body was read (a 413, 408 or 503) is
# sent first, then at most DISCARD_BODIES bodies of the largest size are read and dropped within
# DISCARD_S seconds before the connection closes: closed with bytes unread, the system resets it,
# and a client still sending its body sees the reset instead of the answer
DISCARD_BODIES, DISCARD_S = 4, 2.0
LOG = "rat-serve"  # the logger of the access log (INFO, --access-log) and of each 503 (WARNING)
TOKEN_ENV, MIN_TOKEN_CHARS = "RAT_SERVE_TOKEN", 16  # the access token: its variable, its least length
SQL_WORDS = re.compile(r"\w+|[^\w\s]")
# what a /choose body may give besides its candidates and "verdicts": the fields they share
CHOOSE_FIELDS = ("db_id", "question", "evidence", "dialect", "database")


def request_words(rows: list[dict]) -> int:
    """What scoring ``rows`` weighs, in words: each query's words and signs (``SQL_WORDS``) and,
    for a query scored with a database, each string literal's search of it (``SQL_LITERALS``,
    ``literal_words``): more than ``heavy_words`` goes to the heavy lane.

    >>> sql = "SELECT name FROM airports WHERE city = 'Goroka' OR city = 'Madang'"
    >>> request_words([{"sql": sql, "database": None}]), request_words([{"sql": sql, "database": _Named("shop")}])
    (16, 216)
    """
    return sum(len(SQL_WORDS.findall(r["sql"])) + len(SQL_LITERALS.findall(r["sql"])) * literal_words(r["database"])
               for r in rows)


def literal_words(database) -> int:
    """What one string literal's search of ``database`` (a file, a named connection or None)
    weighs in words: ``LITERAL_WORDS_PER_MB`` a MB of the file, at least 1, at most
    ``MAX_LITERAL_WORDS``, that most for a named connection; 0 without a database (none is searched)."""
    if isinstance(database, _Named):
        return MAX_LITERAL_WORDS
    try:
        return 0 if database is None else min(MAX_LITERAL_WORDS, max(1, round(
            database.stat().st_size / 1e6 * LITERAL_WORDS_PER_MB)))
    except OSError:  # (gone: not read either)
        return 0


def _one_thread() -> None:
    """A scoring thread runs scikit-learn's OpenMP loops (a request of over ``COMPILED_ROWS``
    nodes) on itself alone: the processes already use the cores, and OpenMP's idle threads spin
    on them, taking them from the other requests (and the other processes)."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(1, user_api="openmp")  # this thread's setting: the other threads keep theirs


def content_type_problem(header: str) -> str | None:
    """Why a request body sent with this Content-Type header is not read (a 415), or None: only
    ``application/json`` is (a form or text/plain is what another site's page can send without
    asking), in UTF-8, the only charset JSON has.

    >>> content_type_problem('application/json; charset="UTF-8"'), content_type_problem("text/plain")
    (None, "Content-Type 'text/plain': the body must be application/json")
    >>> content_type_problem("application/json;charset=latin-1")
    "charset 'latin-1': the body must be UTF-8"
    """
    media_type, *parameters = (part.strip() for part in header.split(";"))
    if media_type.lower() != "application/json":
        return f"Content-Type {media_type.lower() or '(none)'!r}: the body must be application/json"
    for parameter in parameters:
        name, _, value = parameter.partition("=")
        charset = value.strip().strip('"')
        if name.strip().lower() == "charset" and charset.lower() not in ("utf-8", "utf8"):
            return f"charset {charset[:40]!r}: the body must be UTF-8"
    return None


# what each field of a query is, in /openapi.json (``ROW_FIELDS``: the fields a query may carry)
FIELD_DESCRIPTIONS = {
    "sql": "the SQL query", "question": "the question the SQL answers",
    "evidence": "external knowledge (BIRD's), read as part of the question",
    "system": "the system that wrote the query (not read here)",
    "db_id": "a database name of GET /databases (default: the only one, where it names one)",
    "question_id": "the question's id, given back with the row", "database": "a database file under --data-root",
    "gold": "the right SQL, where known (not read here)",
    "dialect": f"the SQL's dialect, any case: {', '.join(sorted(DIALECTS))} (default: the database's own)"}
# the errors a request may be answered with, as /openapi.json tells them (each body: {"detail": message})
ERRORS = {400: "a malformed body or field, named in `detail`; a Host header the service does not answer to",
          401: "no token, or another one (a service started with one)",
          404: "/check: the model has no policy, nor was the service given one (--policy)",
          408: "the body had not arrived within --timeout-s",
          413: "a body over its size in bytes, more queries than --max-queries, or SQL over --max-sql-chars",
          415: "a body that is not application/json in UTF-8, or sent with a Content-Encoding",
          503: "scoring took longer than --timeout-s, too many bodies being received at once (Retry-After) "
               "or a named database gone"}


def openapi_of(max_queries: int, max_sql_chars: int) -> dict[str, dict]:
    """What /openapi.json tells of each POST path (``path -> {"openapi_extra", "responses"}``, the
    arguments of FastAPI's route): the JSON body the handler reads (it reads the raw request: FastAPI
    cannot know it) and the errors it answers."""
    from model.scoring.choice import MAX_CANDIDATES
    from model.scoring.fields import MAX_DB_ID_CHARS, MAX_QUESTION_CHARS, ROW_FIELDS

    limits = {"sql": {"maxLength": max_sql_chars}, "question": {"maxLength": MAX_QUESTION_CHARS},
              "evidence": {"maxLength": MAX_QUESTION_CHARS}, "db_id": {"maxLength": MAX_DB_ID_CHARS},
              "question_id": {"type": ["string", "integer"]}}
    fields = {name: {"type": "string", "description": FIELD_DESCRIPTIONS[name], **limits.get(name, {})}
              for name in ROW_FIELDS}
    verdicts = {"type": "boolean", "default": False,
                "description": "each row's verdict beside it, where the model has a policy"}
    query = {"type": "object", "required": ["sql"], "properties": fields, "additionalProperties": False}
    queries = {"type": "object", "required": ["queries"], "additionalProperties": False, "properties": {
        "queries": {"type": "array", "minItems": 1, "maxItems": max_queries, "items": query},
        "verdicts": verdicts}}
    one = {**query, "properties": {**fields, "verdicts": verdicts}}
    choose = {"type": "object", "required": ["candidates"], "additionalProperties": False, "properties": {
        "candidates": {"type": "array", "minItems": 1, "maxItems": min(max_queries, MAX_CANDIDATES),
                       "items": {"type": "string", "maxLength": max_sql_chars},
                       "description": "several queries written for one question"},
        **{name: fields[name] for name in CHOOSE_FIELDS}, "verdicts": verdicts}}

    def route(schema: dict, *errors: int) -> dict:
        detail = {"type": "object", "properties": {"detail": {"type": "string"}}}
        return {"openapi_extra": {"requestBody": {"required": True, "content": {"application/json": {
                    "schema": schema}}}},
                "responses": {code: {"description": ERRORS[code], "content": {"application/json": {"schema": detail}}}
                              for code in (400, 401, *errors, 408, 413, 415, 503)}}

    scored = {"oneOf": [queries, one], "description": "a list of queries, or one query"}
    return {"/score": route(scored), "/check": route(scored, 404), "/choose": route(choose)}


def content_security_policy(page: str) -> str:
    """The page's Content-Security-Policy: its own inline script (by hash) and nothing else runs
    (no inline event handler, no other script), it talks only to this service."""
    hashes = " ".join(f"'sha256-{base64.b64encode(hashlib.sha256(s.encode()).digest()).decode()}'"
                      for s in re.findall(r"<script>(.*?)</script>", page, flags=re.DOTALL))
    return (f"default-src 'none'; script-src {hashes}; style-src 'unsafe-inline'; connect-src 'self'; "
            "img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")


def create_app(scorer, data_root: Path | None = None, schemas: dict | None = None,
               max_queries: int = 64, max_body_bytes: int = 1_000_000, timeout_s: float = 10.0,
               use_databases: bool = True, max_sql_chars: int = MAX_SQL_CHARS, max_nodes: int = MAX_NODES,
               workers: int = 2, api_docs: bool = False, dialect: str | None = None,
               databases: dict[str, str] | None = None, heavy_words: int = HEAVY_WORDS,
               heavy_share: float = HEAVY_SHARE, allowed_hosts: Sequence[str] | None = None,
               token: str | None = None, policy=None, access_log: bool = False):
    """The FastAPI application around a ``Scorer`` (see the module's bounds). ``databases``:
    named connections, name -> URL (or anything ``open_database`` takes), read by ``db_id``.
    ``policy``: the verdicts' ``Policy`` (None: the one saved with the model).
    ``heavy_words`` / ``heavy_share``: the heavy lane (see the module's docstring).
    ``allowed_hosts``: the names a request's Host header may carry (None: any). ``token``: the
    bearer token every request but ``/health`` and the page must carry (None: none).
    ``access_log``: a line for each request (``AccessLog``; a 503's line is written anyway).
    ``app.state.draining``: set (``StoppingServer``, on SIGTERM) while the service stops: ``/health``
    answers 503 ``{"status": "draining"}`` and every answer closes its connection.
    ``app.state.with_databases``: how many of the schemas have their database (a file under
    ``data_root``, or a named connection)."""
    from fastapi import FastAPI, HTTPException, Request
    from fastapi.responses import HTMLResponse, JSONResponse
    from starlette.requests import ClientDisconnect

    from model.data.databases import DatabaseError, is_database_url
    from model.data.execution import DeadlineExceeded, cancellable, paced
    from model.scoring.choice import CANDIDATES, MAX_CANDIDATES, choice_of
    from model.scoring.fields import ROW_FIELDS, field_problem, unknown_field
    from model.scoring.inputs import DatabaseFiles, database_dialects, file_under
    from model.scoring.scorer import RowError

    root = data_root.resolve() if data_root else None
    database_files = DatabaseFiles(root) if root else None  # each db_id's file, checked again per request
    schemas = schemas or {}
    named = dict(databases or {})
    opened = threading.local()  # each scoring thread's (pid, {name: Database})
    dialects = database_dialects(schemas, named, dialect)
    # a query that names no db_id (nor database) reads the one schema served, where there is only one
    # (rat-score's rule for a row without a db_id); with several, it is scored without a schema
    only = next(iter(schemas)) if len(schemas) == 1 else None

    def named_database(name: str):
        """This thread's open connection to the named database (opened on first use)."""
        from model.data.databases import open_database

        if getattr(opened, "pid", None) != os.getpid():  # a new thread, or a forked process
            opened.pid, opened.open = os.getpid(), {}
        if name not in opened.open:
            opened.open[name] = open_database(named[name], timeout_s=scorer.feature_timeout_s,
                                              max_result_bytes=scorer.max_result_bytes)
        return opened.open[name]

    policy = policy if policy is not None else scorer.policy

    def score_rows(rows: list[dict], cancel: threading.Event, verdicts: bool = False, **options):
        """The rows scored (with reasons), or with ``verdicts`` their verdicts under the model's
        policy (``Scorer.check_many``: literals looked up in each row's database, in this thread);
        stopped at the next deadline check once ``cancel`` is set (the client gone)."""
        rows = [{**r, "database": named_database(r["database"].name)}
                if isinstance(r.get("database"), _Named) else r for r in rows]
        with cancellable(cancel):
            if verdicts:
                return scorer.check_many(rows, policy, **options)
            return scorer.score_many(rows, False, True, **options)

    busy = [0]  # requests of the normal lane queued or being scored in this process

    def score_heavy(rows: list[dict], cancel: threading.Event, **options):
        with paced(heavy_share, only_while=lambda: busy[0] > 0):
            return score_rows(rows, cancel, **options)

    app = FastAPI(title="rat-confidence scorer", description="Per-node confidence for SQL queries",
                  docs_url="/docs" if api_docs else None, redoc_url="/redoc" if api_docs else None,
                  openapi_url="/openapi.json" if api_docs else None)
    scoring = ThreadPoolExecutor(max(1, workers), thread_name_prefix="rat-score", initializer=_one_thread)
    # a body is parsed and checked off the event loop, one at a time: a flood of maximum-size
    # bodies does not stall /health; the bytes received and not yet parsed are bounded (RECEIVING)
    parsing = ThreadPoolExecutor(1, thread_name_prefix="rat-read")
    received = [0]  # bytes of request bodies this process holds, received and not yet parsed
    heavy_lane = ThreadPoolExecutor(1, thread_name_prefix="rat-score-heavy", initializer=_one_thread)
    page_html = PAGE.read_text(encoding="utf-8").replace('"{{UNFAMILIAR}}"', json.dumps(UNFAMILIAR))
    page_headers = {"Content-Security-Policy": content_security_policy(page_html),
                    "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}
    info = scorer.saved.info_ if scorer.saved is not None else {}
    # a schema whose db_id has no database file under the root is scored without it: counted here,
    # told in each of its rows (scored_with_database: false)
    with_databases = sum(1 for db_id in schemas if use_databases and (
        db_id in named or (database_files is not None and database_files(db_id) is not None)))
    health_answer = {"status": "ok", "model": scorer.description, "feature_version": info.get("feature_version"),
                     "databases": len(schemas), "with_databases": with_databases}
    draining = threading.Event()  # set while the service stops (StoppingServer)
    app.state.draining, app.state.with_databases = draining, with_databases

    app.add_middleware(BoundBody, max_body_bytes=max_body_bytes)
    if allowed_hosts is not None:
        app.add_middleware(AllowedHosts, hosts=allowed_hosts)
    if token is not None:
        app.add_middleware(RequireToken, token=token)
    app.add_middleware(Draining, draining=draining)
    app.add_middleware(AccessLog, every_request=access_log)

    @asynccontextmanager
    async def body_of(request: Request, deadline: float):
        """The body, received as it arrives and held (counted in ``received``) until the block
        ends. Refused as soon as it passes ``max_body_bytes`` (413: a chunked body has no
        content-length to check up front, so it is counted while it arrives) or takes the
        process's bodies past ``RECEIVING`` of that size (503); 408 if it has not arrived by
        ``deadline``. A client gone before sending it all gets no answer and leaves no trace."""
        chunks, size, budget = [], 0, RECEIVING * max_body_bytes
        try:
            try:
                async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                    async for chunk in request.stream():
                        size += len(chunk)
                        received[0] += len(chunk)
                        if size > max_body_bytes:
                            raise HTTPException(413, f"request body over {max_body_bytes} bytes",
                                                {"Connection": "close"})
                        if received[0] > budget:
                            raise HTTPException(503, f"busy: {budget} bytes of request bodies are being received; "
                                                     "try again", {"Connection": "close", "Retry-After": "1"})
                        chunks.append(chunk)
            except TimeoutError:
                raise HTTPException(408, f"request body not received within {timeout_s:g} s",
                                    {"Connection": "close"}) from None
            except ClientDisconnect:  # nobody to answer: uvicorn drops the response
                raise HTTPException(400, "the client closed the connection before sending its body") from None
            raw = b"".join(chunks)
            del chunks
            yield raw
        finally:
            received[0] -= size

    def database_of(query: dict, field: str) -> Path | None:
        """The query's database: its ``database`` path (``field``, as the client named it) under
        the root, its named connection, or its db_id's file."""
        given = query.get("database")
        if given is not None:
            if is_database_url(given):  # (a request never opens a connection of its own)
                raise HTTPException(400, f"{field}: a URL is not taken in a request; name by db_id a database "
                                         "the service was started with (--database NAME=URL)")
            if root is None:
                raise HTTPException(400, f"{field}: paths need the service to run with --data-root")
            path = file_under(root, given)
            if path is None:
                raise HTTPException(400, f"{field} {given!r}: not a file under the configured root")
            return path
        db_id = query.get("db_id")
        if use_databases and db_id in named:
            return _Named(db_id)
        if not use_databases or root is None or not db_id:
            return None
        return database_files(db_id)

    def candidate_queries(body: Any) -> dict:
        """A /choose body as /score's: ``{"queries": [...]}``, one query a candidate, each with the
        body's db_id, question, evidence and dialect, all answers to one question."""
        if not isinstance(body, dict):
            raise HTTPException(400, "body must be a JSON object: {\"candidates\": [sql, ...], \"db_id\", \"question\"}")
        candidates = body.get("candidates")
        if not isinstance(candidates, list) or not candidates:
            raise HTTPException(400, "candidates: a non-empty list of SQL strings")
        if (k := next((k for k, c in enumerate(candidates) if not isinstance(c, str)), None)) is not None:
            raise HTTPException(400, f"candidates[{k}]: expected a string of SQL, found {type(candidates[k]).__name__}")
        if problem := unknown_field(body, ("candidates", *CHOOSE_FIELDS, "verdicts")):
            raise HTTPException(400, problem)
        shared = {k: body[k] for k in CHOOSE_FIELDS if k in body}
        return {"queries": [{**shared, "sql": sql, "question_id": CANDIDATES} for sql in candidates],
                "verdicts": body.get("verdicts", False)}

    def rows_of(body: Any, what: str = "queries") -> list[dict]:
        if not isinstance(body, dict):
            raise HTTPException(400, "body must be a JSON object: {\"queries\": [...]} or one query")
        if "queries" in body and "sql" in body:
            raise HTTPException(400, "body has both \"queries\" and \"sql\": give a list of queries or one query")
        queries = body.get("queries", [body] if "sql" in body else None)
        if queries is None and what == "queries" and set(body) & set(ROW_FIELDS):  # one query, without its SQL
            raise HTTPException(400, "sql: missing (one query's fields, or \"queries\": a list of queries)")
        if not isinstance(queries, list) or not queries:
            raise HTTPException(400, "body needs \"queries\": a non-empty list of {db_id, question, sql}")
        most = max_queries if what == "queries" else min(max_queries, MAX_CANDIDATES)
        if len(queries) > most:
            raise HTTPException(413, f"{len(queries)} {what} in one request; at most {most}")
        if problem := unknown_field(body, ("queries", "verdicts") if "queries" in body else (*ROW_FIELDS, "verdicts")):
            raise HTTPException(400, problem)

        one = "queries" not in body  # one query, its fields at the body's top

        def field(k: int, name: str) -> str:
            """The k-th query's field as the client named it: ``queries[k].name`` (``name`` in a
            body of one query); in a /choose body, ``candidates[k]`` for its SQL and the body's
            own field for the others."""
            if what == "queries":
                return name if one else f"queries[{k}].{name}"
            return f"candidates[{k}]" if name == "sql" else name

        rows = []
        for k, q in enumerate(queries):
            if not isinstance(q, dict) or q.get("sql") is None:
                raise HTTPException(400, f"{field(k, 'sql')}: needs a string" if isinstance(q, dict)
                                    else f"queries[{k}]: expected a query (an object with \"sql\")")
            if not one and (problem := unknown_field(q, ROW_FIELDS)):
                raise HTTPException(400, f"queries[{k}]: {problem}")
            for name in ROW_FIELDS:  # text fields and the optional dialect
                problem = field_problem(name, q.get(name))  # (it starts with the name)
                if problem:
                    raise HTTPException(400, field(k, name) + problem[len(name):])
            if len(q["sql"]) > max_sql_chars:
                raise HTTPException(413, f"{field(k, 'sql')}: {len(q['sql'])} characters; at most {max_sql_chars}")
            if q.get("db_id") is None and q.get("database") is None and only is not None:
                q = {**q, "db_id": only}
            db_id = q.get("db_id")
            rows.append({"sql": q["sql"], "question": q.get("question") or "", "evidence": q.get("evidence") or "",
                         "db_id": db_id, "question_id": q.get("question_id"), "schema": schemas.get(db_id),
                         "dialect": q.get("dialect"),
                         "database": database_of(q, field(k, "database")),
                         "_unknown": bool(schemas) and db_id is not None and db_id not in schemas})
        return rows

    def unrooted(message: str) -> str:
        """A row's error without the folder the service reads from: a client names files under it."""
        return message.replace(f"{root}{os.sep}", "") if root is not None else message

    def rows_and_weight(raw: bytes, choosing: bool = False) -> tuple[list[dict], bool, bool]:
        """The rows of a request body (a /choose body's candidates), whether it goes to the heavy
        lane, and whether it asks for each row's verdict beside it (``"verdicts": true``)."""
        try:
            body = json.loads(raw, object_pairs_hook=unique_keys)
        except RecursionError:
            raise HTTPException(400, "body is nested too deeply") from None
        except DuplicateKey as e:
            raise HTTPException(400, str(e)) from None
        except (json.JSONDecodeError, UnicodeDecodeError):  # (bytes that are not UTF-8)
            raise HTTPException(400, "body is not valid JSON") from None
        except ValueError:  # valid JSON: an integer longer than Python reads
            raise HTTPException(400, f"body has an integer of more than {sys.get_int_max_str_digits()} digits") from None
        if choosing:
            body = candidate_queries(body)
        rows = rows_of(body, "candidates" if choosing else "queries")
        wanted = body.get("verdicts", False)
        if not isinstance(wanted, bool):
            raise HTTPException(400, "verdicts: true or false")
        # one request is not a file: its confidences never depend on the other queries sent with it
        return rows, request_words([r for r in rows if not r["_unknown"]]) > heavy_words, wanted

    @app.get("/health")
    async def health() -> Any:  # on the event loop: never queued behind scoring
        if draining.is_set():  # (a load balancer sends no more requests here)
            return JSONResponse({**health_answer, "status": "draining"}, status_code=503)
        return health_answer

    @app.get("/databases")
    async def databases() -> dict:
        return {"databases": sorted(schemas), "dialects": dialects}

    @app.get("/", response_class=HTMLResponse)
    async def page() -> HTMLResponse:
        return HTMLResponse(page_html, headers=page_headers)

    for path, endpoint in (("/health", health), ("/databases", databases), ("/", page)):  # HEAD where GET is;
        app.add_api_route(path, endpoint, methods=["HEAD"], include_in_schema=False)  # one operation each in the spec

    documented = openapi_of(max_queries, max_sql_chars)

    @app.post("/score", **documented["/score"])
    async def score(request: Request) -> JSONResponse:
        return await answer(request, verdicts=False)

    @app.post("/check", **documented["/check"])
    async def check(request: Request) -> JSONResponse:
        if policy is None:
            raise HTTPException(404, f"/check needs a model with a policy; {scorer.description} has none "
                                     "(python -m model.scoring.policy, or rat-serve --policy)")
        return await answer(request, verdicts=True)

    @app.post("/choose", **documented["/choose"])
    async def choose(request: Request) -> JSONResponse:
        return await answer(request, verdicts=False, choosing=True)

    async def disconnect(request: Request) -> None:
        """Returns when the client of ``request``, its body read, closes the connection."""
        while (await request.receive())["type"] != "http.disconnect":
            pass

    async def answer(request: Request, verdicts: bool, choosing: bool = False) -> JSONResponse:
        """A /score or /check request's rows, scored (with their verdicts beside them where the
        body asks and the model has a policy) or given their verdicts, in a lane; a /choose
        request's candidates scored so, and the one ``Scorer.choose`` would choose."""
        deadline = time.monotonic() + timeout_s
        problem = content_type_problem(request.headers.get("content-type", ""))
        encoding = request.headers.get("content-encoding", "identity")
        if encoding.strip().lower() != "identity":  # (a compressed body is not opened: no bombs)
            problem = f"Content-Encoding {encoding[:40]!r}: the body must be sent as is, not encoded"
        if problem:
            raise HTTPException(415, problem)
        async with body_of(request, deadline) as raw:
            rows, heavy, wanted = await asyncio.get_running_loop().run_in_executor(
                parsing, rows_and_weight, raw, choosing)
        request.state.queries = len(rows)  # (the access log's count)
        known = [r for r in rows if not r["_unknown"]]
        checking = verdicts or (wanted and policy is not None)  # (scored once: a verdict holds its scored query)
        cancel = threading.Event()
        work = partial(score_heavy if heavy else score_rows, known, cancel, verdicts=checking, deadline=deadline,
                       max_nodes=max_nodes, max_sql_chars=max_sql_chars, dialect=dialect, label_shift=False)
        lane = heavy_lane if heavy else scoring
        busy[0] += not heavy
        scored = asyncio.get_running_loop().run_in_executor(lane, work)
        gone = asyncio.ensure_future(disconnect(request))
        # a request still queued at its deadline, or when its client goes, is dropped; a running
        # one stops at its next check (its client gone: cancelled)
        try:
            async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                await asyncio.wait((scored, gone), return_when=asyncio.FIRST_COMPLETED)
            if not scored.done():  # nobody to answer: uvicorn drops the response
                raise HTTPException(400, "the client closed the connection before its answer")
            results = scored.result()
        except (TimeoutError, DeadlineExceeded):
            raise HTTPException(503, f"scoring took longer than {timeout_s:g} s") from None
        except DatabaseError as e:  # a named database that went away since the start
            raise HTTPException(503, str(e)) from None
        finally:  # (a request given up on, for its time or its client, leaves no work running)
            cancel.set()
            scored.cancel()
            gone.cancel()
            busy[0] -= not heavy
        chosen = None
        if choosing:  # (the verdicts beside the rows hold their scored queries)
            chosen = choice_of([r.scored if checking and not isinstance(r, RowError) else r for r in results])
        it = iter(results)
        out = []
        for r in rows:
            if r["_unknown"]:
                out.append({"error": f"unknown db_id {r['db_id']!r}", "db_id": r["db_id"]})
                continue
            result = next(it)
            if isinstance(result, RowError):
                out.append({"error": unrooted(result.message), "db_id": r["db_id"]})
            elif verdicts:
                out.append({**result.to_dict(), "db_id": r["db_id"]})
            elif checking:  # the scored row, its verdict beside it
                out.append({**result.scored.to_dict(), "scored_with_database": result.scored.with_database,
                            "verdict": {k: v for k, v in result.to_dict().items() if k != "sql"}})
            else:
                out.append({**result.to_dict(), "scored_with_database": result.with_database})
        if choosing:
            return JSONResponse({"chosen": None if chosen is None else chosen.index,
                                 "agreeing": 0 if chosen is None else chosen.agreeing, "results": out})
        return JSONResponse({"results": out})  # as FastAPI would write it, without its encoder's pass

    return app


class DuplicateKey(ValueError):
    """A JSON object that gives one key twice (``unique_keys``)."""


def unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    """``json.loads``'s ``object_pairs_hook``: the object, or ``DuplicateKey`` naming a key given
    twice (``json`` would keep the last silently: the client meant one of them).

    >>> try:
    ...     json.loads('{"sql": "SELECT 1", "sql": "SELECT 2"}', object_pairs_hook=unique_keys)
    ... except DuplicateKey as e:
    ...     print(e)
    key 'sql' given twice in one object
    """
    out = dict(pairs)
    if len(out) < len(pairs):
        seen = set()
        key = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise DuplicateKey(f"key {key[:80]!r} given twice in one object")
    return out


class _Named:
    """A request's named connection, opened in the thread that scores it."""

    def __init__(self, name: str):
        self.name = name


class BoundBody:
    """ASGI middleware: a request whose content-length is over ``max_body_bytes`` (or not a
    number) is answered 413 at once, its body unread (a plain ASGI layer: Starlette's
    ``@app.middleware`` wraps every request in extra tasks and streams). An answer that closes its
    connection before the request's body was read to its end (that 413; a 413, 408 or 503 while
    the body arrives) is sent whole, and then the rest of the body read and dropped, at most
    ``DISCARD_BODIES`` bodies of the largest size within ``DISCARD_S`` seconds, before the
    connection closes: closed with bytes unread, the system would reset it, and a client still
    sending its body would see the reset, not the answer."""

    def __init__(self, app, max_body_bytes: int):
        self.app, self.max_body_bytes = app, max_body_bytes

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = next((v for k, v in scope["headers"] if k == b"content-length"), None)
        most = DISCARD_BODIES * self.max_body_bytes
        chunked = any(k == b"transfer-encoding" for k, _ in scope["headers"])
        read_all, closing = length == b"0" or (length is None and not chunked), False  # (no body: none to read)

        async def receiving():
            nonlocal read_all
            message = await receive()
            read_all = read_all or message["type"] != "http.request" or not message.get("more_body", False)
            return message

        async def sending(message) -> None:
            nonlocal closing
            if message["type"] == "http.response.start":
                closing = (b"connection", b"close") in [(k.lower(), v.lower()) for k, v in message.get("headers", [])]
            elif (message["type"] == "http.response.body" and not message.get("more_body", False) and closing
                  and not read_all and (length is None or (length.isdigit() and int(length) <= most))):
                await send({**message, "more_body": True})  # the answer, whole; its end once the body is read
                await discard()
                message = {"type": "http.response.body", "body": b""}
            await send(message)

        async def discard() -> None:
            dropped = 0
            try:
                async with asyncio.timeout(DISCARD_S):
                    while not read_all and dropped <= most:
                        dropped += len((await receiving()).get("body", b""))
            except TimeoutError:
                pass

        if length is not None and (not length.isdigit() or int(length) > self.max_body_bytes):
            from fastapi.responses import JSONResponse

            response = JSONResponse({"detail": f"request body over {self.max_body_bytes} bytes"},
                                    status_code=413, headers={"Connection": "close"})
            await response(scope, receiving, sending)
            return
        await self.app(scope, receiving, sending)


class Draining:
    """ASGI middleware: while the service stops (``draining`` set), every answer carries
    ``Connection: close``, so a kept-alive client sends its next request elsewhere instead of
    finding the connection closed under it."""

    def __init__(self, app, draining: threading.Event):
        self.app, self.draining = app, draining

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def sending(message) -> None:
            if message["type"] == "http.response.start" and self.draining.is_set():
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"connection"]
                message = {**message, "headers": [*headers, (b"connection", b"close")]}
            await send(message)

        await self.app(scope, receive, sending)


class AccessLog:
    """ASGI middleware: one line for each request to the ``LOG`` logger: the client's address,
    method, path (never its query string), status, milliseconds, bytes of body received and
    queries read (``request.state.queries``), never its SQL, question or body; at INFO with
    ``every_request`` (``--access-log``), and a 503 (a timeout, busy) but ``/health``'s at WARNING
    always. Its time is the log's own (``main``: ``asctime``)."""

    def __init__(self, app, every_request: bool = False):
        self.app, self.every_request = app, every_request

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        import logging

        start, status, received = time.monotonic(), None, 0

        async def receiving():
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            return message

        async def sending(message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receiving, sending)
        finally:
            warn = status == 503 and scope["path"] != "/health"
            if warn or self.every_request:
                client = scope.get("client") or ("-", 0)
                queries = (scope.get("state") or {}).get("queries")
                logging.getLogger(LOG).log(
                    logging.WARNING if warn else logging.INFO, "%s:%s %s %s %s %.1f ms %d B %s queries",
                    client[0], client[1], scope["method"], scope["path"][:200].encode("unicode_escape").decode(),
                    status or "-", (time.monotonic() - start) * 1000, received, "-" if queries is None else queries)


class RequireToken:
    """ASGI middleware: a request without ``Authorization: Bearer <token>`` is answered 401, but
    for ``/health`` (probes) and the page at ``/``, which holds no data and asks for the token.
    The token is compared in constant time."""

    OPEN = ("/", "/health")

    def __init__(self, app, token: str):
        self.app, self.expected = app, token.encode()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and not (scope["path"] in self.OPEN and scope["method"] in ("GET", "HEAD")):
            given = next((v for k, v in scope["headers"] if k == b"authorization"), b"")
            scheme, _, credentials = given.partition(b" ")  # the scheme in any case (RFC 7235)
            if not (hmac.compare_digest(credentials.lstrip(b" "), self.expected) and scheme.lower() == b"bearer"):
                from fastapi.responses import JSONResponse

                response = JSONResponse({"detail": "this service needs its token: Authorization: Bearer <token>"},
                                        status_code=401, headers={"WWW-Authenticate": "Bearer"})
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def read_token(token_file: Path | None, environ=os.environ) -> str | None:
    """The access token: the first line of ``token_file``, else ``$RAT_SERVE_TOKEN``, else None.
    ``UsageError`` for a file that cannot be read, both given, or a token that is shorter than
    ``MIN_TOKEN_CHARS`` or has characters other than visible ASCII.

    >>> read_token(None, {"RAT_SERVE_TOKEN": "k" * 20}), read_token(None, {})
    ('kkkkkkkkkkkkkkkkkkkk', None)
    """
    from model.errors import UsageError

    where = f"--token-file {token_file}" if token_file is not None else f"${TOKEN_ENV}"
    if token_file is not None and environ.get(TOKEN_ENV):
        raise UsageError(f"--token-file {token_file} and ${TOKEN_ENV}: give one of them")
    if token_file is not None:
        try:
            with token_file.open("rb") as f:
                raw = f.read(4096)
        except OSError as e:
            raise UsageError(f"{where}: cannot be read ({e.strerror or type(e).__name__})") from None
        lines = raw.decode("latin-1").splitlines()
        token = lines[0].strip() if lines else ""
    else:
        token = environ.get(TOKEN_ENV)
        if token is None:
            return None
    if len(token) < MIN_TOKEN_CHARS or not all(33 <= ord(c) <= 126 for c in token):
        raise UsageError(f"{where}: a token of at least {MIN_TOKEN_CHARS} visible ASCII characters, without spaces "
                         "(python -c 'import secrets; print(secrets.token_urlsafe())')")
    return token


LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")


def is_loopback(host: str) -> bool:
    """Whether ``host`` (``--host``) is an address of this machine's loopback interface.

    >>> is_loopback("127.0.0.1"), is_loopback("::1"), is_loopback("0.0.0.0"), is_loopback("scorer.lan")
    (True, True, False, False)
    """
    import ipaddress

    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_name(header: str) -> str:
    """The host of a Host header, without its port, lower case.

    >>> host_name("LocalHost:8000"), host_name("[::1]:8000"), host_name("127.0.0.1")
    ('localhost', '::1', '127.0.0.1')
    """
    header = header.strip().lower()
    if header.startswith("["):  # an IPv6 address
        return header[1:header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class AllowedHosts:
    """ASGI middleware: a request whose Host header names none of ``hosts`` is answered 400. A
    service on the loopback interface answers only to loopback names, so that a page of another
    site, its name pointed at 127.0.0.1 (DNS rebinding), cannot read the answers."""

    def __init__(self, app, hosts: Sequence[str]):
        self.app, self.hosts = app, {host_name(h) for h in hosts}

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            header = next((v for k, v in scope["headers"] if k == b"host"), b"").decode("latin-1")
            if host_name(header) not in self.hosts:
                from fastapi.responses import JSONResponse

                response = JSONResponse({"detail": f"Host {header[:80]!r}: not a name this service answers to "
                                                   "(rat-serve --allowed-host)"}, status_code=400)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline on each request head: a connection that has not
    sent a whole request line and headers within ``header_timeout_s`` of connecting, or of its
    previous response, is closed (uvicorn alone keeps a half-sent head open for ever). A body
    still arriving after its response was sent (a handler that reads none, e.g. ``/health``
    given a Content-Length) counts as waiting too: uvicorn would read it for as long as it
    trickles in."""

    header_timeout_s = HEADER_TIMEOUT_S

    def connection_made(self, transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        # asyncio sets TCP_NODELAY only on sockets made with proto IPPROTO_TCP, not on those
        # accepted from a listening socket made with proto 0 (uvicorn's, ours): without it the
        # body of an answer waits for the client's delayed ACK of its head, 40 ms on Linux, on
        # every request of a kept-alive connection after its first
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._arm_head_timer()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm_head_timer()

    def connection_lost(self, exc) -> None:
        timer = getattr(self, "_head_timer", None)
        if timer is not None:
            timer.cancel()
        super().connection_lost(exc)

    def _arm_head_timer(self) -> None:
        timer = getattr(self, "_head_timer", None)
        if timer is not None:
            timer.cancel()
        self._head_timer = self.loop.call_later(self.header_timeout_s, self._head_timeout)

    def _head_timeout(self) -> None:
        waiting = self.cycle is None or self.cycle.response_complete  # no request being answered
        if waiting and not self.transport.is_closing():
            self.transport.close()


def allowed_hosts(host: str, given: Sequence[str]) -> list[str] | None:
    """The Host names ``rat-serve`` answers to: those ``given``, else the loopback names when it
    listens on a loopback address, else any (None).

    >>> allowed_hosts("127.0.0.1", []), allowed_hosts("0.0.0.0", []), allowed_hosts("0.0.0.0", ["scorer.lan"])
    (['localhost', '127.0.0.1', '::1'], None, ['scorer.lan'])
    """
    if given:
        return list(given)
    return list(LOOPBACK_HOSTS) if is_loopback(host) else None


class StoppingServer(Server):
    """uvicorn's server, stopping as ``rat-serve`` does on SIGTERM or SIGINT: ``draining`` set at
    once (the app's: ``/health`` answers 503, each answer closes its connection), new connections
    still taken for ``drain_s`` seconds (a load balancer's time to see /health), then uvicorn's
    graceful shutdown (answers in flight sent); ``run`` then returns, so the process exits 0
    (uvicorn's own raises the signal again once stopped: exit 143 on SIGTERM). A second signal
    ends the drain; a second SIGINT, the wait for answers in flight too."""

    def __init__(self, config, draining: threading.Event, drain_s: float = 0.0):
        super().__init__(config)
        self.draining, self.drain_s, self.drain_until = draining, drain_s, None

    def handle_exit(self, sig: int, frame) -> None:  # (not uvicorn's: it records the signal to raise again)
        import signal

        if not self.draining.is_set() and self.drain_s > 0:
            self.draining.set()
            self.drain_until = time.monotonic() + self.drain_s
            return
        self.draining.set()
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True
        self.should_exit = True

    async def on_tick(self, counter: int) -> bool:
        if self.drain_until is not None and time.monotonic() >= self.drain_until:
            self.should_exit = True
        return await super().on_tick(counter)


def end_with_parent(parent: int) -> None:
    """Have the system send this process SIGTERM when its parent ``parent`` ends (Linux's
    ``PR_SET_PDEATHSIG``; nothing elsewhere), and end at once if it already has: a copy of
    ``serve_processes`` whose parent is killed (SIGKILL: no handler runs) stops instead of
    holding the port."""
    import signal

    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)  # 1: PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # it ended between the fork and the prctl
        os._exit(0)


MAX_DEFAULT_PROCESSES = 4
RESTARTS, RESTART_WINDOW_S = 5, 10.0  # serve_processes gives up when so many copies die so quickly


def default_processes() -> int:
    """``--processes`` by default: one per CPU core this process may use, at most
    ``MAX_DEFAULT_PROCESSES`` (each process holds its own copy of what the model allocates)."""
    import os

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(MAX_DEFAULT_PROCESSES, cores))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rat-serve", description=__doc__.split("\n")[0],
                                     epilog="/docs, /redoc and /openapi.json are off unless --api-docs.")
    parser.add_argument("--model", default="pretrained")
    parser.add_argument("--data-root", type=Path, help="schemas and databases (read-only) under this folder")
    parser.add_argument("--schema", type=Path, help="tables.json, or a .sql file of CREATE TABLE statements "
                        "(in --dialect, named after the file): scoring without databases")
    parser.add_argument("--database", action="append", default=[], metavar="NAME=URL",
                        help="a named connection, read-only: requests with db_id NAME read it "
                             "(postgresql://user:pw@host/db, mysql+pymysql://..., duckdb:///file); repeatable")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--allowed-host", action="append", default=[], metavar="NAME",
                        help="a name requests may carry in their Host header (repeatable; default: "
                             "localhost, 127.0.0.1 and ::1 on a loopback --host, any name otherwise)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--token-file", type=Path, metavar="FILE",
                        help=f"a file whose first line is the token requests must carry (Authorization: Bearer "
                             f"<token>; or ${TOKEN_ENV}); needed on a --host beyond the loopback interface")
    parser.add_argument("--public", action="store_true",
                        help="on a --host beyond the loopback interface, serve without a token: anyone who "
                             "reaches the port can score SQL against the databases and read values stored in them")
    parser.add_argument("--max-queries", type=int, default=64, help="queries per request (default 64)")
    parser.add_argument("--max-sql-chars", type=int, default=MAX_SQL_CHARS, help="characters of one query's SQL")
    parser.add_argument("--max-nodes", type=int, default=MAX_NODES,
                        help="nodes of one query's tree (default 500; BIRD dev's largest gold query has 295)")
    parser.add_argument("--timeout-s", type=float, default=10.0, help="seconds a request may take (default 10)")
    parser.add_argument("--workers", type=int, default=2,
                        help="requests scored at once, in each process (default 2)")
    parser.add_argument("--processes", type=int, default=default_processes(),
                        help="processes serving the port, each with its own --workers (default: the "
                             f"usable CPU cores, at most {MAX_DEFAULT_PROCESSES}; here {default_processes()})")
    parser.add_argument("--heavy-words", type=int, default=HEAVY_WORDS,
                        help="a request whose SQL has more words and signs is scored in the heavy lane: one at a "
                             f"time per process, paced to {HEAVY_SHARE * 100:.0f}%% of the CPU (default {HEAVY_WORDS}); "
                             "a string literal of a query scored with a database counts as the words its search "
                             f"costs: {LITERAL_WORDS_PER_MB} a MB of the database file, at most {MAX_LITERAL_WORDS} (that for a "
                             "--database connection)")
    parser.add_argument("--header-timeout-s", type=float, default=HEADER_TIMEOUT_S,
                        help="seconds a connection may take to send a request head (default 10)")
    parser.add_argument("--dialect", metavar="NAME",
                        help="the SQL dialect of queries without their own 'dialect' field: "
                             f"{', '.join(sorted(DIALECTS))} (default: the database's own, else sqlite)")
    parser.add_argument("--api-docs", action="store_true",
                        help="serve /docs, /redoc and /openapi.json (public to anyone who reaches the port)")
    parser.add_argument("--access-log", action="store_true",
                        help="a line for each request on stderr: time, client, method, path, status, milliseconds, "
                             "body bytes, queries (never the SQL, question or body); a 503's line is written anyway")
    parser.add_argument("--drain-s", type=float, default=0.0, metavar="SECONDS",
                        help="on SIGTERM or SIGINT, keep answering this long, /health saying 503 \"draining\" and "
                             "each answer closing its connection, before stopping (default 0)")
    add_deployment_options(parser)
    args = parser.parse_args(argv)
    import logging

    logging.getLogger("sqlglot").setLevel(logging.ERROR)  # its warnings quote request SQL, newlines and all
    from model.errors import UsageError, say_error
    from model.scoring.inputs import (
        check_service_options,
        load_scorer,
        named_databases,
        read_schemas,
    )

    sock = None
    try:
        check_service_options(args, ("max_queries", "max_sql_chars", "max_nodes", "workers", "processes",
                                     "timeout_s", "heavy_words", "header_timeout_s"))
        if not (math.isfinite(args.drain_s) and args.drain_s >= 0):
            raise UsageError(f"--drain-s must be 0 or more seconds, found {args.drain_s}")
        policy = deployment_options(args)
        if "" in args.allowed_host:
            raise UsageError("--allowed-host: an empty name (no request carries it)")
        token = read_token(args.token_file)
        if token is not None and args.public:
            raise UsageError("--public and a token (--token-file or $RAT_SERVE_TOKEN): give one of them")
        if token is None and not args.public and not is_loopback(args.host):
            raise UsageError(f"--host {args.host}: anyone who reaches the port could score SQL against the "
                             "databases and read the answers, which tell what they store: give "
                             f"--token-file FILE (or ${TOKEN_ENV}), or --public to serve without a token")
        sock = listen_socket(args.host, args.port)  # before the model loads: a taken port is told at once
        schemas = read_schemas(args.schema, args.data_root, args.dialect or "sqlite")
        scorer = load_scorer(args.model)
        if args.query_timeout is not None:  # (before the named connections are opened)
            scorer.feature_timeout_s = args.query_timeout
        databases = named_databases(args.database, schemas, scorer)
    except UsageError as e:
        if sock is not None:
            sock.close()
        say_error("rat-serve", e)
        return 2
    import uvicorn

    app = create_app(scorer, args.data_root, schemas, max_queries=args.max_queries, timeout_s=args.timeout_s,
                     max_sql_chars=args.max_sql_chars, max_nodes=args.max_nodes, workers=args.workers,
                     api_docs=args.api_docs, dialect=args.dialect, databases=databases,
                     heavy_words=args.heavy_words, allowed_hosts=allowed_hosts(args.host, args.allowed_host),
                     token=token, policy=policy, access_log=args.access_log)
    log = logging.getLogger(LOG)
    log.setLevel(logging.INFO)
    log.propagate = False
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s rat-serve %(levelname)s %(message)s"))
    log.addHandler(handler)
    protocol = type("Guarded", (GuardedH11Protocol,), {"header_timeout_s": args.header_timeout_s})
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level="warning", http=protocol,
                            timeout_keep_alive=5, h11_max_incomplete_event_size=16 * 1024)
    processes = f", {args.processes} processes" if args.processes > 1 else ""
    processes += ", token required" if token is not None else ""
    port = sock.getsockname()[1]  # --port 0: the one the system chose
    print(f"rat-serve: {scorer.description}, {len(schemas)} schemas, {app.state.with_databases} with databases"
          f"{processes}, http://{args.host}:{port}/", file=sys.stderr, flush=True)
    server = partial(StoppingServer, config, app.state.draining, args.drain_s)
    if args.processes == 1:
        server().run(sockets=[sock])
        sock.close()
        return 0
    return serve_processes(server, args.processes, sock)


def listen_socket(host: str, port: int):
    """The socket ``rat-serve`` listens on, bound to ``host``:``port`` (IPv6 where ``host`` has a
    colon); a port out of range, a taken port or a host this machine cannot bind is one
    ``UsageError`` line naming them."""
    from model.errors import UsageError

    if not 0 <= port <= 65535:
        raise UsageError(f"--port {port}: expected a port number from 0 to 65535")
    sock = socket.socket(family=socket.AF_INET6 if ":" in host else socket.AF_INET)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        # listening from here: a client that connects once the URL is printed waits in the
        # backlog until the server accepts (it was refused until uvicorn started listening)
        sock.listen(2048)
    except (OSError, UnicodeError) as e:
        sock.close()
        why = getattr(e, "strerror", None) or str(e) or type(e).__name__
        raise UsageError(f"--host {host} --port {port}: cannot listen there ({why})"[:300]) from None
    sock.set_inheritable(True)
    return sock


def serve_processes(server, processes: int, sock) -> int:
    """Serve from ``processes`` forked copies of this process, each running ``server()`` (an
    uvicorn server: ``StoppingServer``), all accepting on the one socket ``sock``: each has its
    own event loop, ``/health`` and scoring threads, so
    scoring, bound by one interpreter lock per process, runs on as many cores. The loaded model
    is frozen out of the garbage collector before the fork, so its pages stay shared. This
    process only watches: a copy that dies is started again (unless ``RESTARTS`` died within
    ``RESTART_WINDOW_S``: then they all stop, exit 1); SIGTERM or SIGINT stops them all, and a
    copy whose parent ends unasked (killed) stops too (``end_with_parent``)."""
    import gc
    import signal

    gc.collect()
    gc.freeze()  # the objects alive now are never written by the collector: shared, not copied
    children: set[int] = set()
    ended: list[float] = []  # when copies died unasked
    stopping = False
    code = 0

    def start() -> None:
        signals = {signal.SIGINT, signal.SIGTERM}
        signal.pthread_sigmask(signal.SIG_BLOCK, signals)  # none lands between the fork and the reset
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the copy: serve until told to stop, never return into the parent's code
            exit_code = 1
            try:
                end_with_parent(parent)
                for s in signals:
                    signal.signal(s, signal.SIG_DFL)
                signal.pthread_sigmask(signal.SIG_UNBLOCK, signals)
                server().run(sockets=[sock])
                exit_code = 0
            finally:
                os._exit(exit_code)
        children.add(pid)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, signals)

    def stop(signum, frame) -> None:
        nonlocal stopping
        stopping = True
        for pid in list(children):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    for _ in range(processes):
        start()
    while children:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        if pid not in children:
            continue
        children.discard(pid)
        if stopping:
            continue
        now = time.monotonic()
        ended = [t for t in ended if now - t < RESTART_WINDOW_S] + [now]
        message = f"rat-serve: process {pid} ended ({os.waitstatus_to_exitcode(status)})"
        if len(ended) >= RESTARTS:
            print(f"{message}, {len(ended)} within {RESTART_WINDOW_S:g} s; stopping", file=sys.stderr, flush=True)
            code = 1
            stop(signal.SIGTERM, None)
        else:
            print(f"{message}; starting another", file=sys.stderr, flush=True)
            start()
    sock.close()
    return code


if __name__ == "__main__":
    sys.exit(main())
