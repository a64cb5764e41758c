"""Masked-LM training (METHODS §7): corpus reading, PHI tokens, sentence packing, whole-word masking, checkpoints
(atomic, resume gives the uninterrupted weights, cancel keeps them), and adversarial debiasing whose reversed
gradient reaches the encoder and lowers how well a probe recovers the attribute from [CLS]."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
torch.set_num_threads(1)

from fairdesk.core.errors import DataError, ModelError  # noqa: E402
from fairdesk.core.models import mlm  # noqa: E402
from fairdesk.core.progress import CancelToken, Cancelled  # noqa: E402

TINY = dict(size=None, hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, dropout=0.1,
            vocab_size=300, batch_size=16, max_steps=30, save_every=10, log_every=5, warmup_steps=5, seed=3)


def _notes(n=120, seed=0, **kw) -> pd.DataFrame:
    return mlm.synthetic_notes(n, {"HIV": 0.9}, seed=seed, n_fillers=(1, 2), **kw)


# --------------------------------------------------------------------------------------------------------------
# Corpus, PHI, sentences, packing, masking


@pytest.mark.parametrize("content, kind", [
    ("2126-9-19", "date"), ("9-19", "date"), ("2147", "date"), ("Month (only) 11", "date"),
    ("Year (4 digits) 2147", "date"), ("Known lastname 123", "name"), ("First Name8 (NamePattern2) 12", "name"),
    ("Doctor Last Name 7", "name"), ("Hospital1 18", "location"), ("Hospital Unit Name 10", "location"),
    ("Street Address(1) 5", "location"), ("Location (un) 3", "location"), ("Telephone/Fax (1) 4", "contact"),
    ("E-mail address 12", "contact"), ("Medical Record Number 1", "id"), ("Numeric Identifier 99", "id"),
    ("Age over 90 12", "age"), ("12", "number"), ("", "other"), ("something odd", "other"),
])
def test_phi_types(content, kind):
    assert mlm.phi_type(content) == kind


def test_phi_placeholders_become_one_special_token_each():
    text = "seen on [**2126-9-19**] by dr. [**Last Name (NamePattern1) 123**] at [**Hospital1 18**]."
    assert mlm.replace_phi(text).split() == ["seen", "on", "[PHI_DATE]", "by", "dr.", "[PHI_NAME]", "at",
                                             "[PHI_LOCATION]", "."]
    tok = mlm.train_wordpiece_tokenizer(["seen on [PHI_DATE] by dr. [PHI_NAME] at [PHI_LOCATION] ."] * 5, 100)
    assert tok.tokenize(mlm.replace_phi(text))[2] == "[PHI_DATE]"
    assert "[PHI_LOCATION]" in tok.tokenize(mlm.replace_phi(text))


def test_sentences_and_packing_into_sequences_of_at_least_20_tokens():
    assert mlm.split_sentences("Pt stable. BP 120/80; HR 70\n\nplan: home!  ok") == [
        "Pt stable.", "BP 120/80;", "HR 70", "plan: home!", "ok"]
    notes = ["a b c . d e . f g h i . j . k l m n o . p q r s t u v . w x y z a b . c d e f g h i j k l m . n",
             "one two . three"]
    tok = mlm.train_wordpiece_tokenizer([s for n in notes for s in mlm.split_sentences(n)], 100)
    data = mlm.pack_sequences(notes, tok, min_tokens=20, max_length=40)
    lengths = [len(x) - 2 for x in data.ids]
    # note 1: 4+3+5+2+6 = 20 -> a sequence; 8+7+12 = 27 ≥ 20 -> a sequence; the remainder "n" joins it (28)
    assert lengths == [20, 28, 4]  # the short second note stays on its own: sequences never mix notes
    # a sentence longer than max_length is cut at word starts into pieces that fit
    long = " ".join(f"w{i}" for i in range(50))
    tok2 = mlm.train_wordpiece_tokenizer([long], 200)
    chunks = mlm.pack_sequences([long], tok2, min_tokens=20, max_length=24)
    assert all(len(x) <= 24 for x in chunks.ids) and sum(len(x) - 2 for x in chunks.ids) == len(tok2.tokenize(long))
    for ids, words in zip(data.ids, data.words):
        assert ids[0] == tok.cls_token_id and ids[-1] == tok.sep_token_id and words[0] == words[-1] == -1
        assert list(words[1:-1]) == sorted(words[1:-1])  # word ids increase along the sequence


def test_whole_word_masking_masks_every_piece_of_a_chosen_word():
    rng = np.random.default_rng(0)
    ids = np.array([[2, 10, 11, 12, 13, 14, 3, 0], [2, 20, 21, 3, 0, 0, 0, 0]])
    words = np.array([[-1, 0, 0, 1, 2, 2, -1, -1], [-1, 0, 1, -1, -1, -1, -1, -1]])  # 2 two-piece words
    focus = np.zeros_like(ids, dtype=bool)
    focus[0, 3] = True
    hits_focus = 0
    for _ in range(300):
        inp, lab = mlm.whole_word_mask(ids, words, focus, rng, 4, np.arange(5, 50), 0.15, 1.0)
        for b in range(2):
            chosen = lab[b] != -100
            assert chosen.any()  # at least one word per sequence
            assert not chosen[[0, -1]].any() and not chosen[ids[b] == 0].any()
            for w in set(words[b][chosen]):
                assert chosen[words[b] == w].all()  # all pieces of a chosen word
            assert (lab[b][chosen] == ids[b][chosen]).all()
        hits_focus += lab[0, 3] != -100
        assert ((inp == 4) <= (lab != -100)).all()  # masks only where predicted
    assert hits_focus == 300  # the focus word is always chosen with focus_probability 1


def test_read_corpus_csv_folder_txt_and_errors(tmp_path):
    df = pd.DataFrame({"note": ["he has a hx of hiv .", "she is given aspirin .", ""], "sex": ["M", None, "F"]})
    df.to_csv(tmp_path / "c.csv", index=False)
    c = mlm.read_corpus(tmp_path / "c.csv", "note", "sex")
    assert c.notes == ["he has a hx of hiv .", "she is given aspirin ."] and c.attributes == ["M", None]
    with pytest.raises(DataError, match="no text column 'text'"):
        mlm.read_corpus(tmp_path / "c.csv")
    with pytest.raises(DataError, match="no attribute column"):
        mlm.read_corpus(tmp_path / "c.csv", "note", "gender")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "b.txt").write_text("second note")
    (tmp_path / "notes" / "a.txt").write_text("first note")
    assert mlm.read_corpus(tmp_path / "notes").notes == ["first note", "second note"]
    with pytest.raises(DataError, match="needs a table"):
        mlm.read_corpus(tmp_path / "notes", attribute_column="sex")
    (tmp_path / "all.txt").write_text("note one\nline two\n\nnote two\n")
    assert mlm.read_corpus(tmp_path / "all.txt").notes == ["note one\nline two", "note two\n"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no .txt files"):
        mlm.read_corpus(tmp_path / "empty")
    with pytest.raises(DataError, match="does not exist"):
        mlm.read_corpus(tmp_path / "nope.csv")


# --------------------------------------------------------------------------------------------------------------
# Adversarial debiasing: the reversed gradient reaches the encoder


def test_adversary_gradient_reaches_the_encoder_reversed():
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig(vocab_size=60, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                       intermediate_size=64, hidden_dropout_prob=0, attention_probs_dropout_prob=0))
    disc = mlm.make_discriminator(32, 2)
    assert [m.out_features for m in disc if hasattr(m, "out_features")] == [16, 8, 2]  # 3 layers, halving
    ids = torch.randint(5, 60, (8, 12))
    att = torch.ones_like(ids)
    labels = torch.full_like(ids, -100)
    z = torch.tensor([0, 1, 0, 1, 1, 0, -1, 1])  # -1: unknown attribute, left out

    def grads(reverse: bool):
        model.zero_grad()
        disc.zero_grad()
        out = mlm.mlm_adversarial_losses(model, disc, ids, att, labels, z, lam=1.0, reverse=reverse)
        out["adv"].backward()
        enc = torch.cat([p.grad.flatten() for n, p in model.bert.named_parameters() if p.grad is not None])
        dis = torch.cat([p.grad.flatten() for p in disc.parameters()])
        return enc, dis

    enc_rev, dis_rev = grads(True)
    enc_plain, dis_plain = grads(False)
    assert enc_rev.abs().sum() > 1e-6  # the release computed the input under no_grad: zero here
    assert torch.allclose(enc_rev, -enc_plain, atol=1e-7)  # encoder: reversed
    assert torch.allclose(dis_rev, dis_plain, atol=1e-7)   # discriminator: unchanged, it still learns
    # with lambda = 0.5 the encoder gets half the reversed gradient
    model.zero_grad()
    mlm.mlm_adversarial_losses(model, disc, ids, att, labels, z, lam=0.5)["adv"].backward()
    half = torch.cat([p.grad.flatten() for n, p in model.bert.named_parameters() if p.grad is not None])
    assert torch.allclose(half, 0.5 * enc_rev, atol=1e-7)


# --------------------------------------------------------------------------------------------------------------
# Training: checkpoints, resume, cancel


def test_training_checkpoints_resume_and_cancel(tmp_path):
    _notes(120).to_csv(tmp_path / "c.csv", index=False)
    cfg = mlm.MLMTrainConfig(**TINY, attribute_column="gender")
    logs = []
    full = mlm.train_mlm(tmp_path / "c.csv", tmp_path / "full", cfg, on_log=logs.append)
    assert full.steps == 30 and [r["step"] for r in logs] == [5, 10, 15, 20, 25, 30]
    assert all(r["adv_loss"] is not None and r["mlm_loss"] > 0 for r in logs)
    assert logs[-1]["mlm_loss"] < logs[0]["mlm_loss"]
    ck = sorted(p.name for p in (tmp_path / "full" / "checkpoints").iterdir())
    assert ck == ["checkpoint-0000020", "checkpoint-0000030"]  # keep_checkpoints = 2, no temp folders left
    info = json.loads((tmp_path / "full" / "training_info.json").read_text())
    assert info["steps"] == 30 and info["classes"] == ["female", "male"] and info["adversarial"]
    assert len(info["provenance"]["model_hashes"]["masked_lm"]) == 64
    model, tok = mlm.load_masked_lm(tmp_path / "full")
    assert (tmp_path / "full" / "model.safetensors").is_file() and "[PHI_DATE]" in tok.get_vocab()

    # From here on the tokenizer of that run is reused: the tokenizers library's WordPiece trainer breaks frequency
    # ties in a process-random order, so only a given tokenizer makes training repeatable bit for bit.
    cfg = mlm.MLMTrainConfig(**TINY, attribute_column="gender", tokenizer_from=str(tmp_path / "full"))
    mlm.train_mlm(tmp_path / "c.csv", tmp_path / "again", cfg)
    model, _ = mlm.load_masked_lm(tmp_path / "again")

    # cancel after step 15: a checkpoint of the finished steps is written, earlier ones are kept
    token = CancelToken()

    def stop(rec):
        if rec["step"] == 15:
            token.cancel()

    with pytest.raises(Cancelled):
        mlm.train_mlm(tmp_path / "c.csv", tmp_path / "part", cfg, cancel=token, on_log=stop)
    assert sorted(p.name for p in (tmp_path / "part" / "checkpoints").iterdir()) == [
        "checkpoint-0000010", "checkpoint-0000015"]
    assert not (tmp_path / "part" / "config.json").exists()  # not a finished model
    with pytest.raises(ModelError, match="checkpoints"):
        mlm.load_masked_lm(tmp_path / "part")
    with pytest.raises(ModelError, match="already holds"):
        mlm.train_mlm(tmp_path / "c.csv", tmp_path / "part", cfg)
    with pytest.raises(ModelError, match="other settings"):
        mlm.train_mlm(tmp_path / "c.csv", tmp_path / "part",
                      mlm.MLMTrainConfig(**{**TINY, "learning_rate": 1e-3}, attribute_column="gender",
                                         tokenizer_from=str(tmp_path / "full")), resume=True)
    # resume: the same weights as the uninterrupted run (data order, masks and dropout follow (seed, step))
    res = mlm.train_mlm(tmp_path / "c.csv", tmp_path / "part", cfg, resume=True)
    assert res.resumed_from == 15 and res.steps == 30
    resumed, _ = mlm.load_masked_lm(tmp_path / "part")
    for (n1, p1), (n2, p2) in zip(model.state_dict().items(), resumed.state_dict().items()):
        assert n1 == n2 and torch.allclose(p1, p2, atol=1e-6), n1
    with pytest.raises(ModelError, match="no checkpoint"):
        mlm.train_mlm(tmp_path / "c.csv", tmp_path / "fresh", cfg, resume=True)


def test_training_input_errors(tmp_path):
    _notes(40).to_csv(tmp_path / "c.csv", index=False)
    with pytest.raises(DataError, match="no attribute column"):
        mlm.train_mlm(tmp_path / "c.csv", tmp_path / "o", mlm.MLMTrainConfig(**TINY, attribute_column="race"))
    pd.DataFrame({"text": ["a b c"] * 40, "g": ["x"] * 40}).to_csv(tmp_path / "one.csv", index=False)
    with pytest.raises(DataError, match="fewer than two"):
        mlm.train_mlm(tmp_path / "one.csv", tmp_path / "o2", mlm.MLMTrainConfig(**TINY, attribute_column="g"))
    with pytest.raises(ModelError, match="multiple of the number of attention heads"):
        mlm.MLMTrainConfig(**{**TINY, "num_heads": 3}).resolved()
    with pytest.raises(ModelError, match="Unknown model size"):
        mlm.MLMTrainConfig(size="huge").resolved()


# --------------------------------------------------------------------------------------------------------------
# Debiasing lowers how well a probe recovers the attribute from [CLS] (planted corpus, ~30 s on one core).
# 400 steps (benchmarks/bench_mlm_bias.py `debiasing` trains the same at 600). Measured at this seed, at 400 steps
# (600 in brackets): probe accuracy baseline 0.907 (0.995), debiased 0.572 (0.567); AUROC baseline 0.970, debiased
# 0.591; log loss baseline 0.270, debiased 0.679; discriminator accuracy 0.507. At 300 steps the debiased probe is
# still at 0.712 (margin 0.09 to the 0.15 rule), so do not go lower.


@pytest.mark.slow
def test_debiasing_lowers_attribute_recovery_from_cls(tmp_path):
    train = mlm.synthetic_notes(2000, None, seed=0, n_fillers=(0, 0), gendered_sentences=2)
    held_out = mlm.synthetic_notes(1000, None, seed=1, n_fillers=(0, 0), gendered_sentences=2)
    train.to_csv(tmp_path / "c.csv", index=False)
    mlm.vocabulary_tokenizer(mlm.corpus_words(pd.concat([train, held_out])["text"])).save_pretrained(tmp_path / "v")
    common = dict(tokenizer_from=str(tmp_path / "v"), size=None, hidden_size=64, num_layers=2, num_heads=4,
                  intermediate_size=128, dropout=0.0,
                  learning_rate=1e-3, warmup_steps=50, max_steps=400, batch_size=64, vocab_size=1000,
                  save_every=10**9, log_every=100, seed=1)
    probes = {}
    for name, attr in (("baseline", None), ("debiased", "gender")):
        res = mlm.train_mlm(tmp_path / "c.csv", tmp_path / name, mlm.MLMTrainConfig(**common, attribute_column=attr))
        model, tok = mlm.load_masked_lm(tmp_path / name)
        feats = mlm.encode_cls(model, tok, held_out["text"].tolist())
        probes[name] = mlm.attribute_probe(feats, held_out["gender"].to_numpy())
        if attr:
            assert 0.35 < res.history[-1]["adv_accuracy"] < 0.65  # the discriminator is held at chance
    base, deb = probes["baseline"], probes["debiased"]
    assert base["accuracy"] > 0.7  # the note's gender can be read from [CLS] without debiasing (0.907 here)
    assert deb["accuracy"] < base["accuracy"] - 0.15  # … much less well after it (0.572 here)
    assert deb["auroc"] < base["auroc"] - 0.15 and deb["log_loss"] > base["log_loss"] + 0.1


def test_cli_train_mlm_and_continued_pretraining(tmp_path, capsys):
    import argparse

    from fairdesk.cli.text import add_text_commands

    parser = argparse.ArgumentParser(prog="fairdesk-cli")
    sub = parser.add_subparsers(dest="command", required=True)
    add_text_commands(sub.add_parser("audit").add_subparsers(), sub.add_parser("train").add_subparsers())
    _notes(60, with_phi=True).to_csv(tmp_path / "c.csv", index=False)
    args = parser.parse_args(["train", "mlm", "--corpus", str(tmp_path / "c.csv"), "--out", str(tmp_path / "m"),
                              "--hidden", "32", "--layers", "1", "--heads", "2", "--steps", "6", "--batch-size", "8",
                              "--vocab-size", "200", "--adversary-attribute", "gender", "--quiet"])
    assert args.func(args) == 0
    assert "trained 6 steps" in capsys.readouterr().out
    model, tok = mlm.load_masked_lm(tmp_path / "m")
    assert model.config.hidden_size == 32 and "[PHI_NAME]" in tok.get_vocab()
    # continued pretraining of a local model whose tokenizer lacks the PHI tokens: they are added
    from transformers import BertConfig, BertForMaskedLM, PreTrainedTokenizerFast
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + mlm.corpus_words(_notes(60)["text"])
    raw = Tokenizer(models.WordPiece({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    raw.normalizer, raw.pre_tokenizer = normalizers.BertNormalizer(), pre_tokenizers.BertPreTokenizer()
    raw.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]",
                                                       special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    base_tok = PreTrainedTokenizerFast(tokenizer_object=raw, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                       sep_token="[SEP]", mask_token="[MASK]")
    BertForMaskedLM(BertConfig(vocab_size=len(words), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                               intermediate_size=64)).save_pretrained(tmp_path / "base")
    base_tok.save_pretrained(tmp_path / "base")
    res = mlm.train_mlm(tmp_path / "c.csv", tmp_path / "cont",
                        mlm.MLMTrainConfig(init_model=str(tmp_path / "base"), max_steps=4, batch_size=8))
    cont, ctok = mlm.load_masked_lm(tmp_path / "cont")
    assert res.steps == 4 and "[PHI_DATE]" in ctok.get_vocab()
    assert cont.get_input_embeddings().weight.shape[0] == len(ctok) == len(words) + len(mlm.PHI_TOKENS)
