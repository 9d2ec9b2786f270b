"""The exact loss floor of every labelled slot of a layout on Markov-chain data (spec hasse.md §4).

A slot that predicts ``w_t`` sees, after ``L`` layers, the sequence tokens its row of
``R^(L)`` reaches (aggregates through their sources, mask tokens carry none). No predictor
can beat ``H(X_t | X_seen)`` in expected cross-entropy, and the Bayes predictor attains it,
so that conditional entropy is the slot's floor; :func:`hassejax.nn.optimal_loss` is their
mean. :func:`target_floors` returns them one by one, so a figure can show where a layout's
floor differs from the interior value (Butterfly's end slots see one neighbour, not two).

Source: Li & Guo, arXiv:2606.09951 (paper: layouts); Cover & Thomas, "Elements of Information
Theory", 2nd ed., §2.6 (cross-entropy is at least the conditional entropy: the information inequality) (textbook); the
per-slot decomposition is (derived).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .markov import MarkovChain, _visible_positions, conditional_entropy

__all__ = ["TargetFloors", "target_floors"]


@dataclasses.dataclass(frozen=True)
class TargetFloors:
    """Result of :func:`target_floors`, one entry per labelled slot in slot order (host NumPy).

    - `slots`: int `(m,)`, the labelled slots.
    - `targets`: int `(m,)`, the 0-based sequence index each slot predicts.
    - `floors`: float64 `(m,)`, ``H(X_target | X_seen)`` in nats.
    - `seen`: per slot, the sorted 0-based sequence positions it sees.
    - `num_layers`: the depth used (None = the limit).

    Source: (derived), the result of :func:`target_floors` (module docstring).

    **Example:** next-token slots on a stationary chain: each floor is the entropy rate
    ``H1 = 5/6 · h(0.1) + 1/6 · log 2``.

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.nn import MarkovChain, causal_layout, target_floors
    >>> chain = MarkovChain(jnp.array([[0.9, 0.1], [0.5, 0.5]]), jnp.array([5 / 6, 1 / 6]))
    >>> f = target_floors(chain, causal_layout(4))
    >>> f.slots.tolist(), f.targets.tolist(), f.seen
    ([0, 1, 2], [1, 2, 3], ((0,), (0, 1), (0, 1, 2)))
    >>> f.floors.round(6).tolist(), round(f.mean, 6)
    ([0.386427, 0.386427, 0.386427], 0.386427)

    ```
    """

    slots: np.ndarray
    targets: np.ndarray
    floors: np.ndarray
    seen: tuple[tuple[int, ...], ...]
    num_layers: int | None

    @property
    def mean(self) -> float:
        """The layout's floor: the mean over its labelled slots (= :func:`~hassejax.nn.optimal_loss`)."""
        return float(self.floors.mean())


def target_floors(chain: MarkovChain, layout, num_layers: int | None = None) -> TargetFloors:
    """The exact cross-entropy floor ``H(X_t | X_seen)`` of every labelled slot of `layout` (nats).

    **Arguments:**

    - `chain`: a :class:`~hassejax.nn.MarkovChain` (its initial law is the law of ``X_1``).
    - `layout`: a :class:`~hassejax.nn.Layout` (mask: row = query slot, column = key slot,
      True = may attend).
    - `num_layers`: depth ``L`` of the model (the slot sees its row of ``R^(L) = (M | I)^L``),
      or None for the limit.

    **Returns:** a :class:`TargetFloors` (float64 floors, host).

    **Raises:** :class:`~hassejax.errors.ParameterError` for a layout without labelled slots.

    Source: (derived) from :func:`~hassejax.nn.conditional_entropy`; paper: Li & Guo,
    arXiv:2606.09951 (layouts).

    **Example:**

    >>> import jax, jax.numpy as jnp
    >>> from hassejax.nn import butterfly_layout, random_markov_chain, target_floors, two_sided_entropy
    >>> chain = random_markov_chain(jax.random.key(0), 3)
    >>> f = target_floors(chain, butterfly_layout(5))
    >>> f.targets.tolist(), f.seen[0]
    ([0, 1, 2, 3, 4], (1, 2, 3, 4))

    An interior slot's floor is `H2` (:func:`~hassejax.nn.two_sided_entropy`), up to the chain's
    dtype: its initial law is the stationary law rounded to that dtype, which moves the law of
    ``X_t`` and so the floor by about 1e-8 nats in float32 (JAX's default without x64; at most
    9.3e-9 over 20 random chains) and 1e-15 in float64; hence the tolerances 1e-6 and 1e-12.

    >>> tol = 1e-6 if chain.initial.dtype == jnp.float32 else 1e-12
    >>> bool(abs(f.floors[2] - two_sided_entropy(chain)) < tol)  # an interior slot: H2
    True
    """
    pairs = _visible_positions(layout, num_layers)
    slots = np.flatnonzero(np.asarray(layout.target_index) >= 0)
    floors = [conditional_entropy(chain, t, seen, layout.sequence_length) for t, seen in pairs]
    return TargetFloors(
        slots=slots,
        targets=np.array([t for t, _ in pairs], dtype=np.int64),
        floors=np.array(floors, dtype=np.float64),
        seen=tuple(tuple(sorted(seen)) for _, seen in pairs),
        num_layers=num_layers,
    )
