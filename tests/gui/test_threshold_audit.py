"""Group gaps › Calibration › Threshold explorer: "Audit at this threshold" runs the shown audit again at the chosen
threshold in one click — on the audit's own dataset (not the one chosen in the form) and with its other settings —
and, when it cannot (the audit's dataset not in the project, a job running, no project), says why and starts
nothing (issue 14, item 3)."""
from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from fairdesk.core.audits.groups import GroupAuditPlan
from fairdesk.core.data.schema import ColumnRoles
from fairdesk.core.project import Project
from fairdesk.jobs.engine import JobState

N_BOOT = 100
ROLES = ColumnRoles(label="label", score="score", task="task", attributes=("sex", "ethnicity"),
                    patient_id="patient_id", sample_id="sample_id", split="split")


def _import(project_path: Path, tmp_path: Path, frame, name: str, seed: int) -> int:
    from fairdesk.core.data.tables import import_table

    path = tmp_path / f"{name}.csv"
    frame(n=200, seed=seed).to_csv(path, index=False)
    return import_table(project_path, path, roles=ROLES, name=name)


def _click(tab):
    """Press the explorer's button; the job it started (None when it refused)."""
    before = tab.job
    tab.calibration_views.explorer.audit_button.click()
    return tab.job if tab.job is not before else None


def _show_explorer(window, tab) -> None:
    """Results › Calibration › Threshold explorer in front, the window at 1366 × 768."""
    window.resize(1366, 768)
    titles = [tab.results_tabs.tabText(i) for i in range(tab.results_tabs.count())]
    tab.results_tabs.setCurrentIndex(titles.index("Calibration"))
    inner = tab.results_tabs.currentWidget()
    inner.setCurrentIndex([inner.tabText(i) for i in range(inner.count())].index("Threshold explorer"))


def _shot(window, tmp_path: Path, name: str) -> None:
    """The window as a PNG, for a look (in $FAIRDESK_TEST_SHOTS when set)."""
    from PySide6.QtWidgets import QApplication

    QApplication.processEvents()  # the layout after a resize
    assert window.grab().save(str(Path(os.environ.get("FAIRDESK_TEST_SHOTS") or tmp_path) / name))


def _plan_dict(plan) -> dict:
    d = plan.to_dict()
    d.pop("threshold")
    return d


def test_audit_at_threshold_reruns_the_shown_audit_on_its_own_dataset(window, project_path, tmp_path,
                                                                      predictions_frame, run_and_wait):
    a = _import(project_path, tmp_path, predictions_frame, "dataset A", seed=0)
    window.open_project(project_path)
    tab = window.audit_tab
    window.show_page(tab)
    # a first audit of A at 0.5 with non-default settings
    assert tab.dataset_combo.currentData() == a
    tab.metric_checks["specificity"].setChecked(False)
    tab.rule_combo.setCurrentIndex(tab.rule_combo.findData("one-vs-rest"))
    tab.family_combo.setCurrentIndex(tab.family_combo.findData("task"))
    tab.correction_combo.setCurrentIndex(tab.correction_combo.findData("holm"))
    tab.margin_spin.setValue(0.08)
    tab.n_boot_spin.setValue(N_BOOT)
    tab.seed_spin.setValue(7)
    tab.min_group_spin.setValue(20)
    tab.tasks_list.set_checked(["mortality"])
    tab.cross_a.setCurrentIndex(tab.cross_a.findData("sex"))
    tab.cross_b.setCurrentIndex(tab.cross_b.findData("ethnicity"))
    tab.add_intersection()
    tab.fixed_radio.setChecked(True)
    tab.threshold_spin.setValue(0.5)
    first = run_and_wait(window, tab.run_audit)
    assert first.state == JobState.DONE, first.error
    first_plan = Project(project_path).load_audit(first.result).plan
    assert first_plan.seed == 7 and first_plan.metrics == ("parity", "recall") and first_plan.tasks == ("mortality",)

    # a second dataset B, chosen in the form, with other settings; the first audit is still the one shown
    b = _import(project_path, tmp_path, predictions_frame, "dataset B", seed=1)
    window.notify_project_changed()
    tab.dataset_combo.setCurrentIndex(tab.dataset_combo.findData(b))
    assert tab.df is None and not tab.view_ready  # B is read in the view runner, not on the Qt thread
    tab.wait_view()
    tab.seed_spin.setValue(99)
    tab.metric_checks["specificity"].setChecked(True)
    tab.rule_combo.setCurrentIndex(tab.rule_combo.findData("max"))
    tab.n_boot_spin.setValue(500)
    assert tab.result_id == first.result and tab.df is not None and tab._df_id == b
    _show_explorer(window, tab)
    ex = tab.calibration_views.explorer
    assert ex.audit_button.isEnabled()
    ex.spin.setValue(0.3)

    def click_and_look():
        job = _click(tab)
        assert "Auditing dataset A at threshold 0.300 with the settings of audit #1" in tab.status.text()
        _shot(window, tmp_path, "threshold-audit-running.png")
        return job

    job = run_and_wait(window, click_and_look)
    assert job.state == JobState.DONE, job.error
    _shot(window, tmp_path, "threshold-audit-done.png")

    # one new audit: threshold 0.3, dataset A, every other setting of the first audit
    project = Project(project_path)
    infos = {i.id: i for i in project.audits()}
    assert sorted(infos) == [first.result, job.result]
    assert infos[job.result].dataset_id == a
    new_plan = project.load_audit(job.result).plan
    assert new_plan.threshold == pytest.approx(0.3)
    assert _plan_dict(new_plan) == _plan_dict(first_plan)
    assert "threshold 0.3" in infos[job.result].name
    # it is listed and shown like any other run, and the form shows what ran
    assert tab.audit_ids() == [first.result, job.result] and tab.result_id == job.result
    assert tab.status.text() == f"Audit #{job.result} stored: audit #{first.result} at threshold 0.300."
    assert tab.dataset_combo.currentData() == a
    assert tab.seed_spin.value() == 7 and not tab.metric_checks["specificity"].isChecked()
    assert tab.fixed_radio.isChecked() and tab.threshold_spin.value() == pytest.approx(0.3)
    assert tab.plan().to_dict() == new_plan.to_dict()
    assert ex.threshold() == pytest.approx(0.3)  # the explorer now shows the new audit at its threshold


def test_audit_at_threshold_refuses_without_the_dataset_or_while_busy(window, make_window, project_path, tmp_path,
                                                                     predictions_frame, run_and_wait, qtbot,
                                                                     monkeypatch):
    from fairdesk.jobs.groups import audit_groups

    a = _import(project_path, tmp_path, predictions_frame, "dataset A", seed=0)
    b = _import(project_path, tmp_path, predictions_frame, "dataset B", seed=1)
    plan = GroupAuditPlan(threshold=0.5, roles=ROLES, n_boot=N_BOOT, min_group_size=20, tasks=("mortality",))
    first = audit_groups(project_path, a, plan)
    # the same audit stored without its dataset (e.g. copied from a project where it was run)
    orphan = Project(project_path).add_audit("orphan", "groups", Project(project_path).audit_json(first),
                                             dataset_id=None)
    window.open_project(project_path)
    tab = window.audit_tab
    window.show_page(tab)
    tab.dataset_combo.setCurrentIndex(tab.dataset_combo.findData(b))
    tab.wait_view()
    tab.seed_spin.setValue(99)
    started = []
    real_run_job = window.run_job
    monkeypatch.setattr(window, "run_job", lambda *args, **kw: started.append(args[0]) or real_run_job(*args, **kw))

    def form() -> tuple:
        return (tab.dataset_combo.currentData(), tab.seed_spin.value(), tab.threshold_spin.value(),
                tab.fixed_radio.isChecked())

    # the audit's dataset is not in the project: said in place, nothing started, nothing changed
    tab.refresh_audits(select=orphan)
    tab.wait_view()
    assert tab.result_id == orphan
    _show_explorer(window, tab)
    ex = tab.calibration_views.explorer
    assert ex.audit_button.isEnabled() and "approximate" in ex.source_label.text()
    ex.spin.setValue(0.3)
    before = form()
    assert _click(tab) is None
    assert started == [] and form() == before
    assert f"Audit #{orphan} was run on a dataset not in this project" in tab.status.text()
    _shot(window, tmp_path, "threshold-audit-no-dataset.png")

    # a job running on the page: said in place, nothing started, nothing changed
    tab.refresh_audits(select=first)
    tab.wait_view()
    assert tab.result_id == first
    from tiny_jobs import until_cancelled

    go = threading.Event()
    long = tab.start_job("A long computation", until_cancelled(go))
    assert go.wait(10) and tab.busy
    started.clear()
    before = form()
    assert _click(tab) is None
    assert started == [] and form() == before and tab.job is long
    assert "An audit is running on this page" in tab.status.text()
    with qtbot.waitSignal(window.runner.finished, timeout=10000):
        tab.cancel()
    assert long.state == JobState.CANCELLED
    assert [i.id for i in Project(project_path).audits()] == [first, orphan]

    # no project open
    empty = make_window()
    assert empty.audit_tab.audit_at_threshold(0.3) is None
    assert "Create or open a project" in empty.audit_tab.status.text()
