"""A SIGTERM that arrives while Snakemake's main thread holds the scheduler's lock stops it
gracefully instead of hanging it (tcpeval.snakemake_signals). The handler is Snakemake's
own JobScheduler.exit_gracefully, on a scheduler's real lock and semaphore."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import types

import pytest
from snakemake.scheduling.job_scheduler import JobScheduler

from tcpeval import snakemake_signals


@pytest.fixture
def scheduler():
    """The state exit_gracefully touches, with its handler installed as Snakemake does."""
    sched = types.SimpleNamespace(_lock=threading.Lock(), _open_jobs=threading.Semaphore(0),
                                  _user_kill=None)
    previous = signal.signal(signal.SIGTERM, lambda *a: JobScheduler.exit_gracefully(sched, *a))
    yield sched
    signal.signal(signal.SIGTERM, previous)


# In a child process: without the fix the handler waits for good on the lock its own
# thread holds, and the child is killed at the timeout instead of hanging the suite.
HOLDS_THE_LOCK = """
import os, signal, threading, time, types
from snakemake.scheduling.job_scheduler import JobScheduler
from tcpeval import snakemake_signals
sched = types.SimpleNamespace(_lock=threading.Lock(), _open_jobs=threading.Semaphore(0), _user_kill=None)
signal.signal(signal.SIGTERM, lambda *a: JobScheduler.exit_gracefully(sched, *a))
snakemake_signals.sigterm_handler_off_main_thread()
with sched._lock:  # choosing jobs: Snakemake's own handler would wait here for good
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(0.05)
    print("while held:", sched._user_kill, flush=True)
assert sched._open_jobs.acquire(timeout=5)  # the scheduler's loop wakes up ...
print("after:", sched._user_kill)          # ... to stop after the running jobs
"""


def test_a_sigterm_while_the_main_thread_holds_the_schedulers_lock_stops_it_once_the_lock_is_free():
    try:
        child = subprocess.run([sys.executable, "-c", HOLDS_THE_LOCK], capture_output=True,
                               text=True, timeout=20)
    except subprocess.TimeoutExpired as hung:
        pytest.fail(f"the SIGTERM handler deadlocked on the scheduler's lock: {hung.stdout!r}")
    assert child.returncode == 0, child.stderr
    assert child.stdout.splitlines() == ["while held: None", "after: graceful"]


def test_installing_twice_defers_the_handler_once(scheduler):
    snakemake_signals.sigterm_handler_off_main_thread()
    deferred = signal.getsignal(signal.SIGTERM)
    snakemake_signals.sigterm_handler_off_main_thread()
    assert signal.getsignal(signal.SIGTERM) is deferred
    os.kill(os.getpid(), signal.SIGTERM)
    assert scheduler._open_jobs.acquire(timeout=5)
    assert not scheduler._open_jobs.acquire(timeout=0.2)  # one signal, one wake-up


def test_a_default_disposition_is_left_alone():
    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        snakemake_signals.sigterm_handler_off_main_thread()
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, previous)
