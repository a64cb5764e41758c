"""Editor of a log-probability bias template file (``resources/text/mlm_bias_templates.json`` format, see
``resources/text/README.md``): categories with their attribute phrases and templates, the demographic slot and its
word groups (e.g. add race or insurance groups), shared template sets, title, source and notes.

The edited list is checked with the templates module's own parser
(:func:`fairdesk.core.text.templates.parse_bias_templates`) before anything is written; its error is shown as it
is. It is saved as a NEW file (atomic write), never over the shipped resources or the file it was opened from, and
read back with :func:`~fairdesk.core.text.templates.load_bias_templates` to make sure it loads.
"""
from __future__ import annotations

import copy
import json
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QAbstractItemView, QDialog, QFileDialog, QFormLayout, QHBoxLayout, QHeaderView,
                               QLabel, QLineEdit, QListWidget, QListWidgetItem, QPlainTextEdit, QPushButton,
                               QSplitter, QTableWidget, QTableWidgetItem, QTabWidget, QVBoxLayout, QWidget)

from fairdesk.core.errors import DataError, FairDeskError

ERROR_STYLE = "color: #B00020;"
OK_STYLE = "color: #1b6e20;"


def _lines(text: str) -> list[str]:
    return [" ".join(line.split()) for line in text.splitlines() if line.strip()]


def _words(text: str) -> list[str]:
    return [" ".join(w.split()) for w in text.split(",") if w.strip()]


def _read_raw(path: Path) -> dict:
    """The file as a dict, checked once with the loader (so the editor starts from a valid list)."""
    from fairdesk.core.text.templates import load_bias_templates

    load_bias_templates(path)
    return json.loads(path.read_text(encoding="utf-8"))


class TemplateEditorDialog(QDialog):
    """Edit a bias template file and save it as a new file. ``saved(path)`` is emitted after a successful save."""

    saved = Signal(str)

    def __init__(self, path: str | Path | None = None, parent=None, *, last_dir: str | None = None) -> None:
        super().__init__(parent)
        from fairdesk.core.text.templates import default_bias_templates_path

        self.setWindowTitle("Bias templates")
        self.resize(980, 640)
        self.source_path = Path(path) if path else default_bias_templates_path()
        self.last_dir = last_dir or str(self.source_path.parent)
        self.saved_path: Path | None = None
        self.data = _read_raw(self.source_path)
        self._row = -1
        self._set_row = -1
        self._slot = str((self.data.get("target") or {}).get("slot", "GEND")).strip("[]")
        self._build()
        self._load_all()

    # =====================================================================================================
    def _build(self) -> None:
        self.tabs = QTabWidget(self)
        # ---- categories
        page = QWidget(self)
        split = QSplitter(Qt.Orientation.Horizontal, page)
        left = QWidget(split)
        lv = QVBoxLayout(left)
        lv.setContentsMargins(0, 0, 0, 0)
        self.category_list = QListWidget(left)
        self.category_list.currentRowChanged.connect(self._category_selected)
        lv.addWidget(self.category_list, 1)
        row = QHBoxLayout()
        self.add_category_button = QPushButton("Add category", left)
        self.add_category_button.clicked.connect(lambda: self.add_category())
        self.remove_category_button = QPushButton("Remove", left)
        self.remove_category_button.clicked.connect(self.remove_category)
        row.addWidget(self.add_category_button)
        row.addWidget(self.remove_category_button)
        lv.addLayout(row)
        right = QWidget(split)
        form = QFormLayout(right)
        self.code_edit = QLineEdit(right)
        self.code_edit.setToolTip("A short unique code, e.g. INS; a template may write the attribute slot as [INS].")
        self.code_edit.editingFinished.connect(self._code_edited)
        self.name_edit = QLineEdit(right)
        self.name_edit.textEdited.connect(self._store_category)
        self.attributes_edit = QPlainTextEdit(right)
        self.attributes_edit.setPlaceholderText("one attribute phrase per line, e.g.\nmedicaid\nprivate insurance")
        self.attributes_edit.textChanged.connect(self._store_category)
        self.templates_edit = QPlainTextEdit(right)
        self.templates_edit.textChanged.connect(self._store_category)
        self.template_help = QLabel("", right)
        self.template_help.setWordWrap(True)
        self.template_help.setStyleSheet("color: palette(mid);")
        form.addRow("Code", self.code_edit)
        form.addRow("Name", self.name_edit)
        form.addRow("Attribute phrases", self.attributes_edit)
        form.addRow("Templates", self.templates_edit)
        form.addRow(self.template_help)
        split.addWidget(left)
        split.addWidget(right)
        split.setSizes([260, 700])
        pv = QVBoxLayout(page)
        pv.addWidget(split)
        self.tabs.addTab(page, "Categories")

        # ---- word groups
        page = QWidget(self)
        pv = QVBoxLayout(page)
        form = QFormLayout()
        self.slot_edit = QLineEdit(page)
        self.slot_edit.setToolTip("The slot the probe scores; renaming it renames it in every template.")
        self.slot_edit.editingFinished.connect(self._slot_edited)
        form.addRow("Scored slot", self.slot_edit)
        pv.addLayout(form)
        note = QLabel("Each group's words fill the scored slot, comma-separated. The first two groups are compared by "
                      "default (the audit can choose others). With the signed-rank test the words are paired position "
                      "by position, so compared groups need the same number of words.", page)
        note.setWordWrap(True)
        note.setStyleSheet("color: palette(mid);")
        pv.addWidget(note)
        self.groups_table = QTableWidget(0, 2, page)
        self.groups_table.setHorizontalHeaderLabels(["Group", "Words (comma-separated)"])
        self.groups_table.horizontalHeader().setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        self.groups_table.setColumnWidth(0, 160)
        self.groups_table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        pv.addWidget(self.groups_table, 1)
        row = QHBoxLayout()
        self.add_group_button = QPushButton("Add group", page)
        self.add_group_button.clicked.connect(lambda: self.add_group())
        self.remove_group_button = QPushButton("Remove group", page)
        self.remove_group_button.clicked.connect(self.remove_group)
        row.addWidget(self.add_group_button)
        row.addWidget(self.remove_group_button)
        row.addStretch(1)
        pv.addLayout(row)
        self.tabs.addTab(page, "Word groups")

        # ---- shared template sets
        page = QWidget(self)
        split = QSplitter(Qt.Orientation.Horizontal, page)
        left = QWidget(split)
        lv = QVBoxLayout(left)
        lv.setContentsMargins(0, 0, 0, 0)
        self.set_list = QListWidget(left)
        self.set_list.currentRowChanged.connect(self._set_selected)
        lv.addWidget(self.set_list, 1)
        row = QHBoxLayout()
        self.add_set_button = QPushButton("Add set", left)
        self.add_set_button.clicked.connect(lambda: self.add_set())
        self.remove_set_button = QPushButton("Remove", left)
        self.remove_set_button.clicked.connect(self.remove_set)
        row.addWidget(self.add_set_button)
        row.addWidget(self.remove_set_button)
        lv.addLayout(row)
        right = QWidget(split)
        form = QFormLayout(right)
        self.set_name_edit = QLineEdit(right)
        self.set_name_edit.editingFinished.connect(self._set_renamed)
        self.set_templates_edit = QPlainTextEdit(right)
        self.set_templates_edit.textChanged.connect(self._store_set)
        form.addRow("Name", self.set_name_edit)
        form.addRow("Templates", self.set_templates_edit)
        set_note = QLabel("A category's template '@name' stands for every template of the set.", right)
        set_note.setStyleSheet("color: palette(mid);")
        form.addRow(set_note)
        split.addWidget(left)
        split.addWidget(right)
        split.setSizes([260, 700])
        pv = QVBoxLayout(page)
        pv.addWidget(split)
        self.tabs.addTab(page, "Shared template sets")

        # ---- about
        page = QWidget(self)
        form = QFormLayout(page)
        self.title_edit = QLineEdit(page)
        self.source_edit = QPlainTextEdit(page)
        self.source_edit.setMaximumHeight(90)
        self.notes_edit = QPlainTextEdit(page)
        form.addRow("Title", self.title_edit)
        form.addRow("Source", self.source_edit)
        form.addRow("Notes (one per line)", self.notes_edit)
        self.tabs.addTab(page, "About")

        self.message = QLabel("", self)
        self.message.setWordWrap(True)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.check_button = QPushButton("Check", self)
        self.check_button.clicked.connect(self.check)
        self.save_button = QPushButton("Save as new file…", self)
        self.save_button.clicked.connect(lambda: self.save_as())
        self.close_button = QPushButton("Close", self)
        self.close_button.clicked.connect(self.reject)
        buttons = QHBoxLayout()
        buttons.addWidget(self.message, 1)
        buttons.addWidget(self.check_button)
        buttons.addWidget(self.save_button)
        buttons.addWidget(self.close_button)
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel(f"Editing a copy of <b>{self.source_path.name}</b> — it is saved as a new file; the "
                                "original stays as it is.", self))
        layout.addWidget(self.tabs, 1)
        layout.addLayout(buttons)

    def _load_all(self) -> None:
        target = self.data.setdefault("target", {})
        self.slot_edit.setText(self._slot)
        self.groups_table.setRowCount(0)
        for g, words in (target.get("groups") or {}).items():
            self.add_group(g, ", ".join(words))
        self.data.setdefault("template_sets", {})
        self.data.setdefault("categories", [])
        self.title_edit.setText(str(self.data.get("title", "")))
        self.source_edit.setPlainText(str(self.data.get("source", "")))
        self.notes_edit.setPlainText("\n".join(map(str, self.data.get("notes", []) or [])))
        self._fill_categories(0)
        self._fill_sets(0)
        self._update_help()

    # =====================================================================================================
    # Categories
    def _fill_categories(self, select: int) -> None:
        self.category_list.blockSignals(True)
        self.category_list.clear()
        for c in self.data["categories"]:
            QListWidgetItem(f"{c.get('code', '?')} — {c.get('name', '')}", self.category_list)
        self.category_list.blockSignals(False)
        self._row = -1
        if self.data["categories"]:
            self.category_list.setCurrentRow(min(max(select, 0), len(self.data["categories"]) - 1))
        else:
            self._category_selected(-1)

    def _category_selected(self, row: int) -> None:
        self._row = row
        has = 0 <= row < len(self.data["categories"])
        for w in (self.code_edit, self.name_edit, self.attributes_edit, self.templates_edit):
            w.setEnabled(has)
            w.blockSignals(True)
        c = self.data["categories"][row] if has else {}
        self.code_edit.setText(str(c.get("code", "")))
        self.name_edit.setText(str(c.get("name", "")))
        self.attributes_edit.setPlainText("\n".join(map(str, c.get("attributes", []) or [])))
        self.templates_edit.setPlainText("\n".join(map(str, c.get("templates", []) or [])))
        for w in (self.code_edit, self.name_edit, self.attributes_edit, self.templates_edit):
            w.blockSignals(False)
        self.remove_category_button.setEnabled(has)

    def _store_category(self, *args) -> None:
        if not 0 <= self._row < len(self.data["categories"]):
            return
        c = self.data["categories"][self._row]
        c["name"] = self.name_edit.text().strip()
        c["attributes"] = _lines(self.attributes_edit.toPlainText())
        c["templates"] = _lines(self.templates_edit.toPlainText())
        item = self.category_list.item(self._row)
        if item is not None:
            item.setText(f"{c.get('code', '?')} — {c['name']}")

    def _code_edited(self) -> None:
        if not 0 <= self._row < len(self.data["categories"]):
            return
        c = self.data["categories"][self._row]
        old, new = str(c.get("code", "")), self.code_edit.text().strip().strip("[]")
        if new == old:
            return
        c["code"] = new
        if old and new:  # a template may write the attribute slot as [CODE]
            c["templates"] = [t.replace(f"[{old}]", f"[{new}]") for t in c.get("templates", [])]
            self.templates_edit.blockSignals(True)
            self.templates_edit.setPlainText("\n".join(c["templates"]))
            self.templates_edit.blockSignals(False)
        self._store_category()

    def add_category(self, code: str | None = None, name: str = "", attributes: list[str] | None = None,
                     templates: list[str] | None = None) -> int:
        """Append a category (a unique code is made up when none is given) and select it. Returns its row."""
        codes = {str(c.get("code")) for c in self.data["categories"]}
        if code is None:
            k = 1
            while f"NEW{k}" in codes:
                k += 1
            code = f"NEW{k}"
        self.data["categories"].append({
            "code": code, "name": name or "New category", "attributes": list(attributes or []),
            "templates": list(templates) if templates is not None else [f"[{self._slot}] has a history of [ATTR]"]})
        row = len(self.data["categories"]) - 1
        self._fill_categories(row)
        self.tabs.setCurrentIndex(0)
        return row

    def remove_category(self) -> None:
        if 0 <= self._row < len(self.data["categories"]):
            del self.data["categories"][self._row]
            self._fill_categories(self._row)

    # =====================================================================================================
    # Slot and word groups
    def _slot_edited(self) -> None:
        new = self.slot_edit.text().strip().strip("[]")
        old = self._slot
        if not new or new == old:
            self.slot_edit.setText(old)
            return
        for c in self.data["categories"]:
            c["templates"] = [t.replace(f"[{old}]", f"[{new}]") for t in c.get("templates", [])]
        sets = self.data["template_sets"]
        for name in list(sets):
            sets[name] = [t.replace(f"[{old}]", f"[{new}]") for t in sets[name]]
        self._slot = new
        self._category_selected(self._row)
        self._set_selected(self._set_row)
        self._update_help()

    def add_group(self, name: str = "", words: str = "") -> int:
        row = self.groups_table.rowCount()
        self.groups_table.insertRow(row)
        self.groups_table.setItem(row, 0, QTableWidgetItem(name))
        self.groups_table.setItem(row, 1, QTableWidgetItem(words))
        return row

    def remove_group(self) -> None:
        rows = sorted({i.row() for i in self.groups_table.selectedIndexes()}, reverse=True)
        for r in rows:
            self.groups_table.removeRow(r)

    def groups(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for r in range(self.groups_table.rowCount()):
            name = (self.groups_table.item(r, 0).text() if self.groups_table.item(r, 0) else "").strip()
            words = _words(self.groups_table.item(r, 1).text() if self.groups_table.item(r, 1) else "")
            if not name and not words:
                continue
            if not name:
                raise DataError(f"Word group in row {r + 1} has words but no name; give it a name (e.g. medicaid).")
            if name in out:
                raise DataError(f"The word group '{name}' appears twice; group names must be unique.")
            out[name] = words
        return out

    # =====================================================================================================
    # Template sets
    def _fill_sets(self, select: int) -> None:
        self.set_list.blockSignals(True)
        self.set_list.clear()
        for name in self.data["template_sets"]:
            QListWidgetItem(name, self.set_list)
        self.set_list.blockSignals(False)
        self._set_row = -1
        if self.data["template_sets"]:
            self.set_list.setCurrentRow(min(max(select, 0), len(self.data["template_sets"]) - 1))
        else:
            self._set_selected(-1)

    def _set_name(self, row: int) -> str | None:
        names = list(self.data["template_sets"])
        return names[row] if 0 <= row < len(names) else None

    def _set_selected(self, row: int) -> None:
        self._set_row = row
        name = self._set_name(row)
        for w in (self.set_name_edit, self.set_templates_edit):
            w.setEnabled(name is not None)
            w.blockSignals(True)
        self.set_name_edit.setText(name or "")
        self.set_templates_edit.setPlainText("\n".join(self.data["template_sets"].get(name, [])) if name else "")
        for w in (self.set_name_edit, self.set_templates_edit):
            w.blockSignals(False)
        self.remove_set_button.setEnabled(name is not None)

    def _store_set(self) -> None:
        name = self._set_name(self._set_row)
        if name is not None:
            self.data["template_sets"][name] = _lines(self.set_templates_edit.toPlainText())

    def _set_renamed(self) -> None:
        old = self._set_name(self._set_row)
        new = self.set_name_edit.text().strip().lstrip("@")
        if old is None or not new or new == old or new in self.data["template_sets"]:
            self.set_name_edit.setText(old or "")
            return
        self.data["template_sets"] = {(new if k == old else k): v for k, v in self.data["template_sets"].items()}
        for c in self.data["categories"]:
            c["templates"] = [f"@{new}" if t == f"@{old}" else t for t in c.get("templates", [])]
        self._fill_sets(self._set_row)
        self._category_selected(self._row)

    def add_set(self, name: str | None = None, templates: list[str] | None = None) -> None:
        k = 1
        while name is None or name in self.data["template_sets"]:
            name = f"set{k}"
            k += 1
        self.data["template_sets"][name] = list(templates or [])
        self._fill_sets(len(self.data["template_sets"]) - 1)
        self.tabs.setCurrentIndex(2)

    def remove_set(self) -> None:
        name = self._set_name(self._set_row)
        if name is not None:
            del self.data["template_sets"][name]
            self._fill_sets(self._set_row)

    def _update_help(self) -> None:
        self.template_help.setText(
            f"One template per line with the scored slot [{self._slot}] once and the attribute slot [ATTR] (or the "
            "category code in brackets) once. {a|b|c} expands to one template per alternative; @name stands for a "
            "shared template set.")

    # =====================================================================================================
    # Checking and saving
    def document(self) -> dict:
        """The edited template list as the JSON object that will be written."""
        self._store_category()
        self._store_set()
        doc = copy.deepcopy(self.data)
        doc["format"] = doc.get("format") or "fairdesk.mlm_bias_templates/1"
        doc["title"] = self.title_edit.text().strip()
        doc["source"] = self.source_edit.toPlainText().strip()
        doc["notes"] = _lines(self.notes_edit.toPlainText())
        doc["target"] = {"slot": self._slot, "groups": self.groups()}
        order = ["format", "title", "source", "notes", "target", "template_sets", "categories"]
        return {k: doc[k] for k in order if k in doc} | {k: v for k, v in doc.items() if k not in order}

    def check(self):
        """Parse the edited list with the templates module; show its error plainly. Returns the parsed list or
        None."""
        from fairdesk.core.text.templates import parse_bias_templates

        try:
            tpl = parse_bias_templates(self.document())
        except FairDeskError as err:
            self.message.setStyleSheet(ERROR_STYLE)
            self.message.setText(str(err))
            return None
        counts = tpl.counts()
        self.message.setStyleSheet(OK_STYLE)
        self.message.setText(f"OK: {len(tpl.categories)} categories, {sum(counts.values())} (template, attribute) "
                             f"pairs, groups {', '.join(tpl.groups)}.")
        return tpl

    def _refused(self, path: Path) -> str | None:
        from fairdesk.paths import resources_dir

        target = path.resolve()
        if target == self.source_path.resolve():
            return (f"{path.name} is the file this editor opened; save the edited list as a new file so that audits "
                    "made with the original stay traceable.")
        try:
            target.relative_to(resources_dir().resolve())
            return "The shipped resource files are not overwritten; save the edited list in another folder."
        except ValueError:
            return None

    def save_as(self, path: str | Path | None = None) -> Path | None:
        """Check, then write the list to ``path`` (asked for when None) atomically and read it back. Returns the
        path, or None when the list has an error or the user cancelled."""
        if self.check() is None:
            return None
        if path is None:
            default = Path(self.last_dir) / f"{self.source_path.stem}-edited.json"
            path, _ = QFileDialog.getSaveFileName(self, "Save the template list as", str(default),
                                                  "Template lists (*.json)")
            if not path:
                return None
        path = Path(path)
        if path.suffix.lower() != ".json":
            path = path.with_name(path.name + ".json")
        refused = self._refused(path)
        if not refused:
            from fairdesk.core.guard import guard_outputs

            try:  # the one output guard: not the opened list by another spelling (a link), not a folder
                guard_outputs([("The template list", path)], inputs=[("the list this editor opened",
                                                                       self.source_path)])
            except FairDeskError as err:
                refused = str(err)
        if refused:
            self.message.setStyleSheet(ERROR_STYLE)
            self.message.setText(refused)
            return None
        from fairdesk.core import atomic
        from fairdesk.core.text.templates import load_bias_templates

        try:
            atomic.write_text(path, json.dumps(self.document(), indent=2, ensure_ascii=False) + "\n")
            tpl = load_bias_templates(path)
        except OSError as err:
            self.message.setStyleSheet(ERROR_STYLE)
            self.message.setText(f"Cannot write {path}: {err.strerror or err}. Choose another folder.")
            return None
        except FairDeskError as err:  # pragma: no cover - checked above; kept for a file changed while writing
            self.message.setStyleSheet(ERROR_STYLE)
            self.message.setText(str(err))
            return None
        self.saved_path = path
        self.message.setStyleSheet(OK_STYLE)
        self.message.setText(f"Saved {path.name}: {len(tpl.categories)} categories, {sum(tpl.counts().values())} "
                             "pairs.")
        self.saved.emit(str(path))
        return path
