"""The age-independent learners of 000 (METHODS §3) on tiny nets: losses, signs, update order, splits, cancel."""
from dataclasses import replace

import numpy as np
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
import pytest

torch = pytest.importorskip("torch")

from fairdesk.core.models import age_independent as ai  # noqa: E402
from fairdesk.core.progress import CancelToken, Cancelled  # noqa: E402

torch.set_num_threads(1)
TINY = ai.LearnerSettings(z_dim=3, hidden=(8,), head_hidden=4, epochs=2, batch_size=16, device="cpu")


def _data(n=48, d=9, seed=0):
    rng = np.random.default_rng(seed)
    age = rng.normal(70, 9, n)
    y = (rng.random(n) < 0.5).astype(int)
    y[:2] = [0, 1]
    X = rng.normal(size=(n, d)) + 0.1 * (age[:, None] - 70) + y[:, None]
    return X, y, age


def _batch(n=16, d=9):
    X, y, age = _data(n, d)
    return (torch.tensor(X, dtype=torch.float32), torch.tensor(y), torch.tensor((age - 70) / 9, dtype=torch.float32))


def _in_width(net) -> int:
    """The width of a network's input: its first linear layer's, or the batch norm's before it (the DNN's body
    standardises the adversary's input)."""
    first = net[0]
    return first.num_features if isinstance(first, torch.nn.BatchNorm1d) else first.in_features


def _nets(method, settings=TINY, d=9, seed=0):
    torch.manual_seed(seed)
    split = ai.modality_split(d, settings.n_modalities, np.random.default_rng(seed)) if method == "consensus" else None
    nets = ai.build_nets(method, d, settings, split)
    split_t = [torch.as_tensor(s) for s in split] if split else None
    return nets, split_t


def _interp_params(nets):
    return [(n, p) for k in ai.interpreter_side("x", nets) if k.startswith("I") for n, p in nets[k].named_parameters()]


def _grads(loss, params):
    return torch.autograd.grad(loss, [p for _, p in params], retain_graph=True, allow_unused=True)


def test_modality_split_is_a_random_partition_of_equal_size():
    parts = ai.modality_split(10, 3, np.random.default_rng(1))
    assert sorted(np.concatenate(parts).tolist()) == list(range(10))
    assert sorted(len(p) for p in parts) == [3, 3, 4]
    assert any(not np.array_equal(p, np.arange(p[0], p[0] + len(p))) for p in parts)  # not contiguous blocks
    again = ai.modality_split(10, 3, np.random.default_rng(1))
    assert all(np.array_equal(a, b) for a, b in zip(parts, again))
    with pytest.raises(Exception):
        ai.modality_split(2, 3, np.random.default_rng(0))


@pytest.mark.parametrize("body", [True, False], ids=["dnn-body", "own-layers"])
def test_consensus_interpreters_read_only_their_modality(body):
    nets, split = _nets("consensus", replace(TINY, dnn_body=body))
    for m, idx in enumerate(split):
        assert _in_width(nets[f"I{m}"]) == len(idx)
    x, _, _ = _batch()
    for n in nets.values():
        n.eval()
    z, zs = ai.encode("consensus", nets, x, split)
    assert z.shape[1] == 3 * TINY.z_dim and len(zs) == 3
    x2 = x.clone()
    x2[:, split[1]] += 5.0  # change only modality 1
    _, zs2 = ai.encode("consensus", nets, x2, split)
    assert torch.allclose(zs[0], zs2[0]) and torch.allclose(zs[2], zs2[2]) and not torch.allclose(zs[1], zs2[1])
    assert _in_width(nets["C"]) == 3 * TINY.z_dim  # C reads the concatenation


@pytest.mark.parametrize("method", ["simple", "autoencoder", "consensus", "entropy", "entropy-binary", "entropy-h"])
def test_interpreter_gradient_from_the_adversary_term_is_reversed(method):
    """000's (unbounded) term: ∇_I of the interpreter's loss = ∇_I Lc (+ ∇_I Lr) − λ ∇_I La (− λ ∇_I Ld): the
    adversary term enters with the opposite sign to the one the adversary descends."""
    import torch.nn.functional as F

    s = ai.LearnerSettings(**{**TINY.to_dict(), "lam": 2.5, "lambda_h": 0.7, "adversary_term": "unbounded"})
    nets, split = _nets(method, s)
    x, y, a = _batch()
    loss, parts = ai.interpreter_loss(method, nets, x, y, a, s, split)
    params = _interp_params(nets)
    g_total = _grads(loss, params)
    z, zs = ai.encode(method, nets, x, split)
    g_c = _grads(F.cross_entropy(nets["C"](z), y), params)
    la, _ = ai.adversary_loss(method, nets, zs, a, s, y)
    g_a = _grads(la, params)
    expected = [gc - 2.5 * ga for gc, ga in zip(g_c, g_a)]
    if "R" in nets:
        expected = [e + g for e, g in zip(expected, _grads(ai.reconstruction_loss(nets, z, x, a, s), params))]
    if method == "consensus":
        expected = [e - 2.5 * g for e, g in zip(expected, _grads(ai.discriminator_loss(nets, zs), params))]
    for got, exp in zip(g_total, expected):
        assert torch.allclose(got, exp, atol=1e-5)
    assert any(g.abs().sum() > 0 for g in g_a)  # the adversary term does reach the interpreter


def test_with_a_silent_classifier_the_interpreter_ascends_the_adversary_loss():
    """C's output layer zeroed → Lc has no gradient; the interpreter's gradient is exactly −λ ∇La."""
    nets, _ = _nets("simple")
    torch.nn.init.zeros_(nets["C"][-1].weight)
    x, y, a = _batch()
    s = ai.LearnerSettings(**{**TINY.to_dict(), "adversary_term": "unbounded"})
    loss, _ = ai.interpreter_loss("simple", nets, x, y, a, s, None)
    params = _interp_params(nets)
    la, _ = ai.adversary_loss("simple", nets, [nets["I"](x)], a, s, y)
    for g, ga in zip(_grads(loss, params), _grads(la, params)):
        assert torch.allclose(g, -s.lam * ga, atol=1e-6)


@pytest.mark.parametrize("method", ["simple", "entropy", "entropy-binary", "consensus"])
def test_bounded_term_pulls_only_while_the_adversary_beats_the_prior(method):
    """The default term −λ·min(La_err, prior): an adversary worse than the no-information guess gives the interpreter
    no gradient (000's −λ·La keeps pushing, without end, towards an ever more wrong — still informed — adversary);
    one better than the prior gives exactly 000's gradient."""
    s = ai.LearnerSettings(**{**TINY.to_dict(), "lambda_h": 0.0})
    nets, split = _nets(method, s)
    torch.nn.init.zeros_(nets["C"][-1].weight)
    if "R" in nets:
        del nets["R"]
    x, y, a = _batch()
    params = _interp_params(nets)
    z, zs = ai.encode(method, nets, x, split)
    la, _ = ai.adversary_loss(method, nets, zs, a, s, y)
    ld = ai.discriminator_loss(nets, zs) if method == "consensus" else None
    g_a = _grads(la, params)
    for prior, pulls in ((float(la.detach()) - 1e-3, False), (float(la.detach()) + 1.0, True)):
        if method == "consensus":  # Ld is capped at log M: only the age term is tested
            continue_ld = float(ld) < np.log(3)
        loss, _ = ai.interpreter_loss(method, nets, x, y, a, s, split, prior)
        got = _grads(loss, params)
        for gi, ga, gd in zip(got, g_a, _grads(ld, params) if ld is not None else g_a):
            expected = -s.lam * ga if pulls else torch.zeros_like(ga)
            if ld is not None and continue_ld:
                expected = expected - s.lam * gd
            assert torch.allclose(gi, expected, atol=1e-6)
    unbounded = ai.LearnerSettings(**{**s.to_dict(), "adversary_term": "unbounded"})
    loss, _ = ai.interpreter_loss(method, nets, x, y, a, unbounded, split, float(la.detach()) - 1e-3)
    assert any(g.abs().sum() > 0 for g in _grads(loss, params))  # 000's term pulls whatever the prior


def test_adversary_prior_by_hand():
    """The loss of the best guess that reads no z: the (within-label) variance of standardised age, or the
    (conditional) entropy of 1[age > mean] in nats."""
    y = np.array([0, 0, 0, 1, 1, 1])
    a = np.array([-1.0, 0.5, -0.5, 1.0, 2.0, -1.5])
    cond, marg = TINY, ai.LearnerSettings(**{**TINY.to_dict(), "conditional": False})
    within = (np.sum((a[:3] - a[:3].mean()) ** 2) + np.sum((a[3:] - a[3:].mean()) ** 2)) / 6
    assert ai.adversary_prior("simple", y, a, cond) == pytest.approx(within)
    assert ai.adversary_prior("simple", y, a, marg) == pytest.approx(np.var(a))
    two = ai.LearnerSettings(**{**TINY.to_dict(), "age_bins": 2})  # 000's adversary: age above the mean
    h = -(1 / 3 * np.log(1 / 3) + 2 / 3 * np.log(2 / 3))  # 1 of 3 above 0 for label 0, 2 of 3 for label 1
    assert ai.adversary_prior("entropy", y, a, two) == pytest.approx(h)
    assert ai.adversary_prior("entropy", y, a, ai.LearnerSettings(**{**two.to_dict(), "conditional": False})) == \
        pytest.approx(np.log(2))
    # 3 groups with edges −0.6, 0.6: label 0 → groups 0, 1, 1; label 1 → 2, 2, 0; by hand
    h3 = -(1 / 3 * np.log(1 / 3) + 2 / 3 * np.log(2 / 3))
    three = ai.LearnerSettings(**{**TINY.to_dict(), "age_bins": 3})
    assert ai.adversary_prior("entropy", y, a, three, edges=[-0.6, 0.6]) == pytest.approx(h3)
    assert ai.adversary_prior("entropy", y, a, ai.LearnerSettings(**{**three.to_dict(), "conditional": False}),
                              edges=[-0.6, 0.6]) == pytest.approx(np.log(3) - 0.0)  # 2, 2, 2 of 6: uniform


def test_entropy_adversary_classifies_equal_frequency_age_groups():
    """Issue 27: the entropy learners' adversary sees B age groups (equal-frequency on the training rows; B = 2 is
    000's split at the mean), not only whether age is above the mean."""
    assert ai.age_group_edges(None, 2) == pytest.approx([0.0])
    age = np.random.default_rng(0).normal(size=1000)
    edges = ai.age_group_edges(age, 5)
    assert len(edges) == 4 and np.allclose(np.bincount(ai.age_groups(age, edges)), 200, atol=1)
    assert ai.age_group_edges(age + 0.3, 2) == pytest.approx([0.0])  # 000's mean split, not the median
    X, y, a = _data(n=64)
    fitted = ai.fit_method("entropy", X, y, a, TINY, seed=0)
    assert fitted.represent(X).shape == (64, TINY.z_dim)
    nets, _ = _nets("entropy")
    assert nets["A"][-1].out_features == 5
    x, yb, ab = _batch()
    target = torch.bucketize(ab, nets["A"].age_edges)
    assert np.array_equal(target.numpy(), ai.age_groups(ab.numpy(), nets["A"].age_edges.numpy()))
    assert ai.adversary_terms("entropy", nets, [nets["I"](x)], ab, TINY, yb)["H"] <= np.log(5) + 1e-6
    with pytest.raises(ai.DataError):
        ai.LearnerSettings(age_bins=1)


@pytest.mark.parametrize("body", [True, False], ids=["dnn-body", "own-layers"])
def test_conditional_adversary_reads_the_label(body):
    nets, _ = _nets("simple", replace(TINY, dnn_body=body))
    assert _in_width(nets["A"]) == TINY.z_dim + 1
    for n in nets.values():
        n.eval()
    x, y, a = _batch()
    z = nets["I"](x)
    t0 = ai.adversary_terms("simple", nets, [z], a, TINY, y)["mse"]
    t1 = ai.adversary_terms("simple", nets, [z], a, TINY, 1 - y)["mse"]
    assert float(t0) != pytest.approx(float(t1))
    with pytest.raises(ai.ModelError):
        ai.adversary_terms("simple", nets, [z], a, TINY, None)
    marg = ai.LearnerSettings(**{**TINY.to_dict(), "conditional": False})
    assert _in_width(_nets("entropy", marg)[0]["A"]) == TINY.z_dim


def test_entropy_term_is_maximised_by_the_interpreter_and_minimised_by_the_adversary():
    s = ai.LearnerSettings(**{**TINY.to_dict(), "lambda_h": 1.0})
    nets, _ = _nets("entropy-h", s)
    del nets["R"]  # isolate the H term: no reconstruction, silent classifier
    torch.nn.init.zeros_(nets["C"][-1].weight)
    x, y, a = _batch(32)

    def entropy():  # in training mode: the batch statistics the losses are optimised with (eval mode's running
        # statistics lag 20 steps behind, and with 5 age groups H starts within 0.1 of its maximum log 5)
        with torch.no_grad():
            return ai.adversary_loss("entropy-h", nets, [nets["I"](x)], a, s, y)[0].item()

    h0 = entropy()
    opt = torch.optim.SGD(nets["I"].parameters(), lr=0.05)
    for _ in range(20):
        opt.zero_grad()
        ai.interpreter_loss("entropy-h", nets, x, y, a, s, None)[0].backward()
        opt.step()
    h1 = entropy()
    assert h1 > h0
    opt_a = torch.optim.SGD(nets["A"].parameters(), lr=0.05)
    for _ in range(20):
        opt_a.zero_grad()
        ai.adversary_loss("entropy-h", nets, [nets["I"](x).detach()], a, s, y)[0].backward()
        opt_a.step()
    assert entropy() < h1


@pytest.mark.parametrize("method,expected", [("simple", ["main"] + ["A"] * 3),
                                             ("entropy", ["main"] + ["A"] * 3),
                                             ("consensus", ["main"] + ["D"] * 2 + ["A"] * 3)])
def test_update_order_and_who_moves(method, expected):
    s = ai.LearnerSettings(**{**TINY.to_dict(), "k_adv": 3, "k_disc": 2})
    nets, split = _nets(method, s)
    opts = ai.make_optimisers(method, nets, s)
    main_params = {id(p) for g in opts["main"].param_groups for p in g["params"]}
    assert not any(id(p) in main_params for k in ("A", "D") if k in nets for p in nets[k].parameters())
    assert all(id(p) in main_params for k in nets if k[0] in "ICR" for p in nets[k].parameters())
    calls = []
    for name, opt in opts.items():
        orig = opt.step

        def step(*args, _n=name, _orig=orig, **kw):
            calls.append(_n)
            return _orig(*args, **kw)
        opt.step = step
    before = {k: [p.detach().clone() for p in nets[k].parameters()] for k in nets}
    x, y, a = _batch()
    ai.train_step(method, nets, opts, x, y, a, s, split)
    assert calls == expected
    moved = {k for k in nets if any(not torch.equal(b, p) for b, p in zip(before[k], nets[k].parameters()))}
    assert moved == set(nets)


def test_every_method_fits_predicts_and_is_reproducible():
    X, y, age = _data()
    for method in ai.METHODS:
        f = ai.fit_method(method, X, y, age, TINY, seed=3)
        p = f.predict_proba(X[:10])
        assert p.shape == (10,) and np.all((p >= 0) & (p <= 1))
        if method in ai.WITH_REPRESENTATION:
            z = f.represent(X[:10])
            assert z.shape == (10, 8 if method == "dnn" else 3 * TINY.z_dim if method == "consensus" else TINY.z_dim)
        else:
            assert f.represent is None
        g = ai.fit_method(method, X, y, age, TINY, seed=3)
        assert g.model_hash == f.model_hash and np.allclose(g.predict_proba(X[:10]), p)
    assert ai.fit_method("simple", X, y, age, TINY, seed=4).model_hash != ai.fit_method(
        "simple", X, y, age, TINY, seed=3).model_hash


def test_fairlearn_reference_accepts_continuous_age():
    pytest.importorskip("fairlearn")
    X, y, age = _data()
    f = ai.fit_method(ai.REFERENCE_METHOD, X, y, age, TINY, seed=0)
    p = f.predict_proba(X)
    assert p.shape == (len(y),) and np.all((p >= 0) & (p <= 1)) and f.represent is None


@pytest.mark.parametrize("method", ["dnn", "simple", "consensus"])
def test_cancel_stops_training(method):
    X, y, age = _data()
    token = CancelToken()
    seen = []

    def progress(fraction, message):
        seen.append(message)
        token.cancel()

    with pytest.raises(Cancelled):
        ai.fit_method(method, X, y, age, ai.LearnerSettings(**{**TINY.to_dict(), "epochs": 50}), progress=progress,
                      cancel=token)
    assert len(seen) == 1  # stopped at the next checkpoint, after one epoch of 50


def test_bad_settings_and_inputs():
    from fairdesk.core.errors import DataError

    with pytest.raises(DataError):
        ai.LearnerSettings(lam=-1)
    with pytest.raises(DataError, match="adversary term"):
        ai.LearnerSettings(adversary_term="huge")
    with pytest.raises(DataError):
        ai.LearnerSettings(k_adv=0)
    X, y, age = _data()
    with pytest.raises(DataError):
        ai.fit_method("dnn", X, np.zeros_like(y), age, TINY)
    with pytest.raises(DataError):
        ai.fit_method("nope", X, y, age, TINY)
    X[0, 0] = np.nan
    with pytest.raises(DataError):
        ai.fit_method("svm", X, y, age, TINY)


def test_device_choice():
    from fairdesk.core.errors import DataError, ModelError

    assert ai.resolve_device("cpu") == "cpu"
    assert ai.resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(ModelError):
            ai.resolve_device("cuda")
    with pytest.raises(DataError):
        ai.LearnerSettings(device="tpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU on this machine")
def test_gpu_path_matches_the_contract():
    X, y, age = _data()
    f = ai.fit_method("consensus", X, y, age, ai.LearnerSettings(**{**TINY.to_dict(), "device": "cuda"}), seed=0)
    assert f.device.startswith("cuda") and f.predict_proba(X).shape == (len(y),)


def test_the_reconstructor_reads_age_so_it_does_not_reward_age_in_z():
    """Issue 27: with ``reconstruct_with_age`` (default) R reads [z, age]: given age, Lr's gradient on z no longer
    points along age — a z that drops age loses nothing in reconstruction. 000's R(z) (False) reads z only."""
    nets, _ = _nets("entropy")
    assert nets["R"][0].in_features == TINY.z_dim + 1
    x, _, a = _batch(32)
    z = nets["I"](x)
    lr_age = ai.reconstruction_loss(nets, z, x, a, TINY)
    lr_other = ai.reconstruction_loss(nets, z, x, -a, TINY)
    assert float(lr_age) != pytest.approx(float(lr_other))  # R does read age
    old = ai.LearnerSettings(**{**TINY.to_dict(), "reconstruct_with_age": False})
    nets0, _ = _nets("autoencoder", old)
    assert nets0["R"][0].in_features == TINY.z_dim
    z0 = nets0["I"](x)
    assert float(ai.reconstruction_loss(nets0, z0, x, a, old)) == pytest.approx(float(ai.reconstruction_loss(
        nets0, z0, x, -a, old)))


@pytest.mark.parametrize("method", ["dnn", "simple", "entropy", "consensus"])
def test_weight_decay_reaches_the_predicting_networks_of_the_dnn_and_the_learners_alike(method):
    """Issue 27, round 8: decoupled weight decay (AdamW) on the weight matrices of the predicting networks' linear
    layers — the DNN's, a learner's I and C — and on nothing else (biases, batch norm, the adversary,
    discriminator and reconstructor), at the same strength for the DNN and the learners; the fit moves the
    decayed weights towards 0 against the same fit without decay."""
    import torch.nn as nn

    s = ai.LearnerSettings(z_dim=3, hidden=(8,), head_hidden=4, epochs=2, batch_size=16, device="cpu",
                           weight_decay=50.0)
    nets, _ = _nets(method, s)
    opts = ai.make_optimisers(method, nets, s)
    decay = {id(p): g["weight_decay"] for o in opts.values() for g in o.param_groups for p in g["params"]}
    assert len(decay) == sum(1 for net in nets.values() for _ in net.parameters())  # every parameter, once
    for name, net in nets.items():
        predicting = name == "net" or name[0] in "IC"
        linear = {id(m.weight) for m in net.modules() if isinstance(m, nn.Linear)}
        for p in net.parameters():
            assert decay[id(p)] == (50.0 if predicting and id(p) in linear else 0.0), (name, p.shape)
    X, y, age = _data()
    norms = {}
    for wd in (0.0, 50.0):
        fitted = ai.fit_method(method, X, y, age, ai.LearnerSettings(**{**s.to_dict(), "weight_decay": wd}), seed=1)
        first = fitted.represent(X)
        norms[wd] = float(np.abs(first).mean())
    assert norms[50.0] < norms[0.0]
    with pytest.raises(Exception, match="weight decay"):
        ai.LearnerSettings(weight_decay=-1.0)


DNN_SIZED = ai.LearnerSettings(epochs=3, batch_size=16, device="cpu", dnn_body=True)


def test_with_the_dnn_body_a_learner_starts_from_the_dnns_weights_and_its_adversary_draws_after():
    """``dnn_body``: with the same torch seed I and C hold exactly the DNN's initial weights (its six hidden modules
    and its batch norm + output layer), for every learner; A (and R) are built after them."""
    for method in ("simple", "entropy", "autoencoder"):
        torch.manual_seed(11)
        dnn = ai.build_nets("dnn", 9, DNN_SIZED)["net"]
        torch.manual_seed(11)
        nets = ai.build_nets(method, 9, DNN_SIZED)
        assert list(nets)[:2] == ["I", "C"]
        for a, b in zip(list(dnn[:6].state_dict().values()) + list(dnn[6:].state_dict().values()),
                        list(nets["I"].state_dict().values()) + list(nets["C"].state_dict().values()), strict=True):
            assert torch.equal(a, b)


def test_at_lambda_0_the_simple_learner_with_the_dnn_body_is_the_dnn():
    """Issue 27, round 9: at λ = 0 and the same seed, age-indep-simple with ``dnn_body`` makes the DNN's predictions
    and representation (same initial weights, same minibatches, the adversary's steps leave I and C alone); with an
    adversary (λ > 0) it departs from them; entropy at λ = 0 differs by its reconstruction term Lr. With the
    learner's own layers (the default) it is another network."""
    X, y, age = _data(n=80)
    dnn = ai.fit_method("dnn", X, y, age, DNN_SIZED, seed=5)
    simple = ai.fit_method("simple", X, y, age, ai.LearnerSettings(**{**DNN_SIZED.to_dict(), "lam": 0.0}), seed=5)
    np.testing.assert_allclose(simple.predict_proba(X), dnn.predict_proba(X), rtol=0, atol=1e-6)
    np.testing.assert_allclose(simple.represent(X), dnn.represent(X), rtol=0, atol=1e-6)
    for method, lam, body in (("simple", 1.0, True), ("entropy", 0.0, True), ("simple", 0.0, False)):
        other = ai.fit_method(method, X, y, age,
                              ai.LearnerSettings(**{**DNN_SIZED.to_dict(), "lam": lam, "dnn_body": body}), seed=5)
        assert np.abs(other.predict_proba(X) - dnn.predict_proba(X)).max() > 1e-4


@hypothesis_settings(max_examples=200, deadline=None, derandomize=True)
@given(n=st.integers(2, 400), batch_size=st.integers(2, 80), seed=st.integers(0, 2**16))
def test_minibatches_partition_the_rows_and_none_has_fewer_than_two(n, batch_size, seed):
    """Every epoch's minibatches hold each training row exactly once and at least two rows each (batch norm), for
    every number of rows and batch size — before, when n = k·batch_size + 1 the lone last row was merged wrongly:
    an IndexError with two batches (the command line on a 40-participant demo with 3 folds), and with more a batch
    lost that epoch and another trained twice."""
    batches = ai._batches(n, batch_size, np.random.default_rng(seed))
    assert sorted(np.concatenate(batches).tolist()) == list(range(n))
    assert all(b.size >= 2 for b in batches)
