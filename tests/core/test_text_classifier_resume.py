"""Resume of text-CNN training (issue 12 point 3): per-epoch checkpoints without pickles; a resumed run equals an
uninterrupted one; a cancel keeps the finished epochs and stores nothing in the project."""
from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)

from fairdesk.core.errors import ModelError  # noqa: E402
from fairdesk.core.models.text_classifier import (  # noqa: E402
    TextCNNConfig,
    checkpoint_info,
    checkpoints,
    latest_checkpoint,
    train_text_classifier,
)
from fairdesk.core.progress import CancelToken, Cancelled  # noqa: E402
from fairdesk.core.text.madlibs import clinical_notes_demo  # noqa: E402


def _cfg() -> TextCNNConfig:
    return TextCNNConfig(embed_dim=8, filters=4, kernel_sizes=(2, 3))


@pytest.fixture(scope="module")
def demo():
    df = clinical_notes_demo(80, seed=1)
    return df["text"].tolist(), df["label"].to_numpy()


def _weights(clf) -> dict:
    return {k: v.detach().clone() for k, v in clf.module.state_dict().items()}


def _no_pickles(folder) -> None:
    for f in folder.rglob("*"):
        if f.is_file():
            assert f.suffix in (".safetensors", ".json"), f
            assert not f.read_bytes().startswith(b"\x80"), f"{f} looks like a pickle"


class _StopAfter:
    """A progress callback that cancels once ``epochs`` epochs are finished (at the next batch)."""

    def __init__(self, epochs: int, token: CancelToken) -> None:
        self.epochs, self.token = epochs, token

    def __call__(self, fraction, message):
        if message.startswith(f"epoch {self.epochs + 1}/") and "batch 2/" in message:
            self.token.cancel()


@pytest.mark.parametrize("method", ["clp", "baseline"])
def test_resume_equals_uninterrupted(demo, tmp_path, method):
    texts, y = demo
    kw = dict(method=method, terms="dixon_train", lam=1.0, epochs=3, batch_size=16, seed=5)
    full = train_text_classifier(texts, y, config=_cfg(), **kw)
    ck = tmp_path / "ck"
    token = CancelToken()
    with pytest.raises(Cancelled):
        train_text_classifier(texts, y, config=_cfg(), checkpoint_dir=ck, progress=_StopAfter(1, token),
                              cancel=token, **kw)
    assert [p.name for p in checkpoints(ck)] == ["epoch-0001"]   # the finished epoch is kept, older ones removed
    assert checkpoint_info(ck)["epoch"] == 1
    _no_pickles(ck)
    seen = []
    resumed = train_text_classifier(texts, y, config=_cfg(), checkpoint_dir=ck, resume=True, on_epoch=seen.append,
                                    **kw)
    assert resumed.config.resumed_from == 1 and resumed.config.epochs == 3
    assert [r["epoch"] for r in seen] == [1, 2, 3] and seen[0]["restored"] and not seen[1].get("restored")
    a, b = _weights(full), _weights(resumed)
    for k in a:
        assert torch.allclose(a[k], b[k], atol=1e-6, rtol=0), k
    assert [round(r["loss"], 6) for r in full.config.history] == [round(r["loss"], 6) for r in resumed.config.history]
    assert latest_checkpoint(ck).name == "epoch-0003"
    _no_pickles(ck)


def test_checkpoint_of_another_run_is_refused(demo, tmp_path):
    texts, y = demo
    ck = tmp_path / "ck"
    train_text_classifier(texts, y, method="baseline", epochs=1, batch_size=16, seed=0, config=_cfg(),
                          checkpoint_dir=ck)
    state = json.loads((latest_checkpoint(ck) / "state.json").read_text())
    assert state["epoch"] == 1 and "param_groups" in state["optimizer"]
    with pytest.raises(ModelError, match="other data or settings"):
        train_text_classifier(texts, y, method="baseline", epochs=2, batch_size=16, seed=1, config=_cfg(),
                              checkpoint_dir=ck, resume=True)
    # no checkpoint: resume starts from the beginning
    fresh = train_text_classifier(texts, y, method="baseline", epochs=1, batch_size=16, seed=0, config=_cfg(),
                                  checkpoint_dir=tmp_path / "none", resume=True)
    assert fresh.config.resumed_from == 0
    assert np.isfinite(fresh.config.history[0]["loss"])


def test_job_cancel_keeps_checkpoint_stores_nothing_then_cli_resumes(demo, tmp_path, capsys):
    """Through the job: a cancel leaves DIR/checkpoints and an unchanged project; ``--resume`` (CLI) continues and
    the model record says so; the checkpoints are removed once the model is saved; no pickle anywhere."""
    import pandas as pd

    from fairdesk.cli import main
    from fairdesk.core.project import Project
    from fairdesk.jobs.ctf import CHECKPOINT_SUBDIR, train_text_classifier_job

    texts, y = demo
    pd.DataFrame({"text": texts, "label": y}).to_csv(tmp_path / "d.csv", index=False)
    proj = tmp_path / "p.fairdesk"
    Project(proj)
    out = tmp_path / "model"
    token = CancelToken()
    epochs_seen = []
    with pytest.raises(Cancelled):
        train_text_classifier_job(proj, str(tmp_path / "d.csv"), "text", "label", out, method="baseline", epochs=3,
                                  batch_size=16, progress=_StopAfter(2, token), cancel=token,
                                  on_epoch=epochs_seen.append)
    assert [r["epoch"] for r in epochs_seen] == [1, 2] and epochs_seen[0]["epochs"] == 3
    p = Project(proj, create=False)
    assert p.models() == [] and p.datasets() == []
    assert checkpoint_info(out / CHECKPOINT_SUBDIR)["epoch"] == 2
    assert not (out / "model.safetensors").exists()
    _no_pickles(out)
    assert main(["train", "text-classifier", "--data", str(tmp_path / "d.csv"), "--text-col", "text", "--label-col",
                 "label", "--method", "baseline", "--epochs", "3", "--batch-size", "16", "--out", str(out),
                 "--project", str(proj), "--resume", "--quiet"]) == 0
    assert "resumed after epoch 2" in capsys.readouterr().out
    (model,) = Project(proj, create=False).models()
    assert model.info["resume"] is True and model.info["resumed_from_epoch"] == 2
    assert model.info["epochs_done"] == 3 and len(model.info["history"]) == 3
    assert not (out / CHECKPOINT_SUBDIR).exists()
    _no_pickles(out)
