"""Exercise 17.1: the next character's distribution in numpy, to compare with next_char_distribution."""

import numpy as np
import numpy.typing as npt


def distribution(logits: npt.NDArray[np.float64], temperature: float, top_k: int | None) -> npt.NDArray[np.float64]:
    """softmax(logits / temperature) over the top_k largest logits (all when None), 0 elsewhere. Ties at the
    k-th value are all kept, as a comparison with the k-th largest keeps them."""
    scaled = np.asarray(logits, dtype=np.float64) / temperature
    if top_k is not None and top_k < scaled.size:
        kth = np.sort(scaled)[-top_k]
        scaled = np.where(scaled < kth, -np.inf, scaled)
    weights = np.exp(scaled - scaled.max())  # minus the maximum: no overflow, the same ratios
    probabilities: npt.NDArray[np.float64] = weights / weights.sum()
    return probabilities
