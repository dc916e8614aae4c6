"""What runs inside a `DataLoader` worker process, and what it sends back.

A worker reads `(task_id, index)` tasks from its own queue, fetches and
collates with the same fetcher as the single-process path, and puts
`(task_id, payload)` on the shared result queue. Payloads are pickled in the
worker (flow tensors travel as their numpy arrays), so a batch that cannot be
pickled comes back as an error instead of being lost in the queue's feeder thread.
"""

from __future__ import annotations

import copyreg
import io
import os
import pickle
import queue
import random
import sys
import traceback
from dataclasses import dataclass
from typing import Any

import numpy as np

from flow.core.tensor import Tensor
from flow.ops.basic import from_numpy
from flow.ops.random import manual_seed

from ._fetch import IterableFetcher, make_fetcher

POLL_INTERVAL = 0.5
"""Seconds between checks that the other side is still alive while waiting on a queue."""


@dataclass(frozen=True)
class WorkerInfo:
    """Which worker this process is: `id` in `[0, num_workers)`, its `seed`, and its copy
    of the `dataset` (an `IterableDataset` uses these to shard its stream)."""

    id: int
    num_workers: int
    seed: int
    dataset: Any


_worker_info: WorkerInfo | None = None


def get_worker_info() -> WorkerInfo | None:
    """The `WorkerInfo` of the current `DataLoader` worker process; None in the main process."""
    return _worker_info


class ResumeIteration:
    """Sent to persistent workers at a new epoch: restart the dataset's stream, then ack."""


@dataclass(frozen=True)
class IterableEnd:
    """A worker's reply once its copy of an `IterableDataset` is exhausted."""

    worker_id: int


class _KeyErrorMessage(str):
    """KeyError shows its argument's repr; this keeps a multi-line traceback readable."""

    def __repr__(self) -> str:
        return str(self)


class ExceptionWrapper:
    """An exception raised in a worker: its type (when picklable) and its traceback text."""

    def __init__(self, where: str):
        exc_type = sys.exc_info()[0]
        self.exc_type = exc_type if _picklable(exc_type) else RuntimeError
        self.message = f"Caught {exc_type.__name__} {where}.\nOriginal {traceback.format_exc()}"

    def reraise(self) -> None:
        msg = _KeyErrorMessage(self.message) if self.exc_type is KeyError else self.message
        try:
            exc = self.exc_type(msg)
        except Exception:  # an exception type that cannot be built from one message
            raise RuntimeError(msg) from None
        raise exc


def _picklable(obj: Any) -> bool:
    try:
        return pickle.loads(pickle.dumps(obj)) is obj
    except Exception:
        return False


def _rebuild_tensor(arr: np.ndarray) -> Tensor:
    return from_numpy(arr)


def _reduce_tensor(t: Tensor):
    return _rebuild_tensor, (t.numpy(),)


def dumps(obj: Any) -> bytes:
    """Pickle `obj`, with flow tensors reduced to their numpy arrays."""
    buf = io.BytesIO()
    pickler = pickle.Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = copyreg.dispatch_table | {Tensor: _reduce_tensor}
    pickler.dump(obj)
    return buf.getvalue()


def _seed_all(base_seed: int, worker_id: int) -> int:
    """Seed Python's, numpy's and flow's global RNGs for this worker (PyTorch's scheme:
    flow and Python get `base_seed + worker_id`; numpy a state mixed from both)."""
    seed = base_seed + worker_id
    random.seed(seed)
    np.random.seed(np.random.SeedSequence([worker_id, base_seed]).generate_state(4))
    manual_seed(seed)
    return seed


def worker_loop(dataset: Any, index_queue, result_queue, auto_collation: bool, collate_fn,
                drop_last: bool, base_seed: int, init_fn, worker_id: int, num_workers: int,
                parent_pid: int) -> None:  # fmt: skip
    """Serve tasks until a None task arrives or the parent process is gone."""
    global _worker_info
    try:
        seed = _seed_all(base_seed, worker_id)
        _worker_info = WorkerInfo(worker_id, num_workers, seed, dataset)
        where = f"in DataLoader worker process {worker_id}"
        init_error = fetcher = None
        try:
            if init_fn is not None:
                init_fn(worker_id)
            fetcher = make_fetcher(dataset, auto_collation, collate_fn, drop_last)
        except Exception:
            init_error = ExceptionWrapper(where)
        ended = False
        while True:
            try:
                task = index_queue.get(timeout=POLL_INTERVAL)
            except queue.Empty:
                if os.getppid() != parent_pid:
                    break
                continue
            if task is None:
                break
            if isinstance(task, ResumeIteration):
                ended = False
                if init_error is None:
                    try:
                        fetcher = make_fetcher(dataset, auto_collation, collate_fn, drop_last)
                    except Exception:
                        init_error = ExceptionWrapper(where)
                result_queue.put((task, None))
                continue
            if ended:  # the main process skips tasks sent to an exhausted worker
                continue
            task_id, index = task
            payload: Any = init_error
            if payload is None:
                try:
                    payload = dumps(fetcher.fetch(index))
                except StopIteration:
                    if not isinstance(fetcher, IterableFetcher):
                        payload = ExceptionWrapper(where)
                    else:
                        payload, ended = IterableEnd(worker_id), True
                except Exception:
                    payload = ExceptionWrapper(where)
            result_queue.put((task_id, payload))
    except KeyboardInterrupt:
        pass
    finally:
        result_queue.cancel_join_thread()
