"""The stated limits of every numeric command-line option, checked while the command line is read.

One table, by option name (an option means the same thing in every command that has it; :data:`BY_COMMAND` holds
the few that differ): a number outside its limits, not a
number, not finite, or not whole where a count is meant is refused before any work starts, in one sentence naming
the option, its limits and what the number is (:func:`fairdesk.core.limits.check_number`, the same check the core's
plans and configurations run for the Python API and the GUI), by :func:`check_limits` right after the command line
is parsed. ``tests/core/test_cli_option_limits.py`` checks that every numeric option of every command has an entry
and that each entry refuses what lies outside it.

An entry is ``(low, high, whole, what)``; probabilities and shares are open at both ends (``OPEN``).
"""
from __future__ import annotations

import argparse

OPEN = "open"  # marker in a `what` tuple's fifth place: the limits themselves are excluded

_SEED = (0, 2**32 - 1, True, "the random seed")
_PROBABILITY = (0.0, 1.0, False, "a probability such as 0.05", OPEN)
_MANY = 10**9

LIMITS: dict[str, tuple] = {
    "--adversary-lambda": (0.0, 1e4, False, "the weight of the adversary's term"),
    "--adversary-lr-scale": (1e-6, 1e3, False, "the adversary's learning rate as a multiple of the model's"),
    "--adversary-steps": (1, 1000, True, "adversary steps per training step"),
    "--alpha": (0.0, 1.0, False, "the significance level, a probability such as 0.05", OPEN),
    "--audit": (1, 2**63 - 1, True, "the number of a stored audit"),
    "--batch-size": (1, 65_536, True, "examples per batch"),
    "--bins": (2, 1000, True, "the number of bins of a continuous attribute"),
    "--carry": (1, 1000, True, "slices carried forward to confirmation"),
    "--checkpoint-every": (0, _MANY, True, "training steps between checkpoints (0: only at the end of each phase)"),
    "--classifiers": (1, 10_000, True, "classifiers simulated per data set"),
    "--confounded-classifiers": (0, 10_000, True, "classifiers simulated on the confounded data set"),
    "--designs": (1, 100_000, True, "designs drawn from the design space"),
    "--discovery-fraction": (0.0, 1.0, False, "the share of rows used to search, such as 0.5", OPEN),
    "--dropout": (0.0, 0.99, False, "the dropout probability"),
    "--epochs": (1, 100_000, True, "passes over the training data"),
    "--examples": (0, 10_000, True, "example images shown in the report"),
    "--features": (1, 100_000, True, "the number of generated features"),
    "--focus-probability": (0.0, 1.0, False, "the probability of masking a focus word"),
    "--folds": (2, 100, True, "cross-validation folds"),
    "--guidance": (0.0, 100.0, False, "the classifier-free guidance scale"),
    "--heads": (1, 64, True, "attention heads"),
    "--hidden": (8, 8192, True, "the hidden size"),
    "--image-size": (8, 2048, True, "the side of the square images, in pixels"),
    "--intermediate": (8, 32_768, True, "the feed-forward size"),
    "--k-adv": (1, 1000, True, "adversary steps per minibatch"),
    "--k-control": (1, 1000, True, "control pairs per example"),
    "--keep-checkpoints": (1, 1000, True, "checkpoints kept"),
    "--lambda": (0.0, 1e4, False, "the weight of the fairness term λ"),
    "--layers": (1, 48, True, "transformer layers"),
    "--leakage-target": (0.0, 1.0, False, "the probe R² the representation may keep, such as 0.05"),
    "--lr": (0.0, 10.0, False, "the learning rate", OPEN),
    "--margin": (0.0, 1.0, False, "the equivalence margin, such as 0.05", OPEN),
    "--max-images": (0, _MANY, True, "images audited (0: all)"),
    "--max-iter": (1, 1_000_000, True, "iterations of the solver"),
    "--max-length": (8, 100_000, True, "tokens per window"),
    "--max-order": (1, 6, True, "attribute values combined in one slice"),
    "--max-tokens": (1, 1000, True, "tokens of an identity term"),
    "--max-windows": (1, 10_000, True, "windows per note"),
    "--min-denominator": (1, _MANY, True, "the fewest cases a tested rate rests on"),
    "--min-effect": (0.0, 100.0, False, "the smallest effect that counts, in nats"),
    "--min-group-size": (1, _MANY, True, "the smallest group that is tested"),
    "--min-log-ratio": (0.0, 100.0, False, "the smallest log ratio that counts, in nats"),
    "--min-sequence-tokens": (1, 100_000, True, "the fewest tokens of a training sequence"),
    "--min-size": (1, _MANY, True, "the fewest rows of a slice"),
    "--min-templates": (2, 100_000, True, "the fewest templates a category is tested on"),
    "--mine-lambda": (0.0, 1e4, False, "the weight of the disentangling term"),
    "--mine-steps": (0, 10**7, True, "training steps of the disentangling map"),
    "--mlm-probability": (0.0, 1.0, False, "the share of tokens masked", OPEN),
    "--n": (10, 10**7, True, "the number of rows generated"),
    "--n-boot": (100, 100_000, True, "the number of bootstrap replicates"),
    "--participants": (10, 1_000_000, True, "participants generated"),
    "--preview-every": (0, _MANY, True, "training steps between previews (0: none)"),
    "--repeats": (1, 100, True, "repeats of the cross-validation"),
    "--resolve": (1, 100_000, True, "data sets the second pass may audit to decide the map's unclear regions"),
    "--runs": (1, 100_000, True, "simulated runs per design"),
    "--save-every": (1, _MANY, True, "training steps between saves"),
    "--seed": _SEED,
    "--split-seed": _SEED,
    "--steps": (1, 1000, True, "DDIM steps of a counterfactual"),
    "--strength": (0.01, 1.0, False, "the share of the noise schedule inverted"),
    "--stride": (1, 100_000, True, "tokens between window starts"),
    "--suppress-k": (1, 1000, True, "the small-cell threshold k"),
    "--test-size": (0.0, 1.0, False, "the share of rows held out for testing", OPEN),
    "--threads": (1, 1024, True, "CPU threads"),
    "--threshold": (0.0, 1.0, False, "the decision threshold, a score such as 0.5", OPEN),
    "--top-k": (1, 1000, True, "predictions kept per mask"),
    "--unet-steps": (0, 10**7, True, "training steps of the denoiser"),
    "--vae-steps": (0, 10**7, True, "training steps of the autoencoder"),
    "--val-size": (0.0, 1.0, False, "the share of rows held out for validation", OPEN),
    "--validation": (0.0, 0.9, False, "the share of training rows held out for validation"),
    "--vocab-size": (100, 1_000_000, True, "the vocabulary size"),
    "--warmup": (0, 10**8, True, "warm-up steps"),
    "--weight-decay": (0.0, 10.0, False, "the weight decay"),
}

# options whose meaning depends on the command: (command path, option) -> entry
BY_COMMAND: dict[tuple[str, str], tuple] = {
    ("bench validity", "--n"): (20, 10**7, True, "the sample size of a simulated data set"),
    ("bench validity", "--n-boot"): (20, 100_000, True, "bootstrap replicates per simulated audit"),
    ("train mlm", "--steps"): (1, 10**8, True, "training steps"),
}


def entry_for(command: str, option: str) -> tuple | None:
    """The stated limits of ``option`` in ``command`` (``"audit groups"``), or ``None`` when it has none."""
    return BY_COMMAND.get((command, option)) or LIMITS.get(option)


def numeric_actions(parser: argparse.ArgumentParser, path: tuple[str, ...] = (), args=None):
    """``(command path, action)`` for every option whose value is a number: of every command, or with ``args``
    only of the command those parsed arguments chose."""
    for action in parser._actions:  # argparse has no public walk over its actions
        if isinstance(action, argparse._SubParsersAction):
            chosen = None if args is None else getattr(args, action.dest, None)
            for name, sub in action.choices.items():
                if chosen is None or name == chosen:
                    yield from numeric_actions(sub, path + (name,), args)
        elif action.type in (int, float) and action.option_strings:
            yield " ".join(path), action


def check_limits(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Every number the command line gave within its stated limits; otherwise :class:`DataError` in one sentence
    naming the option (the CLI prints it on one line, exit 2, before any work). argparse has already made each
    value an ``int`` or ``float`` (or said it is not one)."""
    from fairdesk.core.limits import check_number

    for command, action in numeric_actions(parser, args=args):
        value = getattr(args, action.dest, None)
        entry = entry_for(command, action.option_strings[0])
        if value is None or entry is None:
            continue
        low, high, whole, what, *rest = entry
        for one in value if isinstance(value, list) else [value]:
            check_number(one, action.option_strings[0], low, high, whole=whole, what=what, open_ends=OPEN in rest)
