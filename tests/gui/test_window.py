"""Main window: menus, settings, about box, demo project, recent projects."""
from __future__ import annotations

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
