"""The array shapes of the kernel methods, written once (as diffrax's ``RealScalarLike``).

Within one call jaxtyping binds each name once: `m` queries, `n` keys, `d` the token
dimension, `r` the columns of a covariance factor.
"""

from jaxtyping import Array, ArrayLike, Bool, Float, Real

Time = Real[ArrayLike, ""]
Queries = Float[Array, "m d"]
Keys = Float[Array, "n d"]
KeyMask = Bool[Array, "m n"]
Weights = Float[Array, "m n"]
Velocities = Float[Array, "m d"]
Mean = Float[Array, " d"]
Matrix = Float[Array, "d d"]
Factor = Float[Array, "d r"]
GaussianMap = tuple[Matrix, Mean]
SizeScale = Float[Array, ""]
GrowthBound = Float[Array, ""]
