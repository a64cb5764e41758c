"""Main window: menus, settings, about box, demo project, recent projects."""
from __future__ import annotations

import threading

from fairdesk.jobs.engine import JobState


def test_menus_settings_and_about(window, settings, project_path):
    menus = [a.text().replace("&", "") for a in window.menuBar().actions()]
    assert menus[:2] == ["File", "Settings"] and "Help" in menus
    file_actions = [a.text().replace("&", "") for a in window.menuBar().actions()[0].menu().actions()]
    for name in ("New project…", "Open project…", "Open recent", "Export report (PDF)…", "Quit"):
        assert name in file_actions
    assert not window.action_export.isEnabled()  # no project yet
    window.new_project(project_path)
    assert window.project is not None and project_path.exists()
    assert window.action_export.isEnabled()
    assert project_path.stem in window.windowTitle()
    assert settings.recent_projects()[0].endswith(project_path.name)
    # settings persist in the redirected INI file
    assert settings.threads == 1 and settings.n_boot == 1000 and settings.suppress_k == 11
    from fairdesk.gui.main_window import SettingsDialog

    dialog = SettingsDialog(settings, window)
    dialog.threads.setValue(2)
    dialog.n_boot.setValue(500)
    dialog.suppress_k.setValue(5)
    dialog.accept()
    from fairdesk.gui.settings import Settings

    fresh = Settings(settings.path)
    assert (fresh.threads, fresh.n_boot, fresh.suppress_k) == (2, 500, 5)
    assert "fairdesk-home" in str(settings.path)
    text = window.about_text()
    assert "Apache-2.0" in text and "LGPL" in text and "pyqtgraph" in text


def test_demo_project_is_built_then_opened(window, run_and_wait, tmp_path):
    out = tmp_path / "demo"
    job = run_and_wait(window, lambda: window.open_demo(out, n_boot=200, n_stays=500), timeout=240000)
    assert job.state == JobState.DONE, job.error
    assert (out / "demo.fairdesk").exists() and (out / "demo-audit.pdf").exists()
    assert window.project.path == out / "demo.fairdesk"
    assert window.current_page() is window.audit_tab
    assert window.audit_tab.audit_ids()
    assert window.image_audit_panel.audit_ids(), "the imaging demo audit is listed on its page"
    assert len(window.audit_tab.gap_plot.data) > 0
    # a second time it just opens
    assert window.open_demo(out) is None
    assert not list(tmp_path.glob("demo.building-*"))


def test_unexpected_error_shows_message_and_traceback_on_demand(window, run_and_wait, qtbot):
    from PySide6.QtWidgets import QMessageBox

    def buggy(progress, cancel):
        return {}["no such key"]

    job = run_and_wait(window, lambda: window.run_job("Buggy step", buggy))
    assert job.state == JobState.FAILED
    panel = window.jobs_panel
    assert "Unexpected error" in panel.message_text(job.id) and "KeyError" in panel.message_text(job.id)
    assert "Failed: Buggy step" in window.statusBar().currentMessage()
    qtbot.waitUntil(lambda: "Buggy step" in window.log_view.toPlainText(), timeout=3000)  # the Log dock
    assert not panel.details_buttons[job.id].isHidden()
    panel.details_buttons[job.id].click()
    boxes = [w for w in window.findChildren(QMessageBox) if w.isVisible()]
    assert boxes and "Traceback" in boxes[-1].detailedText()
    boxes[-1].close()


# ----------------------------------------------------------------------------------------------------------------
# Closing the main window while a storing job runs leaves the project one complete file

def _project_state(path):
    """integrity_check and the records, read from a copy of the project file alone (no side file beside it)."""
    import shutil
    import sqlite3
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / path.name
        shutil.copyfile(path, copy)
        con = sqlite3.connect(copy)
        try:
            return (con.execute("PRAGMA integrity_check").fetchone()[0],
                    [r[0] for r in con.execute("SELECT id FROM datasets ORDER BY id")],
                    [(r[0], r[1]) for r in con.execute("SELECT id, predictions_id FROM models ORDER BY id")],
                    [r[0] for r in con.execute("SELECT id FROM audits ORDER BY id")])
        finally:
            con.close()


def _features_project(path):
    from fairdesk.core.data.loaders import table_sha256
    from fairdesk.core.demo import DEMO_ATTRIBUTES, DEMO_FEATURES, generate_icu_cohort
    from fairdesk.core.models.tabular import TrainSpec
    from fairdesk.core.project import Project

    cohort = generate_icu_cohort(n_stays=400, seed=5)
    project = Project(path)
    features = project.add_dataset("cohort", cohort, table_sha256(cohort), kind="features")
    project.add_audit("earlier audit", "groups", '{"kept": true}')
    spec = TrainSpec(kind="logistic_regression", features=list(DEMO_FEATURES), patient_id="patient_id",
                     id_columns=["stay_id"], passthrough=list(DEMO_ATTRIBUTES), seed=5)
    return features, spec


def _train_job(path, features, spec):
    from fairdesk.jobs.groups import train

    return lambda progress, cancel: train(path, features, spec, progress=progress, cancel=cancel)


def test_closing_the_window_inside_a_store_leaves_the_project_complete(make_window, project_path, qtbot,
                                                                       monkeypatch):
    """The close lands while the training job's store transaction (predictions + model record) is open: the window
    waits for the store, and the project is one complete file holding both records."""
    import threading
    import time
    from contextlib import contextmanager

    from fairdesk.core import project as project_module

    features, spec = _features_project(project_path)
    window = make_window()
    window.open_project(project_path)
    inside = threading.Event()
    original = project_module.Project.transaction

    @contextmanager
    def slow_transaction(self):
        with original(self) as tx:
            inside.set()
            time.sleep(0.5)  # widen the write window so the close surely lands in it
            yield tx

    monkeypatch.setattr(project_module.Project, "transaction", slow_transaction)
    window.run_job("Train (closed mid-store)", _train_job(project_path, features, spec))
    qtbot.waitUntil(inside.is_set, timeout=60000)
    window.close()
    assert not window.runner.running
    assert sorted(p.name for p in project_path.parent.glob("audit.fairdesk*")) == ["audit.fairdesk"]
    check, datasets, models, audits = _project_state(project_path)
    assert check == "ok" and audits == [1]
    assert datasets == [features, features + 1] and models == [(1, features + 1)]  # both records, or it failed


def test_closing_the_window_mid_job_stores_nothing_half_done(make_window, project_path, qtbot):
    """The close lands while the job is still computing: it is cancelled, and the project file is byte for byte what
    it was (reading never writes to it)."""
    import threading

    features, spec = _features_project(project_path)
    before = project_path.read_bytes()
    window = make_window()
    window.open_project(project_path)
    started = threading.Event()
    train = _train_job(project_path, features, spec)

    def job(progress, cancel):
        def report(fraction, message=""):
            started.set()
            if progress is not None:
                progress(fraction, message)
        return train(report, cancel)

    job_ = window.run_job("Train (closed mid-job)", job)
    qtbot.waitUntil(started.is_set, timeout=60000)
    window.close()
    assert not window.runner.running
    if job_.state == JobState.DONE:  # the machine was quick enough to finish first: then it stored both records
        assert _project_state(project_path)[2] == [(1, features + 1)]
    else:
        assert job_.state == JobState.CANCELLED, job_.error
        assert project_path.read_bytes() == before
    assert sorted(p.name for p in project_path.parent.glob("audit.fairdesk*")) == ["audit.fairdesk"]
    assert _project_state(project_path)[0] == "ok"


def test_opening_a_project_never_writes_the_settings_file_on_the_qt_thread(window, settings, project_path, qtbot,
                                                                            monkeypatch):
    """Remembering an opened project (recent list, last folder) must not write and fsync the INI file on the Qt
    thread: not in the slot (an explicit sync, 10–16 ms a write, twice per project opened) nor in the event loop's
    next turn (Qt's deferred write: a temporary file and two fdatasyncs, up to 0.4 s measured on a busy disk, in the
    open phase's first gap). The values are seen at once by every Settings of the file; the settings writer thread
    writes them. Held here until released: before it is, the file must not hold the project."""
    from PySide6.QtCore import QSettings

    import fairdesk.gui.settings as settings_module
    from fairdesk.core.project import Project
    from fairdesk.gui.settings import Settings

    Project(project_path)
    release, writers = threading.Event(), []

    def held_write(path):
        writers.append(threading.get_ident())
        release.wait(10)
        QSettings(path, QSettings.Format.IniFormat).sync()

    monkeypatch.setattr(settings_module, "_write", held_write, raising=False)
    syncs = []
    real = settings._qs.sync
    settings._qs.sync = lambda: syncs.append(1) or real()
    window.open_project(project_path)
    assert syncs == []
    qtbot.wait(400)  # the event loop's turns after the slot
    written = settings.path.read_text() if settings.path.exists() else ""
    assert project_path.name not in written, "the Qt thread wrote the settings file"
    assert Settings(settings.path).recent_projects()[0] == str(project_path.resolve())
    release.set()
    qtbot.waitUntil(lambda: settings.path.exists() and project_path.name in settings.path.read_text(), timeout=5000)
    assert writers and threading.main_thread().ident not in writers
