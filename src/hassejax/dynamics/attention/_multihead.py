"""Multi-head attention: the sum of its heads' velocity fields (paper arXiv:2501.18322; spec dynamics.md §1, §2)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import jax.numpy as jnp

from ...errors import ParameterError
from ._base import AbstractAttention, check_map_of_kernel, check_reads_mask
from ._masked import masked_parts
from ._shapes import Factor, GaussianMap, GrowthBound, KeyMask, Keys, Matrix, Mean, Queries, SizeScale, Time, Velocities

__all__ = ["MultiHead"]


class MultiHead(AbstractAttention):
    """Multi-head attention `Γ(x) = Σ_h Γ^h(x) = Σ_h C_h E_{w_h}[y]` (paper; spec dynamics.md §1).

    Each head is any kernel; its value matrix is the head's value-output map
    `C_h = W_{O,h} V_h` and its `beta` its own inverse temperature. The velocity and, when
    every head has one, the Gaussian map `(M, c) = Σ_h (M_h, c_h)` (paper, spec §2) are sums
    over the heads. The heads share the keys and the mask of a call; a head may be a
    :class:`Masked` kernel (per-head masks) when the call passes no keys and no mask.

    **Arguments:**

    - `heads`: a non-empty sequence of :class:`AbstractAttention` kernels of one token
      dimension `d` (stored as a tuple).

    **Raises:** :class:`~hassejax.errors.ParameterError` for no heads, a head that is not
    a kernel, heads of different `d`, or :class:`Masked` heads whose masks differ in size `n`.

    **Example:** two softmax heads with `A = 0` add their value maps:

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import MultiHead, Softmax
    >>> e = jnp.eye(2)
    >>> model = MultiHead([Softmax(V=e[:, :1] * e[:1], A=0 * e), Softmax(V=3 * e, A=0 * e)])
    >>> model.velocity(0.0, jnp.array([[1.0, 1.0], [1.0, 1.0]])).tolist()
    [[4.0, 3.0], [4.0, 3.0]]

    ```
    """

    heads: tuple[AbstractAttention, ...]

    _gaussian_kernel_methods: ClassVar[tuple[str, ...]] = ("velocity",)

    def __init__(self, heads: Sequence[AbstractAttention]):
        heads = tuple(heads)
        if len(heads) == 0:
            raise ParameterError("`heads` must contain at least one attention kernel; got an empty sequence.")
        for h, head in enumerate(heads):
            if not isinstance(head, AbstractAttention):
                raise ParameterError(
                    f"`heads[{h}]` must be an attention kernel (AbstractAttention); got {type(head).__name__}."
                )
        ds = [head.d for head in heads]
        if len(set(ds)) != 1:
            raise ParameterError(f"`heads` must share the token dimension d; got d = {ds}.")
        ns = [(where, part.n) for h, head in enumerate(heads) for part, where in masked_parts(head, f"heads[{h}]")]
        if len({n for _, n in ns}) > 1:  # a solve then named `x` with one head's size (review)
            (h0, n0), (h1, n1) = ns[0], next(p for p in ns if p[1] != ns[0][1])
            raise ParameterError(
                f"`heads`: the masks of the Masked heads must share the number of tokens n; `{h0}` has "
                f"n = {n0} and `{h1}` has n = {n1}."
            )
        self.heads = heads

    @property
    def d(self) -> int:
        """Token dimension `d`."""
        return self.heads[0].d

    def velocity(self, t: Time, x: Queries, keys: Keys | None = None, mask: KeyMask | None = None) -> Velocities:
        """`Σ_h Γ^h(x_i)` (same keys and mask for every head)."""
        out = None
        for head in self.heads:
            term = head.velocity(t, x, keys, mask)
            out = term if out is None else out + term
        return out

    def gaussian_size_scale(self, t: Time) -> SizeScale:
        """The largest of the heads' scales (see :class:`AbstractAttention`)."""
        return jnp.max(jnp.stack([jnp.asarray(h.gaussian_size_scale(t), float) for h in self.heads]))

    def gaussian_growth_bound(self, t: Time) -> GrowthBound:
        """The sum of the heads' bounds (`Σ' = Σ_h (M_hΣ + ΣM_hᵀ)`; see :class:`AbstractAttention`)."""
        return sum((jnp.asarray(h.gaussian_growth_bound(t), float) for h in self.heads), jnp.zeros(()))

    def gaussian_uses_factor(self) -> bool:
        """True when any head's Gaussian map is evaluated from the factor (see :class:`AbstractAttention`)."""
        return any(h.gaussian_uses_factor() for h in self.heads)

    def gaussian_affine(self, t: Time, mean: Mean, cov: Matrix, factor: Factor | None = None) -> GaussianMap:
        """`(Σ_h M_h, Σ_h c_h)` (paper; spec dynamics.md §2). Raises if a head has no Gaussian map."""
        self.check_gaussian()
        m = c = None
        for head in self.heads:
            mh, ch = head.gaussian_affine(t, mean, cov, factor)
            m = mh if m is None else m + mh
            c = ch if c is None else c + ch
        return m, c

    def gaussian_second_moment(self) -> bool:
        """True when a head's Gaussian map depends on the second moment (see :class:`AbstractAttention`)."""
        return any(h.gaussian_second_moment() for h in self.heads)

    def gaussian_homogeneous(self) -> bool:
        """True when every head's Gaussian map is homogeneous (see :class:`AbstractAttention`)."""
        return all(h.gaussian_homogeneous() for h in self.heads)

    def check_projective_state(self, name: str = "model") -> None:
        """Raise :class:`~hassejax.errors.ParameterError` naming the first head the projective state cannot solve."""
        for h, head in enumerate(self.heads):
            head.check_projective_state(f"{name}.heads[{h}]")

    def check_covariance_state(self, name: str = "model") -> None:
        """Raise :class:`~hassejax.errors.ParameterError` naming the first head the covariance state cannot solve."""
        for h, head in enumerate(self.heads):
            head.check_covariance_state(f"{name}.heads[{h}]")

    def _check_gaussian_interval(self, t0: float, t1: float, name: str = "model") -> None:
        """Each head's check on `[t0, t1]` (see :class:`AbstractAttention`), naming the head."""
        for h, head in enumerate(self.heads):
            head._check_gaussian_interval(t0, t1, f"{name}.heads[{h}]")

    def check_gaussian(self, name: str = "model") -> None:
        """Raise :class:`~hassejax.errors.ParameterError` naming the first head without a Gaussian map (or for a
        subclass that changed :meth:`velocity` and not the map, see :meth:`AbstractAttention.check_gaussian`)."""
        check_map_of_kernel(self, name)
        for h, head in enumerate(self.heads):
            head.check_gaussian(f"{name}.heads[{h}]")

    def check_maskable(self, name: str = "kernel") -> None:
        """Raise :class:`~hassejax.errors.ParameterError` naming the first head that cannot be masked (or for a
        subclass whose own :meth:`velocity` never reads its mask, see :meth:`AbstractAttention.check_maskable`)."""
        check_reads_mask(self, name)
        for h, head in enumerate(self.heads):
            head.check_maskable(f"{name}.heads[{h}]")

    def check_unbatched(self, name: str = "model") -> None:
        """Raise :class:`~hassejax.errors.ParameterError` if a head has batched parameters."""
        for h, head in enumerate(self.heads):
            head.check_unbatched(f"{name}.heads[{h}]")
