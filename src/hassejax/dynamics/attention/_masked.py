"""Masked self-attention with an optional fixed attention-sink token (spec dynamics.md §1, §7b item 14)."""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Bool, Float, Real

from ..._checks import as_mask, check_rows_nonempty
from ..._tracing import is_traced
from ...errors import ParameterError
from ..params import _as_param
from ._base import AbstractAttention

__all__ = ["Masked", "masked_parts"]


class Masked(AbstractAttention):
    """A kernel under a fixed mask: token `i` sees only the keys `j` with `mask[i, j]` (spec dynamics.md §1).

    Positions are `s_i = i/n` (:func:`~hassejax.dynamics.positions`); with a causal mask
    the first token sees only itself, so it is autonomous (`ẋ_1 = V x_1` for softmax). With
    `sink`, a fixed attention-sink token at `s = 0` is prepended to the keys and every query
    may attend to it; it has no velocity of its own (it is not a token of `x`). The tokens
    are the keys: :meth:`velocity` takes no `keys` and no `mask`. Softmax-type kernels
    normalise over the allowed keys, sigmoid and linear divide by their number; a row with
    no allowed key (possible only for traced masks) gets `Γ = 0`. No Gaussian map: masked
    attention does not preserve Gaussians (spec §2).

    A causal mask makes the velocity of token `i` independent of later tokens exactly, but a
    solve with the default adaptive controller picks one step size for all tokens, so a later
    token moves the earlier trajectories within the tolerance (measured: `1e-7`–`4e-6` at
    `rtol = 1e-6`); with ``diffrax.ConstantStepSize()`` they are bit-identical.

    **Arguments:**

    - `kernel`: the attention kernel applied under the mask (any kernel with a masked form:
      not :class:`Sinkhorn`, not another :class:`Masked`; a :class:`MultiHead` shares the
      mask across its heads).
    - `mask`: `(n, n)` Boolean, row = query, column = key, True = may attend (e.g. from
      :mod:`hassejax.masks`); leading batch axes allowed for ``vmap`` (a call or a solve takes one kernel). A
      ``vmap`` over a :class:`Masked` maps every leaf, the kernel's included: to sweep masks under one unbatched
      kernel, build the :class:`Masked` inside the mapped function,
      ``jax.vmap(lambda m: solve_particles(Masked(kernel, m), x0, t1=...))(masks)``.
    - `sink`: `(d,)` position of the attention-sink token, or None (no sink).

    **Raises:** :class:`~hassejax.errors.ParameterError` for a kernel without a masked
    form (:meth:`~AbstractAttention.check_maskable`: Sinkhorn, a Masked kernel, or a user's kernel whose method that
    receives the mask, its ``velocity``, else ``weights``, else ``normalise``, never reads its `mask` argument, which
    would run unmasked) or a sink of the wrong shape; :class:`~hassejax.errors.MaskError` for a
    non-Boolean or non-square mask; :class:`~hassejax.errors.EmptyRowError` if (without a
    sink) a row of a concrete mask allows no key.

    **Example:** causal softmax with `V = I`, `A = 0`: token `i` moves to the mean of tokens `0..i`:

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.dynamics import Masked, Softmax
    >>> causal = jnp.tril(jnp.ones((3, 3), bool))
    >>> model = Masked(Softmax(V=jnp.eye(1), A=jnp.zeros((1, 1))), causal)
    >>> model.velocity(0.0, jnp.array([[3.0], [1.0], [2.0]])).ravel().tolist()
    [3.0, 2.0, 2.0]
    >>> with_sink = Masked(model.kernel, causal, sink=jnp.array([5.0]))  # every query also sees 5.0
    >>> with_sink.velocity(0.0, jnp.array([[3.0], [1.0], [2.0]])).ravel().tolist()
    [4.0, 3.0, 2.75]

    ```
    """

    kernel: AbstractAttention
    mask: Bool[Array, "... n n"]
    sink: Float[Array, "... d"] | None

    def __init__(
        self,
        kernel: AbstractAttention,
        mask: Bool[ArrayLike, "... n n"],
        sink: Real[ArrayLike, "... d"] | None = None,
    ):
        if not isinstance(kernel, AbstractAttention):
            raise ParameterError(
                f"`kernel` must be an attention kernel (AbstractAttention); got {type(kernel).__name__}."
            )
        kernel.check_maskable("kernel")
        mask = as_mask(mask, "mask", square=True, batched=True)
        d = kernel.d
        if sink is not None:
            sink = _as_param(sink, "sink")
            if jnp.shape(sink)[-1:] != (d,):
                raise ParameterError(f"`sink` must have shape (d,) = ({d},); got shape {jnp.shape(sink)}.")
        elif not is_traced(mask):  # value check only on concrete masks
            check_rows_nonempty(mask, "mask")
        self.kernel = kernel
        self.mask = mask
        self.sink = sink

    @property
    def d(self) -> int:
        """Token dimension `d` (the kernel's)."""
        return self.kernel.d

    @property
    def n(self) -> int:
        """Number of tokens (the mask's size)."""
        return self.mask.shape[-1]

    def check_maskable(self, name: str = "kernel") -> None:
        """Always raises: a masked kernel takes its own mask."""
        raise ParameterError(
            f"`{name}` is already Masked; give the inner kernel a combined mask instead (`mask1 & mask2`)."
        )

    def velocity(
        self,
        t: Real[ArrayLike, ""],
        x: Float[Array, "n d"],
        keys: Float[Array, "k d"] | None = None,
        mask: Bool[Array, "n k"] | None = None,
    ) -> Float[Array, "n d"]:
        """`Γ(x_i)` over the allowed keys (and the sink), `x` the `(n, d)` tokens.

        **Raises:** :class:`~hassejax.errors.ParameterError` if `keys` or `mask` is given,
        or `x` does not have `n` rows.
        """
        if keys is not None or mask is not None:
            raise ParameterError(
                "A Masked kernel takes its mask from `self.mask` and uses the tokens as keys; pass keys=None, mask=None."
            )
        n = self.n
        if x.ndim != 2 or x.shape[0] != n:
            raise ParameterError(f"`x` must have shape (n, d) with n = {n} (the mask size); got shape {x.shape}.")
        m = self.mask
        y = x
        if self.sink is not None:
            sink = jnp.asarray(self.sink, x.dtype)
            y = jnp.concatenate([sink[None, :], x], axis=0)
            m = jnp.concatenate([jnp.ones((n, 1), dtype=bool), m], axis=1)
        return self.kernel.velocity(t, x, y, m)

    def gaussian_second_moment(self) -> bool:
        """The kernel's (see :class:`AbstractAttention`): no Gaussian map under a mask, but the particle solves' size
        event watches the second moment for such a kernel, also as a head of a :class:`MultiHead` (a masked linear
        head there ran to its blow-up unseen, a fresh-user review)."""
        return self.kernel.gaussian_second_moment()

    def check_unbatched(self, name: str = "model") -> None:
        """Raise :class:`~hassejax.errors.ParameterError` if the kernel, the mask or the sink is batched."""
        self.kernel.check_unbatched(f"{name}.kernel")
        if self.mask.ndim != 2:
            raise ParameterError(f"`{name}.mask` must have shape (n, n) inside a solve; got shape {self.mask.shape}.")
        if self.sink is not None and jnp.ndim(self.sink) != 1:
            raise ParameterError(
                f"`{name}.sink` must have shape (d,) inside a solve; got shape {jnp.shape(self.sink)}."
            )


def masked_parts(model: AbstractAttention, name: str = "model"):
    """Every :class:`Masked` kernel in `model`, with its name: `model` itself, or a head of a (nested)
    :class:`~hassejax.dynamics.MultiHead` (``model.heads[0].heads[1]``), in order."""
    if isinstance(model, Masked):
        yield model, name
    for h, head in enumerate(getattr(model, "heads", ())):
        yield from masked_parts(head, f"{name}.heads[{h}]")
