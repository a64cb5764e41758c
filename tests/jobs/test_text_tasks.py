"""Job functions of the language-model audits: register a masked-LM folder, train one (stored only when complete;
cancel keeps checkpoints and resumes), run the bias probe (one or two models, completion) into the project."""
from __future__ import annotations

import json
import threading

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
torch.set_num_threads(1)

from fairdesk.core.errors import ModelError  # noqa: E402
from fairdesk.core.progress import CancelToken, Cancelled  # noqa: E402
from fairdesk.core.project import Project  # noqa: E402
from fairdesk.jobs import text as text_tasks  # noqa: E402

TINY_TRAIN = dict(size=None, hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, vocab_size=300,
                  batch_size=8, max_steps=12, save_every=4, log_every=2, warmup_steps=2, seed=1)


from tiny_text import corpus, tiny_models  # noqa: E402,F401  (shared fixtures)


def test_register_stores_path_and_fingerprint_once(tmp_path, tiny_models):
    from fairdesk.core.models.mlm import model_fingerprint

    base, _ = tiny_models
    pp = tmp_path / "p.fairdesk"
    seen = []
    model_id = text_tasks.register_language_model(pp, base, progress=lambda f, m: seen.append(f))
    [m] = Project(pp).models()
    assert (m.id, m.kind, m.name) == (model_id, "masked_lm", "base")
    assert m.info["path"] == str(base.resolve()) and m.info["fingerprint"] == model_fingerprint(base)
    assert m.info["source"] == "opened" and m.info["architecture"] == "BertForMaskedLM"
    assert m.info["hidden_size"] == 32 and m.info["n_parameters"] > 1000
    assert seen[-1] == 1.0
    # the same folder again: the same record
    assert text_tasks.register_language_model(pp, base, name="again") == model_id
    assert len(Project(pp).models()) == 1


def test_register_refuses_what_is_not_a_masked_lm(tmp_path, tiny_models):
    from transformers import BertConfig, BertModel

    pp = tmp_path / "p.fairdesk"
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ModelError, match="no config.json"):
        text_tasks.register_language_model(pp, empty)
    with pytest.raises(ModelError, match="does not exist"):
        text_tasks.register_language_model(pp, tmp_path / "missing")
    # an encoder without the masked-LM head (saved from BertModel) with the right tokenizer
    headless = tmp_path / "headless"
    BertModel(BertConfig(vocab_size=400, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=32)).save_pretrained(str(headless))
    for f in tiny_models[0].iterdir():
        if f.name.startswith(("tokenizer", "special_tokens", "vocab")):
            (headless / f.name).write_bytes(f.read_bytes())
    with pytest.raises(ModelError, match="masked-LM head|belong together"):
        text_tasks.register_language_model(pp, headless)
    assert Project(pp).models() == []


def test_train_stores_the_model_only_when_complete_and_resumes(tmp_path, corpus):
    from fairdesk.core.models.mlm import MLMTrainConfig

    pp = tmp_path / "p.fairdesk"
    out = tmp_path / "trained"
    cfg = MLMTrainConfig(**TINY_TRAIN, attribute_column="gender")
    token = CancelToken()
    logs = []

    def on_log(rec):  # called on the training thread; cancel after step 6
        logs.append((threading.get_ident(), rec))
        if rec["step"] == 6:
            token.cancel()

    with pytest.raises(Cancelled):
        text_tasks.train_language_model(pp, corpus, out, cfg, on_log=on_log, cancel=token, threads=1)
    assert [r["step"] for _, r in logs] == [2, 4, 6]
    assert all(r["adv_accuracy"] is not None for _, r in logs)
    assert Project(pp).models() == []  # nothing stored
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["checkpoint-0000004", "checkpoint-0000006"]
    assert not (out / "config.json").exists()

    logs.clear()
    model_id = text_tasks.train_language_model(pp, corpus, out, cfg, resume=True, name="debiased",
                                               on_log=lambda r: logs.append((0, r)))
    assert [r["step"] for _, r in logs] == [8, 10, 12]
    [m] = Project(pp).models()
    assert (m.id, m.kind, m.name) == (model_id, "masked_lm", "debiased")
    t = m.info["training"]
    assert m.info["source"] == "trained" and t["steps"] == 12 and t["resumed_from"] == 6
    assert t["adversarial"] and t["classes"] == ["female", "male"] and t["attribute_column"] == "gender"
    assert [h["step"] for h in t["history"]] == [2, 4, 6, 8, 10, 12]
    assert t["final_mlm_loss"] == pytest.approx(logs[-1][1]["mlm_loss"])
    assert m.info["path"] == str(out.resolve()) and len(m.info["fingerprint"]) == 64


def test_audit_stores_the_cli_document(tmp_path, tiny_models):
    from fairdesk.core.audits.mlm_bias import ProbeOptions, mlm_audit_document, run_mlm_bias_audit

    base, other = tiny_models
    pp = tmp_path / "p.fairdesk"
    opts = ProbeOptions(categories=("DNR", "HIV"), test="wilcoxon")
    audit_id = text_tasks.audit_mlm_bias(pp, [base, other], None, opts, completion=True, names=["base", "other"])
    [a] = Project(pp).audits()
    assert (a.id, a.kind) == (audit_id, "mlm_bias") and a.name == "Language-model bias: base vs other"
    doc = json.loads(Project(pp).audit_json(audit_id))
    assert doc["model_name"] == "base" and [r["category"] for r in doc["records"]] == ["DNR", "HIV"]
    assert doc["compared"][0]["model_name"] == "other" and len(doc["comparison"]) == 2
    assert doc["completion"]["rows"] and doc["provenance"]["model_hashes"]["masked_lm"]
    # the same records as the core functions give directly (the CLI's path)
    direct = mlm_audit_document({"base": run_mlm_bias_audit(str(base), None, opts),
                                 "other": run_mlm_bias_audit(str(other), None, opts)})
    for mine, theirs in zip(doc["records"], direct["records"]):
        assert mine["p_value"] == pytest.approx(theirs["p_value"]) and mine["n"] == theirs["n"]
        assert [s["score"] for s in mine["scores"]] == pytest.approx([s["score"] for s in theirs["scores"]])
    assert doc["comparison"] == direct["comparison"]
    # one model, same name twice gets a suffix; nothing stored when cancelled
    token = CancelToken()
    token.cancel()
    with pytest.raises(Cancelled):
        text_tasks.audit_mlm_bias(pp, [base], None, opts, cancel=token)
    assert len(Project(pp).audits()) == 1
    assert text_tasks.unique_names(["a", "a", "b", "a"]) == ["a", "a (2)", "b", "a (3)"]
    with pytest.raises(ModelError, match="at least one"):
        text_tasks.audit_mlm_bias(pp, [], None, opts)
