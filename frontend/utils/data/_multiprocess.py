"""The multi-process `DataLoader` iterator: workers fetch, the main process restores order.

Tasks go round-robin to the workers' own queues, at most `prefetch_factor *
num_workers` ahead; results share one queue and are held back until every
earlier task's result has been yielded, so batches come out in sampler order,
exactly as with `num_workers=0`. Workers start with 'fork' where the platform
has it (nothing is pickled) and 'spawn' otherwise.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import pickle
import queue
import time
import weakref
from typing import Any

from ._dataloader import BaseIter, DataLoader
from ._worker import POLL_INTERVAL, ExceptionWrapper, IterableEnd, ResumeIteration, worker_loop

SHUTDOWN_GRACE = 1.0
"""Seconds workers get to exit after the stop signal before they are terminated."""


def _context(requested: Any):
    if requested is None:
        methods = multiprocessing.get_all_start_methods()
        return multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    if isinstance(requested, str):
        return multiprocessing.get_context(requested)
    return requested


def _shutdown(workers: list, index_queues: list, result_queue) -> None:
    """Ask every worker to stop, terminate those that do not within the grace period,
    and release the queues (without waiting for data nobody will read)."""
    for q in index_queues:
        try:
            q.put(None)
        except (OSError, ValueError):
            pass
    deadline = time.monotonic() + SHUTDOWN_GRACE
    for w in workers:
        w.join(max(0.0, deadline - time.monotonic()))
    for w in workers:
        if w.is_alive():
            w.terminate()
            w.join()
    for q in [*index_queues, result_queue]:
        q.cancel_join_thread()
        q.close()


class MultiProcessIter(BaseIter):
    def __init__(self, loader: DataLoader):
        super().__init__(loader)
        self._num_workers = loader.num_workers
        self._prefetch = loader.prefetch_factor * loader.num_workers
        self._timeout = loader.timeout
        self._persistent = loader.persistent_workers
        ctx = _context(loader.multiprocessing_context)
        self._result_queue = ctx.Queue()
        self._index_queues: list = []
        self._workers: list = []
        self._finalizer = weakref.finalize(
            self, _shutdown, self._workers, self._index_queues, self._result_queue
        )
        for worker_id in range(self._num_workers):
            index_queue = ctx.Queue()
            worker = ctx.Process(
                target=worker_loop,
                args=(
                    self._dataset,
                    index_queue,
                    self._result_queue,
                    self._auto_collation,
                    self._collate_fn,
                    self._drop_last,
                    self._base_seed,
                    loader.worker_init_fn,
                    worker_id,
                    self._num_workers,
                    os.getpid(),
                ),
                daemon=True,
            )
            self._index_queues.append(index_queue)
            try:
                worker.start()
            except (pickle.PicklingError, AttributeError, TypeError) as err:
                self._finalizer()
                raise RuntimeError(
                    f"DataLoader could not start worker processes with the "
                    f"{ctx.get_start_method()!r} start method, which pickles the dataset, "
                    f"collate_fn and worker_init_fn: make them picklable (defined at module "
                    f"level, not lambdas or local classes) or use num_workers=0 ({err})"
                ) from err
            self._workers.append(worker)
        self._start_epoch()

    def reset(self, loader: DataLoader) -> None:
        """Start a new epoch on the same (persistent) workers."""
        super().reset(loader)
        for q in self._index_queues:
            q.put(ResumeIteration())
        acks = 0
        while acks < self._num_workers:  # results of an abandoned epoch arrive first: drop them
            task_id, _ = self._get()
            acks += isinstance(task_id, ResumeIteration)
        self._start_epoch()

    def _start_epoch(self) -> None:
        self._send_idx = self._rcvd_idx = self._outstanding = 0
        self._tasks: dict[int, tuple] = {}  # task id -> (worker id,) or (worker id, payload)
        self._active = [True] * self._num_workers
        self._worker_cycle = itertools.cycle(range(self._num_workers))
        for _ in range(self._prefetch):
            self._put_task()

    def _put_task(self) -> None:
        if self._outstanding >= self._prefetch:
            return
        try:
            index = next(self._sampler_iter)
        except StopIteration:
            return
        for _ in range(self._num_workers):
            worker_id = next(self._worker_cycle)
            if self._active[worker_id]:
                break
        else:
            return
        self._index_queues[worker_id].put((self._send_idx, index))
        self._tasks[self._send_idx] = (worker_id,)
        self._outstanding += 1
        self._send_idx += 1

    def _get(self) -> tuple[Any, Any]:
        """The next result from any worker; raises if `timeout` passes or a worker died."""
        deadline = time.monotonic() + self._timeout if self._timeout > 0 else None
        while True:
            wait = POLL_INTERVAL
            if deadline is not None:
                wait = max(0.0, min(wait, deadline - time.monotonic()))
            try:
                return self._result_queue.get(timeout=wait)
            except queue.Empty:
                pass
            if deadline is not None and time.monotonic() >= deadline:
                raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds")
            dead = [w for w in self._workers if not w.is_alive()]
            if dead:
                self._finalizer()
                codes = ", ".join(f"pid {w.pid}: exit code {w.exitcode}" for w in dead)
                raise RuntimeError(f"DataLoader worker(s) exited unexpectedly ({codes})")

    def _next(self) -> Any:
        while True:
            while self._rcvd_idx < self._send_idx:  # skip tasks of exhausted workers
                task = self._tasks[self._rcvd_idx]
                if len(task) == 2 or self._active[task[0]]:
                    break
                del self._tasks[self._rcvd_idx]
                self._rcvd_idx += 1
            else:
                if not self._persistent:
                    self._finalizer()
                raise StopIteration
            task = self._tasks[self._rcvd_idx]
            if len(task) == 2:
                return self._deliver(task[1])
            task_id, payload = self._get()
            self._outstanding -= 1
            if isinstance(payload, IterableEnd):
                self._active[payload.worker_id] = False
                self._put_task()
            elif task_id == self._rcvd_idx:
                return self._deliver(payload)
            else:
                self._tasks[task_id] += (payload,)

    def _deliver(self, payload: Any) -> Any:
        del self._tasks[self._rcvd_idx]
        self._rcvd_idx += 1
        self._put_task()
        if isinstance(payload, ExceptionWrapper):
            payload.reraise()
        return pickle.loads(payload)
