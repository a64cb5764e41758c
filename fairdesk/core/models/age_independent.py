"""Age-independent representation learners of 000 and their baselines (METHODS §3).

Entry point: :func:`fit_method` ``(method, X, y, age, settings, seed, progress, cancel) -> FittedMethod``, whose
``predict_proba(X)`` gives P(y = 1) and ``represent(X)`` the learned representation ``z`` (``None`` for methods
without one). Features are standardised with the training rows' mean and SD inside the fit.

Learners (PyTorch; a GPU when ``torch.cuda.is_available()`` and ``device="auto"``): interpreter ``I: x → z``,
classifier ``C: z → 2 logits``, adversary ``A: z → age``. Every network is fully connected with ReLU and batch
normalisation before its output layer (:func:`mlp`); Adam, lr 3·10⁻⁴, optionally with decoupled weight
decay (``weight_decay``, default 0; AdamW) on the weight matrices of the predicting networks — the DNN's, a
learner's I and C — alike (:func:`make_optimisers`). Per minibatch the interpreter side (I, C and,
where present, R) takes ONE step on its loss, then the adversary (and discriminator) take K steps on theirs with
``z`` held fixed (000 Algorithms 1–4):

* ``simple``       — I, C minimise ``Lc − λ·La``; A minimises ``La = mean (A(z) − age)²``.
* ``autoencoder``  — adds R: z → x̂; I, C, R minimise ``Lc − λ·La + Lr`` with ``Lr = mean (x̂ − x)²``. By default
  (``reconstruct_with_age``) R also reads standardised age, so the reconstruction does not reward age in
  z (:func:`reconstruction_loss`); 000's R reads z only.
* ``consensus``    — features split at random into M = 3 modalities of equal (±1) size (:func:`modality_split`);
  one interpreter per modality, D predicts the modality from each ``z_m`` (``Ld`` = CE), A predicts age from each
  ``z_m`` (``La`` averaged over m), C reads ``[z_1 … z_M]``. I, C minimise ``Lc − λ·La − λ·Ld``; then K_D steps
  of D on ``Ld`` and K steps of A on ``La``. No reconstructor.
* ``entropy``      — as autoencoder, but A is an age-group classifier: B logits for the row's age group g (B =
  ``age_bins`` equal-frequency groups of the training rows' age, :func:`age_group_edges`);
  ``La = CE(P, g) + λ_H·H[P]`` with ``H[P] = −Σ P log P`` (batch mean); A minimises La, I maximises it
  (I, C, R minimise ``Lc − λ·La + Lr``). ``entropy-binary`` keeps the CE term only, ``entropy-h`` the H term only.
  ``age_bins=2`` is 000's adversary (age above or below the mean: the edge of standardised age is 0); the default
  5 groups — with two, age within each half is never penalised and a regression probe still reads it.

λ (``lam``) is FairDesk's adversary strength: 000's algorithms are λ = 1 (the default); λ = 0 trains the same
networks with no adversarial pressure. The regression adversary sees age standardised with the training rows'
mean and SD (000 regresses raw years; on that scale the squared error is ~100× the CE and swamps it).

Two departures from 000 (both settings, defaults shown; docs/methods.md §3 has the measurements):

* ``adversary_term="bounded"``: in the interpreter's loss the adversary's error part (squared error, or the
  entropy adversary's CE; consensus's Ld) is capped at its no-information value :func:`adversary_prior` — the
  loss of the best guess that reads nothing from z. 000's ``−λ·La`` has no lower bound: the interpreter can lower
  it without end by making the current adversary confidently *wrong*, which keeps age in z (in a form the lagging
  adversary misreads) and, for λ > 1, swamps the classifier. ``"unbounded"`` is 000's term.
* ``conditional=True``: the adversary also reads the label (a ±1 column beside z), as the equalized-odds
  adversaries of Madras et al. (2018) and Zhang et al. (2018) do, and its prior is per label class. 000's
  adversary reads z only, so it also removes the age the diagnosis itself implies (older participants are more
  often impaired) — which no classifier of the diagnosis can shed without losing accuracy, and which 000's own
  fairness score (equalized odds, Δ_eo) does not count. ``conditional=False`` is 000's adversary.

The learners' body (``dnn_body``, the default, with K = 10): the learner is the DNN plus an
adversary — I is the DNN's hidden layers (z = their post-ReLU 8-unit output), C the DNN's output layer (batch norm,
z → 2), built first so that with the DNN's seed (which the protocol then gives every learner) I and C start from the
DNN's weights and see its minibatches; A reads [z, label] standardised over the minibatch. At λ = 0 simple *is* the
DNN (entropy differs by its reconstruction term Lr, which also trains I). ``dnn_body=False``: the learner's own
layers (I an :func:`mlp` with a linear z, C z → 16 → 2) and seeds of its own.

Baselines: ``dnn`` (hidden 64-32-8, ReLU, batch norm before the output layer; its representation is the last hidden
layer, 8 units), ``svm`` (RBF SVC with Platt scores), ``rf`` (random forest, 200 trees), ``adaboost`` (100 stumps) —
scikit-learn. ``fairlearn-adversarial`` (:data:`REFERENCE_METHOD`) is fairlearn's ``AdversarialFairnessClassifier``
(Zhang et al. 2018, equalized-odds adversary on the predictor's score, continuous sensitive feature = standardised
age), an external reference, available only when fairlearn is importable.

torch, sklearn and fairlearn are imported inside functions (this module stays cheap for the GUI).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import numpy as np

from fairdesk.core.errors import DataError, ModelError
from fairdesk.core.progress import CancelToken, ProgressFn, Reporter

BASELINES: tuple[str, ...] = ("dnn", "svm", "rf", "adaboost")
LEARNERS: tuple[str, ...] = ("simple", "autoencoder", "consensus", "entropy", "entropy-binary", "entropy-h")
METHODS: tuple[str, ...] = BASELINES + LEARNERS
REFERENCE_METHOD = "fairlearn-adversarial"
#: Methods whose fitted model exposes a representation z (leakage is measured on it).
WITH_REPRESENTATION: frozenset[str] = frozenset(("dnn",) + LEARNERS)
TORCH_METHODS: frozenset[str] = frozenset(("dnn",) + LEARNERS)

#: The interpreter's adversary term: "bounded" −λ·min(La, La_prior) (no reward for making the adversary worse than
#: the prior guess), "unbounded" 000's −λ·La.
ADVERSARY_TERMS: tuple[str, ...] = ("bounded", "unbounded")

METHOD_LABELS: dict[str, str] = {
    "dnn": "DNN 64-32-8 (baseline)", "svm": "SVM (RBF)", "rf": "Random forest", "adaboost": "AdaBoost",
    "simple": "age-indep-simple", "autoencoder": "age-indep-autoencoder", "consensus": "age-indep-consensus-net",
    "entropy": "age-indep-entropy", "entropy-binary": "age-indep-entropy (binary)",
    "entropy-h": "age-indep-entropy (H only)", REFERENCE_METHOD: "fairlearn AdversarialFairnessClassifier (external)",
}


@dataclass
class LearnerSettings:
    """Training settings shared by the neural methods (000 "Implementation" and METHODS §3)."""

    lam: float = 1.0        # λ: weight of the adversary (and discriminator) term in the interpreter's loss
    # K: adversary steps per minibatch (000 leaves K open; 1 let z keep age; with the
    # DNN's layers a K = 5 adversary lags the interpreter and leaves age beyond the label:
    # docs/validation/age-learners.md)
    k_adv: int = 10
    k_disc: int = 1         # K_D: discriminator steps per minibatch (consensus)
    lambda_h: float = 1.0   # λ_H: weight of the entropy term (entropy)
    age_bins: int = 5       # B: age groups the entropy family's adversary classifies (2 = 000's above/below the mean)
    reconstruct_with_age: bool = True  # R reads [z, age] (False: 000's R(z), which rewards age in z)
    z_dim: int = 8          # size of z (per modality for consensus); 8 = the DNN's last hidden layer
    hidden: tuple[int, ...] = (64, 32)  # interpreter hidden layers (the DNN's 64-32 before its 8)
    head_hidden: int = 16   # hidden units of C, A, D (C: only with dnn_body=False)
    # the learner is the DNN plus an adversary (docs/methods.md §3): I = the DNN's
    # hidden layers (z = its 8-unit post-ReLU last hidden layer), C = its output layer (batch norm, z → 2), A reads
    # its input standardised, and the protocol fits it with the DNN's seed (initial weights of I and C, minibatch
    # order), so at λ = 0 simple is the DNN and a learner's cost is its adversary's, not a second network's
    # training noise. The default (with K = 10). False: the learner's own I (64-32, batch norm,
    # linear z) and C (z → 16 → 2) with seeds of their own.
    dnn_body: bool = True
    epochs: int = 40
    batch_size: int = 64
    lr: float = 3e-4
    # decoupled (AdamW) weight decay of the predicting networks' weight matrices (the DNN; I and C), the same for
    # the DNN and the learners; 0 = none (3 was measured and not made the default: docs/validation/age-learners.md)
    weight_decay: float = 0.0
    n_modalities: int = 3
    device: str = "auto"
    adversary_term: str = "bounded"  # ADVERSARY_TERMS: the interpreter's adversary term (000's is "unbounded")
    conditional: bool = True  # the adversary (and discriminator-free probe target) also sees the label

    def __post_init__(self) -> None:
        if self.lam < 0:
            raise DataError("The adversary strength λ must be ≥ 0.")
        if self.k_adv < 1 or self.k_disc < 1:
            raise DataError("The adversary and discriminator need at least one step per minibatch (K ≥ 1).")
        if self.weight_decay < 0:
            raise DataError("The weight decay must be ≥ 0.")
        if self.epochs < 1 or self.batch_size < 2:
            raise DataError("Training needs at least one epoch and minibatches of at least 2 rows.")
        if self.n_modalities < 2:
            raise DataError("Consensus-net needs at least 2 modalities.")
        if self.age_bins < 2:
            raise DataError("The entropy learners' adversary needs at least 2 age groups (age_bins ≥ 2).")
        if self.adversary_term not in ADVERSARY_TERMS:
            raise DataError(f"Unknown adversary term '{self.adversary_term}'; use 'bounded' (the default) or "
                            "'unbounded' (000's −λ·La).")
        if self.device not in ("auto", "cpu", "cuda") and not str(self.device).startswith("cuda:"):
            raise DataError(f"Unknown device '{self.device}'. Use auto, cpu or cuda.")
        self.hidden = tuple(int(h) for h in self.hidden)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["hidden"] = list(self.hidden)
        return d


@dataclass
class FittedMethod:
    """A fitted method: ``predict_proba(X) -> P(y=1)``; ``represent(X) -> z`` or ``None``."""

    method: str
    predict_proba: Callable[[np.ndarray], np.ndarray]
    represent: Callable[[np.ndarray], np.ndarray] | None
    model_hash: str
    device: str = "cpu"
    details: dict = field(default_factory=dict)


def fairlearn_available() -> bool:
    try:
        import fairlearn.adversarial  # noqa: F401
    except Exception:  # noqa: BLE001 — any import failure means "not available"
        return False
    return True


def resolve_device(device: str) -> str:
    import torch

    has_cuda = torch.cuda.is_available()
    if device == "auto":
        return "cuda" if has_cuda else "cpu"
    if device != "cpu" and not has_cuda:
        raise ModelError("A GPU (cuda) was requested but none is available. Choose 'auto' or 'cpu'.")
    return device


# --------------------------------------------------------------------------------------------------------------
# Networks


def mlp(sizes: list[int]):
    """Fully connected ReLU network ``sizes[0] → … → sizes[-1]`` with batch norm before the output layer."""
    import torch.nn as nn

    layers: list = []
    for a, b in zip(sizes[:-2], sizes[1:-1]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    if len(sizes) > 2:
        layers.append(nn.BatchNorm1d(sizes[-2]))
    layers.append(nn.Linear(sizes[-2], sizes[-1]))
    return nn.Sequential(*layers)


def dnn_body(sizes: list[int]) -> list:
    """Fully connected layers ``sizes[0] → … → sizes[-1]``, each followed by ReLU: the DNN's hidden layers, and with
    ``LearnerSettings.dnn_body`` every learner's interpreter (:func:`build_nets`)."""
    import torch.nn as nn

    layers: list = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return layers


def dnn_output_layer(width: int) -> list:
    """Batch norm, then the linear layer to 2 logits: the DNN's output layer, and with ``LearnerSettings.dnn_body``
    every learner's classifier C."""
    import torch.nn as nn

    return [nn.BatchNorm1d(width), nn.Linear(width, 2)]


def modality_split(n_features: int, n_modalities: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Features split at random into ``n_modalities`` disjoint sets whose sizes differ by at most one."""
    if n_features < n_modalities:
        raise DataError(f"Consensus-net needs at least {n_modalities} features (one per modality).")
    return [np.sort(part) for part in np.array_split(rng.permutation(n_features), n_modalities)]


def build_nets(method: str, n_features: int, settings: LearnerSettings,
               split: list[np.ndarray] | None = None) -> dict[str, Any]:
    """The networks of ``method`` (call ``torch.manual_seed`` first for reproducible weights).

    The DNN is :func:`dnn_body` ``[n, 64, 32, 8]`` then :func:`dnn_output_layer`. With ``settings.dnn_body`` a
    learner's I is ``dnn_body([n, *hidden, z_dim])`` and its C ``dnn_output_layer(z_dim)`` (consensus: one I per
    modality, C on their concatenation), built first and in the DNN's order, and A, D, R after them: with the
    default sizes and the DNN's seed a learner starts from the DNN's initial weights, and the adversary's networks
    take no draws before them; A then reads [z, label] standardised over the minibatch (batch norm without affine
    parameters). *Why*: the pairing alone left age in z at λ = 1 on the strong cohort (R² beyond the
    label 0.13 and 0.18 for simple and entropy over four seeds against the own layers' 0.07 and 0.12): the DNN's
    post-ReLU z is small and A, reading it raw, lagged where I moved age (docs/validation/age-learners.md)."""
    import torch.nn as nn

    s = settings
    zc = s.z_dim

    def interpreter(n_in: int):
        return nn.Sequential(*dnn_body([n_in, *s.hidden, zc])) if s.dnn_body else mlp([n_in, *s.hidden, zc])

    def classifier(width: int):
        return nn.Sequential(*dnn_output_layer(width)) if s.dnn_body else mlp([width, s.head_hidden, 2])

    def adversary(outputs: int):
        # with the DNN's body z is not normalised (post-ReLU, unit SDs ~0.01–0.1): A reads its input standardised
        # over the minibatch, else it is blind to a shrunken z that still carries age
        a = mlp([zc + int(s.conditional), s.head_hidden, outputs])
        return nn.Sequential(nn.BatchNorm1d(zc + int(s.conditional), affine=False), *a) if s.dnn_body else a

    if method == "dnn":
        # hidden 64-32-8 with ReLU, batch norm before the output layer; [:6] is the representation (8 units)
        return {"net": nn.Sequential(*dnn_body([n_features, 64, 32, 8]), *dnn_output_layer(8))}
    if method == "consensus":
        assert split is not None
        nets = {f"I{m}": interpreter(len(idx)) for m, idx in enumerate(split)}
        nets["C"] = classifier(zc * len(split))
        nets["A"] = adversary(1)
        nets["D"] = mlp([zc, s.head_hidden, len(split)])
        return nets
    if method not in LEARNERS:
        raise ModelError(f"Unknown learner '{method}'.")
    nets = {"I": interpreter(n_features)}
    nets["C"] = classifier(zc)
    nets["A"] = adversary(s.age_bins if method.startswith("entropy") else 1)
    if method.startswith("entropy"):
        import torch

        # the group edges on standardised age travel with A (device, state dict); the fit sets the training rows'
        nets["A"].register_buffer("age_edges", torch.as_tensor(age_group_edges(None, s.age_bins),
                                                               dtype=torch.float32))
    if method != "simple":
        nets["R"] = mlp([zc + int(s.reconstruct_with_age), *reversed(s.hidden), n_features])
    return nets


# Which networks each optimiser updates.
def interpreter_side(method: str, nets: dict) -> list[str]:
    return [k for k in nets if k[0] in "ICR"]


def encode(method: str, nets: dict, x, split: list | None = None):
    """(z used by C, list of per-modality z for the adversary/discriminator)."""
    import torch

    if method == "consensus":
        zs = [nets[f"I{m}"](x[:, idx]) for m, idx in enumerate(split)]
        return torch.cat(zs, dim=1), zs
    z = nets["I"](x)
    return z, [z]


def _adversary_input(z, y, settings: LearnerSettings):
    """What A reads: z, and with ``settings.conditional`` the label as a ±1 column (A then predicts the age the
    representation adds to the label's; Madras et al. 2018 and Zhang et al. 2018 give an equalized-odds adversary
    the label)."""
    import torch

    if not settings.conditional:
        return z
    if y is None:
        raise ModelError("The conditional adversary needs the labels of the minibatch.")
    return torch.cat([z, (2.0 * y.to(z.dtype) - 1.0).unsqueeze(1)], dim=1)


def age_group_edges(age_std, bins: int) -> np.ndarray:
    """The ``bins − 1`` inner edges of equal-frequency age groups on standardised age: the quantiles of the
    training rows' ``age_std``, or, without rows (``None``), of the standard normal (for 2 groups both give 0 on a
    symmetric sample: 000's split at the mean). A row's group is the number of edges below its age."""
    from scipy.stats import norm

    q = np.arange(1, bins) / bins
    if age_std is None:
        return norm.ppf(q)
    if bins == 2:
        return np.zeros(1)  # 000: above or below the training mean (0 on standardised age)
    return np.quantile(np.asarray(age_std, float), q)


def age_groups(age_std, edges) -> np.ndarray:
    """Each row's age group (0 … len(edges)) given the inner edges: the number of edges strictly below its age."""
    return np.searchsorted(np.asarray(edges, float), np.asarray(age_std, float), side="left")


def adversary_terms(method: str, nets: dict, zs: list, age_std, settings: LearnerSettings, y=None) -> dict:
    """The adversary's loss parts: ``mse`` (regression adversary, averaged over modalities) or ``ce`` and ``H``
    (entropy family), as tensors."""
    import torch
    import torch.nn.functional as F

    if method.startswith("entropy"):
        logits = nets["A"](_adversary_input(zs[0], y, settings))
        target = torch.bucketize(age_std, nets["A"].age_edges.to(age_std.dtype))  # age group: edges below
        logp = torch.log_softmax(logits, dim=1)
        return {"ce": F.cross_entropy(logits, target), "H": -(logp.exp() * logp).sum(dim=1).mean()}
    losses = [((nets["A"](_adversary_input(z, y, settings)).squeeze(1) - age_std) ** 2).mean() for z in zs]
    return {"mse": torch.stack(losses).mean()}


def combine_adversary(method: str, terms: dict, settings: LearnerSettings, prior: float | None = None):
    """La from the parts: ``mse``; ``ce + λ_H·H`` (entropy), ``ce`` (binary), ``λ_H·H`` (H only). With ``prior``
    (the loss of the best guess that reads no z: :func:`adversary_prior`) the error part is capped at it — the
    bounded term the interpreter ascends (see :func:`interpreter_loss`)."""
    import torch

    def cap(t):
        return t if prior is None else torch.clamp(t, max=float(prior))

    if not method.startswith("entropy"):
        return cap(terms["mse"])
    if method == "entropy":
        return cap(terms["ce"]) + settings.lambda_h * terms["H"]
    if method == "entropy-binary":
        return cap(terms["ce"])
    return settings.lambda_h * terms["H"]


def adversary_loss(method: str, nets: dict, zs: list, age_std, settings: LearnerSettings, y=None):
    """La, what the adversary minimises: squared error on standardised age (averaged over modalities), or the
    entropy adversary's ``CE + λ_H·H``; returns (La, parts)."""
    terms = adversary_terms(method, nets, zs, age_std, settings, y)
    parts = {k: float(v.detach()) for k, v in terms.items() if method.startswith("entropy")}
    return combine_adversary(method, terms, settings), parts


def adversary_prior(method: str, y, age_std, settings: LearnerSettings, edges=None) -> float:
    """The adversary's loss when it reads nothing from z: the best constant guess of standardised age (or of
    the age group), per label class when the adversary is conditional. Squared error: the (within-class) variance;
    entropy family: the (conditional) entropy of the age group (``edges``: :func:`age_group_edges`, by default
    the standard normal's) in nats. Consensus's discriminator: log M."""
    y = np.asarray(y).astype(int).reshape(-1)
    age_std = np.asarray(age_std, float).reshape(-1)
    classes = [y == c for c in np.unique(y)] if settings.conditional else [np.ones(y.size, bool)]
    if method.startswith("entropy"):
        group = age_groups(age_std, age_group_edges(None, settings.age_bins) if edges is None else edges)
    total = 0.0
    for rows in classes:
        if method.startswith("entropy"):
            q = np.bincount(group[rows], minlength=settings.age_bins) / rows.sum()
            h = -sum(v * math.log(v) for v in q if v > 0)
            total += rows.sum() * h
        else:
            total += float(((age_std[rows] - age_std[rows].mean()) ** 2).sum())
    return total / y.size


def discriminator_loss(nets: dict, zs: list):
    """Ld: CE of D predicting the modality index from each z_m."""
    import torch
    import torch.nn.functional as F

    logits = torch.cat([nets["D"](z) for z in zs])
    target = torch.cat([torch.full((z.shape[0],), m, dtype=torch.long, device=z.device) for m, z in enumerate(zs)])
    return F.cross_entropy(logits, target)


def interpreter_loss(method: str, nets: dict, x, y, age_std, settings: LearnerSettings,
                     split: list | None = None, prior: float | None = None):
    """The loss the interpreter side minimises: ``Lc − λ·La' (+ Lr) (− λ·Ld')``; returns (loss, parts).

    ``adversary_term="unbounded"`` (000): La' = La, Ld' = Ld. ``"bounded"`` (default): the error part of La is
    capped at ``prior`` (:func:`adversary_prior`; from this minibatch when None) and Ld at log M. Why: 000's −λ·La
    has no lower bound — the interpreter lowers it without end by making the *current* adversary wrong (z pushed
    along A's weights until its squared error or cross-entropy is far above the no-information guess), which keeps
    age in z (a wrong adversary is an informed one) and, at λ > 1, swamps Lc. Capped, an adversary no better than
    the prior exerts no pull; the only optimum of the term is z that tells the adversary nothing."""
    import torch.nn.functional as F

    z, zs = encode(method, nets, x, split)
    lc = F.cross_entropy(nets["C"](z), y)
    terms = adversary_terms(method, nets, zs, age_std, settings, y)
    bounded = settings.adversary_term == "bounded"
    if bounded and prior is None:
        edges = nets["A"].age_edges.cpu().numpy() if method.startswith("entropy") else None
        prior = adversary_prior(method, y.cpu().numpy(), age_std.cpu().numpy(), settings, edges)
    la = combine_adversary(method, terms, settings, prior if bounded else None)
    loss = lc - settings.lam * la
    parts = {"Lc": float(lc.detach()), "La": float(la.detach()),
             **({k: float(v.detach()) for k, v in terms.items()} if method.startswith("entropy") else {})}
    if "R" in nets:
        lr = reconstruction_loss(nets, z, x, age_std, settings)
        loss = loss + lr
        parts["Lr"] = float(lr.detach())
    if method == "consensus":
        ld = discriminator_loss(nets, zs)
        if bounded:
            import torch

            ld = torch.clamp(ld, max=math.log(len(zs)))
        loss = loss - settings.lam * ld
        parts["Ld"] = float(ld.detach())
    return loss, parts


def reconstruction_loss(nets: dict, z, x, age_std, settings: LearnerSettings):
    """Lr = mean (x̂ − x)², x̂ = R(z) (000) or, with ``settings.reconstruct_with_age``, R([z, standardised age]):
    the decoder is given age, so the reconstruction no longer rewards a z that carries it (as in the Fader networks
    of Lample et al. 2017). Without it, where age is a large share of the features' variance the reconstruction
    pulls age into z as hard as the adversary pushes it out (measured in docs/methods.md §3)."""
    import torch

    r_in = torch.cat([z, age_std.to(z.dtype).unsqueeze(1)], dim=1) if settings.reconstruct_with_age else z
    return ((nets["R"](r_in) - x) ** 2).mean()


def make_optimisers(method: str, nets: dict, settings: LearnerSettings) -> dict:
    """Adam (lr 3·10⁻⁴) per side. The weight matrices of the predicting networks' linear layers (the DNN; a
    learner's I and C) get decoupled weight decay ``settings.weight_decay`` (AdamW, which at 0 is Adam step for
    step); biases, batch norm and the other networks (A, D, R) none."""
    import torch
    import torch.nn as nn

    def groups(names, decay=0.0):
        params = [p for n in names for p in nets[n].parameters()]
        decayed = {id(m.weight) for n in names for m in nets[n].modules() if isinstance(m, nn.Linear)} if decay \
            else set()
        return [g for g in ({"params": [p for p in params if id(p) in decayed], "weight_decay": decay},
                            {"params": [p for p in params if id(p) not in decayed], "weight_decay": 0.0})
                if g["params"]]

    def adamw(param_groups):
        return torch.optim.AdamW(param_groups, lr=settings.lr)

    if method == "dnn":
        return {"main": adamw(groups(["net"], settings.weight_decay))}
    side = interpreter_side(method, nets)
    predicting = [n for n in side if n[0] in "IC"]
    opts = {"main": adamw(groups(predicting, settings.weight_decay) + groups([n for n in side if n not in predicting])),
            "A": adamw(groups(["A"]))}
    if method == "consensus":
        opts["D"] = adamw(groups(["D"]))
    return opts


def train_step(method: str, nets: dict, opts: dict, x, y, age_std, settings: LearnerSettings,
               split: list | None = None, prior: float | None = None) -> dict:
    """One minibatch of 000's Algorithms 1–4: the interpreter side once, then K_D discriminator and K adversary
    steps on the representation the updated interpreter produces (held fixed)."""
    import torch
    import torch.nn.functional as F

    if method == "dnn":
        opts["main"].zero_grad()
        loss = F.cross_entropy(nets["net"](x), y)
        loss.backward()
        opts["main"].step()
        return {"Lc": float(loss.detach())}
    for opt in opts.values():
        opt.zero_grad()
    loss, parts = interpreter_loss(method, nets, x, y, age_std, settings, split, prior)
    loss.backward()
    opts["main"].step()  # only I, C (R) move: A and D gradients from this pass are discarded below
    with torch.no_grad():
        _, zs = encode(method, nets, x, split)
    zs = [z.detach() for z in zs]
    if method == "consensus":
        for _ in range(settings.k_disc):
            opts["D"].zero_grad()
            ld = discriminator_loss(nets, zs)
            ld.backward()
            opts["D"].step()
    for _ in range(settings.k_adv):
        opts["A"].zero_grad()
        la, _ = adversary_loss(method, nets, zs, age_std, settings, y)
        la.backward()
        opts["A"].step()
    return parts


# --------------------------------------------------------------------------------------------------------------
# Fitting


def _standardise(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean = X.mean(axis=0)
    sd = X.std(axis=0)
    sd[sd == 0] = 1.0
    return mean, sd


def _check_inputs(X, y, age) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y).astype(int).reshape(-1)
    age = np.asarray(age, dtype=np.float64).reshape(-1)
    if X.ndim != 2 or X.shape[0] != y.size or y.size != age.size:
        raise DataError("Features, labels and the attribute must have one row per sample.")
    if not np.isfinite(X).all() or not np.isfinite(age).all():
        raise DataError("Features and the attribute must be finite numbers (no missing values).")
    if set(np.unique(y).tolist()) != {0, 1}:
        raise DataError("The label must be 0/1 with both classes present in every training fold.")
    return X, y, age


def fit_method(method: str, X, y, age, settings: LearnerSettings | None = None, seed: int = 0,
               progress: ProgressFn | None = None, cancel: CancelToken | None = None) -> FittedMethod:
    """Fit one method on training rows (features ``X``, 0/1 labels ``y``, continuous attribute ``age``)."""
    from fairdesk.core.models.tabular import model_hash

    settings = settings or LearnerSettings()
    rep = Reporter(progress, cancel)
    X, y, age = _check_inputs(X, y, age)
    mean, sd = _standardise(X)
    a_mean, a_sd = float(age.mean()), float(age.std()) or 1.0
    Xs = (X - mean) / sd
    if method in TORCH_METHODS:
        return _fit_torch(method, Xs, y, (age - a_mean) / a_sd, mean, sd, settings, seed, rep)
    rep.check()
    if method == REFERENCE_METHOD:
        return _fit_fairlearn(Xs, y, (age - a_mean) / a_sd, mean, sd, settings, seed, rep)
    est = _sklearn_estimator(method, seed)
    est.fit(Xs, y)
    rep(1.0, f"{method}: fitted")

    def proba(Xn):
        return est.predict_proba((np.asarray(Xn, float) - mean) / sd)[:, 1]

    return FittedMethod(method, proba, None, model_hash({"est": est, "mean": mean, "sd": sd}, method, []))


def _sklearn_estimator(method: str, seed: int):
    if method == "svm":
        from sklearn.calibration import CalibratedClassifierCV
        from sklearn.svm import SVC

        return CalibratedClassifierCV(SVC(kernel="rbf"), ensemble=False, cv=5)  # Platt scores, one SVC
    if method == "rf":
        from sklearn.ensemble import RandomForestClassifier

        return RandomForestClassifier(n_estimators=200, random_state=seed, n_jobs=1)
    if method == "adaboost":
        from sklearn.ensemble import AdaBoostClassifier

        return AdaBoostClassifier(n_estimators=100, random_state=seed)
    raise DataError(f"Unknown method '{method}'; choose from {', '.join(METHODS)}.")


def _batches(n: int, batch_size: int, rng: np.random.Generator) -> list[np.ndarray]:
    order = rng.permutation(n)
    out = [order[i:i + batch_size] for i in range(0, n, batch_size)]
    if len(out) > 1 and out[-1].size < 2:  # batch norm needs two rows: the last row joins the batch before it
        last = out.pop()  # (popped first: ``out[-2] = concatenate([out[-2], out.pop()])`` indexes the list after the
        out[-1] = np.concatenate([out[-1], last])  # pop — an IndexError with 2 batches, and with more it overwrote
    return out  # the third-to-last batch, so its rows went untrained that epoch and the second-to-last's trained twice)


def _fit_torch(method, Xs, y, age_std, mean, sd, settings, seed, rep) -> FittedMethod:
    import torch

    from fairdesk.core.models.tabular import model_hash

    if Xs.shape[0] < 4:
        raise DataError("Too few training rows to train a network (at least 4 are needed).")
    device = resolve_device(settings.device)
    rng = np.random.default_rng(seed)
    split = modality_split(Xs.shape[1], settings.n_modalities, rng) if method == "consensus" else None
    torch.manual_seed(int(rng.integers(2 ** 31)))
    nets = build_nets(method, Xs.shape[1], settings, split)
    edges = None
    if method.startswith("entropy"):  # equal-frequency age groups of the training rows
        edges = age_group_edges(age_std, settings.age_bins)
        nets["A"].age_edges.copy_(torch.as_tensor(edges, dtype=torch.float32))
    for net in nets.values():
        net.to(device)
    split_t = [torch.as_tensor(idx, device=device) for idx in split] if split else None
    opts = make_optimisers(method, nets, settings)
    xt = torch.as_tensor(Xs, dtype=torch.float32, device=device)
    yt = torch.as_tensor(y, dtype=torch.long, device=device)
    at = torch.as_tensor(age_std, dtype=torch.float32, device=device)
    for net in nets.values():
        net.train()
    parts: dict = {}
    prior = adversary_prior(method, y, age_std, settings, edges) if method != "dnn" else None
    for epoch in range(settings.epochs):
        for idx in _batches(len(y), settings.batch_size, rng):
            b = torch.as_tensor(idx, device=device)
            parts = train_step(method, nets, opts, xt[b], yt[b], at[b], settings, split_t, prior)
        rep((epoch + 1) / settings.epochs, f"{method}: epoch {epoch + 1}/{settings.epochs}")
        if not all(np.isfinite(v) for v in parts.values()):
            raise ModelError(f"Training of '{method}' diverged (a loss became infinite); lower λ.")
    for net in nets.values():
        net.eval()

    def _tensor(Xn):
        return torch.as_tensor((np.asarray(Xn, float) - mean) / sd, dtype=torch.float32, device=device)

    def proba(Xn):
        with torch.no_grad():
            logits = nets["net"](_tensor(Xn)) if method == "dnn" else nets["C"](encode(method, nets, _tensor(Xn),
                                                                                       split_t)[0])
            return torch.softmax(logits, dim=1)[:, 1].double().cpu().numpy()

    def represent(Xn):
        with torch.no_grad():
            if method == "dnn":
                z = nets["net"][:6](_tensor(Xn))  # output of the last hidden layer (8 units, after ReLU)
            else:
                z = encode(method, nets, _tensor(Xn), split_t)[0]
            return z.double().cpu().numpy()

    state = {name: net.state_dict() for name, net in nets.items()}
    details = {"final_losses": parts}
    if split:
        details["modalities"] = [idx.tolist() for idx in split]
    return FittedMethod(method, proba, represent, model_hash({"nets": state, "mean": mean, "sd": sd}, method, []),
                        device, details)


def _fit_fairlearn(Xs, y, age_std, mean, sd, settings, seed, rep) -> FittedMethod:
    """fairlearn's adversarial classifier as an external reference (continuous sensitive feature)."""
    import torch
    from fairlearn.adversarial import AdversarialFairnessClassifier

    from fairdesk.core.models.tabular import model_hash

    torch.manual_seed(seed)
    device = resolve_device(settings.device)
    clf = AdversarialFairnessClassifier(
        backend="torch", predictor_model=[64, "relu", 32, "relu", 8, "relu"], adversary_model=[16, "relu"],
        constraints="equalized_odds", learning_rate=settings.lr, alpha=settings.lam, epochs=settings.epochs,
        batch_size=settings.batch_size, shuffle=True, random_state=seed, cuda=device.startswith("cuda"),
        progress_updates=None)
    clf.fit(Xs, y, sensitive_features=age_std.reshape(-1, 1))
    if getattr(clf, "adversary_loss_", "continuous") != "continuous":
        raise ModelError("fairlearn did not treat age as a continuous sensitive feature.")
    rep(1.0, f"{REFERENCE_METHOD}: fitted")

    def proba(Xn):
        # the estimator has no public predict_proba; _raw_predict is its sigmoid output P(y = 1)
        return np.asarray(clf._raw_predict((np.asarray(Xn, float) - mean) / sd), float).reshape(-1)

    state = {"predictor": clf.backendEngine_.predictor_model.state_dict()}
    return FittedMethod(REFERENCE_METHOD, proba, None, model_hash({"nets": state}, REFERENCE_METHOD, []), device)
