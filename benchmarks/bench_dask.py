"""The group audit on Dask.distributed (issue 25): the P1 workload of ``bench_groups`` (57 tasks × 4 attributes ×
3 gaps × 1,000 bootstrap replicates on 20,000 rows per task) in this process and on a ``LocalCluster`` of 1, 2 and 4
worker processes, in one run.

    python -m benchmarks.bench_dask [--tasks 57] [--n-boot 1000] [--workers 1,2,4] [--json out.json]

Per executor: the wall time of the audit (the cluster started and its workers warmed up beforehand; start-up is
reported apart), the speed-up over the local executor and per added worker, and whether the stored document equals
the local one (it must: every (task, attribute) draws from its own stream). The serialisation overhead is measured
directly: the seconds and bytes to pickle and unpickle every task's input and result (what a cluster moves), next to
the audit's time. Run it on an idle machine: with fewer free cores than workers the speed-up says only how
busy the machine was (``os.cpu_count()`` and the load average are printed with the numbers).
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import time

from benchmarks.bench_groups import METRICS, N_BOOT, N_ROWS, N_TASKS, _roles, generate


def recording_executor():
    """The local executor, keeping every task's (fn, item, shared) and result for the serialisation measurement."""
    from fairdesk.core.executor import LocalExecutor

    class Recording(LocalExecutor):
        def __init__(self):
            super().__init__()
            self.calls = []

        def map(self, fn, items, rep=None, describe=str, shared=None, weights=None):
            out = super().map(fn, items, rep, describe, shared, weights)
            self.calls += [((fn, item, shared), res) for item, res in zip(items, out)]
            return out

    return Recording()


def serialisation(calls) -> dict:
    """Seconds and bytes to pickle and unpickle every task's input and result (cloudpickle, as Dask does)."""
    import cloudpickle

    t0, c0 = time.perf_counter(), time.process_time()
    sent = [cloudpickle.dumps(args, protocol=pickle.HIGHEST_PROTOCOL) for args, _ in calls]
    back = [cloudpickle.dumps(res, protocol=pickle.HIGHEST_PROTOCOL) for _, res in calls]
    for blob in sent + back:
        pickle.loads(blob)
    return {"seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0, "mb_in": sum(map(len, sent)) / 1e6,
            "mb_out": sum(map(len, back)) / 1e6, "tasks": len(calls)}


def _doc(result) -> str:
    d = result.to_dict()
    d["provenance"].pop("created_utc")
    d["provenance"].pop("executor")
    return json.dumps(d)


def main(argv: list[str] | None = None) -> int:
    from fairdesk.core.audits.groups import GroupAuditPlan, run_group_audit
    from fairdesk.core.executor import DaskExecutor, ExecutorSpec

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=N_TASKS)
    ap.add_argument("--n-boot", type=int, default=N_BOOT)
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    table = generate(args.tasks, N_ROWS)
    plan = GroupAuditPlan(threshold=0.5, roles=_roles(), metrics=METRICS, n_boot=args.n_boot, seed=0)
    warm = generate(2, 2000)
    warm_plan = GroupAuditPlan(threshold=0.5, roles=_roles(), n_boot=100)
    run_group_audit(warm, warm_plan)  # imports and caches of this process
    rows = []
    rec = recording_executor()
    t0 = time.perf_counter()
    c0 = time.process_time()
    local = run_group_audit(table, plan, executor=rec)
    base = time.perf_counter() - t0
    tasks = rec.tasks
    rows.append({"executor": "local", "workers": 1, "seconds": base, "cpu_seconds": time.process_time() - c0,
                 "start_seconds": 0.0, "same_document": True, "tasks": tasks})
    ser = serialisation(rec.calls)
    del rec
    reference = _doc(local)
    for n in [int(w) for w in args.workers.split(",")]:
        t0 = time.perf_counter()
        ex = DaskExecutor(ExecutorSpec("dask", f"local:{n}"))
        run_group_audit(warm, warm_plan, executor=ex)  # every worker imports FairDesk once
        start = time.perf_counter() - t0
        t0 = time.perf_counter()
        res = run_group_audit(table, plan, executor=ex)
        rows.append({"executor": f"dask local:{n}", "workers": ex.workers, "seconds": time.perf_counter() - t0,
                     "start_seconds": start, "same_document": _doc(res) == reference,
                     "tasks": res.provenance["executor"]["tasks"]})
        ex.close()
    for r in rows:
        r["speedup"] = base / r["seconds"]
    prev = None
    for r in rows[1:]:
        r["speedup_per_added_worker"] = (None if prev is None else
                                         (prev["seconds"] / r["seconds"] - 1) / (r["workers"] - prev["workers"]))
        prev = r
    info = {"cpus": os.cpu_count(), "load_average": os.getloadavg(), "tasks": args.tasks, "rows_per_task": N_ROWS,
            "n_boot": args.n_boot, "audit_tasks": tasks, "serialisation": ser, "runs": rows}
    print(f"P1: {args.tasks} tasks × 4 attributes × 3 gaps × {args.n_boot:,} replicates on {N_ROWS:,} rows per task; "
          f"{tasks} executor tasks; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print(f"{'executor':<14} {'workers':>7} {'start s':>8} {'audit s':>8} {'speed-up':>9} {'per added worker':>17} "
          f"{'same doc':>9}")
    for r in rows:
        per = r.get("speedup_per_added_worker")
        print(f"{r['executor']:<14} {r['workers']:>7} {r['start_seconds']:>8.1f} {r['seconds']:>8.1f} "
              f"{r['speedup']:>8.2f}× {'' if per is None else f'{per:+.2f}':>17} {str(r['same_document']):>9}")
    print(f"local audit: {rows[0]['cpu_seconds']:.1f} s of CPU in {base:.1f} s; serialisation: "
          f"{ser['cpu_seconds']:.2f} s of CPU ({100 * ser['cpu_seconds'] / rows[0]['cpu_seconds']:.1f}% of the "
          "local audit's CPU)")
    print(f"serialisation of every task's input and result: {ser['seconds']:.2f} s for {ser['mb_in']:.1f} MB in and "
          f"{ser['mb_out']:.1f} MB out ({100 * ser['seconds'] / base:.1f}% of the local audit)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(info, f, indent=1)
    return 0 if all(r["same_document"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
