"""File › Manage audits…: rename, delete (asks; undone with "Undo delete" until the project closes) and compare
two stored group audits (which verdicts changed, how the gaps moved, what differed), with the comparison's PDF.

The deleted audits are kept in memory by the main window (``window.deleted_audits``, emptied when another project
opens), so a delete loses nothing until then; nothing but the audit row itself is removed from the project."""
from __future__ import annotations

import pandas as pd
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QAbstractItemView, QDialog, QDialogButtonBox, QFileDialog, QHBoxLayout, QInputDialog,
                               QLabel, QListWidget, QListWidgetItem, QMessageBox, QPushButton, QVBoxLayout)

from fairdesk.core.errors import FairDeskError
from fairdesk.gui.widgets.tables import DataFrameView


class ManageAuditsDialog(QDialog):
    def __init__(self, window) -> None:
        super().__init__(window)
        self.window_ = window
        self.setWindowTitle("Manage audits")
        self.list = QListWidget(self)
        self.list.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.list.itemSelectionChanged.connect(self._update_buttons)
        self.rename_button = QPushButton("Rename…", self, clicked=lambda: self.rename_selected())
        self.delete_button = QPushButton("Delete…", self, clicked=lambda: self.delete_selected())
        self.undo_button = QPushButton("Undo delete", self, clicked=lambda: self.undo_delete())
        self.compare_button = QPushButton("Compare the two…", self, clicked=lambda: self.compare_selected())
        self.compare_button.setToolTip("Select two group audits (Ctrl+click) to see which verdicts changed")
        buttons = QHBoxLayout()
        for b in (self.rename_button, self.delete_button, self.undo_button, self.compare_button):
            buttons.addWidget(b)
        buttons.addStretch(1)
        close = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        close.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel("Stored audits of this project (select two group audits to compare them):", self))
        layout.addWidget(self.list, 1)
        layout.addLayout(buttons)
        layout.addWidget(close)
        self.resize(620, 380)
        self.refresh()

    @property
    def project(self):
        return self.window_.project

    def refresh(self) -> None:
        self.list.clear()
        if self.project is None:
            return
        from fairdesk.core.kinds import AUDIT_KINDS

        for a in self.project.audits():
            kind = AUDIT_KINDS[a.kind].title if a.kind in AUDIT_KINDS else a.kind
            when = str(a.created)[:16].replace("T", " ")
            item = QListWidgetItem(f"{a.id}: {a.name}  ({kind}, {when})", self.list)
            item.setData(Qt.ItemDataRole.UserRole, (a.id, a.kind, a.name))
        self._update_buttons()

    def selected(self) -> list[tuple[int, str, str]]:
        return [i.data(Qt.ItemDataRole.UserRole) for i in self.list.selectedItems()]

    def _update_buttons(self) -> None:
        sel = self.selected()
        self.rename_button.setEnabled(len(sel) == 1)
        self.delete_button.setEnabled(len(sel) >= 1)
        self.undo_button.setEnabled(bool(self.window_.deleted_audits))
        self.compare_button.setEnabled(len(sel) == 2 and all(k == "groups" for _, k, _ in sel))

    def _changed(self) -> None:
        self.window_.notify_project_changed()
        self.refresh()

    def rename_selected(self, name: str | None = None) -> None:
        (audit_id, _, old), = self.selected()
        if name is None:
            name, ok = QInputDialog.getText(self, "Rename audit", "New name:", text=old)
            if not ok:
                return
        try:
            self.project.rename_audit(audit_id, name)
        except FairDeskError as err:
            self.window_.show_error("Could not rename the audit", str(err))
            return
        self._changed()

    def delete_selected(self, confirm: bool = True) -> None:
        sel = self.selected()
        if not sel:
            return
        names = ", ".join(f"'{n}'" for _, _, n in sel)
        if confirm:
            answer = QMessageBox.question(
                self, "Delete audit", f"Delete {names}? Only the audit is removed (its dataset and models stay); "
                "Undo delete brings it back until the project is closed.")
            if answer != QMessageBox.StandardButton.Yes:
                return
        for audit_id, _, _ in sel:
            try:
                self.window_.deleted_audits.append(self.project.delete_audit(audit_id))
            except FairDeskError as err:
                self.window_.show_error("Could not delete the audit", str(err))
                break
        self.window_.statusBar().showMessage(f"Deleted {names}. Undo delete (File › Manage audits…) brings it "
                                             "back until the project is closed.", 10000)
        self._changed()

    def undo_delete(self) -> int | None:
        if not self.window_.deleted_audits:
            return None
        gone = self.window_.deleted_audits.pop()
        try:
            rid = self.project.restore_audit(gone)
        except FairDeskError as err:
            self.window_.deleted_audits.append(gone)
            self.window_.show_error("Could not restore the audit", str(err))
            return None
        self.window_.statusBar().showMessage(f"Restored '{gone.name}' as audit {rid}.", 8000)
        self._changed()
        return rid

    def compare_selected(self):
        (a, _, _), (b, _, _) = sorted(self.selected())
        dialog = CompareDialog(self.window_, a, b, self)
        dialog.open()
        return dialog


class CompareDialog(QDialog):
    """The comparison of two stored group audits: the sentences, the tests whose verdict changed (then all), and
    "Export PDF…" (the same PDF as ``fairdesk-cli report compare``)."""

    def __init__(self, window, audit_a: int, audit_b: int, parent=None) -> None:
        super().__init__(parent or window)
        self.window_, self.audit_a, self.audit_b = window, audit_a, audit_b
        self.comparison: dict | None = None
        self.setWindowTitle(f"Compare audits {audit_a} and {audit_b}")
        self.words = QLabel("Comparing…", self)
        self.words.setWordWrap(True)
        self.words.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.table = DataFrameView(self, placeholder="No test ran in both audits.")
        self.pdf_button = QPushButton("Export PDF…", self, clicked=lambda: self.export_pdf())
        self.pdf_button.setEnabled(False)
        close = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        close.rejected.connect(self.reject)
        row = QHBoxLayout()
        row.addWidget(self.pdf_button)
        row.addStretch(1)
        row.addWidget(close)
        layout = QVBoxLayout(self)
        layout.addWidget(self.words)
        layout.addWidget(self.table, 1)
        layout.addLayout(row)
        self.resize(900, 520)
        path = window.project.path

        def work(progress, cancel):
            from fairdesk.jobs.compare import compare_stored

            return compare_stored(path, audit_a, audit_b)

        window.run_job(f"Compare audits {audit_a} and {audit_b}", work, on_done=self._show)

    def _show(self, job) -> None:
        from fairdesk.core.compare import comparison_sentences

        self.comparison = job.result
        self.words.setText("\n".join(comparison_sentences(self.comparison)))
        rows = pd.DataFrame(self.comparison["rows"])
        if not rows.empty:
            rows = rows.sort_values("changed", ascending=False, kind="stable")
            rows = rows[["changed", "task", "attribute", "metric", "kind", "group", "comparison", "gap_a", "gap_b",
                         "gap_change", "verdict_a", "verdict_b", "only_in"]]
        self.table.set_frame(rows)
        self.pdf_button.setEnabled(True)

    def export_pdf(self, path=None):
        if path is None:
            path, _ = QFileDialog.getSaveFileName(self, "Export the comparison", "comparison.pdf", "PDF (*.pdf)")
            if not path:
                return None
        project, a, b = self.window_.project.path, self.audit_a, self.audit_b
        k = self.window_.settings.suppress_k

        def work(progress, cancel):
            from fairdesk.jobs.compare import export_comparison

            return export_comparison(project, a, b, path, suppress_k=k, progress=progress, cancel=cancel)

        return self.window_.run_job("Export the comparison (PDF)", work)
