"""GUI test setup: offscreen Qt, settings and user data redirected to tmp_path, job runners shut down after."""
from __future__ import annotations

import os

os.environ["QT_QPA_PLATFORM"] = "offscreen"  # before any Qt import
os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")

from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from layout_walk import wait_views  # noqa: E402

N_BOOT = 200
_BLOCKERS: list = []  # see run_and_wait: PySide may deliver a queued signal to a freed pytest-qt blocker (segfault)


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path, monkeypatch):
    home = tmp_path / "fairdesk-home"
    home.mkdir()
    monkeypatch.setenv("FAIRDESK_HOME", str(home))
    monkeypatch.setenv("FAIRDESK_SETTINGS", str(home / "settings.ini"))
    yield home


def make_predictions(n: int = 300, seed: int = 0, tasks=("mortality", "sepsis")) -> pd.DataFrame:
    """A small long-format predictions table with a planted recall gap for women in 'mortality'."""
    rng = np.random.default_rng(seed)
    frames = []
    sex = rng.choice(["F", "M"], n)
    ethnicity = rng.choice(["WHITE", "BLACK", "ASIAN"], n, p=[0.6, 0.25, 0.15])
    age = np.round(rng.uniform(18, 90, n), 1)
    split = np.where(rng.random(n) < 0.3, "val", "test")
    for k, task in enumerate(tasks):
        y = rng.binomial(1, 0.3, n)
        penalty = 0.3 * ((sex == "F") & (y == 1)) if k == 0 else 0.0
        score = np.clip(0.3 + 0.35 * y + rng.normal(0, 0.15, n) - penalty, 0.0, 1.0)
        frames.append(pd.DataFrame({"sample_id": np.arange(n), "patient_id": np.arange(n), "task": task, "label": y,
                                    "score": np.round(score, 4), "sex": sex, "ethnicity": ethnicity, "age": age,
                                    "split": split}))
    return pd.concat(frames, ignore_index=True)


@pytest.fixture
def predictions_csv(tmp_path) -> Path:
    path = tmp_path / "predictions.csv"
    make_predictions().to_csv(path, index=False)
    return path


@pytest.fixture(autouse=True)
def _no_blocking_dialogs(monkeypatch):
    """A modal dialog nobody answers would hang the run (pytest-timeout cannot interrupt Qt's modal loop): every
    static dialog a test did not replace itself fails the test at once, naming the dialog."""
    from PySide6.QtWidgets import QFileDialog, QInputDialog, QMessageBox

    def refuse(name):
        def call(*args, **kwargs):
            text = " | ".join(str(a) for a in args[1:3])
            raise AssertionError(f"unexpected modal dialog {name}: {text}")
        return call

    for cls, names in ((QMessageBox, ("question", "warning", "critical", "information")),
                       (QFileDialog, ("getOpenFileName", "getSaveFileName", "getExistingDirectory",
                                      "getOpenFileNames")),
                       (QInputDialog, ("getText", "getItem", "getInt", "getDouble"))):
        for name in names:
            monkeypatch.setattr(cls, name, refuse(f"{cls.__name__}.{name}"))


@pytest.fixture
def settings(tmp_path):
    from fairdesk.gui.settings import Settings

    return Settings(tmp_path / "fairdesk-home" / "settings.ini")


def _then_wait_views(window, method):
    def call(*args, **kwargs):
        out = method(*args, **kwargs)
        wait_views(window)
        return out
    return call


@pytest.fixture
def make_window(qtbot, settings):
    """Factory of main windows; every window's job runner is shut down at teardown."""
    from fairdesk.gui.main_window import MainWindow

    windows = []

    def factory(project=None):
        window = MainWindow(project=project, settings=settings)
        qtbot.addWidget(window)
        # the pages read stored audits in the view thread: a test that opens a project or stores something goes on
        # once every page shows its audit in full
        for name in ("open_project", "notify_project_changed"):
            setattr(window, name, _then_wait_views(window, getattr(window, name)))
        wait_views(window)
        window.show()
        windows.append(window)
        return window

    yield factory
    for window in windows:
        window.runner.shutdown(10000)
        window.close()


@pytest.fixture
def window(make_window):
    return make_window()


@pytest.fixture
def project_path(tmp_path) -> Path:
    return tmp_path / "audit.fairdesk"


@pytest.fixture
def run_and_wait(qtbot):
    """``run_and_wait(window, trigger)``: call ``trigger()`` (it queues a job and returns it) and wait, with
    ``qtbot.waitSignal``, for the runner's ``finished`` signal of that job; the window's slots have run by then."""

    keep = _BLOCKERS  # blockers are never freed: a queued "finished" of another job may still be on its way to one

    def run(window, trigger, timeout: int = 120000):
        ids: dict[str, int] = {}
        early: list[int] = []  # jobs that finished while ``trigger`` ran, before its job's id was known

        def check(job) -> bool:
            if "id" not in ids:
                # a job cancelled while still queued emits ``finished`` at once, inside ``trigger``
                early.append(job.id)
                return False
            return job.id == ids["id"]

        blocker = qtbot.waitSignal(window.runner.finished, timeout=timeout, check_params_cb=check)
        keep.append((blocker, check))
        job = trigger()
        assert job is not None, "the action did not start a job"
        ids["id"] = job.id
        if job.id not in early:
            blocker.wait()
        wait_views(window)
        return job

    return run


@pytest.fixture
def predictions_frame():
    return make_predictions


@pytest.fixture
def stored_predictions(window, project_path, tmp_path):
    """The window with a project holding one predictions dataset (imported with core.data.tables.import_table)."""
    from fairdesk.core.data.schema import ColumnRoles
    from fairdesk.core.data.tables import import_table

    path = tmp_path / "stored.csv"
    make_predictions().to_csv(path, index=False)
    roles = ColumnRoles(label="label", score="score", task="task", attributes=("sex", "ethnicity"),
                        continuous_attributes=("age",), patient_id="patient_id", sample_id="sample_id",
                        split="split")
    dataset_id = import_table(project_path, path, roles=roles, name="stored predictions")
    window.open_project(project_path)
    return dataset_id
