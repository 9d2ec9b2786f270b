"""The exact loss floor of every labelled slot of a layout on Markov-chain data (spec hasse.md §4).

A slot that predicts ``w_t`` sees, after ``L`` layers, the slots its row of ``R^(L)`` reaches:
a slot reading one sequence token shows that token, a mask token shows none, and an aggregate
(the average of its sources' embeddings) shows only the unordered multiset of its sources' tokens
— their order only where the slot also reaches the sources (or all but one of them). No predictor
can beat ``H(X_t | view)`` in expected cross-entropy, and the Bayes predictor attains it (for
generic embeddings, which tell the multisets apart), so that conditional entropy is the slot's floor; :func:`hassejax.nn.optimal_loss` is their
mean. :func:`target_floors` returns them one by one, so a figure can show where a layout's
floor differs from the interior value (Butterfly's end slots see one neighbour, not two).

Source: Li & Guo, arXiv:2606.09951 (paper: layouts); Cover & Thomas, "Elements of Information
Theory", 2nd ed., §2.6 (cross-entropy is at least the conditional entropy: the information inequality) (textbook); the
per-slot decomposition and the multiset view of an aggregate are (derived).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .markov import MarkovChain, _slot_floor, _slot_views

__all__ = ["TargetFloors", "target_floors"]


@dataclasses.dataclass(frozen=True)
class TargetFloors:
    """Result of :func:`target_floors`, one entry per labelled slot in slot order (host NumPy).

    - `slots`: int `(m,)`, the labelled slots.
    - `targets`: int `(m,)`, the 0-based sequence index each slot predicts.
    - `floors`: float64 `(m,)`, ``H(X_target | view)`` in nats (``H(X_target | X_seen)`` where `pooled` is empty).
    - `seen`: per slot, the sorted 0-based sequence positions whose tokens it knows.
    - `num_layers`: the depth used (None = the limit).
    - `pooled`: per slot, the position tuples of the aggregates it reaches without their sources: of each it knows
      only the multiset of tokens (empty tuples for the shipped layouts, whose aggregates' sources are reached).

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
    pooled: tuple[tuple[tuple[int, ...], ...], ...] = ()

    @property
    def mean(self) -> float:
        """The layout's floor: the mean over its labelled slots (= :func:`~hassejax.nn.optimal_loss`)."""
        return float(self.floors.mean())


def target_floors(chain: MarkovChain, layout, num_layers: int | None = None) -> TargetFloors:
    """The exact cross-entropy floor ``H(X_t | view)`` of every labelled slot of `layout` (nats).

    A slot's view (module docstring): the tokens of the positions it reaches through single-token slots, and for an
    aggregate it reaches without its sources the multiset of their tokens; then the floor is computed from the
    enumerated joint law of the positions involved (else the nearest-neighbour closed form,
    :func:`~hassejax.nn.conditional_entropy`).

    **Arguments:**

    - `chain`: a :class:`~hassejax.nn.MarkovChain` (its initial law is the law of ``X_1``).
    - `layout`: a :class:`~hassejax.nn.Layout` (mask: row = query slot, column = key slot,
      True = may attend).
    - `num_layers`: depth ``L`` of the model (the slot sees its row of ``R^(L) = (M | I)^L``),
      or None for the limit.

    **Returns:** a :class:`TargetFloors` (float64 floors, host).

    **Raises:** :class:`~hassejax.errors.ParameterError` for a layout without labelled slots, or with an aggregate of
    unequal weights reached without its sources (no multiset: not implemented);
    :class:`~hassejax.errors.MemoryBudgetError` where aggregates reached without their sources tie more than
    ``V^m = 2^22`` joint configurations together.

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

    A centre slot that sees only itself holds ``(w_{k−1} + w_{k+1}) / 2``: the unordered pair of its neighbours,
    which tells less than the ordered pair (`H2`).

    >>> import dataclasses
    >>> alone = dataclasses.replace(butterfly_layout(5), mask=jnp.eye(13, dtype=bool))
    >>> g = target_floors(chain, alone)
    >>> g.seen[2], g.pooled[2], bool(g.floors[2] > f.floors[2] + 1e-3)
    ((), ((1, 3),), True)
    """
    views = _slot_views(layout, num_layers)
    slots = np.flatnonzero(np.asarray(layout.target_index) >= 0)
    floors = [_slot_floor(chain, t, known, pools, layout.sequence_length, layout.name) for t, known, pools in views]
    return TargetFloors(
        slots=slots,
        targets=np.array([t for t, _, _ in views], dtype=np.int64),
        floors=np.array(floors, dtype=np.float64),
        seen=tuple(tuple(sorted(known)) for _, known, _ in views),
        num_layers=num_layers,
        pooled=tuple(tuple(pools) for _, _, pools in views),
    )
