"""Exercise 12.1: a confusion matrix computed by uopc, from two one-hot encodings and one matrix product."""

from uopc.tensor import Tensor, TensorError, dtypes


def confusion_matrix(labels: Tensor, predictions: Tensor, classes: int) -> Tensor:
    """counts[i, j]: how many examples of class i were predicted as class j (int32, classes x classes).

    one_hot(labels).T @ one_hot(predictions) adds 1 at (label, prediction) for every example: the product
    sums over the batch axis, which is exactly the counting. The product runs in float32, exact for counts
    below 2**24.
    """
    if labels.shape != predictions.shape or labels.ndim != 1:
        raise TensorError(f"confusion_matrix: labels {labels.shape} and predictions {predictions.shape} must be 1-D")
    truth = labels.one_hot(classes).float()
    guess = predictions.one_hot(classes).float()
    return (truth.T @ guess).cast(dtypes.int32)
