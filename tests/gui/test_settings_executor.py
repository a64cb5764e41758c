"""Settings › Executor (issue 25): the choice is saved, refused in one sentence when it cannot run, and the group
audit page hands it to the same job the CLI's --executor reaches. (Connecting to a real cluster is tested from the
command line in tests/core/test_executor.py: this process refuses every network connection.)"""
from __future__ import annotations

from fairdesk.core.executor import ExecutorSpec


def test_dialog_saves_the_executor_and_refuses_a_bad_address(window, settings, qtbot):
    from fairdesk.gui.main_window import SettingsDialog

    dialog = SettingsDialog(settings, window)
    qtbot.addWidget(dialog)
    assert dialog.executor_kind.currentData() == "local" and not dialog.scheduler.isEnabled()
    assert dialog.executor_spec() == ExecutorSpec()
    dialog.executor_kind.setCurrentIndex(dialog.executor_kind.findData("dask"))
    assert dialog.scheduler.isEnabled() and dialog.test_connection.isEnabled()
    dialog.scheduler.setText("nohost")
    dialog.probe_executor()  # refused before anything is asked of the network
    assert "not an address" in dialog.workers_seen.text() and not dialog._probe_timer.isActive()
    dialog.accept()
    assert settings.executor == "local"  # nothing saved while the address is wrong
    dialog.scheduler.setText("tcp://10.0.0.5:8786")
    dialog.accept()
    assert (settings.executor, settings.scheduler) == ("dask", "tcp://10.0.0.5:8786")
    assert settings.executor_spec() == ExecutorSpec("dask", "tcp://10.0.0.5:8786")


def test_group_audit_page_runs_its_job_on_the_chosen_executor(window, settings, stored_predictions):
    tab = window.audit_tab
    window.show_page(tab)
    tab.fixed_radio.setChecked(True)
    assert tab.audit_run().kwargs["executor"] == ExecutorSpec()
    settings.executor, settings.scheduler = "dask", "local:2"
    assert tab.audit_run().kwargs["executor"] == ExecutorSpec("dask", "local:2")
