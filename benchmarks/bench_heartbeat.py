"""Heartbeat of the Qt thread (issue 24): how long the window stops answering while it shows results.

``python -m benchmarks.bench_heartbeat [--demo DIR] [--size 1366x768] [--n-boot 1000] [--no-audit] [--stalls N]
[--opens N] [--switch-interval S]``
(offscreen; about two minutes with an existing demo project, plus about a minute to build one).

A ``QTimer`` ticks every 5 ms on the main thread and records the time between its ticks: a tick that comes late
means the Qt thread was busy (building a table, drawing, waiting for a file) and the window could not repaint or
answer a click for that long. Measured, in one process:

* ``idle``: the baseline — the window with no project, the event loop doing nothing else for 2 s;
* ``open``: opening the demo project (``fairdesk-cli demo``: a group audit and an image audit) until every page
  has shown its newest stored audit;
* ``walk``: bringing every main tab, page and result tab to the front, one after another;
* ``select``: selecting every stored audit on every audit page (both kinds of the demo);
* ``form``: filling the Group gaps form from the demo audit's plan (choosing its dataset reads the table and
  guesses its columns: form work, not results);
* ``audit``: that group audit (``--n-boot`` replicates) run through the page, from Run until the new audit is
  shown;
* ``opens`` (``--opens N``, N > 1): the gaps of the first open and of N − 1 more, each after the project was
  closed (an empty project opened) and the decoded datasets forgotten. The open phase has only 100–170 ticks, so
  its p99 is its second-largest gap; pooled over N opens it rests on N times as many (the first open alone stays
  the ``open`` row). The opens after the first find the modules imported and the plots' first paint done.

Prints, per phase, the number of ticks, the median, 99th percentile and largest gap in ms, the p99 and max as
ratios to the idle baseline, and the p99 and largest *CPU time of the Qt thread* within one gap (``thread_time``):
on a machine shared with other work a gap's wall time grows with the load (at a load of 10 on 2 CPUs, 50 ms of
work can take 250 ms), its CPU time does not. ``others``: the CPU time of every other thread over the phase (the
view runner reading stored audits, a running job): while another thread runs Python the Qt thread waits for the
interpreter lock at every return from Qt, so this is the work that stretches gaps the Qt thread's own CPU does not
explain. ``>50ms``: how many gaps were longer than the p99 target — unlike the p99 it does not fall when the same
gaps come in a longer phase (a phase shortened by less work in other threads keeps its slow gaps and loses fast
ones, so its p99 rises). Issue 24's targets: no gap above 250 ms and a p99 gap of at most 50 ms.
Run it at ``nice`` beside other work and the idle line moves too: read the ratios. ``--stalls N`` says where the
longest stretches went: the N of most CPU per phase with the Qt thread's sampled Python stacks (:class:`StallSampler`),
and what the other threads ran meanwhile. ``--switch-interval S`` sets the interpreter's switch interval after the
window set its own (A/B runs of that setting).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")

TICK_MS = 5
TARGET_MAX_MS, TARGET_P99_MS = 250.0, 50.0


class Heartbeat:
    """A 5 ms ``QTimer`` on the main thread recording the gaps between its ticks."""

    def __init__(self) -> None:
        from PySide6.QtCore import Qt, QTimer

        self.timer = QTimer()
        self.timer.setTimerType(Qt.TimerType.PreciseTimer)
        self.timer.setInterval(TICK_MS)
        self.timer.timeout.connect(self._tick)
        self.gaps: list[float] = []
        self.cpu: list[float] = []  # the Qt thread's own CPU time in each gap
        self._last: float | None = None
        self._last_cpu = 0.0
        self.sampler: StallSampler | None = None
        self.running = False

    def _tick(self) -> None:
        now, cpu = time.perf_counter(), time.thread_time()
        if self._last is not None:
            self.gaps.append(1000.0 * (now - self._last))
            self.cpu.append(1000.0 * (cpu - self._last_cpu))
            if self.sampler is not None:
                self.sampler.tick(self.gaps[-1], self.cpu[-1])
        self._last, self._last_cpu = now, cpu

    def start(self) -> None:
        self.gaps, self.cpu, self._last, self._last_cpu = [], [], time.perf_counter(), time.thread_time()
        self._cpu0 = (time.process_time(), time.thread_time())
        if self.sampler is not None:
            self.sampler.restart()
        self.timer.start()
        self.running = True

    def stop(self) -> tuple[list[float], list[float], float]:
        """The gaps and the Qt thread's CPU in each (ms), and the CPU time of every other thread of the process over
        the phase (ms: the view and job runners' work, which holds the interpreter lock the Qt thread waits for)."""
        self._tick()  # a stretch still blocking at the end counts too
        self.running = False
        self.timer.stop()
        others = (time.process_time() - self._cpu0[0]) - (time.thread_time() - self._cpu0[1])
        return self.gaps, self.cpu, 1000.0 * others


class StallSampler:
    """Where the Qt thread spends a long stretch (``--stalls``): a thread samples the Qt thread's Python stack every
    3 ms while the heartbeat's tick is over 12 ms late; each tick after a gap of at least ``SHORTEST`` ms closes a
    stretch with its wall time, the Qt thread's CPU time and the other threads' CPU time within it (so a stretch
    whose wall time the Qt thread's CPU does not explain shows whom it waited for). Time inside Qt's C++ code
    (layout, painting) shows as the Python frame that called into Qt. The other threads' innermost frames are
    counted too (``(other)``; a thread waiting on a lock or queue is left out). Frames are read from the frame
    objects (no source lines), so a sample holds the interpreter lock for well under a millisecond."""

    SHORTEST = 20.0

    def __init__(self, beat: Heartbeat, depth: int = 12) -> None:
        import collections
        import threading

        self.beat, self.depth = beat, depth
        self.main = threading.main_thread().ident
        self.stretches: list[tuple[float, float, float, collections.Counter]] = []
        self._open: collections.Counter | None = None
        self._counter = collections.Counter
        self._process_cpu = time.process_time()
        beat.sampler = self
        threading.Thread(target=self._watch, daemon=True).start()

    @staticmethod
    def _frames(frame, depth: int) -> list[str]:
        out = []
        while frame is not None and len(out) < depth:
            name = frame.f_code.co_filename
            if not any(k in name for k in ("importlib._bootstrap", "jsonschema", "referencing")):
                out.append(f"{os.path.basename(name)}:{frame.f_lineno}:{frame.f_code.co_name}")
            frame = frame.f_back
        return out

    def _watch(self) -> None:
        import threading

        me = threading.get_ident()
        while True:
            time.sleep(0.003)
            last = self.beat._last
            if not self.beat.running or last is None or time.perf_counter() - last < 0.012:
                continue
            frames = sys._current_frames()
            frame = frames.get(self.main)
            if frame is None:
                continue
            counter = self._open
            if counter is None:
                counter = self._open = self._counter()
            counter[" <- ".join(self._frames(frame, self.depth))] += 1
            for ident, other in frames.items():  # what the other threads were running meanwhile
                if ident in (self.main, me):
                    continue
                inner = self._frames(other, 5)
                if inner and not (("threading.py" in inner[0] and ":wait" in inner[0]) or ":_write_loop" in inner[0]):
                    counter["  (other) " + " <- ".join(inner)] += 1

    def restart(self) -> None:
        self._process_cpu, self._open = time.process_time(), None

    def tick(self, gap_ms: float, cpu_ms: float) -> None:
        process = time.process_time()
        others = 1000.0 * (process - self._process_cpu) - cpu_ms
        self._process_cpu = process
        if gap_ms >= self.SHORTEST:
            self.stretches.append((gap_ms, cpu_ms, others, self._open or self._counter()))
        self._open = None

    def report(self, phase: str, top: int) -> None:
        """Print the ``top`` stretches of most wall time and of most CPU since the last report, with their most
        sampled stacks."""
        print(f"--- {phase}: {len(self.stretches)} stretches of at least {self.SHORTEST:g} ms")
        shown = set()
        for key, what in ((0, "wall time"), (1, "the Qt thread's CPU")):
            print(f"  those of most {what}:")
            for stretch in sorted(self.stretches, key=lambda r: -r[key])[:top]:
                gap, cpu, others, stacks = stretch
                print(f"  {gap:.0f} ms wall, {cpu:.0f} ms Qt-thread CPU, {others:.0f} ms other threads' CPU")
                if id(stretch) in shown:
                    print("    (above)")
                    continue
                shown.add(id(stretch))
                for stack, n in stacks.most_common(10):
                    print(f"    {n:3d} × {stack}")
        self.stretches = []


def pump(seconds: float) -> None:
    """Run the event loop for ``seconds`` (the heartbeat ticks meanwhile)."""
    from PySide6.QtCore import QEventLoop, QTimer

    loop = QEventLoop()
    QTimer.singleShot(int(seconds * 1000), loop.quit)
    loop.exec()


def pump_until(done, timeout: float = 600.0, settle: float = 0.3) -> bool:
    """Run the event loop until ``done()`` holds (checked every 20 ms), then ``settle`` seconds more."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            return False
        pump(0.02)
    pump(settle)
    return True


def summary(measured: tuple[list[float], list[float], float]) -> dict:
    import numpy as np

    gaps, cpu, others = measured
    a, c = np.asarray(gaps or [0.0]), np.asarray(cpu or [0.0])
    return {"ticks": int(a.size), "median": float(np.median(a)), "p99": float(np.percentile(a, 99)),
            "max": float(a.max()), "cpu_p99": float(np.percentile(c, 99)), "cpu_max": float(c.max()),
            "others": others, "over": int((a > TARGET_P99_MS).sum())}


_PAGES: dict = {}


def pages_idle(window) -> bool:
    """True when no page is still building the view of an audit (and no job runs). The pages are looked up once
    (``findChildren`` over the whole window, every 20 ms, was itself a gap of the Qt thread the benchmark counted)."""
    from fairdesk.gui.tabs.base import AuditPage

    pages = _PAGES.get(id(window))
    if pages is None:
        pages = _PAGES[id(window)] = window.findChildren(AuditPage)
    views = getattr(window, "views", None)
    return (window.runner.idle and (views is None or views.idle)
            and all(getattr(p, "view_ready", True) for p in pages))


def walk(window) -> int:
    """Bring every main tab, page and result tab to the front; returns how many states were shown."""
    from PySide6.QtWidgets import QTabWidget

    shown = 0
    for ti in range(window.tabs.count()):
        window.tabs.setCurrentIndex(ti)
        pump(0.05)
        pages = window.tabs.widget(ti)
        if not isinstance(pages, QTabWidget):
            continue
        for pi in range(pages.count()):
            pages.setCurrentIndex(pi)
            pump(0.1)
            shown += 1
            page = pages.widget(pi)
            for tabs in [t for t in page.findChildren(QTabWidget) if t.isVisible()]:
                for k in range(tabs.count()):
                    tabs.setCurrentIndex(k)
                    pump(0.1)
                    shown += 1
                tabs.setCurrentIndex(0)
    return shown


def select_every_audit(window) -> int:
    """Select every stored audit on every audit page (its page in front); returns how many were shown."""
    from fairdesk.gui.tabs.base import AuditPage

    shown = 0
    for page in [p for p in vars(window).values() if isinstance(p, AuditPage)]:
        if page.audit_list.count() == 0:
            continue
        window.show_page(page)
        pump(0.1)
        for row in range(page.audit_list.count()):
            page.audit_list.setCurrentRow(-1)  # so that choosing the shown audit again shows it anew
            pump(0.05)
            page.audit_list.setCurrentRow(row)
            pump_until(lambda: pages_idle(window), settle=0.2)
            shown += 1
    return shown


def demo_plan(window):
    """``(dataset_id, plan)`` of the demo's group audit, read before the heartbeat starts: the app never reads a stored
    audit on the Qt thread (the view runner does; "Audit at this threshold" takes the plan of the audit shown), so
    the 1.2 s this read costs must not count as the form's."""
    project = window.project
    demo = next(a for a in project.audits() if a.kind == "groups")
    return demo.dataset_id, project.load_audit(demo.id).plan


def fill_group_form(window, n_boot: int, dataset_id: int, plan) -> None:
    """Fill the Group gaps form from the demo audit's plan (``n_boot`` replicates), as a user choosing its dataset."""
    from dataclasses import replace

    tab = window.audit_tab
    window.show_page(tab)
    tab.fill_form(dataset_id, replace(plan, n_boot=n_boot))
    pump(0.2)


def run_group_audit(window) -> bool:
    """Press Run on the filled Group gaps page; wait until the new audit is shown."""
    tab = window.audit_tab
    project = window.project
    before = {a.id for a in project.audits()}
    job = tab.run_audit()
    if job is None:
        print("the audit did not start:", tab.status.text(), file=sys.stderr)
        return False
    # done when the page's job is over and the page shows a new audit (no query of the project meanwhile: the
    # benchmark's own query of the project's audits every 20 ms on the Qt thread, while the job wrote into the
    # project, stood in this phase's largest gap)
    return pump_until(lambda: not tab.busy and tab.audit_id is not None and tab.audit_id not in before
                      and pages_idle(window), timeout=1800, settle=0.5)


def reopen(window, project_file: Path, empty_file: Path, times: int, beat: Heartbeat, first: tuple, stalls: list,
           sampler) -> dict:
    """Open ``project_file`` ``times`` more times, each after closing it (opening an empty project, which clears
    every page; not measured) with the first tab's first page in front and the decoded datasets forgotten, as when
    the project was first opened; returns the summary of the gaps of the first open (``first``) and of these."""
    import fairdesk.core.project as project_module
    from fairdesk.core.project import Project
    from PySide6.QtWidgets import QTabWidget

    Project(empty_file)  # created once
    gaps, cpu, others = list(first[0]), list(first[1]), first[2]
    pooled = [s for phase, stretches in stalls if phase == "open" for s in stretches]
    for _ in range(times):
        window.open_project(empty_file)
        window.tabs.setCurrentIndex(0)
        if isinstance(window.tabs.widget(0), QTabWidget):
            window.tabs.widget(0).setCurrentIndex(0)
        pump_until(lambda: pages_idle(window), settle=0.5)
        # the app keeps the last datasets decoded (by content) for the process: a first open decodes them
        with project_module._FRAMES_LOCK:
            project_module._FRAMES.clear()
        beat.start()
        window.open_project(project_file)
        pump_until(lambda: pages_idle(window))
        g, c, o = beat.stop()
        gaps, cpu, others = gaps + g, cpu + c, others + o
        if sampler is not None:
            pooled += sampler.stretches
            sampler.stretches = []
    if sampler is not None:
        stalls.append(("opens", pooled))
    return summary((gaps, cpu, others))


def scratch_home(demo: Path | None, prefix: str) -> tuple[tempfile.TemporaryDirectory, Path, Path]:
    """``(tmp, home, demo)``: a temporary folder ``home`` holding FairDesk's home and settings (set in the
    environment), and the demo folder: ``demo`` when it holds a demo project, else one built there (or in
    ``home``)."""
    tmp = tempfile.TemporaryDirectory(prefix=prefix)
    home = Path(tmp.name)
    os.environ["FAIRDESK_HOME"] = str(home / "home")
    os.environ["FAIRDESK_SETTINGS"] = str(home / "home" / "settings.ini")
    if demo is None or not (demo / "demo.fairdesk").exists():
        from fairdesk.jobs.demo import run_demo

        demo = demo or home / "demo"
        print(f"building the demo in {demo} …", flush=True)
        run_demo(demo)
    return tmp, home, demo


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--demo", type=Path, default=None,
                    help="folder of an existing demo (fairdesk-cli demo --out DIR); built in a temporary one if absent")
    ap.add_argument("--size", default="1366x768", help="window size, WxH")
    ap.add_argument("--n-boot", type=int, default=1000, help="bootstrap replicates of the audit run in the GUI")
    ap.add_argument("--no-audit", action="store_true", help="skip the audit run")
    ap.add_argument("--stalls", type=int, default=0, metavar="N",
                    help="also print, per phase, the N stretches of most CPU with the Qt thread's sampled stacks")
    ap.add_argument("--opens", type=int, default=1, metavar="N",
                    help="after the other phases, close the project and open it again until it was opened N times "
                         "in all, and add a row 'opens' pooling the gaps of all N opens (default 1: no such row)")
    ap.add_argument("--switch-interval", type=float, default=None, metavar="S",
                    help="the interpreter's switch interval in seconds, set after the window's own (for A/B runs)")
    args = ap.parse_args(argv)

    tmp, home, demo = scratch_home(args.demo, "fairdesk-heartbeat-")
    # work on a copy: the audit phase stores a new audit
    import shutil

    project_file = home / "demo.fairdesk"
    shutil.copy2(demo / "demo.fairdesk", project_file)

    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication(sys.argv[:1])
    from fairdesk.gui.main_window import MainWindow
    from fairdesk.gui.settings import Settings

    window = MainWindow(settings=Settings(home / "home" / "settings.ini"))
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)
    w, h = (int(v) for v in args.size.lower().split("x"))
    window.resize(w, h)
    window.show()
    pump(1.0)
    # the window loads the readers of stored results in its view thread after start-up: wait for that, as a user
    # choosing a project in the file dialog does
    t0 = time.perf_counter()
    views = getattr(window, "views", None)  # (a build before issue 24 has no view runner)
    pump_until(lambda: (views is None or views.idle) and not getattr(window, "warming_up", False), timeout=300)
    warm = time.perf_counter() - t0 + 1.0
    beat = Heartbeat()
    sampler = StallSampler(beat) if args.stalls else None
    results: dict[str, dict] = {}
    stalls: list[tuple[str, list]] = []

    raw: dict[str, tuple] = {}

    def measured(phase: str) -> dict:
        raw[phase] = beat.stop()
        if sampler is not None:
            stalls.append((phase, sampler.stretches))
            sampler.stretches = []
        return summary(raw[phase])

    beat.start()
    pump(2.0)
    results["idle"] = measured("idle")

    beat.start()
    window.open_project(project_file)
    pump_until(lambda: pages_idle(window))
    results["open"] = measured("open")

    beat.start()
    n_states = walk(window)
    results["walk"] = measured("walk")

    beat.start()
    n_audits = select_every_audit(window)
    results["select"] = measured("select")

    if not args.no_audit:
        dataset_id, plan = demo_plan(window)
        beat.start()
        fill_group_form(window, args.n_boot, dataset_id, plan)
        results["form"] = measured("form")
        beat.start()
        ok = run_group_audit(window)
        results["audit"] = measured("audit")
        if not ok:
            print("the audit run did not finish", file=sys.stderr)

    if args.opens > 1:
        results["opens"] = reopen(window, project_file, home / "closed.fairdesk", args.opens - 1, beat, raw["open"],
                                  stalls, sampler)

    base = results["idle"]
    print(f"heartbeat every {TICK_MS} ms, window {w}×{h}, {n_states} states walked, {n_audits} stored audits "
          f"selected; project opened {args.opens} time(s) ('opens': the gaps of all); readers loaded {warm:.1f} s after start-up; load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} CPUs; switch interval {1000 * sys.getswitchinterval():g} ms; targets: max ≤ {TARGET_MAX_MS:.0f} ms, p99 ≤ {TARGET_P99_MS:.0f} ms")
    print(f"{'phase':<8}{'ticks':>7}{'median ms':>11}{'p99 ms':>9}{'max ms':>9}{'p99/idle':>10}{'max/idle':>10}"
          f"{'CPU p99':>9}{'CPU max':>9}{'others':>9}{'>50ms':>7}  targets (wall; CPU)")
    for name, r in results.items():
        ok = r["max"] <= TARGET_MAX_MS and r["p99"] <= TARGET_P99_MS
        ok_cpu = r["cpu_max"] <= TARGET_MAX_MS and r["cpu_p99"] <= TARGET_P99_MS
        print(f"{name:<8}{r['ticks']:>7}{r['median']:>11.1f}{r['p99']:>9.1f}{r['max']:>9.1f}"
              f"{r['p99'] / max(base['p99'], 1e-9):>10.1f}{r['max'] / max(base['max'], 1e-9):>10.1f}"
              f"{r['cpu_p99']:>9.1f}{r['cpu_max']:>9.1f}{r['others']:>9.0f}{r['over']:>7}  "
              f"{'met' if ok else 'MISSED'}; {'met' if ok_cpu else 'MISSED'}")
    for phase, stretches in stalls:
        sampler.stretches = stretches
        sampler.report(phase, args.stalls)
    window.shutdown(30000)
    window.close()
    app.processEvents()
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
