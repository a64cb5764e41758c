"""CPU time of the view thread's read of each stored audit (issue 24): what holds the interpreter lock while a
project opens or an audit is chosen.

``python -m benchmarks.bench_view_read [--demo DIR] [--reps 5] [--profile N]`` (offscreen; builds the demo in a
temporary folder when ``DIR`` holds none).

For every stored audit of the project, runs the steps the GUI's view runner runs when the audit is shown
(:meth:`fairdesk.gui.tabs.base.AuditPage.read_view`: read and check the stored document, parse it, prepare the
views, sum up the findings) ``--reps`` times after one warm-up read, and prints the median *thread CPU time* of
each step and of the schema check inside the read. CPU time, not wall time: the machine's load does not stretch it,
and every millisecond of it is a millisecond in which the Qt thread cannot run Python (the heartbeat benchmark,
``benchmarks/bench_heartbeat.py``, measures what the window feels). ``--profile N`` also prints the N functions of
most cumulative time over all reads (cProfile).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")


class Timed:
    """Wraps ``obj.name`` so that each call adds its thread CPU time (ms) to ``totals[label]``."""

    def __init__(self, totals: dict, label: str, obj, name: str) -> None:
        self.totals, self.label, self.obj, self.name = totals, label, obj, name
        self.real = getattr(obj, name)
        self.own = name in vars(obj)  # a module's function (put back) or a method of the class (instance copy dropped)
        setattr(obj, name, self)

    def undo(self) -> None:
        if self.own:
            setattr(self.obj, self.name, self.real)
        else:
            delattr(self.obj, self.name)

    def __call__(self, *args, **kwargs):
        t = time.thread_time()
        try:
            return self.real(*args, **kwargs)
        finally:
            self.totals[self.label] += 1000.0 * (time.thread_time() - t)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--demo", type=Path, default=None, help="folder of an existing demo (fairdesk-cli demo --out DIR)")
    ap.add_argument("--reps", type=int, default=5, help="reads of each audit after one warm-up read")
    ap.add_argument("--profile", type=int, default=0, metavar="N", help="print the N functions of most cumulative time")
    args = ap.parse_args(argv)

    from benchmarks.bench_heartbeat import scratch_home

    tmp, home, demo = scratch_home(args.demo, "fairdesk-viewread-")

    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication(sys.argv[:1])  # noqa: F841 - the pages need it
    from fairdesk.core import kinds
    from fairdesk.core.project import Project
    from fairdesk.gui.main_window import MainWindow, warm_up_readers
    from fairdesk.gui.settings import Settings
    from fairdesk.gui.tabs.base import AuditPage

    window = MainWindow(settings=Settings(home / "home" / "settings.ini"))
    warm_up_readers()  # as the window does after start-up: the imports, then gc.freeze()
    project = Project(demo / "demo.fairdesk", create=False)
    pages = {p.kind().name: p for p in vars(window).values() if isinstance(p, AuditPage)}
    k = int(window.settings.suppress_k)
    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
    print(f"view-thread read of each stored audit of {demo / 'demo.fairdesk'}: median thread CPU ms of "
          f"{args.reps} reads (after one warm-up read)")
    print(f"{'audit':<28}{'read+check':>11}{'(check)':>9}{'parse':>8}{'prepare':>9}{'findings':>10}{'total':>8}")
    for audit in project.audits():
        page = pages.get(audit.kind)
        if page is None:
            continue
        per_rep: list[dict] = []
        for rep in range(args.reps + 1):
            totals: dict = defaultdict(float)
            wrapped = [Timed(totals, "read+check", project, "audit_document"),
                       Timed(totals, "(check)", kinds, "check_document"),
                       Timed(totals, "parse", page, "parse_document"),
                       Timed(totals, "prepare", page, "prepare_results"),
                       Timed(totals, "findings", page, "findings_of")]
            if profiler is not None and rep:
                profiler.enable()
            t = time.thread_time()
            page.read_view(project, audit.id, k)
            totals["total"] = 1000.0 * (time.thread_time() - t)
            if profiler is not None and rep:
                profiler.disable()
            for w in reversed(wrapped):
                w.undo()
            if rep:
                per_rep.append(totals)
        med = {key: statistics.median(r[key] for r in per_rep)
               for key in ("read+check", "(check)", "parse", "prepare", "findings", "total")}
        print(f"{f'#{audit.id} {audit.kind}':<28}{med['read+check']:>11.1f}{med['(check)']:>9.1f}{med['parse']:>8.1f}"
              f"{med['prepare']:>9.1f}{med['findings']:>10.1f}{med['total']:>8.1f}")
    if profiler is not None:
        import pstats

        pstats.Stats(profiler).sort_stats("cumulative").print_stats(args.profile)
    window.shutdown(30000)
    window.close()
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
