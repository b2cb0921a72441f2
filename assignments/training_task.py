"""The ``learns`` check's probe call: the copy task, its data and initial weights, from the seed.

Each sequence is ``half`` random tokens followed by the same tokens again; the model predicts
every next token of the second half, which only attention ``half - 1`` positions back can know.
Held-out inputs ask for one position each, with every later token replaced by a random one, in
pairs that differ only there, so a model that learned to copy the future is caught; their
answers stay in the call's ``meta`` (the grader's side) and never enter the sandbox.

The training does not take a new task for every grading seed: its data and weights come from
one of the assignment's ``seeds`` training seeds (``[training] seeds``, 8 unless set), the one
the grading seed picks. The grader trains the reference once per training seed and keeps it
(``grader.learning.ReferenceTrainings``); with a seed per submission it would train it again
for every submission.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from assignments.model import Namespace, ProbeCall
from sandbox import training

CALL_ID = "training"
INIT_PREFIX = "training.init."
_SEED_SALT = 0x1EA2
DEFAULT_TRAINING_SEEDS = 8


def training_seed_count(config: Mapping[str, Any]) -> int:
    """How many training seeds the grading seeds share: ``config["seeds"]``."""
    count = int(config.get("seeds", DEFAULT_TRAINING_SEEDS))
    if count < 1:
        raise ValueError(f"[training] seeds must be at least 1, not {count}")
    return count


def training_seed(config: Mapping[str, Any], seed: int) -> int:
    """The training seed a grading seed picks: one of ``config["seeds"]`` (grading seeds 0 to
    count - 1 pick each once)."""
    return seed % training_seed_count(config)


def training_call(config: Mapping[str, Any], seed: int,
                  reference: Namespace) -> tuple[ProbeCall, dict[str, torch.Tensor]]:
    """The training call and its input tensors for one grading seed: those of the training
    seed it picks."""
    if config.get("optimiser", "adam") != "adam":
        raise ValueError(f"unknown optimiser {config['optimiser']!r} (only adam)")
    vocab, half = int(config["vocab"]), int(config["half"])
    length = 2 * half
    picked = training_seed(config, seed)
    generator = torch.Generator().manual_seed(picked * 65_537 + _SEED_SALT)

    def tokens(*shape: int) -> torch.Tensor:
        return torch.randint(vocab, shape, generator=generator)

    first = tokens(int(config["train_sequences"]), half)
    data = torch.cat([first, first], dim=1)
    pairs = int(config["held_out"]) // 2
    count = 2 * pairs
    # Held-out sequences come in pairs that differ only after the position asked: a model
    # that respects the mask predicts the same for both.
    held_first = tokens(pairs, half).repeat(2, 1)
    sequences = torch.cat([held_first, held_first], dim=1)
    asked = torch.randint(half - 1, length - 1, (pairs,), generator=generator).repeat(2)
    later = torch.arange(length)[None, :] > asked[:, None]
    held_out = torch.where(later, tokens(count, length), sequences)[:, :-1]
    answers = sequences[torch.arange(count), asked + 1]

    spec: dict[str, Any] = {
        "target": str(config["target"]),
        "seconds": float(config["call_seconds"]),
        "learn": {
            "layer": str(config["layer"]), "d_model": int(config["d_model"]),
            "num_heads": int(config["num_heads"]), "vocab": vocab, "length": length - 1,
            "first": half - 1, "batch": int(config["batch"]), "steps": int(config["steps"]),
            "lr": float(config["lr"]), "data": "training.data", "held_out": "training.held_out",
            "init_prefix": INIT_PREFIX,
            # the global generator's seed for the whole training (dropout masks), from the
            # training seed: the same file trains the same way on a seed wherever it runs
            "seed": int(torch.randint(2**31 - 1, (1,), generator=generator)),
        },
    }
    model = training.build_model(reference, spec)
    names = [name for name, _ in model.named_parameters()]
    spec["learn"]["weights"] = names
    inputs = {"training.data": data, "training.held_out": held_out}
    for name, parameter in model.named_parameters():
        inputs[INIT_PREFIX + name] = _initial(name, tuple(parameter.shape), generator)
    call = ProbeCall(
        CALL_ID, spec, "training",
        f"training a tiny transformer on your code ({count} held-out sequences of "
        f"{length - 1} tokens, vocabulary {vocab}, {spec['learn']['steps']} Adam steps)",
        compare="training",
        meta={"answers": answers, "asked": asked, "names": names,
              "shapes": {name: tuple(p.shape) for name, p in model.named_parameters()},
              "chance": 1.0 / vocab, "training_seed": picked},
    )
    return call, inputs


def _initial(name: str, shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    """Embeddings N(0, 0.25), matrices N(0, 0.25 / fan_in), biases 0."""
    if len(shape) == 1:
        return torch.zeros(shape)
    values = torch.randn(shape, generator=generator) * 0.5
    if not name.startswith(("token.", "position.")):
        values = values / shape[-1] ** 0.5
    return values
