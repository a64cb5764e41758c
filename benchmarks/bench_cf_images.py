"""Benchmark of counterfactual image generation on CPU (issue 4).

``python -m benchmarks.bench_cf_images [--quick] [--n 16] [--steps 50] [--threads 1] [--json OUT]``

For 64×64 and 128×128 grey images and the default DDIM step count, a generator of the CLI's "tiny" size (VAE
channels 8-16-16 → latent 4 × H/4 × W/4, UNet 32-64; untrained weights: throughput does not depend on training)
makes, for every image, its counterfactual and its null-intervention reconstruction (2 images per input; the
audit needs both). Lines:

* ``fairdesk batched``   — ``CounterfactualGenerator.counterfactuals``: one DDIM inversion, both targets denoised
  in one batch, progress + cancel checked every step;
* ``fairdesk one-by-one`` — one full call per target (encode, invert, denoise, decode for a′ = 0, then again for
  a′ = 1): what generating the targets one by one costs; batching shares the inversion and the encoding;
* ``plain loop``         — the same work written as a bare diffusers loop (encode, the same inversion arithmetic,
  ``for t in DDIMScheduler.timesteps: unet(...); scheduler.step(...)``, decode) with no callbacks: the floor;
* each with oneDNN (``torch.backends.mkldnn.enabled``) on and off.

Reported: counterfactual images per second (2 per input), the FairDesk/plain ratio (overhead) and the
batched/one-by-one speed-up. Every timing is the best of ``--repeat`` rounds after a warm-up, the three lines interleaved in each round
(the machines are shared; a load change then hits all lines alike).
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np


def _plain_loop(gen, images, a, steps):
    """The same work as ``gen.counterfactuals(images, a, targets=[0, 1], steps=steps)`` with nothing around it."""
    import torch

    ac = gen.ddim.alphas_cumprod
    with torch.inference_mode():
        x = torch.from_numpy(images[:, None]) * 2 - 1
        z = gen.vae.encode(x).latent_dist.mean * gen.config.latent_scale
        lab = torch.from_numpy(a).long()
        gen.ddim.set_timesteps(steps)
        ts = [int(t) for t in gen.ddim.timesteps]
        a_prev = torch.tensor(1.0)
        for t in ts[::-1]:
            eps = gen.unet(z, torch.full((len(z),), t), class_labels=lab).sample
            x0 = (z - (1 - a_prev).sqrt() * eps) / a_prev.sqrt()
            z = ac[t].sqrt() * x0 + (1 - ac[t]).sqrt() * eps
            a_prev = ac[t]
        zz = torch.cat([z, z])
        labs = torch.cat([torch.zeros(len(z), dtype=torch.long), torch.ones(len(z), dtype=torch.long)])
        for t in gen.ddim.timesteps:
            eps = gen.unet(zz, torch.full((len(zz),), int(t)), class_labels=labs).sample
            zz = gen.ddim.step(eps, t, zz, eta=0.0).prev_sample
        return ((gen.vae.decode(zz / gen.config.latent_scale).sample + 1) / 2).clamp(0, 1).numpy()


def _best_interleaved(fns: dict, repeat: int) -> dict:
    """Best time of each function over ``repeat`` rounds, the functions interleaved within each round so that
    a change in the load of a shared machine hits all of them alike. One warm-up call each."""
    for fn in fns.values():
        fn()
    best = {k: float("inf") for k in fns}
    for _ in range(repeat):
        for k, fn in fns.items():
            t = time.perf_counter()
            fn()
            best[k] = min(best[k], time.perf_counter() - t)
    return best


def run(sizes=(64, 128), n: int = 16, steps: int = 50, repeat: int = 2, threads: int = 1) -> list[dict]:
    import torch

    from fairdesk.core.generation.images import CounterfactualGenerator, GeneratorConfig, _build
    from fairdesk.core.progress import CancelToken
    from fairdesk.core.synthetic import morpho

    torch.set_num_threads(threads)
    rows = []
    for size in sizes:
        cfg = GeneratorConfig(image_size=size, vae_channels=(8, 16, 16), unet_channels=(32, 64), norm_groups=8,
                              default_steps=steps)
        torch.manual_seed(0)
        vae, unet = _build(cfg)
        gen = CounterfactualGenerator(vae, unet, cfg)
        ds = morpho.make_morpho(n, seed=0, size=size)
        images, a = ds.images, ds.a
        # the two paths compute the same images (sanity check before timing)
        ref = gen.counterfactuals(images[:2], a[:2], targets=[0, 1], steps=steps)
        plain = _plain_loop(gen, images[:2], a[:2], steps)[:, 0]
        assert np.allclose(np.concatenate([ref[0], ref[1]]), plain, atol=1e-4)
        for mkl in (True, False):
            torch.backends.mkldnn.enabled = mkl
            progress_calls = []
            best = _best_interleaved({
                "batched": lambda: gen.counterfactuals(images, a, targets=[0, 1], steps=steps,
                                                       progress=lambda f, m: progress_calls.append(f),
                                                       cancel=CancelToken()),
                "single": lambda: [gen.counterfactuals(images, a, targets=[t], steps=steps) for t in (0, 1)],
                "plain": lambda: _plain_loop(gen, images, a, steps)}, repeat)
            t_batched, t_single, t_plain = best["batched"], best["single"], best["plain"]
            n_out = 2 * n
            rows.append({"size": size, "onednn": mkl, "n_inputs": n, "steps": steps, "threads": threads,
                         "batched_s": t_batched, "one_by_one_s": t_single, "plain_s": t_plain,
                         "cf_per_s_batched": n_out / t_batched, "cf_per_s_one_by_one": n_out / t_single,
                         "cf_per_s_plain": n_out / t_plain, "overhead_vs_plain": t_batched / t_plain,
                         "batched_speedup": t_single / t_batched})
            print(f"{size}x{size} oneDNN {'on ' if mkl else 'off'}: batched {n_out / t_batched:6.2f} cf/s, "
                  f"one-by-one {n_out / t_single:6.2f}, plain loop {n_out / t_plain:6.2f} | "
                  f"overhead ×{t_batched / t_plain:.3f}, batching ×{t_single / t_batched:.2f}", flush=True)
        torch.backends.mkldnn.enabled = True
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="4 inputs, 1 repeat")
    p.add_argument("--n", type=int, default=16)
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--sizes", default="64,128")
    p.add_argument("--json")
    args = p.parse_args(argv)
    n, repeat = (4, 1) if args.quick else (args.n, args.repeat)
    rows = run(tuple(int(s) for s in args.sizes.split(",")), n, args.steps, repeat, args.threads)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
