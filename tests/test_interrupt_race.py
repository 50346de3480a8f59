"""Ctrl-C while a command's worker processes start: each worker ignores it from its first
instruction on (``model.errors.start_pool``), not only once its initializer has run."""

from __future__ import annotations

import multiprocessing
import os
import signal

import pytest

import model.errors
from model.errors import leave_interrupts_to_the_parent, start_pool

_started = leave_interrupts_to_the_parent  # (the real one: the test below puts another in its place)


def _interrupted_while_starting() -> None:
    """A worker that Ctrl-C reaches before its initializer has run: the interrupt arrives
    (sent to itself, so that it is certain to come in that window), then the initializer."""
    os.kill(os.getpid(), signal.SIGINT)
    _started()


def _pid(_) -> int:
    return os.getpid()


@pytest.mark.parametrize("method", ["fork", "spawn"])  # (the scorer's pool forks, execution's spawns)
def test_a_worker_interrupted_before_its_initializer_lives_on(method, monkeypatch, capfd):
    """Without SIGINT blocked from the fork on, the interrupt raised KeyboardInterrupt in the
    worker: it printed a traceback and died, and so did each the pool put in its place (the
    map never ended)."""
    monkeypatch.setattr(model.errors, "leave_interrupts_to_the_parent", _interrupted_while_starting)
    with start_pool(multiprocessing.get_context(method), 1) as pool:
        assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, [])  # (the parent's, as before)
        [worker] = pool._pool
        assert set(pool.map_async(_pid, range(4)).get(timeout=10)) == {worker.pid}
        os.kill(worker.pid, signal.SIGINT)  # once started: ignored (a user's Ctrl-C is the parent's)
        assert set(pool.map_async(_pid, range(4)).get(timeout=10)) == {worker.pid} and worker.exitcode is None
    assert "KeyboardInterrupt" not in capfd.readouterr().err
