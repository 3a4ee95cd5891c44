"""Who scores a sweep's chunks: this process and jobs - 1 loky workers (joblib's own process
pool), sharing them out so no core waits (sweep/run.py feeds the results to the merge).

joblib's Parallel runs every chunk in a worker while its caller waits; here the caller takes
part. It also merges what the workers finish (sweep/merge.py, in chunk order), so it scores a
chunk itself only when no finished one is waiting, and always the lowest chunk left: the
merge is never held up by a chunk nobody has started. --jobs 2 so starts one worker process,
not two, and its start-up overlaps with this process's first chunk."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from typing import Any, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")

SMALL_GRID_CELLS = 2_000_000  # below this, starting workers costs more than they save
THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)
WORKER_THREAD_LIMITS = dict.fromkeys(THREAD_VARIABLES, "1")  # the processes are the parallelism
IDLE_WORKER_S = 300
AHEAD = 4  # items queued per worker: none runs dry while the caller scores or merges
# the executor loky_workers last returned (loky keeps its reusable one out of reach: in a
# module global before 3.7, per thread since)
_STARTED: dict[str, Any] = {}


def jobs_for(jobs: int, cells: float, chunks: int) -> int:
    """Processes worth scoring with: one for a small grid (INFERSIZE_MIN_PARALLEL_CELLS,
    default 2 M cells, moves the line), never more than its chunks."""
    smallest = int(os.environ.get("INFERSIZE_MIN_PARALLEL_CELLS", SMALL_GRID_CELLS))
    return 1 if cells < smallest else max(1, min(jobs, chunks))


PARENT_POLL_S = 0.2  # how often a worker looks for its parent: it outlives it by no more


# A terminal's hang-up and Ctrl-C reach the whole process group: this process ends the run and
# kills its workers, which must not also die of them on their own (loky's resource tracker,
# killed by SIGHUP, was relaunched and printed a traceback for every resource it did not know)
HELD_SIGNALS = ("SIGINT", "SIGHUP")


def loky_workers(n: int, simulator: bool = False) -> Any:
    """n loky workers, reused by later calls in this process (loky's reusable executor); each
    exits as soon as this process is gone, however it ended (SIGKILL included). They, loky's
    resource tracker and the thread that respawns workers start with HELD_SIGNALS blocked (a
    mask a child inherits), so only this process hears them; one that arrives meanwhile is
    delivered here once the workers are up. Python's own resource tracker (multiprocessing's,
    which loky starts beside its own) is started first and the mask set again after it:
    CPython 3.11's `resource_tracker.ensure_running` ends its launch with
    `pthread_sigmask(SIG_UNBLOCK, (SIGINT, SIGTERM))` rather than restoring the mask it found,
    and the workers loky started next heard Ctrl-C (a worker still importing printed its
    KeyboardInterrupt after the run's line). `simulator`: the run has capacity rows, so its
    workers load the compiled simulator too."""
    import signal
    from multiprocessing import resource_tracker

    from loky import get_reusable_executor

    held = {getattr(signal, name) for name in HELD_SIGNALS if hasattr(signal, name)}
    masks = hasattr(signal, "pthread_sigmask")  # POSIX
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held) if masks else set()
    try:
        if masks:
            resource_tracker.ensure_running()
            signal.pthread_sigmask(signal.SIG_BLOCK, held)
        executor = get_reusable_executor(
            max_workers=n,
            timeout=IDLE_WORKER_S,
            env=WORKER_THREAD_LIMITS,
            initializer=watch_parent,
            initargs=(os.getpid(),),
        )
        _STARTED["executor"] = executor  # before anything that may raise: stop_workers finds it
        # starts the workers, the tracker and the manager thread now; a worker's first task
        # imports what a chunk runs, as loky takes its memory baseline after the first task
        # (the libraries, the compiled simulator among them, would otherwise read as a leak
        # and the worker would be restarted mid-run with a warning)
        executor.submit(_import_in_worker, simulator)
    finally:
        if masks:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)
    return executor


# glibc's mallopt parameters (malloc.h), and the largest block it may be told to keep
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
KEPT_BLOCK_BYTES = 32 * 2**20
KEPT_HEAP_BYTES = 2**30


def keep_freed_memory() -> None:
    """Let the main process of `infersize sweep run` reuse the memory of one chunk's arrays for
    the next chunk's: glibc gives a freed block over 128 KiB back to the system, and the next
    chunk's arrays fault the same pages in again, most of a --jobs 1 fleet run's system time.
    Blocks up to 32 MiB now come from the heap, which is trimmed only past 1 GiB free; the peak
    memory is the same. Not in loky's workers: loky restarts a worker whose memory stays 300 MB
    above what it held after its first task, as a kept heap does. Where the C library is not
    glibc, nothing changes."""
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError, TypeError):
        return
    mallopt(M_MMAP_THRESHOLD, KEPT_BLOCK_BYTES)
    mallopt(M_TRIM_THRESHOLD, KEPT_HEAP_BYTES)


def watch_parent(parent: int) -> None:
    """In a worker: a thread that ends the process when `parent` is no longer its parent (the
    kernel hands an orphan to another process), so a killed run leaves no worker behind."""
    import threading
    import time

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="infersize-parent-watch", daemon=True).start()


def _import_in_worker(simulator: bool = False) -> int:
    """What run_chunk needs, imported ahead: the scoring, the tables, and for capacity rows
    the compiled simulator (numba) and polars (their lengths files); a fleet chunk needs
    neither, and polars alone is 0.14 s of a worker's start."""
    import pyarrow.parquet  # noqa: F401

    import infersize.sweep.chunks

    if simulator:
        import polars  # noqa: F401

        import infersize.core.serving.kernel
        import infersize.core.serving.meanfield_steps
        import infersize.sweep.capacity.table  # noqa: F401
    return os.getpid()


def warm_workers(jobs: int, simulator: bool = False) -> None:
    """Start the workers of a `jobs`-process run now, so their interpreters start and import
    while the plan is built (submitting returns at once); the run reuses them."""
    workers = loky_workers(jobs - 1, simulator)
    for _ in range(jobs - 1):
        workers.submit(_import_in_worker, simulator)


def share_out(
    items: list[Item], work: Callable[[Item], Result], pool: Executor | None, workers: int
) -> Iterator[Result]:
    """`work` of every item, each yielded as it finishes, done by the caller and `workers`
    workers of `pool`. Workers are kept up to AHEAD items ahead each, never more in all than
    the items left for the caller times the workers, so all end together; between yields the
    caller does the lowest item left whenever no finished one is waiting. A worker run dry
    while a finished item waits (mostly near the end, or when the caller falls behind) is
    given the lowest item left at once, so it is not idle while the caller hands results on."""
    queue = deque(items)
    running: set[Future[Result]] = set()
    while queue or running:
        while pool is not None and len(running) < min(AHEAD, len(queue) - 1) * workers:
            item = queue[1]  # the lowest is the caller's
            del queue[1]
            running.add(pool.submit(work, item))
        finished = next((future for future in running if future.done()), None)
        if finished is not None:
            if queue and pool is not None and _busy(running) < workers:
                running.add(pool.submit(work, queue.popleft()))  # an idle worker starts it now
            running.remove(finished)
            yield finished.result()
        elif queue:
            yield work(queue.popleft())
        else:
            wait(running, return_when=FIRST_COMPLETED)


def _busy(running: set[Future[Any]]) -> int:
    return sum(not future.done() for future in running)


def _running_executor() -> Any:
    """The loky executor loky_workers last started in this process, None if none was (not a
    new one, as get_reusable_executor() would make)."""
    return _STARTED.get("executor")


def stop_workers(wait: bool = False) -> None:
    """Kill this process's loky workers now (an interrupted run must not write on); `wait`
    also waits until the pool is torn down (its locks released: a process about to exit
    leaves nothing for loky's resource tracker to warn about).

    The workers are killed here, and loky's manager thread left to find them gone and tear
    the pool down as broken, before the executor is shut down: told to shut down with
    `kill_workers` while items it had not yet handed to a worker were queued (each worker is
    kept up to AHEAD ahead), loky 3.x's manager thread cancels them and then looks one of
    them up again (`KeyError` in `add_call_item_to_queue`), dying with a traceback after
    the run's line and leaving its semaphores to the resource tracker's leak warning."""
    executor = _running_executor()
    if executor is None:
        if "loky" in sys.modules:  # interrupted while loky was creating the executor
            _kill_workers()
        return
    if _kill_workers():
        for thread in threading.enumerate():
            if thread.name == MANAGER_THREAD:
                thread.join(timeout=WORKER_EXIT_S)
    try:
        executor.shutdown(wait=wait, kill_workers=True)
    except RuntimeError:  # interrupted while loky was starting it: no thread to wait for yet
        executor.shutdown(wait=False, kill_workers=True)


MANAGER_THREAD = "ExecutorManagerThread"  # loky's thread that feeds and reaps the workers
WORKER_EXIT_S = 5.0  # how long a killed worker, then the manager thread, may take to end


def _kill_workers() -> bool:
    """SIGKILL this process's loky worker processes (its other children are left alone) and
    wait for them to end; whether any was."""
    import multiprocessing
    import signal

    from loky.backend.process import LokyProcess

    workers = [p for p in multiprocessing.active_children() if isinstance(p, LokyProcess)]
    for worker in workers:
        if worker.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker.pid, getattr(signal, "SIGKILL", signal.SIGTERM))
    for worker in workers:
        worker.join(timeout=WORKER_EXIT_S)
    return bool(workers)


def release_workers() -> None:
    """Every chunk is scored: the idle workers exit while the tables are finished, instead of
    the process waiting for their interpreters to shut down when it exits (0.2 s)."""
    executor = _running_executor()
    if executor is not None:
        executor.shutdown(wait=False)
