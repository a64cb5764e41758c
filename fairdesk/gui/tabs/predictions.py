"""The form shared by the audits of a predictions table (Group gaps, Slices): choosing its dataset reads the table and
guesses its columns' roles in the window's view runner (``window.views``), never on the Qt thread; the form is
filled when the read is done (at once when the dataset was read before)."""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from fairdesk.core.data.roles import attribute_candidates, guess_roles
from fairdesk.gui.tabs.base import AuditPage
from fairdesk.gui.tabs.dataset import NONE, PREDICTIONS
from fairdesk.gui.widgets.panel_parts import fill_combo

REQUIRED_ROLES = ("label", "score")


@dataclass(frozen=True)
class PredictionsColumns:
    """What the form shows of a predictions dataset: its columns, the column of each role (as stored with the
    dataset, else guessed; None when neither names one of its columns) and the attribute candidates with the
    checked ones."""

    dataset_id: int
    df: pd.DataFrame
    columns: list[str]
    roles: dict[str, str | None]
    categorical: list[str]
    continuous: list[str]
    checked_categorical: list[str]
    checked_continuous: list[str]


def read_predictions_columns(project, dataset_id: int, stored: dict, role_keys) -> PredictionsColumns:
    """Read dataset ``dataset_id`` and guess its columns (view thread: pandas only). ``stored``: the roles stored
    with the dataset."""
    df = project.load_dataset(dataset_id)
    guess = guess_roles(df)
    cols = [str(c) for c in df.columns]
    roles = {}
    for key in role_keys:
        value = stored.get(key) or guess.get(key)
        roles[key] = value if value in cols else None
    exclude = set(roles.values()) | {d.get(k) for d in (stored, guess) for k in ("sample_id", "split")}
    cat, cont = attribute_candidates(df, {c for c in exclude if c})
    stored_attrs = list(stored.get("attributes") or []) or guess["attributes"]
    stored_cont = list(stored.get("continuous_attributes") or []) or guess["continuous_attributes"]
    # an attribute stored as categorical that is clearly continuous (e.g. age carried over by training)
    moved = [a for a in stored_attrs if a in cont]
    checked_cat = [a for a in stored_attrs if a not in moved and a in cols]
    checked_cont = list(dict.fromkeys([a for a in stored_cont if a in cols] + moved))
    return PredictionsColumns(dataset_id, df, cols, roles, list(dict.fromkeys(cat + checked_cat)),
                              list(dict.fromkeys(cont + checked_cont)), checked_cat, checked_cont)


class PredictionsPage(AuditPage):
    """An audit page whose form starts with :func:`fairdesk.gui.widgets.panel_parts.predictions_box`: its
    ``build_form`` sets ``dataset_combo``, ``role_combos``, ``attributes_list`` and ``continuous_list`` and connects
    the dataset combo to :meth:`dataset_changed`. ``self.df`` is the chosen dataset once read (None until then);
    a page adds to the filled form in :meth:`columns_shown`."""

    def __init__(self, window) -> None:
        self.df: pd.DataFrame | None = None
        self._df_id: int | None = None
        self._columns: PredictionsColumns | None = None  # the last dataset read
        self._infos: dict = {}
        super().__init__(window)

    def refresh_form(self) -> None:
        project = self.window_.project
        infos = [d for d in project.datasets() if d.kind == PREDICTIONS] if project else []
        self._infos = {d.id: d for d in infos}
        fill_combo(self.dataset_combo, [(f"{d.name}  (#{d.id}, {d.n_rows:,} rows)", d.id) for d in infos])
        if self.dataset_combo.currentData() is None and infos:
            self.dataset_combo.setCurrentIndex(len(infos) - 1)
        self.dataset_changed()

    def dataset_changed(self, *args) -> None:
        """The chosen dataset changed (or the project): fill the form from its columns, read in the view runner
        unless it was the last one read; a newer choice cancels an older read."""
        dataset_id = self.dataset_combo.currentData()
        project = self.window_.project
        self.form_read.cancel()
        if dataset_id is None or project is None:
            self.df, self._df_id, self._columns = None, None, None
            for combo in self.role_combos.values():
                combo.clear()
            self.attributes_list.set_items([])
            self.continuous_list.set_items([])
            self.columns_shown(None)
            self.update_buttons()
            return
        if self._columns is not None and self._columns.dataset_id == dataset_id:
            self.form_data(self._columns)  # also when it was already chosen: resets the form
            return
        self.df, self._df_id = None, None
        self.update_buttons()
        info = self._infos.get(dataset_id)
        stored, keys = dict(info.roles or {}) if info else {}, tuple(self.role_combos)
        self.form_read.start(f"Read dataset #{dataset_id}",
                             lambda: read_predictions_columns(project, dataset_id, stored, keys))

    def form_data(self, read: PredictionsColumns) -> None:
        self._columns, self.df, self._df_id = read, read.df, read.dataset_id
        for key, combo in self.role_combos.items():
            optional = key not in REQUIRED_ROLES
            fill_combo(combo, ([(NONE, None)] if optional else []) + [(c, c) for c in read.columns], keep=False)
            value = read.roles.get(key)
            combo.setCurrentIndex(combo.findData(value) if value else (0 if optional else -1))
        self.attributes_list.set_items(read.categorical, read.checked_categorical)
        self.continuous_list.set_items(read.continuous, read.checked_continuous)
        self.columns_shown(read)
        self.update_buttons()

    def columns_shown(self, read: PredictionsColumns | None) -> None:
        """The form shows ``read`` (None: no dataset); a page fills what else depends on the columns."""

    def form_ready(self) -> bool:
        return self.df is not None and self.window_.project is not None
