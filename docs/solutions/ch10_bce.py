"""Exercise 10.2: binary cross-entropy on logits, in a form that neither overflows nor loses precision."""

from uopc.tensor import Tensor, TensorError


def bce_with_logits(z: Tensor, y: Tensor) -> Tensor:
    """mean(-y log sigmoid(z) - (1 - y) log(1 - sigmoid(z))), for float targets y in [0, 1].

    Written out, the loss is log(1 + exp(z)) - z * y. For large z, exp(z) overflows; for very negative z,
    1 + exp(z) rounds to 1 and the log loses everything. The identity
    log(1 + exp(z)) = max(z, 0) + log(1 + exp(-|z|)) keeps the exponent <= 0, so exp never overflows,
    and the large part, max(z, 0), is exact.

    -|z| is written min(z, -z): at z = 0 both are kinks, and the gradient rules must still add up to the true
    derivative of the smooth whole, sigmoid(0) = 1/2. MAX and MIN split a tie in half, so max(z, 0) sends 1/2
    and min(z, -z) sends 1/2 - 1/2 = 0, for a total of 1/2. -z.abs() would also work, since abs has
    gradient sign(0) = 0 at the kink.
    """
    if z.shape != y.shape:
        raise TensorError(f"bce_with_logits: logits {z.shape} and targets {y.shape} differ in shape")
    softplus = z.maximum(0.0) + (1.0 + z.minimum(-z).exp()).log()
    return (softplus - z * y.float()).mean()
