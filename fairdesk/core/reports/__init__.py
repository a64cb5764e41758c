"""Reports: one module per audit kind, the generic report tree, its PDF renderer, and figure data shared with the GUI.

* :mod:`fairdesk.core.reports.document` — the generic report tree (``Report``, ``Section``, ``Paragraph``, ``Table``,
  ``FigureSpec``) and text helpers (``suppress_text``).
* One module per audit kind, named after it: :mod:`~fairdesk.core.reports.groups`,
  :mod:`~fairdesk.core.reports.mlm_bias`, :mod:`~fairdesk.core.reports.encoders`,
  :mod:`~fairdesk.core.reports.cit_images`. Each has ``report_tree(doc, settings) -> Report`` and the registry's
  ``build_report(doc, path, settings) -> Path`` (:mod:`fairdesk.core.kinds`), which honour every
  :class:`~fairdesk.core.kinds.ReportSettings` (counts below ``suppress_k`` print as "<k").
* :mod:`fairdesk.core.reports.pdf` — the generic renderer: ``write_pdf(report, path)``, ``render_bytes(report)``.
* :mod:`fairdesk.core.reports.figures` — ``forest_data``, ``delta_eo_data``, ``delta_bins_data`` (the plotted
  rows with hover text) and ``render_*_png`` (matplotlib, Agg). Cheap to import: the GUI loads it at start-up.

Names are loaded lazily so that importing this package (or ``figures``) pulls in neither reportlab nor matplotlib.
"""
from __future__ import annotations

import importlib

_EXPORTS = {
    "Report": "document", "Section": "document", "Paragraph": "document", "Table": "document",
    "FigureSpec": "document", "write_pdf": "pdf", "report_to_pdf": "groups", "render_bytes": "pdf",
    "forest_data": "figures", "delta_eo_data": "figures", "delta_bins_data": "figures",
    "render_forest_png": "figures", "render_delta_png": "figures", "render_bins_png": "figures",
    "STATUS_STYLE": "figures",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
