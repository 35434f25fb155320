"""`kill` (SIGTERM) stops a matrix gracefully, whenever it arrives.

Snakemake's SIGTERM handler (JobScheduler.exit_gracefully, 9.x up to 9.27.1 at least)
takes the scheduler's lock, a plain threading.Lock. Python runs a signal handler on the
main thread, which holds that lock while it chooses jobs (the ILP solver runs for tens of
milliseconds) and while it books finished ones. A SIGTERM in those moments waits for a
lock its own thread holds: Snakemake hangs for good, with no job running (about one stop
in fifteen on the 2-vCPU VM). Running the handler on a thread of its own lets it wait until
the main thread lets the lock go, and then do what it always did.
"""
from __future__ import annotations

import signal
import threading

_OFF_MAIN = "_tcpeval_off_main_thread"


def sigterm_handler_off_main_thread() -> None:
    """Re-install the SIGTERM handler in place (Snakemake's, set when its scheduler was
    built) so that each signal runs it on a new thread. Call it from the workflow's
    `onstart`, which Snakemake runs after building the scheduler and before scheduling."""
    handler = signal.getsignal(signal.SIGTERM)
    if not callable(handler) or getattr(handler, _OFF_MAIN, False):
        return  # default or ignored disposition (nothing to defer), or already deferred

    def deferred(signum, _frame):
        threading.Thread(target=handler, args=(signum, None), name="sigterm-handler",
                         daemon=True).start()

    setattr(deferred, _OFF_MAIN, True)
    signal.signal(signal.SIGTERM, deferred)
