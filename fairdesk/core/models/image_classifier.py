"""Image classifiers under audit: import a TorchScript file or a state dict for a built-in architecture, or train a
small CNN on CPU (Model tab). Nothing untrusted is unpickled: state dicts load with
``torch.load(weights_only=True)`` or from safetensors; TorchScript archives load with ``torch.jit.load``.

Built-in architectures (plain ``torch.nn``; torchvision is not installable beside this torch):

* ``small_cnn`` — 3 × (conv 3×3, BatchNorm, ReLU, max-pool) → global average pool → linear;
* ``small_resnet`` — a stem conv, ``blocks`` basic residual blocks per stage over 3 stages (stride 2 between them,
  ResNet-style shortcut convolutions), global average pool → linear.

A classifier folder holds ``config.json`` (architecture, input size, output names) and ``model.safetensors``;
both are written atomically. Outputs are sigmoid probabilities, one per disease.
torch and safetensors are imported inside functions.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from fairdesk.core import atomic
from fairdesk.core.errors import ModelError
from fairdesk.core.progress import CancelToken, ProgressFn, Reporter

ARCHITECTURES = ("small_cnn", "small_resnet")
_CLASSES: dict = {}


def _arch_classes() -> dict:
    if _CLASSES:
        return _CLASSES
    import torch
    from torch import nn

    class SmallCNN(nn.Module):
        def __init__(self, in_channels: int = 1, n_outputs: int = 1, width: int = 16) -> None:
            super().__init__()
            layers, c = [], in_channels
            for mult in (1, 2, 4):
                layers += [nn.Conv2d(c, width * mult, 3, padding=1), nn.BatchNorm2d(width * mult), nn.ReLU(),
                           nn.MaxPool2d(2)]
                c = width * mult
            self.features = nn.Sequential(*layers)
            self.head = nn.Linear(c, n_outputs)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.features(x).mean(dim=(2, 3)))

    class BasicBlock(nn.Module):
        def __init__(self, c_in: int, c_out: int, stride: int) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(c_out)
            self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(c_out)
            self.short = (nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))
                          if stride != 1 or c_in != c_out else nn.Identity())

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out = torch.relu(self.bn1(self.conv1(x)))
            return torch.relu(self.bn2(self.conv2(out)) + self.short(x))

    class SmallResNet(nn.Module):
        def __init__(self, in_channels: int = 1, n_outputs: int = 1, width: int = 16, blocks: int = 1) -> None:
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(in_channels, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width),
                                      nn.ReLU())
            stages, c = [], width
            for i, mult in enumerate((1, 2, 4)):
                for j in range(blocks):
                    stages.append(BasicBlock(c, width * mult, 2 if (i > 0 and j == 0) else 1))
                    c = width * mult
            self.stages = nn.Sequential(*stages)
            self.head = nn.Linear(c, n_outputs)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.stages(self.stem(x)).mean(dim=(2, 3)))

    _CLASSES.update(small_cnn=SmallCNN, small_resnet=SmallResNet)
    return _CLASSES


def build_architecture(arch: str, in_channels: int = 1, n_outputs: int = 1, width: int = 16, **kw):
    if arch not in ARCHITECTURES:
        raise ModelError(f"Unknown architecture '{arch}'; built-in ones are {', '.join(ARCHITECTURES)}.")
    return _arch_classes()[arch](in_channels=in_channels, n_outputs=n_outputs, width=width, **kw)


@dataclass
class ClassifierConfig:
    arch: str = "small_cnn"                 # or "torchscript"
    image_size: int = 32
    outputs: tuple[str, ...] = ("disease",)
    in_channels: int = 1
    width: int = 16
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        from fairdesk.core.data.schema import column_names
        from fairdesk.core.limits import check_number

        self.image_size = check_number(self.image_size, "--image-size", 8, 2048, whole=True,
                                       what="the side of the square input image in pixels")
        self.width = check_number(self.width, "--width", 1, 512, whole=True, what="the CNN's base channel width")
        self.in_channels = check_number(self.in_channels, "in_channels", 1, 4, whole=True,
                                        what="grey (1) or colour (3) input channels")
        self.outputs = column_names(self.outputs, "outputs")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["outputs"] = list(self.outputs)
        return d


class ImageClassifier:
    """A torch module plus what is needed to feed it: ``predict_proba(images) -> (n, n_outputs)`` in [0, 1]."""

    def __init__(self, module, config: ClassifierConfig) -> None:
        self.module = module
        self.config = config
        module.eval()

    @property
    def outputs(self) -> tuple[str, ...]:
        return tuple(self.config.outputs)

    def predict_proba(self, images: np.ndarray, batch_size: int = 256, progress: ProgressFn | None = None,
                      cancel: CancelToken | None = None) -> np.ndarray:
        import torch

        rep = Reporter(progress, cancel)
        x = _to_tensor(images, self.config)
        out = []
        self.module.eval()
        with torch.inference_mode():
            for start in range(0, len(x), batch_size):
                rep(start / max(len(x), 1), "classifier predictions")
                logits = self.module(x[start:start + batch_size])
                if logits.ndim == 1:
                    logits = logits[:, None]
                out.append(torch.sigmoid(logits.float()).numpy())
        res = np.concatenate(out) if out else np.zeros((0, len(self.outputs)))
        if res.shape[1] != len(self.outputs):
            raise ModelError(f"The model returns {res.shape[1]} outputs but {len(self.outputs)} names were given.")
        return res

    def __call__(self, images: np.ndarray) -> np.ndarray:
        return self.predict_proba(images)

    def save(self, folder: str | Path) -> Path:
        """``config.json`` + ``model.safetensors`` (built-in architectures only), each written atomically."""
        from safetensors.torch import save

        if self.config.arch not in ARCHITECTURES:
            raise ModelError("Only built-in architectures can be saved as a state dict; keep the TorchScript file.")
        from fairdesk.core.guard import owned_folder

        folder = Path(folder)
        state = {k: v.detach().cpu().contiguous() for k, v in self.module.state_dict().items()}
        with owned_folder(folder, "a FairDesk image classifier"):  # refuses a folder holding anything FairDesk did not write
            atomic.write_bytes(folder / "model.safetensors", save(state))
            atomic.write_text(folder / "config.json", json.dumps(self.config.to_dict(), indent=1))
        return folder


def _to_tensor(images: np.ndarray, config: ClassifierConfig):
    import torch

    arr = np.asarray(images, dtype=np.float32)
    if arr.ndim == 3:
        arr = arr[:, None]
    if arr.ndim != 4 or arr.shape[1] != config.in_channels:
        raise ModelError(f"Expected images shaped (n, H, W) or (n, {config.in_channels}, H, W); got {arr.shape}.")
    x = torch.from_numpy(np.ascontiguousarray(arr))
    if arr.shape[-1] != config.image_size or arr.shape[-2] != config.image_size:
        x = torch.nn.functional.interpolate(x, size=(config.image_size, config.image_size), mode="bilinear",
                                            align_corners=False)
    return x


def load_state_dict_file(path: str | Path) -> dict:
    """A state dict from ``.safetensors`` or a torch file, without unpickling arbitrary objects."""
    import torch

    path = Path(path)
    if not path.is_file():
        raise ModelError(f"Weights file '{path}' not found.")
    if path.suffix == ".safetensors":
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        try:
            return load_file(str(path))
        except (SafetensorError, OSError, ValueError, RuntimeError) as err:
            from fairdesk.core.data.loaders import is_pickle

            with open(path, "rb") as handle:
                head = handle.read(9)
            what = " (it looks like a Python pickle, which FairDesk never loads)" if is_pickle(head) else ""
            raise ModelError(f"'{path.name}' is not a readable safetensors file{what}: "
                             f"{str(err).splitlines()[0][:200]}. Save the weights with safetensors.") from None
    try:
        state = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as err:
        raise ModelError(f"'{path.name}' is not a plain weights file FairDesk can load safely "
                         f"(weights_only=True refused it: {type(err).__name__}). Save the model's state_dict() "
                         "or export it to TorchScript.") from None
    if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
        state = state["state_dict"]
    if not isinstance(state, dict):
        raise ModelError(f"'{path.name}' does not hold a state dict.")
    return state


def import_state_dict(path: str | Path, config: ClassifierConfig) -> ImageClassifier:
    try:
        module = build_architecture(config.arch, config.in_channels, len(config.outputs), config.width,
                                    **config.extra)
    except TypeError as err:  # an 'extra' setting the architecture does not take
        raise ModelError(f"Architecture '{config.arch}' does not take the settings {config.extra}: {err}.") \
            from None
    state = load_state_dict_file(path)
    state = {k[7:] if k.startswith("module.") else k: v for k, v in state.items()}
    try:
        module.load_state_dict(state, strict=True)
    except RuntimeError as err:
        first = str(err).splitlines()[0][:300]
        raise ModelError(f"The weights do not fit architecture '{config.arch}' with width {config.width} and "
                         f"{len(config.outputs)} output(s): {first}") from None
    return ImageClassifier(module, config)


def import_torchscript(path: str | Path, image_size: int, outputs: tuple[str, ...] = ("disease",),
                       in_channels: int = 1) -> ImageClassifier:
    import torch

    path = Path(path)
    if not path.is_file():
        raise ModelError(f"TorchScript file '{path}' not found.")
    try:
        module = torch.jit.load(str(path), map_location="cpu")
    except Exception as err:
        raise ModelError(f"'{path.name}' is not a TorchScript archive ({type(err).__name__}). Export the model "
                         "with torch.jit.script or torch.jit.trace and save it.") from None
    return ImageClassifier(module, ClassifierConfig("torchscript", image_size, tuple(outputs), in_channels))


def _read_config(cfg_file: Path) -> ClassifierConfig:
    """``config.json`` of a classifier folder, checked key by key (a ModelError names what is wrong)."""
    from dataclasses import fields

    where = f"{cfg_file.parent.name}/config.json"
    try:
        from fairdesk.core.jsonable import read_json_file
        cfg = read_json_file(cfg_file)
    except (OSError, ValueError) as err:
        raise ModelError(f"{where} is not valid JSON ({err}); FairDesk writes it when it saves a classifier.") \
            from None
    if not isinstance(cfg, dict):
        raise ModelError(f"{where} must hold a JSON object with the keys "
                         f"{', '.join(f.name for f in fields(ClassifierConfig))}.")
    known = {f.name for f in fields(ClassifierConfig)}
    unknown = [str(k) for k in cfg if k not in known]
    if unknown:  # a newer FairDesk's settings: read what this version knows, say what it ignored
        import warnings

        from fairdesk.core.jsonable import NewerKeysNote

        warnings.warn(f"Written by a newer FairDesk? {where} holds keys this version does not know, ignored: "
                      f"{', '.join(unknown[:6])}{f' and {len(unknown) - 6} more' if len(unknown) > 6 else ''}.",
                      NewerKeysNote, stacklevel=2)
        cfg = {k: v for k, v in cfg.items() if k in known}
    outputs = cfg.get("outputs", ("disease",))
    if isinstance(outputs, str) or not isinstance(outputs, (list, tuple)) or not outputs:
        raise ModelError(f"{where}: 'outputs' must be a list of output names, e.g. [\"disease\"].")
    cfg["outputs"] = tuple(str(o) for o in outputs)
    for key in ("image_size", "in_channels", "width"):
        if key in cfg and (not isinstance(cfg[key], int) or isinstance(cfg[key], bool) or cfg[key] < 1):
            raise ModelError(f"{where}: '{key}' must be a positive whole number, not {cfg[key]!r}.")
    if not isinstance(cfg.get("extra", {}), dict):
        raise ModelError(f"{where}: 'extra' must be a JSON object of architecture settings.")
    return ClassifierConfig(**cfg)


def load_classifier(path: str | Path, image_size: int | None = None,
                    outputs: tuple[str, ...] | None = None) -> ImageClassifier:
    """A classifier folder (config.json + model.safetensors) or a TorchScript file (.pt/.pth/.ts)."""
    path = Path(path)
    if path.is_dir():
        cfg_file = path / "config.json"
        if not cfg_file.is_file():
            raise ModelError(f"'{path}' has no config.json; it is not a FairDesk classifier folder.")
        return import_state_dict(path / "model.safetensors", _read_config(cfg_file))
    if image_size is None:
        raise ModelError("Give the input image size for a TorchScript classifier.")
    return import_torchscript(path, image_size, tuple(outputs or ("disease",)))


@dataclass
class TrainHistory:
    loss: list[float] = field(default_factory=list)
    val_auc: list[float] = field(default_factory=list)


def train_cnn(images: np.ndarray, labels: np.ndarray, config: ClassifierConfig | None = None, epochs: int = 5,
              batch_size: int = 64, lr: float = 3e-3, seed: int = 0, val: tuple | None = None,
              progress: ProgressFn | None = None, cancel: CancelToken | None = None
              ) -> tuple[ImageClassifier, TrainHistory]:
    """Train a built-in architecture on CPU with BCE (rows with a missing label are ignored for that output).

    Progress per batch (loss); cancel is checked every batch and raises :class:`Cancelled` (no model returned).
    ``val=(images, labels)`` records the mean validation AUROC after each epoch."""
    import torch

    config = config or ClassifierConfig()
    rep = Reporter(progress, cancel)
    y = np.asarray(labels, dtype=np.float32)
    if y.ndim == 1:
        y = y[:, None]
    if y.shape[1] != len(config.outputs):
        raise ModelError(f"{y.shape[1]} label column(s) for {len(config.outputs)} output name(s).")
    if len(y) != len(images) or len(y) < 2:
        raise ModelError("Need at least two images, one label row per image.")
    torch.manual_seed(seed)
    module = build_architecture(config.arch, config.in_channels, len(config.outputs), config.width, **config.extra)
    x = _to_tensor(images, config)
    yt = torch.from_numpy(y)
    opt = torch.optim.AdamW(module.parameters(), lr=lr, weight_decay=1e-4)
    gen = torch.Generator().manual_seed(seed)
    hist = TrainHistory()
    n_batches = -(-len(x) // batch_size)
    clf = ImageClassifier(module, config)
    for epoch in range(epochs):
        module.train()
        perm = torch.randperm(len(x), generator=gen)
        total = 0.0
        for b in range(n_batches):
            idx = perm[b * batch_size:(b + 1) * batch_size]
            target = yt[idx]
            mask = ~torch.isnan(target)
            logits = module(x[idx])
            loss = torch.nn.functional.binary_cross_entropy_with_logits(logits[mask], target[mask])
            opt.zero_grad()
            loss.backward()
            opt.step()
            value = loss.item()
            total += value
            rep((epoch + (b + 1) / n_batches) / epochs, f"epoch {epoch + 1}/{epochs} loss {value:.4f}")
        hist.loss.append(total / n_batches)
        if val is not None:
            from sklearn.metrics import roc_auc_score

            pv = clf.predict_proba(val[0])
            yv = np.asarray(val[1], float).reshape(len(pv), -1)
            aucs = [roc_auc_score(yv[:, j][~np.isnan(yv[:, j])], pv[:, j][~np.isnan(yv[:, j])])
                    for j in range(yv.shape[1]) if len(np.unique(yv[:, j][~np.isnan(yv[:, j])])) == 2]
            hist.val_auc.append(float(np.mean(aucs)) if aucs else float("nan"))
    module.eval()
    return clf, hist
