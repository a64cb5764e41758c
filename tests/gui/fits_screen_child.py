"""Child process of test_fits_screen.py: a main window on an offscreen screen of the size (and Qt scale factor)
the parent chose, with a stored group audit; prints JSON: the geometry facts and the layout walk's problems."""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from PySide6.QtWidgets import QApplication  # noqa: E402

from layout_walk import settle, states, wait_views, walk  # noqa: E402


def legend_overlaps(window) -> list[str]:
    """Every visible legend (a widget's ``legend`` label) whose area on screen meets a visible table's, on every
    page and result tab."""
    from PySide6.QtCore import QRect
    from PySide6.QtWidgets import QAbstractItemView, QLabel, QWidget

    def rect(w) -> QRect:
        return QRect(w.mapToGlobal(w.rect().topLeft()), w.size())

    found = []
    for name, _page in states(window):
        legends = [w.legend for w in window.findChildren(QWidget)
                   if isinstance(getattr(w, "legend", None), QLabel) and w.legend.isVisible()]
        tables = [t for t in window.findChildren(QAbstractItemView) if t.isVisible()]
        found += [f"{name}: a legend covers a table" for lg in legends for t in tables
                  if rect(lg).intersects(rect(t))]
    return found


def main(project_dir: str) -> None:
    app = QApplication([])
    from conftest import make_predictions  # (after the app: conftest sets QT_QPA_PLATFORM for in-process tests)
    from fairdesk.core.audits.groups import GroupAuditPlan
    from fairdesk.core.data.schema import ColumnRoles
    from fairdesk.gui.main_window import MainWindow
    from fairdesk.core.data.tables import import_table
    from fairdesk.jobs.groups import audit_groups

    csv = Path(project_dir) / "predictions.csv"
    make_predictions().to_csv(csv, index=False)
    project = Path(project_dir) / "fit.fairdesk"
    roles = ColumnRoles(label="label", score="score", task="task", attributes=("sex", "ethnicity"),
                        continuous_attributes=("age",), patient_id="patient_id", split="split")
    ds = import_table(project, csv, roles=roles)
    audit_groups(project, ds, GroupAuditPlan(roles=roles, threshold=0.5, n_boot=200, n_permutations=200),
                 name="fit")
    window = MainWindow()
    window.show()
    settle(app)
    window.open_project(project)
    wait_views(window)
    settle(app)
    area = window.screen().availableGeometry()
    frame = window.frameGeometry()
    status = window.statusBar()
    top_left = status.mapTo(window, status.rect().topLeft())
    facts = {"area": [area.x(), area.y(), area.width(), area.height()],
             "frame": [frame.x(), frame.y(), frame.width(), frame.height()],
             "inside": area.contains(frame),
             "status_visible": status.isVisible() and top_left.y() + status.height() <= window.height(),
             "scale": window.devicePixelRatio()}
    window.show_page(window.audit_tab)
    window.audit_tab.results_tabs.setCurrentIndex(0)
    settle(app)
    # how much of the gap plot shows without scrolling: its part inside the page's scrolled viewport and the window
    plot = window.audit_tab.gap_plot
    viewport = plot.parentWidget()
    while viewport is not None and viewport.objectName() != "qt_scrollarea_viewport":
        viewport = viewport.parentWidget()
    top = plot.mapTo(window, plot.rect().topLeft()).y()
    bottom = min(top + plot.height(), window.statusBar().mapTo(window, window.statusBar().rect().topLeft()).y())
    if viewport is not None:
        bottom = min(bottom, viewport.mapTo(window, viewport.rect().bottomLeft()).y())
    facts["gap_plot_visible_px"] = max(0, bottom - top) if plot.isVisible() else 0
    size = (window.width(), window.height())
    facts["problems"] = walk(window, size)
    legends = legend_overlaps(window)
    # a window manager's frame takes some of the screen: about 20×40 device pixels (borders, title bar)
    framed = (size[0] - round(20 / facts["scale"]), size[1] - round(40 / facts["scale"]))
    facts["framed_problems"] = walk(window, framed)
    facts["legend_overlaps"] = legends + [f"framed {where}" for where in legend_overlaps(window)]
    print(json.dumps(facts))
    window.runner.shutdown(10000)
    window.views.shutdown(10000)


if __name__ == "__main__":
    main(sys.argv[1])
