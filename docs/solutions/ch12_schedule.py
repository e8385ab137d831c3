"""Exercise 12.2: linear warm-up, then cosine decay; set through opt.lr, so the plan never changes."""

import math


def warmup_cosine(peak: float, step: int, total: int, warmup: int) -> float:
    """The learning rate at `step` (0-based) of `total`: a linear ramp from peak/warmup to peak over the first
    `warmup` steps, then half a cosine from peak down to 0 at `total`."""
    if not 0 <= step < total or not 0 <= warmup < total:
        raise ValueError(
            f"warmup_cosine: need 0 <= step < total and 0 <= warmup < total, got {step=} {warmup=} {total=}"
        )
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / (total - warmup)
    return peak * 0.5 * (1.0 + math.cos(math.pi * progress))
