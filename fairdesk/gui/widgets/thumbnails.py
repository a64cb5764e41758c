"""A lazy thumbnail grid of an image dataset, with the files that could not be read listed separately.

Images are decoded OFF the Qt thread: one small private reader thread (a ``concurrent.futures`` executor, not the
job runner — thumbnails must not wait behind a long training job) reads each file with
:func:`fairdesk.core.data.images.read_image`, shrinks it with Pillow and hands back 8-bit grey pixels through a
queue. A ``QTimer`` in the Qt thread drains the queue a few items per tick and turns them into icons, so the window
stays responsive. At most ``max_items`` thumbnails are shown (the rest are counted, never read). Setting new files
cancels the previous load.
"""
from __future__ import annotations

import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from PySide6.QtCore import QSize, Qt, QTimer, Signal
from PySide6.QtGui import QIcon, QImage, QPixmap
from PySide6.QtWidgets import (QApplication, QLabel, QListView, QListWidget, QListWidgetItem, QSplitter,
                               QVBoxLayout, QWidget)


def thumbnail_array(path: str | Path, size: int) -> np.ndarray:
    """The image at ``path`` as uint8 grey pixels, longest side at most ``size`` (aspect kept; small images are
    enlarged by a whole factor). Raises DataError."""
    from PIL import Image

    from fairdesk.core.data.images import read_image

    arr = read_image(path)
    h, w = arr.shape[:2]
    scale = size / max(h, w)
    if scale < 1:
        im = Image.fromarray(arr, mode="F").resize((max(1, round(w * scale)), max(1, round(h * scale))),
                                                   Image.BILINEAR)
        arr = np.asarray(im, dtype=np.float32)
    elif scale >= 2:  # tiny images: enlarge by a whole factor, pixels kept sharp
        k = int(scale)
        arr = np.repeat(np.repeat(arr, k, axis=0), k, axis=1)
    return np.round(np.clip(arr, 0.0, 1.0) * 255).astype(np.uint8)


def _to_qimage(arr: np.ndarray) -> QImage:
    arr = np.ascontiguousarray(arr)
    h, w = arr.shape
    return QImage(arr.data, w, h, w, QImage.Format.Format_Grayscale8).copy()  # copy: own the pixels


class ThumbnailGrid(QWidget):
    """``set_files(files, captions=None, unreadable=None)``; ``loaded`` is emitted when every thumbnail is in."""

    loaded = Signal()

    PER_TICK = 24

    def __init__(self, parent=None, *, thumb_size: int = 96, max_items: int = 240) -> None:
        super().__init__(parent)
        self.thumb_size = int(thumb_size)
        self.max_items = int(max_items)
        self._executor: ThreadPoolExecutor | None = None
        self._queue: queue.Queue = queue.Queue()
        self._stop = threading.Event()
        self._generation = 0
        self._pending = 0
        self.failed: list[dict] = []      # files that the thumbnail reader could not decode
        self.grid = QListWidget(self)
        self.grid.setViewMode(QListView.ViewMode.IconMode)
        self.grid.setIconSize(QSize(self.thumb_size, self.thumb_size))
        self.grid.setGridSize(QSize(self.thumb_size + 24, self.thumb_size + 30))
        self.grid.setResizeMode(QListView.ResizeMode.Adjust)
        self.grid.setMovement(QListView.Movement.Static)
        self.grid.setUniformItemSizes(True)
        self.grid.setWordWrap(True)
        self.status = QLabel("No images.", self)
        self.status.setStyleSheet("color: palette(mid);")
        self.unreadable_label = QLabel("Unreadable files", self)
        self.unreadable_list = QListWidget(self)
        self.unreadable_list.setToolTip("Files that are missing or cannot be decoded; they are left out, the rest "
                                        "of the dataset is used.")
        bottom = QWidget(self)
        bv = QVBoxLayout(bottom)
        bv.setContentsMargins(0, 0, 0, 0)
        bv.addWidget(self.unreadable_label)
        bv.addWidget(self.unreadable_list)
        self.split = QSplitter(Qt.Orientation.Vertical, self)
        self.split.addWidget(self.grid)
        self.split.addWidget(bottom)
        self.split.setStretchFactor(0, 4)
        self.split.setStretchFactor(1, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.status)
        layout.addWidget(self.split, 1)
        self.timer = QTimer(self)
        self.timer.setInterval(30)
        self.timer.timeout.connect(self._drain)
        app = QApplication.instance()
        if app is not None:   # child widgets get no closeEvent when the window closes: stop the reader on quit
            app.aboutToQuit.connect(self.stop)
        self._set_unreadable([])

    # ---- API -----------------------------------------------------------------------------------------------
    def set_files(self, files, captions=None, unreadable: list[dict] | None = None) -> None:
        """Show thumbnails of ``files`` (the first ``max_items``); list ``unreadable`` ({"path", "reason"})."""
        self.stop()
        files = [str(f) for f in files]
        captions = [str(c) for c in captions] if captions is not None else [Path(f).name for f in files]
        self.grid.clear()
        self.failed = []
        self._set_unreadable(unreadable or [])
        self._total = len(files)
        shown = files[: self.max_items]
        self._pending = len(shown)
        self._items = []
        for f, cap in zip(shown, captions):
            item = QListWidgetItem(cap)
            item.setToolTip(f)
            item.setSizeHint(QSize(self.thumb_size + 20, self.thumb_size + 26))
            self.grid.addItem(item)
            self._items.append(item)
        self._update_status()
        if not shown:
            self.loaded.emit()
            return
        self._generation += 1
        self._stop = threading.Event()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fairdesk-thumbnails")
        self._executor.submit(self._read_all, shown, self._generation, self._stop, self._queue, self.thumb_size)
        self.timer.start()

    def stop(self) -> None:
        """Cancel a running load (the reader stops after its current file)."""
        self._stop.set()
        self.timer.stop()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
        self._pending = 0

    @property
    def loading(self) -> bool:
        return self._pending > 0

    def count(self) -> int:
        return self.grid.count()

    def thumbnails_ready(self) -> int:
        return sum(1 for i in range(self.grid.count()) if not self.grid.item(i).icon().isNull())

    # ---- worker thread -------------------------------------------------------------------------------------
    @staticmethod
    def _read_all(files, generation, stop, out, size) -> None:
        for i, f in enumerate(files):
            if stop.is_set():
                return
            try:
                out.put((generation, i, thumbnail_array(f, size), None))
            except Exception as err:  # noqa: BLE001 - reported in the list, never fatal
                out.put((generation, i, None, str(err)))

    # ---- Qt thread -----------------------------------------------------------------------------------------
    def _drain(self) -> None:
        for _ in range(self.PER_TICK):
            try:
                generation, i, arr, error = self._queue.get_nowait()
            except queue.Empty:
                break
            if generation != self._generation or i >= len(self._items):
                continue  # a result of a cancelled load
            item = self._items[i]
            if arr is not None:
                item.setIcon(QIcon(QPixmap.fromImage(_to_qimage(arr))))
            else:
                item.setText(item.text() + "\n(unreadable)")
                self.failed.append({"path": item.toolTip(), "reason": error})
                self._add_unreadable(item.toolTip(), error)
            self._pending -= 1
        self._update_status()
        if self._pending <= 0:
            self.timer.stop()
            if self._executor is not None:
                self._executor.shutdown(wait=False)
                self._executor = None
            self.loaded.emit()

    def _update_status(self) -> None:
        total = getattr(self, "_total", 0)
        shown = self.grid.count()
        more = f" (first {shown} of {total:,} shown)" if total > shown else ""
        loading = f"; loading {self._pending}…" if self._pending > 0 else ""
        self.status.setText(f"{total:,} images{more}{loading}" if total else "No images.")

    def _set_unreadable(self, rows: list[dict]) -> None:
        self.unreadable_list.clear()
        for r in rows:
            self._add_unreadable(r.get("path", "?"), r.get("reason", ""))
        self._update_unreadable_label()

    def _add_unreadable(self, path: str, reason: str) -> None:
        self.unreadable_list.addItem(f"{path} — {reason}")
        self._update_unreadable_label()

    def _update_unreadable_label(self) -> None:
        n = self.unreadable_list.count()
        self.unreadable_label.setText(f"Unreadable files ({n})" if n else "Unreadable files: none")
        self.unreadable_list.setVisible(n > 0)

    def unreadable_items(self) -> list[str]:
        return [self.unreadable_list.item(i).text() for i in range(self.unreadable_list.count())]

    def closeEvent(self, event) -> None:  # noqa: N802 - Qt override
        self.stop()
        super().closeEvent(event)
