"""Hidden: the probe plan of ``cross-entropy``: which calls the sandbox makes, on which inputs."""

from __future__ import annotations

from typing import Any

import torch

from assignments.model import ProbeCall
from assignments.probing import InputBank, shape_of, tensor

# The spread of each target's offset, shared by its K logits.
OFFSETS = 3.0
# Distinct sizes tell the axes apart: N targets, K classes, d extra positions.
N, K, D = 6, 7, 4
# Ordinary logits wider than unit, so that each mistake moves the loss far beyond tolerance.
SCALE = 2.0
# The padding class the ignore probes pass as ignore_index: a real class, as a token id 0 is.
PAD = 0
# How far the probes that ignore PAD put its logits below the others.
PAD_BELOW = 4.0
SMOOTHING = 0.5
# Extreme logits, as a confident model's are. exp overflows float32 past about 88.7 and
# underflows to 0 below about -103.9 (-87.3 for normal numbers).
LARGE = 100.0  # every logit of the large-logits probe is about this: exp(100) = inf
FAR = 120.0  # the spread probe puts each row's target this far below the row's other logits
LARGE_64, FAR_64 = 1000.0, 800.0  # the same for float64
# The smoothing probes raise their target logits by this much (a model that is mostly right),
# so that the smoothing term differs from the target's negative log-likelihood on every row;
# by less where few targets are kept, so that the likelihood itself still weighs.
CONFIDENT, FAIRLY_CONFIDENT = 3.0, 1.5
ARGUMENT_NAMES = {"arg0": "logits", "arg1": "target"}


def build_calls(seed: int) -> tuple[list[ProbeCall], dict[str, torch.Tensor]]:
    """The calls (ids named by the checks in assignment.toml) and their input tensors."""
    bank = InputBank(seed)
    calls: list[ProbeCall] = []

    def targets(name: str, shape: tuple[int, ...], *, ignored: int | None = None) -> str:
        """Random class indices; with ``ignored``, about a third of them (at least one, never
        all) set to that index and the others drawn from the classes other than it."""
        low = 1 if ignored == PAD else 0
        values = torch.randint(low, K, shape, generator=bank.generator)
        if ignored is not None:
            flat = values.view(-1)
            order = torch.randperm(flat.numel(), generator=bank.generator)
            flat[order[: max(1, flat.numel() // 3)]] = ignored
        return bank.add(f"{name}.target", values)

    def add(name: str, group: str, shape: tuple[int, ...], *, ignored: int | None = None,
            dtype: torch.dtype = torch.float32, grad: bool = False, what: str = "",
            confident: float = 0.0, **kwargs: Any) -> tuple[str, str]:
        logits = bank.randn(f"{name}.logits", *shape, dtype=dtype, scale=SCALE)
        # Each target's logits shifted by its own offset, which the softmax over the classes
        # ignores and a softmax over any other axis does not.
        offsets = torch.randn(shape[0], 1, *shape[2:], generator=bank.generator,
                              dtype=torch.float64) * OFFSETS
        bank.value(logits).add_(offsets.to(dtype))
        target = targets(name, (shape[0], *shape[2:]), ignored=ignored)
        if ignored == PAD:
            # A model rarely predicts padding: counted, an ignored target would weigh a lot.
            bank.value(logits).select(1, PAD).sub_(PAD_BELOW)
        if confident:
            picked = bank.value(target).clamp(min=0).unsqueeze(1)
            bank.value(logits).scatter_add_(1, picked, torch.full(picked.shape, confident,
                                                                  dtype=dtype))
            what += f", the targets' logits raised by {confident:g}"
        spec: dict[str, Any] = {"target": "cross_entropy",
                                "args": [tensor(logits, grad=grad), tensor(target)],
                                "kwargs": kwargs}
        if grad:
            # The upstream gradient has the loss's shape: (N, d) per target, () once reduced.
            out_shape = (shape[0], *shape[2:]) if kwargs.get("reduction") == "none" else ()
            upstream = torch.randn(out_shape, generator=bank.generator, dtype=torch.float64)
            spec["backward"] = {"output": 0,
                                "grad": bank.add(f"{name}.grad", upstream.to(dtype))}
        options = ", ".join(f"{key}={value!r}" for key, value in kwargs.items())
        describe = (f"logits {shape_of(bank, logits)} ({str(dtype)[6:]}){what}, "
                    f"target {shape_of(bank, target)}" + (f", {options}" if options else ""))
        calls.append(ProbeCall(name, spec, group, describe,
                               meta={"argument_names": ARGUMENT_NAMES}))
        return logits, target

    add("mean", "plain", (N, K))
    add("sum", "plain", (N, K), reduction="sum")
    add("none", "plain", (N, K), reduction="none")
    add("spatial-mean", "spatial", (N, K, D))
    add("spatial-none", "spatial", (N, K, D), reduction="none")

    add("ignore-mean", "ignore", (N, K), ignored=PAD, ignore_index=PAD)
    add("ignore-sum", "ignore", (N, K), ignored=PAD, ignore_index=PAD, reduction="sum")
    add("ignore-none", "ignore", (N, K, D), ignored=PAD, ignore_index=PAD, reduction="none")
    # The default ignore_index: targets of -100 must be skipped before they index anything.
    add("default-ignore", "default-ignore", (N, K), ignored=-100,
        what=" with some targets -100 (the default ignore_index)")

    add("smooth-mean", "smoothing", (N, K), confident=CONFIDENT, label_smoothing=SMOOTHING)
    add("smooth-none", "smoothing", (N, K, D), confident=CONFIDENT, label_smoothing=SMOOTHING,
        reduction="none")
    add("smooth-ignore", "smoothing", (N, K), ignored=PAD, confident=FAIRLY_CONFIDENT,
        ignore_index=PAD, label_smoothing=SMOOTHING)

    def extreme(suffix: str, group: str, dtype: torch.dtype, large: float,
                far: float) -> None:
        """The three extreme probes in ``dtype``: exp(large) overflows it, exp(-far)
        underflows it."""
        # Every logit about ``large``: a shift by each row's maximum keeps them ordinary.
        logits, _ = add(f"large-logits{suffix}", group, (N, K), dtype=dtype,
                        what=f" all about {large:.0f}", reduction="none")
        bank.value(logits).add_(large)
        # Each row's target class ``far`` below its other logits (a confident wrong
        # prediction): its probability underflows to 0, while the loss, about ``far``, is
        # finite.
        logits, target = add(f"spread-logits{suffix}", group, (N, K), dtype=dtype,
                             what=f" whose target logits are {far:.0f} below the others",
                             reduction="none")
        bank.value(logits)[torch.arange(N), bank.value(target)] -= far
        # Rows at very different levels: row 0 about large + far, the others ordinary. Only
        # each row's own maximum keeps every row finite.
        logits, _ = add(f"mixed-rows{suffix}", group, (N, K), dtype=dtype,
                        what=f" whose first row is about {large + far:.0f}, the others ordinary",
                        reduction="none")
        bank.value(logits)[0] += large + far
        # A class the model all but rules out: its logit ``far`` below the others in every row,
        # and the target of every other row. Its log-probability is about -far; only a shift
        # by each row's maximum (not the batch's, not the class's) keeps it finite.
        logits, target = add(f"rare-class{suffix}", group, (N, K), dtype=dtype,
                             what=f" whose last class is {far:.0f} below the others",
                             reduction="none")
        bank.value(logits)[:, K - 1] -= far
        bank.value(target)[::2] = K - 1

    extreme("", "extreme", torch.float32, LARGE, FAR)
    # The same in float64, whose exp overflows past about 709 and underflows below about -745:
    # computing in float64 does not make a missing shift safe. A group of its own: a missing
    # shift computed in float64 is exact on the float32 probes.
    extreme("-64", "extreme-64", torch.float64, LARGE_64, FAR_64)

    add("grad", "float64", (N, K), ignored=2, dtype=torch.float64, grad=True, confident=CONFIDENT,
        ignore_index=2, label_smoothing=0.1)
    add("grad-spatial", "float64", (N, K, D), ignored=PAD, dtype=torch.float64, grad=True,
        confident=CONFIDENT, ignore_index=PAD, label_smoothing=0.1, reduction="sum")

    add("bad-reduction", "misuse", (N, K), reduction="average")
    return calls, bank.tensors
