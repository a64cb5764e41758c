"""Counterfactual image generator: a conditional latent diffusion model built from diffusers parts
(METHODS §6).

* ``AutoencoderKL`` (grey images in [0, 1] ↔ a latent of ``latent_channels`` × H/2^(L−1) × W/2^(L−1)), trained first
  (L1 + small KL);
* a class-conditioned ``UNet2DModel`` (``num_class_embeds`` = number of attribute values + 1 "null" class for
  classifier-free guidance) on the scaled latents, trained with ``DDPMScheduler`` noise (ε-prediction);
* optionally (``mine_lambda`` > 0) the MINE disentangling map of 004 §3.3 (:mod:`.mine`), trained between the two
  phases on the scaled latents: the UNet then learns, inverts and denoises ``φ(z₀) = z₀ + λ·m(z₀)/‖m(z₀)‖`` instead
  of ``z₀`` (training, DDIM inversion and counterfactuals alike). The DECODER is applied to the diffusion's output
  as it comes, i.e. to a latent in φ's image, without undoing φ: this is the paper's pipeline (§3.2–3.3, Fig. 1:
  E → φ → diffusion under a → D on the generated latent); φ has no closed-form inverse, it moves each latent by
  exactly λ (per sample, ℓ2 over the whole scaled latent, whose elements have unit standard deviation) so the
  decoder sees latents within λ of those it was trained on (the paper's λ is 1e-3), and subtracting the original's
  perturbation instead would add back to the counterfactual the very direction m(z₀) that carried the attribute
  of the ORIGINAL image. The map's weights are saved with the generator (``mine/*.safetensors``);
* generation with ``DDIMScheduler`` (η = 0): a counterfactual do(A = a′) encodes x to z₀, DETERMINISTICALLY
  INVERTS z₀ under the observed a to z_T (DDIM inversion; the unit's "abduction"), then denoises z_T under a′ and
  decodes. ``strength`` < 1 is the partial-noise option (invert / denoise only the first ``strength`` share of the
  steps). All targets of a batch are denoised together from ONE inversion (batched across targets), and the null
  intervention a′ = a is just one more target.

Every denoising and inversion step runs through a step callback that reports progress and checks the cancel
token, so cancel stops within one step. Training reports the loss, can hand sample previews to a callback, writes
a first checkpoint after one minute of training, then every ``checkpoint_every`` steps, with ``save_pretrained``
(safetensors) into a temporary folder renamed into place (a cancelled or crashed run keeps its last complete
checkpoint) and resumes from one. Nothing is downloaded: models are built from
configs and loaded from local folders only.

Quality (METHODS §6, 004 App. I): :func:`composition` (L1 under the null intervention after 1 and 10 cycles),
:func:`reversibility` (L1 after a → a′ → a), :func:`effectiveness` (an attribute classifier's accuracy on the
counterfactuals w.r.t. a′) and :func:`frechet_distance` in the feature space of a LOCALLY trained extractor (PCA of
the real training images — not Inception FID, and named as such in results).

torch and diffusers are imported inside functions.
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from fairdesk.core import atomic
from fairdesk.core.errors import ModelError
from fairdesk.core.generation.train_state import flat_optimizer_state, load_flat_optimizer_state
from fairdesk.core.progress import CancelToken, ProgressFn, Reporter

META_FILE = "fairdesk_generator.json"
ATTRIBUTE_FILE = "attribute.json"   # which attribute column and groups the generator was trained on
MINE_DIR = "mine"                   # map.safetensors (m) and critic.safetensors (T) of the disentangling map


@dataclass
class GeneratorConfig:
    image_size: int = 32
    in_channels: int = 1
    n_classes: int = 2
    vae_channels: tuple[int, ...] = (16, 32)
    latent_channels: int = 4
    vae_layers: int = 1
    unet_channels: tuple[int, ...] = (32, 64)
    unet_layers: int = 1
    unet_attention: bool = False
    norm_groups: int = 8
    num_train_timesteps: int = 1000
    beta_schedule: str = "squaredcos_cap_v2"
    cond_drop: float = 0.1          # share of training steps with the null class (classifier-free guidance)
    kl_weight: float = 1e-4
    default_steps: int = 50         # DDIM steps for counterfactuals
    latent_scale: float = 1.0       # set after VAE training: 1 / std of the latents
    mine_lambda: float = 0.0        # > 0: the MINE disentangling map φ with this λ (004 §3.3; the paper's λ: 1e-3)
    mine_width: int = 16            # base width of the map m (a U-shaped CNN)
    mine_critic_width: int = 32     # base width of the statistics network T (only needed while training)

    def __post_init__(self) -> None:
        from fairdesk.core.limits import check_number

        self.image_size = check_number(self.image_size, "--image-size", 8, 512, whole=True,
                                       what="the side of the square images the generator makes, in pixels")
        self.default_steps = check_number(self.default_steps, "--steps", 1, 1000, whole=True,
                                          what="the DDIM steps of a counterfactual")
        for name in ("mine_width", "mine_critic_width"):
            setattr(self, name, check_number(getattr(self, name), name, 1, 512, whole=True,
                                             what="a network's base channel width"))

    @property
    def latent_size(self) -> int:
        return self.image_size // 2 ** (len(self.vae_channels) - 1)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["vae_channels"], d["unet_channels"] = list(self.vae_channels), list(self.unet_channels)
        return d

    @classmethod
    def from_dict(cls, d: dict, where: str = "the generator's settings") -> "GeneratorConfig":
        """The settings stored in ``d``: keys a newer FairDesk added are ignored with a note, a value of the wrong
        type or a missing key is a ValueError sentence (:func:`fairdesk.core.jsonable.config_from_dict`)."""
        from fairdesk.core.jsonable import config_from_dict

        return config_from_dict(cls, d, where)


#: Named sizes offered by the CLI and the GUI: (autoencoder channels, UNet channels). "tiny" trains in minutes on a
#: CPU at 32×32; "base" is meant for a GPU.
GENERATOR_SIZES: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {
    "tiny": ((8, 16, 16), (32, 64)), "small": ((16, 32, 32), (64, 128)),
    "base": ((32, 64, 128, 128), (128, 256, 256))}


def config_for_size(size: str, image_size: int, default_steps: int = 50, n_classes: int = 2) -> GeneratorConfig:
    """The :class:`GeneratorConfig` of a named size (see :data:`GENERATOR_SIZES`)."""
    if size not in GENERATOR_SIZES:
        raise ModelError(f"Unknown generator size '{size}'; choose one of {', '.join(GENERATOR_SIZES)}.")
    vae_ch, unet_ch = GENERATOR_SIZES[size]
    down = 2 ** (len(vae_ch) - 1)
    if image_size < 8 or image_size % down:
        raise ModelError(f"The image size must be a multiple of {down} (and at least 8) for the '{size}' generator; "
                         f"got {image_size}.")
    return GeneratorConfig(image_size=image_size, n_classes=n_classes, vae_channels=vae_ch, unet_channels=unet_ch,
                           default_steps=default_steps)


def _build(config: GeneratorConfig):
    from diffusers import AutoencoderKL, UNet2DModel

    nv = len(config.vae_channels)
    vae = AutoencoderKL(in_channels=config.in_channels, out_channels=config.in_channels,
                        down_block_types=("DownEncoderBlock2D",) * nv, up_block_types=("UpDecoderBlock2D",) * nv,
                        block_out_channels=tuple(config.vae_channels), layers_per_block=config.vae_layers,
                        latent_channels=config.latent_channels, norm_num_groups=config.norm_groups,
                        sample_size=config.image_size, mid_block_add_attention=False)
    nu = len(config.unet_channels)
    unet = UNet2DModel(sample_size=config.latent_size, in_channels=config.latent_channels,
                       out_channels=config.latent_channels, layers_per_block=config.unet_layers,
                       block_out_channels=tuple(config.unet_channels), down_block_types=("DownBlock2D",) * nu,
                       up_block_types=("UpBlock2D",) * nu, norm_num_groups=config.norm_groups,
                       add_attention=config.unet_attention, num_class_embeds=config.n_classes + 1)
    return vae, unet


def _schedulers(config: GeneratorConfig):
    from diffusers import DDIMScheduler, DDPMScheduler

    kw = dict(num_train_timesteps=config.num_train_timesteps, beta_schedule=config.beta_schedule,
              clip_sample=False)
    return DDPMScheduler(**kw), DDIMScheduler(**kw, set_alpha_to_one=True, steps_offset=0)


class CounterfactualGenerator:
    """A trained (or loaded) generator. ``counterfactuals(...)`` is the main entry point."""

    def __init__(self, vae, unet, config: GeneratorConfig, meta: dict | None = None) -> None:
        self.vae, self.unet, self.config = vae, unet, config
        self.meta = dict(meta or {})
        self.vae.eval()
        self.unet.eval()
        self.ddpm, self.ddim = _schedulers(config)
        self.mine_map = None      # the trained map m (None: no map, or not trained yet)
        self.mine_critic = None   # its statistics network T (kept for resuming and for diagnostics)

    @property
    def uses_map(self) -> bool:
        return self.mine_map is not None and self.config.mine_lambda > 0

    # ---------------------------------------------------------------- encode / decode
    def _to_tensor(self, images: np.ndarray):
        import torch

        x = np.asarray(images, dtype=np.float32)
        if x.ndim == 3:
            x = x[:, None]
        if x.shape[1:] != (self.config.in_channels, self.config.image_size, self.config.image_size):
            raise ModelError(f"The generator expects {self.config.image_size}×{self.config.image_size} images with "
                             f"{self.config.in_channels} channel(s); got {x.shape[1:]}.")
        return torch.from_numpy(x) * 2.0 - 1.0

    def encode(self, images: np.ndarray, batch_size: int = 256):
        import torch

        x = self._to_tensor(images)
        with torch.inference_mode():
            return torch.cat([self.vae.encode(x[i:i + batch_size]).latent_dist.mean
                              for i in range(0, len(x), batch_size)]) * self.config.latent_scale

    def disentangle(self, z0):
        """``φ(z₀)`` when the generator has a MINE map, else ``z₀`` unchanged (scaled latents)."""
        if not self.uses_map:
            return z0
        import torch

        from fairdesk.core.generation.mine import phi

        self.mine_map.eval()
        with torch.inference_mode():
            return phi(self.mine_map, z0, self.config.mine_lambda)

    def latent(self, images: np.ndarray, batch_size: int = 256):
        """The latent the diffusion model works on: ``φ(E(x))`` (or ``E(x)`` without a map)."""
        return self.disentangle(self.encode(images, batch_size))

    def decode(self, z, batch_size: int = 256) -> np.ndarray:
        import torch

        with torch.inference_mode():
            out = torch.cat([self.vae.decode(z[i:i + batch_size] / self.config.latent_scale).sample
                             for i in range(0, len(z), batch_size)])
        out = ((out + 1.0) / 2.0).clamp(0.0, 1.0).numpy()
        return out[:, 0] if self.config.in_channels == 1 else out

    # ---------------------------------------------------------------- DDIM
    def _eps(self, z, t: int, labels, guidance: float):
        import torch

        tt = torch.full((len(z),), int(t), dtype=torch.long)
        if guidance == 1.0:
            return self.unet(z, tt, class_labels=labels).sample
        null = torch.full_like(labels, self.config.n_classes)
        both = self.unet(torch.cat([z, z]), torch.cat([tt, tt]), class_labels=torch.cat([labels, null])).sample
        cond, unc = both.chunk(2)
        return unc + guidance * (cond - unc)

    def _timesteps(self, steps: int, strength: float) -> list[int]:
        self.ddim.set_timesteps(int(steps))
        ts = [int(t) for t in self.ddim.timesteps]  # descending
        k = max(1, int(round(strength * len(ts))))
        return ts[len(ts) - k:]

    def invert(self, z0, labels, steps: int, strength: float = 1.0, guidance: float = 1.0, step_callback=None):
        """Deterministic DDIM inversion of z₀ under ``labels`` up to the ``strength`` share of the schedule."""
        import torch

        ac = self.ddim.alphas_cumprod
        ts = self._timesteps(steps, strength)[::-1]  # ascending; mirrors denoise() step by step
        z = z0
        a_prev = torch.tensor(1.0)  # z0 is the clean latent (the scheduler's final alpha is 1)
        with torch.inference_mode():
            for i, t in enumerate(ts):
                # eps at the target timestep: the same network call the matching denoising step makes
                eps = self._eps(z, t, labels, guidance)
                x0 = (z - (1 - a_prev).sqrt() * eps) / a_prev.sqrt()
                z = ac[t].sqrt() * x0 + (1 - ac[t]).sqrt() * eps
                a_prev = ac[t]
                if step_callback is not None:
                    step_callback(i, len(ts), "inversion")
        return z, ts[-1]

    def denoise(self, zt, labels, steps: int, strength: float = 1.0, guidance: float = 1.0, step_callback=None):
        """DDIM (η = 0) denoising of z_t under ``labels`` with diffusers' DDIMScheduler."""
        import torch

        ts = self._timesteps(steps, strength)
        z = zt
        with torch.inference_mode():
            for i, t in enumerate(ts):
                eps = self._eps(z, t, labels, guidance)
                z = self.ddim.step(eps, t, z, eta=0.0).prev_sample
                if step_callback is not None:
                    step_callback(i, len(ts), "denoising")
        return z

    def counterfactuals(self, images: np.ndarray, a, targets=None, steps: int | None = None,
                        strength: float = 1.0, guidance: float = 1.0, batch_size: int = 128,
                        batched_targets: bool = True, return_latent: bool = False,
                        progress: ProgressFn | None = None, cancel: CancelToken | None = None) -> dict:
        """Counterfactual images per target value: ``{a′: (n, H, W)}``.

        ``targets`` default: every attribute value, so the dict holds the null intervention (a′ = a, a
        reconstruction through the same path) and the counterfactuals. ``batched_targets=False`` denoises each
        target separately (for benchmarks). With ``return_latent`` the dict also holds ``"z_T"`` (n, …): the
        inverted latent, the unit's representation for the invariance tests. Cancel is checked at every step.
        """
        import torch

        rep = Reporter(progress, cancel)
        steps = int(steps or self.config.default_steps)
        a = np.asarray(a).astype(int).reshape(-1)
        if len(a) != len(images):
            raise ModelError("One attribute value per image is needed.")
        if a.min() < 0 or a.max() >= self.config.n_classes:
            raise ModelError(f"Attribute values must be 0..{self.config.n_classes - 1}.")
        targets = list(range(self.config.n_classes)) if targets is None else [int(t) for t in targets]
        n = len(images)
        out = {t: [] for t in targets}
        latents = []
        n_batches = -(-n // batch_size)
        per_batch = 1 + (1 if batched_targets else len(targets))  # inversion + denoising passes
        total = max(n_batches * per_batch * steps, 1)
        done = [0]

        def step_cb(i, k, what):
            done[0] += max(1, round(steps / k)) if k < steps else 1
            rep(min(done[0] / total, 1.0), f"counterfactuals: {what} step {i + 1}/{k}")
            rep.check()  # a cancel requested from the progress callback itself stops before the next step

        for b in range(n_batches):
            sl = slice(b * batch_size, (b + 1) * batch_size)
            rep.check()
            z0 = self.latent(images[sl])
            lab = torch.from_numpy(a[sl]).long()
            zt, _ = self.invert(z0, lab, steps, strength, guidance, step_cb)
            if return_latent:
                latents.append(zt.reshape(len(zt), -1).numpy())
            if batched_targets:
                m = len(zt)
                zz = zt.repeat(len(targets), 1, 1, 1)
                labs = torch.cat([torch.full((m,), t, dtype=torch.long) for t in targets])
                res = self.denoise(zz, labs, steps, strength, guidance, step_cb)
                imgs = self.decode(res)
                for j, t in enumerate(targets):
                    out[t].append(imgs[j * m:(j + 1) * m])
            else:
                for t in targets:
                    labs = torch.full((len(zt),), t, dtype=torch.long)
                    out[t].append(self.decode(self.denoise(zt, labs, steps, strength, guidance, step_cb)))
        result = {t: np.concatenate(v) for t, v in out.items()}
        if return_latent:
            result["z_T"] = np.concatenate(latents)
        rep(1.0, "counterfactuals done")
        return result

    def sample(self, labels, steps: int = 20, seed: int = 0, guidance: float = 1.0) -> np.ndarray:
        """Unconditional draws per class label (training previews)."""
        import torch

        g = torch.Generator().manual_seed(seed)
        c, s = self.config.latent_channels, self.config.latent_size
        z = torch.randn((len(labels), c, s, s), generator=g)
        lab = torch.as_tensor(np.asarray(labels), dtype=torch.long)
        return self.decode(self.denoise(z, lab, steps, 1.0, guidance))

    # ---------------------------------------------------------------- save / load
    def save(self, folder: str | Path, extra_state: dict | None = None) -> Path:
        """``vae/`` and ``unet/`` via save_pretrained (safetensors) + ``fairdesk_generator.json``, written into a
        temporary sibling folder and renamed into place, so an interrupted save never damages the previous one
        (:func:`fairdesk.core.guard.owned_folder`): a folder holding anything FairDesk did not write is refused, and
        the folder replaced loses only the files FairDesk recorded writing there."""
        from fairdesk.core.guard import owned_folder

        folder = Path(folder)
        with owned_folder(folder, "a FairDesk generator", replace=True) as tmp:  # only FairDesk's files replaced
            self.vae.save_pretrained(tmp / "vae", safe_serialization=True)
            self.unet.save_pretrained(tmp / "unet", safe_serialization=True)
            if self.mine_map is not None:
                from safetensors.torch import save_file

                (tmp / MINE_DIR).mkdir()
                for name, net in (("map", self.mine_map), ("critic", self.mine_critic)):
                    if net is not None:
                        save_file({k: v.detach().contiguous() for k, v in net.state_dict().items()},
                                  str(tmp / MINE_DIR / f"{name}.safetensors"))
            if extra_state:
                from safetensors.torch import save_file

                save_file({k: v.detach().contiguous() for k, v in extra_state.items()}, str(tmp / "train_state.safetensors"))
            atomic.write_text(tmp / META_FILE, json.dumps({"config": self.config.to_dict(), **self.meta}, indent=1))
        return folder


def load_generator(folder: str | Path) -> CounterfactualGenerator:
    """Load a generator folder written by :meth:`CounterfactualGenerator.save` (local files only)."""
    from diffusers import AutoencoderKL, UNet2DModel

    folder = Path(folder)
    meta_file = folder / META_FILE
    if not meta_file.is_file():
        raise ModelError(f"'{folder}' is not a FairDesk generator folder (no {META_FILE}).")
    meta = _read_meta(meta_file)
    config = GeneratorConfig.from_dict(meta.pop("config"))
    # Each part must name the one diffusers class FairDesk builds: a model class's from_pretrained has no
    # remote-code path (only pipelines and AutoModel do), local files only, safetensors only (no pickle).
    for part, cls in (("vae", AutoencoderKL), ("unet", UNet2DModel)):
        cfg_file = folder / part / "config.json"
        try:
            from fairdesk.core.jsonable import read_json_file
            class_name = read_json_file(cfg_file).get("_class_name")
        except (OSError, UnicodeDecodeError, ValueError, AttributeError):
            class_name = None
        if class_name != cls.__name__:
            raise ModelError(f"{cfg_file} does not describe a {cls.__name__} (FairDesk's generator part), so "
                             f"'{folder}' is not a generator FairDesk wrote; train or copy the generator again.")
    try:
        vae = AutoencoderKL.from_pretrained(str(folder / "vae"), local_files_only=True, trust_remote_code=False,
                                            use_safetensors=True)
        unet = UNet2DModel.from_pretrained(str(folder / "unet"), local_files_only=True, trust_remote_code=False,
                                           use_safetensors=True)
    except Exception as err:
        raise ModelError(f"The generator in '{folder}' cannot be loaded: {type(err).__name__}: {err}") from None
    gen = CounterfactualGenerator(vae, unet, config, meta)
    if config.mine_lambda > 0 and (folder / MINE_DIR / "map.safetensors").is_file():
        gen.mine_map, gen.mine_critic = _load_mine(folder, config)
    attr_file = folder / ATTRIBUTE_FILE
    if attr_file.is_file():
        try:
            from fairdesk.core.jsonable import read_json_file
            attr = read_json_file(attr_file)
            meta["attribute"] = {"column": attr.get("attribute"), "values": list(attr.get("values") or [])}
        except (ValueError, AttributeError):
            raise ModelError(f"'{attr_file}' is damaged; write it again or delete it.") from None
    gen.meta = meta
    return gen


def _mine_diagnostics(gen: "CounterfactualGenerator", z0, a, schedule, rep, fraction: float) -> dict:
    """What the map achieved, measured honestly: a FRESH statistics network per latent, trained on one half of
    the training latents and evaluated on the other (:func:`.mine.estimate_mi`), for z₀ and for φ(z₀)."""
    from fairdesk.core.generation.mine import estimate_mi

    out = {"lambda": gen.config.mine_lambda,
           "estimator": "MINE Donsker-Varadhan bound, fresh statistics network, held-out half of the training "
                        "latents (nats; 0 = nothing detectable)", "n_latents": int(len(z0))}
    for key, z in (("mi_z0", z0), ("mi_phi_z0", gen.disentangle(z0))):
        rep(fraction, f"disentangling: measuring {'I(z; a)' if key == 'mi_z0' else 'I(φ(z); a)'}")
        out[key] = estimate_mi(z.clone(), a, gen.config.n_classes, steps=schedule.mine_eval_steps,
                               batch_size=128, seed=schedule.seed, check=rep.check)
    return out


def _mine_nets(config: GeneratorConfig):
    from fairdesk.core.generation.mine import build_critic, build_map

    return (build_map(config.latent_channels, config.latent_size, config.mine_width),
            build_critic(config.latent_channels, config.latent_size, config.n_classes, config.mine_critic_width))


def _load_mine(folder: Path, config: GeneratorConfig):
    from safetensors.torch import load_file

    map_net, critic = _mine_nets(config)
    try:
        map_net.load_state_dict(load_file(str(folder / MINE_DIR / "map.safetensors")))
        if (folder / MINE_DIR / "critic.safetensors").is_file():
            critic.load_state_dict(load_file(str(folder / MINE_DIR / "critic.safetensors")))
        else:
            critic = None
    except Exception as err:
        raise ModelError(f"The disentangling map in '{folder / MINE_DIR}' cannot be loaded: "
                         f"{type(err).__name__}: {err}") from None
    map_net.eval()
    if critic is not None:
        critic.eval()
    return map_net, critic


# ==============================================================================================================
# Training


@dataclass
class TrainSchedule:
    vae_steps: int = 400
    unet_steps: int = 1500
    batch_size: int = 64
    vae_lr: float = 2e-3
    unet_lr: float = 2e-3
    checkpoint_every: int = 250
    # The first checkpoint of a run comes early: after the first step that ends this many seconds into the run
    # (or at ``checkpoint_every`` steps if that is sooner), then every ``checkpoint_every`` steps. On a CPU a
    # "small" generator takes seconds per step, so 250 steps are many minutes a cancel or crash would lose.
    first_checkpoint_seconds: float = 60.0
    preview_every: int = 0           # 0: no previews
    seed: int = 0
    # MINE disentangling map (only when the config's mine_lambda > 0), between the two phases. One step =
    # ``mine_critic_iters`` updates of T then one of m (004 App. H.2: 5 and 1; Adam 1e-4, weight decay 1e-5).
    mine_steps: int = 200
    mine_lr: float = 1e-4
    mine_critic_iters: int = 5
    mine_eval_steps: int = 200       # after the phase: held-out MINE estimates of I(z₀; a) and I(φ(z₀); a) (0: skip)


@dataclass
class TrainResult:
    generator: CounterfactualGenerator
    vae_loss: list[float] = field(default_factory=list)
    unet_loss: list[float] = field(default_factory=list)
    checkpoints: list[int] = field(default_factory=list)   # global steps at which a checkpoint was written
    mine_dv: list[float] = field(default_factory=list)     # DV estimate of I(φ(z₀); a) per MINE step (training T)


def train_generator(images: np.ndarray, a, config: GeneratorConfig | None = None,
                    schedule: TrainSchedule | None = None, out_dir: str | Path | None = None, resume: bool = False,
                    preview=None, metrics=None, attribute: dict | None = None, progress: ProgressFn | None = None,
                    cancel: CancelToken | None = None) -> TrainResult:
    """Train the VAE, then the class-conditioned latent UNet, on CPU or wherever torch runs.

    ``out_dir``: a first checkpoint after ``schedule.first_checkpoint_seconds`` (default 60 s) of training, then
    every ``schedule.checkpoint_every`` steps and at the end (a cancelled or crashed run keeps the last one; 0: only
    at the end of each phase); ``resume=True`` continues from the checkpoint in ``out_dir`` (weights, Adam moments, step
    counter, loss history). ``preview(step, images, labels)`` receives sample images every
    ``schedule.preview_every`` UNet steps. ``metrics(dict)`` is called after every step with ``phase``
    ("autoencoder" / "diffusion"), ``step`` (global), ``phase_step``, ``loss`` and ``lr`` (for loss curves; it runs
    on the training thread). ``attribute`` = ``{"column", "values"}`` is stored with every checkpoint (the audit
    checks that it codes the attribute the same way). Progress reports the loss; cancel is checked every step.

    With ``config.mine_lambda`` > 0 a third phase sits between the two: ``schedule.mine_steps`` steps of the MINE
    disentangling map (:mod:`.mine`) on the scaled latents (metrics phase "disentangling", ``loss`` = the DV estimate
    of I(φ(z₀); a) under the current T); the UNet is then trained on φ(z₀). Global steps count all three phases.
    """
    import torch

    rep = Reporter(progress, cancel)
    schedule = schedule or TrainSchedule()
    a = np.asarray(a).astype(int).reshape(-1)
    if len(a) != len(images) or len(a) < 2:
        raise ModelError("Need at least two images and one attribute value per image.")
    out_dir = Path(out_dir) if out_dir is not None else None
    meta: dict = {"step": 0, "vae_loss": [], "unet_loss": [], "checkpoints": [], "mine_dv": []}
    opt_state = None
    opt_phase = None
    if resume:
        if out_dir is None or not (out_dir / META_FILE).is_file():
            raise ModelError("Nothing to resume: the output folder has no generator checkpoint.")
        gen = load_generator(out_dir)
        config = gen.config
        meta.update({k: gen.meta[k] for k in meta if k in gen.meta})
        for key in ("attribute", "mine"):
            if gen.meta.get(key):
                meta[key] = gen.meta[key]
        vae, unet = gen.vae, gen.unet
        mine_map, mine_critic = gen.mine_map, gen.mine_critic
        opt_phase = gen.meta.get("optimizer_phase")
        if (out_dir / "train_state.safetensors").is_file():
            from safetensors.torch import load_file

            opt_state = load_file(str(out_dir / "train_state.safetensors"))
    else:
        config = config or GeneratorConfig(image_size=int(np.asarray(images).shape[-1]))
        if a.max() >= config.n_classes:
            raise ModelError(f"Attribute values must be 0..{config.n_classes - 1}.")
        if config.mine_lambda < 0 or not math.isfinite(config.mine_lambda):
            raise ModelError(f"The disentangling map's λ must be ≥ 0 (0: no map); got {config.mine_lambda}.")
        torch.manual_seed(schedule.seed)
        vae, unet = _build(config)
        mine_map = mine_critic = None
    if attribute is not None:
        meta["attribute"] = {"column": attribute.get("column"), "values": list(attribute.get("values") or [])}
    gen = CounterfactualGenerator(vae, unet, config, meta)
    gen.mine_map, gen.mine_critic = mine_map, mine_critic
    x_all = gen._to_tensor(images)
    lab_all = torch.from_numpy(a).long()
    g = torch.Generator().manual_seed(schedule.seed + 1000 * meta["step"])
    n_mine = int(schedule.mine_steps) if config.mine_lambda > 0 else 0
    unet_start = schedule.vae_steps + n_mine
    total = unet_start + schedule.unet_steps
    res = TrainResult(gen, list(meta["vae_loss"]), list(meta["unet_loss"]), list(meta["checkpoints"]),
                      list(meta["mine_dv"]))

    run_started = time.monotonic()
    written = []  # checkpoints written by this run (the early first one is due until there is one)

    def due(step: int) -> bool:
        """A periodic checkpoint after this step: every ``checkpoint_every`` steps, and the first one of the run
        once ``first_checkpoint_seconds`` have passed."""
        if not schedule.checkpoint_every or out_dir is None:
            return False
        return step % schedule.checkpoint_every == 0 or (
            not written and time.monotonic() - run_started >= schedule.first_checkpoint_seconds)

    def checkpoint(step: int, optimizer, phase: str) -> None:
        if out_dir is None:
            return
        written.append(step)
        gen.meta.update(step=step, vae_loss=res.vae_loss, unet_loss=res.unet_loss, mine_dv=res.mine_dv,
                        checkpoints=res.checkpoints + [step], optimizer_phase=phase, schedule=asdict(schedule))
        gen.save(out_dir, optimizer.state() if phase == "mine" else flat_optimizer_state(optimizer))
        res.checkpoints.append(step)

    def batch():
        idx = torch.randint(0, len(x_all), (min(schedule.batch_size, len(x_all)),), generator=g)
        return x_all[idx], lab_all[idx]

    step = meta["step"]
    # ---- phase 1: VAE
    if step < schedule.vae_steps:
        opt = torch.optim.AdamW(vae.parameters(), lr=schedule.vae_lr, weight_decay=0.0)
        if opt_state is not None and opt_phase == "vae":
            load_flat_optimizer_state(opt, opt_state)
        vae.train()
        while step < schedule.vae_steps:
            rep.check()
            x, _ = batch()
            post = vae.encode(x).latent_dist
            rec = vae.decode(post.sample(generator=g)).sample
            loss = (rec - x).abs().mean() + config.kl_weight * post.kl().mean() / x[0].numel()
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            res.vae_loss.append(loss.item())
            if metrics is not None:
                metrics({"phase": "autoencoder", "step": step, "phase_step": step, "loss": res.vae_loss[-1],
                         "lr": float(opt.param_groups[0]["lr"])})
            rep(step / total, f"autoencoder step {step}/{schedule.vae_steps} loss {loss.item():.4f}")
            if step == schedule.vae_steps:
                vae.eval()
                with torch.inference_mode():
                    z = torch.cat([vae.encode(x_all[i:i + 256]).latent_dist.mean for i in range(0, len(x_all), 256)])
                config.latent_scale = float(1.0 / z.std().clamp_min(1e-6))
                checkpoint(step, opt, "vae")
            elif due(step):
                checkpoint(step, opt, "vae")
        opt_state = None
    vae.eval()
    for p in vae.parameters():
        p.requires_grad_(False)
    z_all = None
    if step < total:
        with torch.inference_mode():
            z_all = torch.cat([vae.encode(x_all[i:i + 256]).latent_dist.mean
                               for i in range(0, len(x_all), 256)]) * config.latent_scale
    # ---- phase 2 (optional): the MINE disentangling map φ on the scaled latents
    if step < unet_start:
        from fairdesk.core.generation.mine import MineTrainer, class_prior

        if gen.mine_map is None or gen.mine_critic is None or opt_phase != "mine":
            torch.manual_seed(schedule.seed + 7)
            gen.mine_map, gen.mine_critic = _mine_nets(config)
            opt_state = None
        trainer = MineTrainer(gen.mine_map, gen.mine_critic, config.mine_lambda, class_prior(a, config.n_classes),
                              lr=schedule.mine_lr, critic_iters=schedule.mine_critic_iters)
        if opt_state is not None:
            trainer.load_state(opt_state)
        z_mine = z_all.clone()  # out of inference mode: the map's gradient flows through φ(z)

        def mine_batch():
            idx = torch.randint(0, len(z_mine), (min(schedule.batch_size, len(z_mine)),), generator=g)
            return z_mine[idx], lab_all[idx]
        while step < unet_start:
            rep.check()
            dv = trainer.step(mine_batch)
            step += 1
            res.mine_dv.append(dv)
            k = step - schedule.vae_steps
            if metrics is not None:
                metrics({"phase": "disentangling", "step": step, "phase_step": k, "loss": dv,
                         "lr": float(trainer.opt_map.param_groups[0]["lr"])})
            rep(step / total, f"disentangling step {k}/{n_mine} DV estimate of I(φ(z); a) {dv:.4f}")
            if step == unet_start and schedule.mine_eval_steps:
                gen.meta["mine"] = _mine_diagnostics(gen, z_all, a, schedule, rep, step / total)
            if step == unet_start or due(step):
                checkpoint(step, trainer, "mine")
        opt_state = None
    # ---- phase 3: latent UNet (DDPM ε-prediction, class dropout for classifier-free guidance) on φ(z₀)
    if step < total:
        z_all = gen.disentangle(z_all)
        opt = torch.optim.AdamW(unet.parameters(), lr=schedule.unet_lr, weight_decay=0.0)
        if opt_state is not None and opt_phase == "unet":
            load_flat_optimizer_state(opt, opt_state)
        n_unet = schedule.unet_steps
        start = step  # cosine learning-rate decay over the UNet phase, continued on resume
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: 0.5 * (1 + math.cos(math.pi * min((s + start - unet_start) / max(n_unet, 1), 1))))
        unet.train()
        while step < total:
            rep.check()
            idx = torch.randint(0, len(z_all), (min(schedule.batch_size, len(z_all)),), generator=g)
            z0, lab = z_all[idx], lab_all[idx].clone()
            drop = torch.rand(len(lab), generator=g) < config.cond_drop
            lab[drop] = config.n_classes
            noise = torch.randn(z0.shape, generator=g)
            t = torch.randint(0, config.num_train_timesteps, (len(z0),), generator=g)
            zt = gen.ddpm.add_noise(z0, noise, t)
            loss = torch.nn.functional.mse_loss(unet(zt, t, class_labels=lab).sample, noise)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(unet.parameters(), 1.0)
            opt.step()
            sched.step()
            step += 1
            res.unet_loss.append(loss.item())
            if metrics is not None:
                metrics({"phase": "diffusion", "step": step, "phase_step": step - unet_start,
                         "loss": res.unet_loss[-1], "lr": float(opt.param_groups[0]["lr"])})
            rep(step / total, f"diffusion step {step - unet_start}/{n_unet} loss {loss.item():.4f}")
            if preview is not None and schedule.preview_every and (step - unet_start) % \
                    schedule.preview_every == 0:
                unet.eval()
                labels = np.arange(config.n_classes).repeat(2)
                preview(step, gen.sample(labels, steps=10, seed=step), labels)
                unet.train()
            if step == total or due(step):
                unet.eval()
                checkpoint(step, opt, "unet")
                unet.train()
    unet.eval()
    for p in vae.parameters():
        p.requires_grad_(True)
    gen.meta.update(step=step, vae_loss=res.vae_loss, unet_loss=res.unet_loss, mine_dv=res.mine_dv,
                    checkpoints=res.checkpoints)
    return res


# ==============================================================================================================
# Quality (004 App. I)


def composition(gen: CounterfactualGenerator, images: np.ndarray, a, cycles=(1, 10), steps: int | None = None,
                **kw) -> dict:
    """Mean L1 (pixels in [0, 1]) between x and its null-intervention reconstruction (a′ = a) after k cycles."""
    a = np.asarray(a).astype(int)
    images = np.asarray(images, np.float32)
    out, x, done = {}, images.copy(), 0
    for k in sorted(cycles):
        while done < k:
            nxt = np.empty_like(x)
            for v in np.unique(a):
                sel = a == v
                nxt[sel] = gen.counterfactuals(x[sel], a[sel], targets=[int(v)], steps=steps, **kw)[int(v)]
            x = nxt
            done += 1
        out[f"l1_{k}"] = float(np.abs(x - images).mean())
    return out


def _pick(cfs: dict, targets) -> np.ndarray:
    targets = np.asarray(targets).astype(int)
    return np.stack([cfs[int(t)][i] for i, t in enumerate(targets)])


def reversibility(gen: CounterfactualGenerator, images: np.ndarray, a, steps: int | None = None, **kw) -> float:
    """Mean L1 between x and the result of a → a′ → a (binary a: a′ = 1 − a)."""
    a = np.asarray(a).astype(int)
    there = _pick(gen.counterfactuals(images, a, targets=None, steps=steps, **kw), 1 - a)
    back = _pick(gen.counterfactuals(there, 1 - a, targets=None, steps=steps, **kw), a)
    return float(np.abs(back - images).mean())


def effectiveness(attribute_classifier, counterfactual_images: np.ndarray, targets) -> float:
    """Accuracy of an attribute classifier (images → P(A = 1)) on the counterfactuals w.r.t. the target a′."""
    p = np.asarray(attribute_classifier(counterfactual_images)).reshape(-1)
    return float(np.mean((p > 0.5).astype(int) == np.asarray(targets).astype(int)))


class PCAFeatures:
    """The locally trained feature extractor for the Fréchet distance: PCA of the real training images."""

    name = "PCA feature extractor fitted on the real training images (not Inception; no FID weights offline)"

    def __init__(self, images: np.ndarray, n_components: int = 32, seed: int = 0) -> None:
        x = np.asarray(images, np.float64).reshape(len(images), -1)
        self.mean = x.mean(axis=0)
        _, _, vt = np.linalg.svd(x - self.mean, full_matrices=False)
        self.components = vt[:n_components]

    def __call__(self, images: np.ndarray) -> np.ndarray:
        return (np.asarray(images, np.float64).reshape(len(images), -1) - self.mean) @ self.components.T


def frechet_distance(features, real: np.ndarray, fake: np.ndarray) -> dict:
    """Fréchet distance between Gaussians fitted to the features of real and generated images."""
    from scipy import linalg

    f1, f2 = features(real), features(fake)
    mu1, mu2 = f1.mean(0), f2.mean(0)
    s1, s2 = np.cov(f1, rowvar=False), np.cov(f2, rowvar=False)
    covmean = linalg.sqrtm(s1 @ s2)
    covmean = np.real(covmean)
    d = float(np.sum((mu1 - mu2) ** 2) + np.trace(s1 + s2 - 2 * covmean))
    return {"frechet_distance": max(d, 0.0), "feature_extractor": getattr(features, "name", repr(features))}


def _read_meta(meta_file: Path) -> dict:
    """The generator's metadata file, checked: damaged or foreign content is a ModelError sentence."""
    try:
        from fairdesk.core.jsonable import read_json_file
        meta = read_json_file(meta_file)
        if not isinstance(meta, dict) or not isinstance(meta.get("config"), dict):
            raise ValueError("no 'config' object")
        meta["config"] = GeneratorConfig.from_dict(meta["config"], f"{meta_file.name}: 'config'").to_dict()
    except (UnicodeDecodeError, ValueError, TypeError, KeyError) as err:
        why = "it is not text" if isinstance(err, UnicodeDecodeError) else \
            f"{type(err).__name__}: {(str(err).splitlines() or [''])[0][:160]}"
        raise ModelError(f"{meta_file.parent.name}/{meta_file.name} is damaged or not a FairDesk generator file "
                         f"({why}); choose the folder FairDesk wrote when it trained the generator.") from None
    return meta
