"""Where the independent pieces of heavy work run: in this process (``local``, the default) or on a
Dask.distributed cluster (``dask``: a scheduler address, or ``local:N`` for a ``LocalCluster`` of N workers).

One seam for every family that scales out: the caller cuts its work into *tasks* — a module-level
function ``fn(item, shared, rep) -> result`` and a list of items — and :meth:`Executor.map` returns the results in
the items' order, whichever executor ran them and in whatever order they finished. ``shared`` is one object every
task of the call reads (sent to the cluster once); ``rep`` is a :class:`~fairdesk.core.progress.Reporter`: in the
local executor the task's share of the caller's progress bar with the caller's cancel token, on a cluster a silent
one (progress moves per finished task there, and cancel cancels the futures).

A task draws its random numbers from :func:`task_rng` keyed by its identity (never by which worker runs it or when),
so the stored document is the same number for number on any executor and any number of workers.

Dask.distributed is optional (``pip install 'fairdesk[distributed]'``) and imported only when a ``dask`` executor is
opened; the local executor imports nothing.
"""
from __future__ import annotations

from abc import ABC, abstractmethod

import contextlib
import logging
import time
import uuid
import warnings
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fairdesk.core.errors import FairDeskError
from fairdesk.core.progress import Cancelled, Reporter

KINDS = ("local", "dask")
INSTALL_HINT = ("--executor dask needs Dask.distributed, which is not installed: install it with "
                "pip install 'fairdesk[distributed]' (on an air-gapped machine from the wheelhouse), or use "
                "--executor local.")
#: seconds to wait for a remote scheduler's first worker
CONNECT_TIMEOUT = 30.0
#: seconds between two looks at the cancel token while tasks run on a cluster
POLL_SECONDS = 0.2
#: packages whose versions decide the numbers: a worker running other versions is refused
SAME_VERSIONS = ("fairdesk", "numpy", "pandas", "scipy", "scikit-learn")

#: the worker processes of ``local:N`` run one BLAS / OpenMP / torch thread each: N workers use N cores
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}

Task = Callable[[Any, Any, Reporter], Any]


@dataclass(frozen=True)
class ExecutorSpec:
    """Which executor to open: ``kind`` "local" or "dask"; ``scheduler`` (dask only) ``tcp://HOST:PORT`` or
    ``local:N``. What the CLI's ``--executor`` / ``--scheduler`` and the GUI's Settings › Executor hold."""

    kind: str = "local"
    scheduler: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise FairDeskError(f"Unknown --executor '{self.kind}'; choose local or dask.")
        sched = (self.scheduler or "").strip() or None
        object.__setattr__(self, "scheduler", sched)
        if self.kind == "local":
            if sched is not None:
                raise FairDeskError("--scheduler belongs to --executor dask; leave it out with --executor local.")
            return
        if sched is None:
            raise FairDeskError("--executor dask needs --scheduler: the scheduler's address (tcp://HOST:PORT) or "
                                "local:N for N workers on this machine.")
        if sched.startswith("local:"):
            n = sched[len("local:"):]
            if not n.isdigit() or not 1 <= int(n) <= 1024:
                raise FairDeskError(f"--scheduler {sched}: give local:N with N a whole number of workers from 1 to "
                                    "1024, e.g. local:4.")
        elif "://" not in sched and ":" not in sched:
            raise FairDeskError(f"--scheduler {sched} is not an address: give tcp://HOST:PORT (e.g. "
                                "tcp://10.0.0.5:8786) or local:N.")

    @classmethod
    def from_options(cls, executor: str | None, scheduler: str | None) -> "ExecutorSpec":
        return cls(executor or "local", scheduler)

    @property
    def local_workers(self) -> int | None:
        """N of ``local:N``, else None."""
        if self.scheduler and self.scheduler.startswith("local:"):
            return int(self.scheduler[len("local:"):])
        return None


def task_seed(seed: int, *identity) -> np.random.SeedSequence:
    """The seed sequence of one task: the run's seed as entropy, the task's identity (e.g. task name and attribute)
    as the spawn key (CRC-32 of each part's text). Two tasks with different identities get independent streams; the
    same task gets the same stream on any worker, in any order."""
    return np.random.SeedSequence(int(seed), spawn_key=tuple(zlib.crc32(str(p).encode("utf-8")) for p in identity))


def task_rng(seed: int, *identity) -> np.random.Generator:
    """``numpy.random.default_rng`` on :func:`task_seed`."""
    return np.random.default_rng(task_seed(seed, *identity))


def import_distributed():
    """``distributed``, or a :class:`FairDeskError` saying how to install it."""
    try:
        import distributed
    except ImportError:
        raise FairDeskError(INSTALL_HINT) from None
    return distributed


class Executor(ABC):
    """Runs tasks; counts them for the provenance (:meth:`provenance`). :class:`LocalExecutor` and
    :class:`DaskExecutor` are the two kinds."""

    kind = "local"
    scheduler: str | None = None
    workers = 1

    def __init__(self) -> None:
        self.tasks = 0

    @abstractmethod
    def map(self, fn: Task, items: Sequence, rep: Reporter | None = None,
            describe: Callable[[Any], str] = str, shared: Any = None, weights: Sequence[float] | None = None) -> list:
        """``[fn(item, shared, rep) for item in items]``, run by this executor; progress moves through ``rep`` as
        tasks finish, each task taking its share ``weights`` (equal shares when None) of the bar."""

    def provenance(self) -> dict:
        """``{"kind", "scheduler", "workers", "tasks"}`` as stored in ``provenance.executor``."""
        return {"kind": self.kind, "scheduler": self.scheduler, "workers": self.workers, "tasks": self.tasks}

    def close(self) -> None:
        """Nothing to release here."""


class LocalExecutor(Executor):
    """The tasks one after the other in this process: today's behaviour, with fine progress inside each task."""

    def map(self, fn, items, rep=None, describe=str, shared=None, weights=None) -> list:
        rep = rep or Reporter()
        edges = _edges(len(items), weights)
        out = []
        for i, item in enumerate(items):
            rep(edges[i], describe(item))
            out.append(fn(item, shared, rep.sub(edges[i], edges[i + 1])))
            self.tasks += 1
        return out


def _edges(n: int, weights: Sequence[float] | None) -> list[float]:
    """Where each of ``n`` tasks starts on a 0–1 progress bar (and 1.0 at the end)."""
    w = np.ones(n) if weights is None else np.asarray(weights, float)
    cum = np.concatenate([[0.0], np.cumsum(w)])
    return (cum / cum[-1]).tolist() if n else [0.0]


def run_remote(fn: Task, item, shared):
    """What a worker runs: the task with a silent reporter (progress is counted by finished tasks)."""
    return fn(item, shared, Reporter())


def worker_versions() -> dict[str, str | None]:
    """The versions of :data:`SAME_VERSIONS` in this process (run on every worker when connecting)."""
    from importlib import metadata

    from fairdesk import version

    out: dict[str, str | None] = {"fairdesk": version()}
    for name in SAME_VERSIONS[1:]:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


class DaskExecutor(Executor):
    """Tasks as futures of a ``distributed.Client``: on the scheduler at ``spec.scheduler``, or on a
    ``LocalCluster`` of N single-threaded worker processes bound to 127.0.0.1 for ``local:N``."""

    kind = "dask"

    def __init__(self, spec: ExecutorSpec, timeout: float = CONNECT_TIMEOUT) -> None:
        super().__init__()
        distributed = import_distributed()
        self.cluster = None
        n_local = spec.local_workers
        try:
            if n_local is not None:
                with warnings.catch_warnings():  # "port 8787 in use, another one taken": its HTTP port, loopback
                    warnings.filterwarnings("ignore", message=".*[Pp]ort.*")
                    self.cluster = distributed.LocalCluster(n_workers=n_local, threads_per_worker=1, processes=True,
                                                            host="127.0.0.1", dashboard_address=None,
                                                            silence_logs=logging.ERROR, env=ONE_THREAD)
                self.client = distributed.Client(self.cluster)
                self.client.wait_for_workers(n_local, timeout=timeout)
            else:
                self.client = distributed.Client(spec.scheduler, timeout=timeout)
                self.client.wait_for_workers(1, timeout=timeout)
        except (OSError, TimeoutError) as err:
            self.close()
            what = "start a local Dask cluster" if n_local else f"reach the Dask scheduler at {spec.scheduler}"
            raise FairDeskError(f"Could not {what} ({_reason(err)}); check that the scheduler runs and has a worker, "
                                "or use --executor local.") from None
        self.scheduler = spec.scheduler
        self.workers = len(self.client.scheduler_info(n_workers=-1)["workers"])
        self._check_versions()

    def _check_versions(self) -> None:
        mine = worker_versions()
        try:
            theirs = self.client.run(worker_versions)
        except Exception as err:  # noqa: BLE001 — a worker that cannot import fairdesk raises anything
            self.close()
            raise FairDeskError(f"The workers of the Dask scheduler at {self.scheduler} cannot run FairDesk "
                                f"({_reason(err)}); install the same FairDesk on every worker.") from None
        for worker, versions in sorted(theirs.items()):
            differ = {k: v for k, v in versions.items() if v != mine.get(k)}
            if differ:
                self.close()
                said = ", ".join(f"{k} {v} (here {mine.get(k)})" for k, v in differ.items())
                raise FairDeskError(f"The Dask worker {worker} of {self.scheduler} runs {said}; install the same "
                                    "versions on every worker (the wheelhouse), so that the numbers match.")

    def map(self, fn, items, rep=None, describe=str, shared=None, weights=None) -> list:
        distributed = import_distributed()
        rep = rep or Reporter()
        n = len(items)
        if n == 0:
            return []
        run = uuid.uuid4().hex[:8]
        name = getattr(fn, "__name__", "task").strip("_")
        futures = []
        try:
            shared_f = self.client.scatter(shared, broadcast=False, hash=False) if shared is not None else None
            futures = [self.client.submit(run_remote, fn, item, shared_f, key=f"{name}-{run}-{i}", pure=False)
                       for i, item in enumerate(items)]
            self.tasks += n
            index = {f.key: i for i, f in enumerate(futures)}
            share = np.diff(_edges(n, weights))
            pending, done, moved = set(futures), 0, 0.0
            rep(0.0, f"{n:,} tasks sent to {self.workers} Dask worker(s) at {self.scheduler}")
            while pending:
                if rep.cancel.cancelled:
                    raise Cancelled()
                try:
                    finished = distributed.wait(list(pending), timeout=POLL_SECONDS,
                                                return_when="FIRST_COMPLETED").done
                except TimeoutError:
                    continue
                for f in finished:
                    pending.discard(f)
                    if f.status == "error":
                        self._raise_task_error(f, describe(items[index[f.key]]))
                    if f.status != "finished":
                        raise FairDeskError(f"Lost the connection to the Dask scheduler at {self.scheduler} "
                                            f"({f.status} task); nothing was stored. Check the scheduler and run "
                                            "again.")
                    done += 1
                    moved += share[index[f.key]]
                    rep(moved, f"{describe(items[index[f.key]])} done ({done:,} of {n:,} tasks on "
                                  f"{self.workers} Dask worker(s))")
            return self.client.gather(futures)
        except BaseException:
            if futures:  # cancel: the futures go too (nothing keeps running for a result no one will store)
                with contextlib.suppress(Exception):
                    self.client.cancel(futures, force=True)
            raise

    def _raise_task_error(self, future, what: str) -> None:
        from distributed.scheduler import KilledWorker

        err = future.exception()
        if isinstance(err, KilledWorker):
            raise FairDeskError(f"Dask workers of the scheduler at {self.scheduler} died while running {what}, on "
                                "every retry; nothing was stored. Check the workers' memory and logs, then run "
                                "again.") from None
        future.result()  # the task's own error, as raised in the task (e.g. a DataError naming a column)

    def close(self) -> None:
        for part in ("client", "cluster"):
            obj = getattr(self, part, None)
            if obj is not None:
                with contextlib.suppress(Exception):
                    obj.close()
                setattr(self, part, None)


def _reason(err: BaseException) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text if len(text) <= 160 else text[:157] + "…"


@contextlib.contextmanager
def open_executor(spec: ExecutorSpec | Executor | None = None) -> Iterator[Executor]:
    """The executor of ``spec`` (None: local), closed afterwards; an :class:`Executor` passed in is used as is
    (and left open: its opener closes it)."""
    if isinstance(spec, Executor):
        yield spec
        return
    spec = spec or ExecutorSpec()
    ex = LocalExecutor() if spec.kind == "local" else DaskExecutor(spec)
    try:
        yield ex
    finally:
        ex.close()


def probe(spec: ExecutorSpec, timeout: float = 10.0) -> dict:
    """Test the connection (GUI Settings › Executor): ``{"scheduler", "workers", "threads", "seconds"}`` of a
    cluster that answers; raises :class:`FairDeskError` in one sentence otherwise."""
    if spec.kind == "local":
        return {"scheduler": None, "workers": 1, "threads": 1, "seconds": 0.0}
    t0 = time.monotonic()
    ex = DaskExecutor(spec, timeout=timeout)
    try:
        info = ex.client.scheduler_info(n_workers=-1)["workers"]
        threads = sum(int(w.get("nthreads", 1)) for w in info.values())
        return {"scheduler": ex.scheduler, "workers": len(info), "threads": threads,
                "seconds": round(time.monotonic() - t0, 2)}
    finally:
        ex.close()


def executor_text(provenance: dict) -> str:
    """The executor of a stored document in words, for the reports' provenance sections."""
    rec = (provenance or {}).get("executor")
    if not rec:
        return "not recorded (run in one process before executors were recorded)"
    tasks = rec.get("tasks")
    count = f"{tasks:,} tasks" if isinstance(tasks, int) else "tasks not counted"
    if rec.get("kind") == "dask":
        workers = rec.get("workers")
        return (f"Dask.distributed, scheduler {rec.get('scheduler')}, {workers} worker{'s' * (workers != 1)}, "
                f"{count} (each with its own random stream: the numbers do not depend on the executor)")
    return f"local (this process), {count}"
