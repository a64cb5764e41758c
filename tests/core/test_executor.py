"""The executor seam (issue 25): local and Dask executors give the same stored documents.

In-process tests use the local executor only (the session's network guard stays whole). The Dask tests start a
loopback cluster with the ``dask`` command line — a scheduler and two workers bound to 127.0.0.1 — and run FairDesk
against it in subprocesses whose every connection outside the loopback is refused and logged.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fairdesk.core.errors import FairDeskError
from fairdesk.core.executor import Executor, ExecutorSpec, LocalExecutor, task_rng

ROOT = Path(__file__).resolve().parents[2]
DASK = shutil.which("dask", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
VOLATILE = ("created_utc", "elapsed_s", "seconds", "executor")  # clocks, and the executor itself


def _table(path: Path) -> Path:
    rng = np.random.default_rng(5)
    n = 1200
    pd.DataFrame({"task": np.repeat(["mort", "los", "sepsis"], n // 3), "y": rng.integers(0, 2, n),
                  "s": rng.random(n).round(4), "sex": rng.choice(["F", "M"], n), "race": rng.choice(["A", "B", "C"], n),
                  "age": rng.uniform(18, 90, n).round(1), "pid": rng.integers(0, 300, n)}).to_csv(path, index=False)
    return path


AUDIT = ["--label", "y", "--score", "s", "--task", "task", "--attribute", "sex", "--attribute", "race",
         "--continuous-attribute", "age", "--patient-id", "pid", "--threshold", "0.5", "--n-boot", "200", "--quiet"]


def _strip(obj):
    """The document without its clocks and executor record: what must be equal number for number."""
    if isinstance(obj, dict):
        return {k: _strip(v) for k, v in obj.items() if k not in VOLATILE}
    if isinstance(obj, list):
        return [_strip(v) for v in obj]
    return obj


# ----------------------------------------------------------------------------------------------------------------
# In process: the local executor, the seed streams, the options

def test_spec_refuses_what_cannot_run_in_one_sentence():
    assert ExecutorSpec() == ExecutorSpec("local", None)
    assert ExecutorSpec("dask", "local:3").local_workers == 3
    assert ExecutorSpec("dask", "tcp://10.0.0.5:8786").local_workers is None
    for kind, sched, said in (("local", "tcp://h:1", "belongs to --executor dask"),
                              ("dask", None, "needs --scheduler"), ("dask", "local:0", "local:N"),
                              ("dask", "local:two", "local:N"), ("dask", "myhost", "not an address"),
                              ("ray", None, "Unknown --executor")):
        with pytest.raises(FairDeskError, match=said):
            ExecutorSpec(kind, sched)


def test_task_streams_are_keyed_by_identity_not_by_order():
    a = task_rng(7, "groups", "mort", "sex").random(5)
    assert np.array_equal(a, task_rng(7, "groups", "mort", "sex").random(5))
    assert not np.array_equal(a, task_rng(7, "groups", "mort", "race").random(5))
    assert not np.array_equal(a, task_rng(8, "groups", "mort", "sex").random(5))


class ReversedExecutor(Executor):
    """Runs the tasks last to first (as a cluster may finish them) and returns them in the items' order."""

    kind = "reversed"

    def map(self, fn, items, rep=None, describe=str, shared=None, weights=None):
        from fairdesk.core.progress import Reporter

        out = {i: fn(items[i], shared, Reporter()) for i in reversed(range(len(items)))}
        self.tasks += len(items)
        return [out[i] for i in range(len(items))]


def test_group_audit_does_not_depend_on_the_order_tasks_run_in(tmp_path):
    """The mechanism of the byte-identical documents: each (task, attribute) draws from its own stream, so running
    the units in another order changes nothing. Before issue 25 one generator ran through the units in turn (a
    unit's numbers depended on every unit before it)."""
    from fairdesk.core.audits.groups import GroupAuditPlan, run_group_audit
    from fairdesk.core.data.schema import ColumnRoles

    table = pd.read_csv(_table(tmp_path / "t.csv"))
    roles = ColumnRoles(label="y", score="s", task="task", attributes=("sex", "race"), continuous_attributes=("age",),
                        patient_id="pid")
    plan = GroupAuditPlan(roles=roles, threshold=0.5, n_boot=200, n_permutations=200)
    seen = []
    local = run_group_audit(table, plan, progress=lambda f, m: seen.append(f))
    other = run_group_audit(table, plan, executor=ReversedExecutor())
    assert _strip(local.to_dict()) == _strip(other.to_dict())
    assert local.provenance["executor"] == {"kind": "local", "scheduler": None, "workers": 1, "tasks": 9}
    assert other.provenance["executor"]["tasks"] == 9
    assert seen == sorted(seen)
    from fairdesk.core.kinds import ReportSettings
    from fairdesk.core.reports.groups import report_tree

    doc = json.loads(json.dumps(local.to_dict()))
    doc["provenance"]["executor"] = {"kind": "dask", "scheduler": "tcp://10.0.0.5:8786", "workers": 4, "tasks": 9}
    assert "Dask.distributed, scheduler tcp://10.0.0.5:8786, 4 workers, 9 tasks" in repr(
        report_tree(doc, ReportSettings(suppress_k=11)))  # the report's provenance names the executor


def test_the_local_path_imports_no_dask():
    code = ("import sys, pandas as pd; from fairdesk.core.audits.groups import GroupAuditPlan, run_group_audit; "
            "from fairdesk.core.data.schema import ColumnRoles; "
            "t = pd.DataFrame({'y': [0, 1] * 40, 's': [0.2, 0.7] * 40, 'g': ['a'] * 40 + ['b'] * 40}); "
            "r = run_group_audit(t, GroupAuditPlan(ColumnRoles(label='y', score='s', attributes=('g',)), "
            "threshold=0.5, n_boot=100, min_group_size=10)); "
            "print(r.provenance['executor']['kind'], 'dask' in sys.modules, 'distributed' in sys.modules)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["local", "False", "False"]


def test_local_executor_gives_each_task_its_share_of_the_progress_and_stops_on_cancel():
    from fairdesk.core.progress import Cancelled, CancelToken, Reporter

    seen = []
    ex = LocalExecutor()
    out = ex.map(lambda item, shared, rep: (rep(1.0, "x"), item * shared)[1], [1, 2, 3], Reporter(
        lambda f, m: seen.append(round(f, 3))), shared=10, weights=[2, 1, 1])
    assert out == [10, 20, 30] and ex.provenance()["tasks"] == 3
    assert seen == [0.0, 0.5, 0.5, 0.75, 0.75, 1.0]
    token = CancelToken()

    def task(item, shared, rep):
        token.cancel()
        return item

    with pytest.raises(Cancelled):
        LocalExecutor().map(task, [1, 2], Reporter(cancel=token))


def test_without_dask_the_option_says_how_to_install_it(monkeypatch, tmp_path, capsys):
    from fairdesk.cli import main

    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed -> ImportError
    csv = _table(tmp_path / "t.csv")
    code = main(["audit", "groups", str(csv), *AUDIT, "--json", str(tmp_path / "a.json"), "--executor", "dask",
                 "--scheduler", "local:2"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and not (tmp_path / "a.json").exists()
    assert "pip install 'fairdesk[distributed]'" in err and err.count("\n") == 0, err
    code = main(["audit", "groups", str(csv), *AUDIT, "--json", str(tmp_path / "a.json"), "--scheduler", "local:2"])
    assert code == 2 and "--scheduler belongs to --executor dask" in capsys.readouterr().err


# ----------------------------------------------------------------------------------------------------------------
# A loopback cluster started with the dask command line

_LOOPBACK_GUARD = '''
import os, socket
_LOG = os.environ["FAIRDESK_TEST_SOCKET_LOG"]
_AF_UNIX = getattr(socket, "AF_UNIX", None)

def _loopback(address):
    return isinstance(address, tuple) and str(address[0]) in ("127.0.0.1", "::1")

def _method(original, name):
    def guarded(self, address, *args):
        if self.family == _AF_UNIX or _loopback(address):
            return original(self, address, *args)
        with open(_LOG, "a") as log:
            log.write(f"{os.getpid()} {name}({address!r})\\n")
        raise OSError("network access attempted: " + name)
    return guarded

socket.socket.connect = _method(socket.socket.connect, "connect")
socket.socket.connect_ex = _method(socket.socket.connect_ex, "connect_ex")
'''


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """``dask scheduler`` and two ``dask worker`` processes on 127.0.0.1; yields (address, env, socket log)."""
    if DASK is None:
        pytest.skip("the dask command is not installed (pip install 'fairdesk[distributed]')")
    tmp = tmp_path_factory.mktemp("dask")
    (tmp / "guard").mkdir()
    (tmp / "guard" / "sitecustomize.py").write_text(_LOOPBACK_GUARD)
    log = tmp / "sockets.log"
    log.write_text("")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp / "guard"), str(ROOT)]), OMP_NUM_THREADS="1",
               FAIRDESK_TEST_SOCKET_LOG=str(log))
    procs = []
    try:
        sched_file = tmp / "scheduler.json"
        procs.append(subprocess.Popen([DASK, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                                       "--scheduler-file", str(sched_file)], env=env, cwd=tmp,
                                      stdout=subprocess.DEVNULL, stderr=open(tmp / "scheduler.log", "w")))
        deadline = time.monotonic() + 90
        while not sched_file.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        address = json.loads(sched_file.read_text())["address"]
        assert address.startswith("tcp://127.0.0.1:")
        logs = [tmp / f"worker{i}.log" for i in range(2)]
        for wlog in logs:
            procs.append(subprocess.Popen([DASK, "worker", address, "--host", "127.0.0.1", "--nthreads", "1",
                                           "--no-dashboard"], env=env, cwd=tmp, stdout=subprocess.DEVNULL,
                                          stderr=open(wlog, "w")))
        while time.monotonic() < deadline and not all("Registered to" in w.read_text() for w in logs):
            time.sleep(0.2)
        assert all("Registered to" in w.read_text() for w in logs), [w.read_text()[-500:] for w in logs]
        yield address, env, log
    finally:
        for p in procs:  # killed, not terminated: a terminated worker spends ~8 s closing gracefully; nothing to keep
            p.kill()
        for p in procs:
            p.wait(timeout=20)


def _cli(env, *args, timeout=300):
    run = subprocess.run([sys.executable, "-m", "fairdesk", *args], env=env, capture_output=True, text=True,
                         timeout=timeout, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    return run


def test_group_audit_on_a_loopback_cluster_equals_the_local_audit(cluster, tmp_path):
    address, env, log = cluster
    csv = _table(tmp_path / "t.csv")
    local = _cli(env, "audit", "groups", str(csv), *AUDIT, "--json", str(tmp_path / "local.json"))
    dask = _cli(env, "audit", "groups", str(csv), *AUDIT, "--json", str(tmp_path / "dask.json"),
                "--executor", "dask", "--scheduler", address)
    a, b = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("local", "dask"))
    assert b["provenance"]["executor"] == {"kind": "dask", "scheduler": address, "workers": 2, "tasks": 9}
    assert a["provenance"]["executor"] == {"kind": "local", "scheduler": None, "workers": 1, "tasks": 9}
    for doc in (a, b):
        doc["provenance"].pop("executor"), doc["provenance"].pop("created_utc")
    assert json.dumps(a, indent=1) == json.dumps(b, indent=1)  # byte for byte, apart from clock and executor
    assert local.stdout.split(" -> ")[0] == dask.stdout.split(" -> ")[0]  # the same counts said
    assert log.read_text() == ""  # nothing outside the loopback


def test_validity_run_on_a_loopback_cluster_equals_the_local_run(cluster, tmp_path):
    address, env, log = cluster
    common = ["bench", "validity", "--family", "mlm", "--runs", "2", "--seed", "3", "--quiet"]
    _cli(env, *common, "--json", str(tmp_path / "local.json"))
    _cli(env, *common, "--json", str(tmp_path / "dask.json"), "--executor", "dask", "--scheduler", address)
    a, b = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("local", "dask"))
    assert b["provenance"]["executor"]["workers"] == 2
    assert b["provenance"]["executor"]["tasks"] == a["provenance"]["executor"]["tasks"] == 16  # 8 laws × 2 runs
    assert json.dumps(_strip(a)) == json.dumps(_strip(b))
    assert log.read_text() == ""


CANCEL = textwrap.dedent("""
    import sys, time
    from distributed import Client
    from fairdesk.core.audits.groups import GroupAuditPlan
    from fairdesk.core.data.schema import ColumnRoles
    from fairdesk.core.executor import ExecutorSpec
    from fairdesk.core.progress import Cancelled, CancelToken
    from fairdesk.core.project import Project
    from fairdesk.core.data.tables import import_table
    from fairdesk.jobs.groups import audit_groups

    address, csv, project = sys.argv[1:4]
    roles = ColumnRoles(label="y", score="s", task="task", attributes=("sex", "race"), patient_id="pid")
    ds = import_table(project, csv, roles=roles)
    token, seen = CancelToken(), []

    def progress(f, m):
        seen.append(m)
        if "done (1 of" in m:  # the first task came back from the cluster: cancel the rest
            token.cancel()

    plan = GroupAuditPlan(roles=roles, threshold=0.5, n_boot=5000)
    try:
        audit_groups(project, ds, plan, progress=progress, cancel=token, executor=ExecutorSpec("dask", address))
        print("NOT CANCELLED")
    except Cancelled:
        print("CANCELLED")
    print("AUDITS", len(Project(project, create=False).audits()))
    with Client(address, timeout=30) as c:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (c.who_has() or any(c.processing().values())):
            time.sleep(0.2)
        print("LEFT", len(c.who_has()), sum(len(v) for v in c.processing().values()))
""")


def test_cancel_on_the_cluster_cancels_the_futures_and_stores_nothing(cluster, tmp_path):
    address, env, log = cluster
    csv = _table(tmp_path / "t.csv")
    run = subprocess.run([sys.executable, "-c", CANCEL, address, str(csv), str(tmp_path / "p.fairdesk")], env=env,
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.split("\n")
    assert "CANCELLED" in lines and "AUDITS 0" in lines and "LEFT 0 0" in lines, run.stdout
    assert log.read_text() == ""
