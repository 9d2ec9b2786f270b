"""Synthetic data with a known answer: sequences of a random first-order Markov chain.

A chain on `V` states has transition matrix `P` (row `a` = law of the next state after `a`)
and an initial law `μ` (by default the stationary law `π`, so every position has marginal
`π`). For such data the best achievable cross-entropy of every prediction task is known
exactly:

- one-sided: ``H1 = H(X_t | X_{t−1}) = −Σ_a π_a Σ_b P_ab log P_ab`` (the entropy rate);
- two-sided (interior `t`): ``H2 = H(X_t | X_{t−1}, X_{t+1})`` with
  ``p(b | a, c) = P_ab P_bc / (P²)_ac``;
- in general (:func:`conditional_entropy`), by the Markov property ``H(X_t | X_S)`` depends
  only on the nearest visible positions `a < t < c` of `S`:
  ``p(x_a, x_t, x_c) = μ_a(x_a) (P^{t−a})_{x_a x_t} (P^{c−t})_{x_t x_c}`` with `μ_a` the law of
  `X_a`, and ``H(X_t | X_S) = H(X_a, X_t, X_c) − H(X_a, X_c)`` (a missing side drops out);
- :func:`optimal_loss`: the per-token average over the labelled slots of a
  :class:`~hassejax.nn.Layout` of ``H(X_t | view)``, the view being the tokens of the sequence
  positions the slot reaches and, for an aggregate it reaches without its sources, only the
  multiset of their tokens (its input is their embeddings' average); without such an aggregate
  bearing on `t` this is the closed form above, else the enumerated joint law of the positions
  involved. It is the floor of the layout's held-out loss (boundaries included exactly);
- :func:`bayes_loss`: the loss of that optimal (Bayes) predictor on given sequences — the
  same held-out set as a model, so the two can be compared without sampling noise.

Entropies are computed on the host in float64 from the chain's stored (possibly float32)
parameters, so they are exact for the chain that is sampled. Natural logarithms (nats).

Source: Cover & Thomas, "Elements of Information Theory", 2nd ed., §4.2 (entropy rate of a
Markov chain) (textbook); the two-sided and general forms are (derived).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float, Int, PRNGKeyArray
from scipy.sparse.csgraph import connected_components
from scipy.special import entr

from .._checks import int_value
from ..errors import MemoryBudgetError, ParameterError
from ..order import reachability

__all__ = [
    "MarkovChain",
    "stationary_distribution",
    "random_markov_chain",
    "entropy_rate",
    "two_sided_entropy",
    "conditional_entropy",
    "optimal_loss",
    "bayes_loss",
]


def _check_stochastic(transition: np.ndarray) -> None:
    if transition.ndim != 2 or transition.shape[0] != transition.shape[1] or transition.shape[0] < 1:
        raise ParameterError(f"`transition` must be a square (V, V) matrix; got shape {transition.shape}.")
    if not np.all(np.isfinite(transition)) or np.any(transition < 0):
        raise ParameterError("`transition` must have finite, non-negative entries.")
    rows = transition.sum(axis=1)
    if not np.allclose(rows, 1.0, atol=1e-5):
        # rounded: a float32 matrix's sums read 0.9999999776 (a docstring example printed differently under x64)
        low, high = (float(np.round(v, 6)) for v in (rows.min(), rows.max()))
        raise ParameterError(f"`transition` rows must sum to 1; got row sums in [{low}, {high}].")


def stationary_distribution(transition: Float[ArrayLike, "V V"]) -> Float[np.ndarray, " V"]:
    """The stationary law `π` (``π P = π``, ``Σ π = 1``) of an irreducible chain, float64 (host).

    Solved as a least-squares linear system on the host (small `V`).

    **Raises:** :class:`~hassejax.errors.ParameterError` if `transition` is not row-stochastic
    or the chain is not irreducible (then `π` is not unique).

    Source: Cover & Thomas, "Elements of Information Theory", 2nd ed., §4.1 (the stationary distribution of a Markov
    chain) (textbook); the least-squares solve and the irreducibility check are (derived).

    **Example:** ``π = (5/6, 1/6)`` solves ``π P = π``; the identity chain has two classes.

    ```python
    >>> import numpy as np
    >>> from hassejax.nn import stationary_distribution
    >>> stationary_distribution(np.array([[0.9, 0.1], [0.5, 0.5]])).round(6).tolist()
    [0.833333, 0.166667]
    >>> stationary_distribution(np.eye(2))
    Traceback (most recent call last):
    ...
    hassejax.errors.ParameterError: `transition` must be irreducible (one communicating class); it has 2.

    ```
    """
    p = np.asarray(transition, dtype=np.float64)
    _check_stochastic(p)
    ncomp, _ = connected_components(p > 0, directed=True, connection="strong")
    if ncomp != 1:
        raise ParameterError(f"`transition` must be irreducible (one communicating class); it has {ncomp}.")
    v = p.shape[0]
    a = np.vstack([p.T - np.eye(v), np.ones((1, v))])
    b = np.zeros(v + 1)
    b[-1] = 1.0
    pi = np.linalg.lstsq(a, b, rcond=None)[0]
    pi = np.clip(pi, 0.0, None)
    return pi / pi.sum()


class MarkovChain(eqx.Module):
    """A first-order Markov chain on `V` states (token ids `0..V−1`).

    - `transition`: float `(V, V)`, row-stochastic.
    - `initial`: float `(V,)`, the law of the first state.

    **Raises:** :class:`~hassejax.errors.ParameterError` for shapes that do not match or a
    matrix that is not row-stochastic (checked on concrete inputs).

    Source: Cover & Thomas, "Elements of Information Theory", 2nd ed., §4.1 (Markov chains) (textbook); the
    inverse-CDF sampler of :meth:`sample` is (derived).

    **Example:** the chain that alternates `0, 1, 0, …` from state 0 samples one sequence only.

    ```python
    >>> import jax, jax.numpy as jnp
    >>> from hassejax.nn import MarkovChain
    >>> chain = MarkovChain(jnp.array([[0.0, 1.0], [1.0, 0.0]]), jnp.array([1.0, 0.0]))
    >>> chain.vocab_size, chain.sample(jax.random.key(0), 2, 5).tolist()
    (2, [[0, 1, 0, 1, 0], [0, 1, 0, 1, 0]])
    >>> MarkovChain(jnp.array([[0.9, 0.1], [0.5, 0.6]]), jnp.array([0.5, 0.5]))
    Traceback (most recent call last):
    ...
    hassejax.errors.ParameterError: `transition` rows must sum to 1; got row sums in [1.0, 1.1].

    ```
    """

    transition: Float[Array, "V V"]
    initial: Float[Array, " V"]

    def __init__(self, transition: Float[Array, "V V"], initial: Float[Array, " V"]):
        t = np.asarray(transition, dtype=np.float64)
        _check_stochastic(t)
        i = np.asarray(initial, dtype=np.float64)
        if i.shape != (t.shape[0],) or np.any(i < 0) or not np.isclose(i.sum(), 1.0, atol=1e-5):
            raise ParameterError(
                f"`initial` must be a probability vector of shape ({t.shape[0]},); got shape {i.shape}, sum {i.sum()}."
            )
        self.transition = jnp.asarray(transition)
        self.initial = jnp.asarray(initial)

    @property
    def vocab_size(self) -> int:
        """Number of states `V`."""
        return self.transition.shape[0]

    def sample(
        self, key: PRNGKeyArray, num_sequences: int | np.integer, length: int | np.integer
    ) -> Int[Array, "num_sequences length"]:
        """`num_sequences` independent sequences of `length` states (int32), jittable.

        `X_1 ~ initial`, `X_{t+1} ~ transition[X_t]`, by inverse-CDF sampling: one uniform draw
        `(length, num_sequences)` up front, then a :func:`jax.lax.scan` over time that picks, for
        every sequence at once, the first state whose cumulative probability exceeds its uniform
        (cumulative sums normalised by their last entry, so rounding never runs past state `V − 1`
        and a zero-probability state is never picked).

        **Arguments:** `key` (a `jax.random` key); `num_sequences`, `length`: positive ints (NumPy integers too).

        **Raises:** :class:`~hassejax.errors.ParameterError` for a `num_sequences` or `length` that is not a positive
        int (a bool or a float is refused).
        """
        for name, value in (("length", length), ("num_sequences", num_sequences)):
            if int_value(value) is None or value < 1:
                raise ParameterError(f"`{name}` must be a positive int; got {value!r}.")
        return _sample(self.transition, self.initial, key, int(num_sequences), int(length))


@eqx.filter_jit
def _sample(transition, initial, key, num_sequences: int, length: int):
    cum_p = jnp.cumsum(transition, axis=1)
    cum_p = cum_p / cum_p[:, -1:]
    cum_0 = jnp.cumsum(initial) / jnp.sum(initial)
    u = jax.random.uniform(key, (length, num_sequences), dtype=cum_p.dtype)

    def pick(cum, v):  # cum (..., V), v (...): first index with v < cum
        return jnp.sum(v[..., None] >= cum, axis=-1).astype(jnp.int32)

    x0 = pick(jnp.broadcast_to(cum_0, (num_sequences, cum_0.shape[0])), u[0])

    def step(x, v):
        nxt = pick(cum_p[x], v)
        return nxt, nxt

    _, rest = jax.lax.scan(step, x0, u[1:])
    return jnp.concatenate([x0[None], rest]).T


def random_markov_chain(key: PRNGKeyArray, vocab_size: int | np.integer, concentration: float = 0.5) -> MarkovChain:
    """A random chain: rows of `P` drawn i.i.d. from ``Dirichlet(concentration · 1_V)``, `μ = π`.

    A concentration `≤ 1` makes rows peaked, so context matters (`H1` well below `log V`).

    **Arguments:** `key` (a `jax.random` key), `vocab_size` `V >= 2` (an int, a NumPy integer too), `concentration`
    `α > 0`.

    **Returns:** a stationary :class:`MarkovChain` (initial law = stationary law).

    **Raises:** :class:`~hassejax.errors.ParameterError` for `V < 2`, `α <= 0`, or a draw that
    is not irreducible, naming `concentration` (Dirichlet entries that underflow to 0: a small `α` such as 1e-3;
    use a larger one or another key).

    Source: (derived), no paper: a random stochastic matrix with i.i.d. Dirichlet rows, synthetic data whose loss
    floors are known exactly (module docstring).

    **Example:**

    ```python
    >>> import jax, numpy as np
    >>> from hassejax.nn import entropy_rate, random_markov_chain, stationary_distribution
    >>> chain = random_markov_chain(jax.random.key(0), 3)
    >>> chain.transition.sum(axis=1).round(6).tolist()
    [1.0, 1.0, 1.0]
    >>> bool(np.allclose(chain.initial, stationary_distribution(chain.transition), atol=1e-6))  # stationary
    True
    >>> bool(entropy_rate(chain) < np.log(3))  # peaked rows: context helps
    True

    ```
    """
    if int_value(vocab_size) is None or vocab_size < 2:
        raise ParameterError(f"`vocab_size` must be an int >= 2; got {vocab_size!r}.")
    vocab_size = int(vocab_size)
    if not (isinstance(concentration, (int, float)) and concentration > 0):
        raise ParameterError(f"`concentration` must be a positive number; got {concentration!r}.")
    alpha = jnp.full((vocab_size,), float(concentration))
    p = jax.random.dirichlet(key, alpha, shape=(vocab_size,))
    p = p / jnp.sum(p, axis=1, keepdims=True)
    try:
        pi = stationary_distribution(p)
    except ParameterError as err:  # named `transition`, an argument the caller never passed (a fresh user)
        raise ParameterError(
            f"`concentration` = {concentration!r} drew a chain that is not irreducible ({str(err).split('; ')[-1].rstrip('.')} "
            "communicating classes): "
            "with a small concentration Dirichlet entries underflow to 0 and some states are never left or never "
            "reached. Use a larger concentration (e.g. 0.1 or more) or another key."
        ) from None
    return MarkovChain(p, jnp.asarray(pi, dtype=p.dtype))


def _host(chain: MarkovChain) -> tuple[np.ndarray, np.ndarray]:
    p = np.asarray(chain.transition, dtype=np.float64)
    mu = np.asarray(chain.initial, dtype=np.float64)
    return p / p.sum(axis=1, keepdims=True), mu / mu.sum()


def _h(p: np.ndarray) -> float:
    return float(entr(p).sum())


def conditional_entropy(chain: MarkovChain, target: int, visible, length: int | None = None) -> float:
    """Exact ``H(X_target | X_visible)`` in nats for the chain started from `chain.initial`.

    **Arguments:**

    - `chain`: a :class:`MarkovChain`.
    - `target`: 0-based position `t` of the predicted state.
    - `visible`: iterable of 0-based positions seen (may include `t`: then the answer is 0).
    - `length`: optional sequence length, to check that every position is inside it.

    **Returns:** a Python float (host, float64).

    **Raises:** :class:`~hassejax.errors.ParameterError` for negative positions or positions
    outside `length`.

    Source: conditional entropy as in Cover & Thomas, "Elements of Information Theory", 2nd ed., §2.2
    (textbook); its reduction to the nearest visible positions by the Markov property is (derived), module
    docstring.

    **Example:** with ``P = [[0.9, 0.1], [0.5, 0.5]]`` started from ``π = (5/6, 1/6)``: nothing
    seen gives ``H(π)``, the previous state gives the entropy rate, the state itself gives 0.

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.nn import MarkovChain, conditional_entropy
    >>> chain = MarkovChain(jnp.array([[0.9, 0.1], [0.5, 0.5]]), jnp.array([5 / 6, 1 / 6]))
    >>> [round(conditional_entropy(chain, 1, seen), 6) for seen in ([], [0], [0, 2], [1])]
    [0.450561, 0.386427, 0.333574, 0.0]

    ```
    """
    vis = sorted({int(v) for v in visible})
    t = int(target)
    if t < 0 or (vis and vis[0] < 0) or (length is not None and max([t, *vis]) >= length):
        bad = "target" if t < 0 or (length is not None and t >= length) else "visible"
        where = f"[0, {length})" if length is not None else "[0, ∞) (0-based)"
        raise ParameterError(f"`{bad}`: positions must lie in {where}; got target {t} and visible {vis}.")
    if t in vis:
        return 0.0
    p, mu = _host(chain)
    left = max((v for v in vis if v < t), default=None)
    right = min((v for v in vis if v > t), default=None)
    mpow = np.linalg.matrix_power
    if left is None:
        joint = mu @ mpow(p, t)  # law of X_t
        joint = joint[:, None]  # (x_t, [x_a])
    else:
        law_a = mu @ mpow(p, left)
        joint = law_a[:, None] * mpow(p, t - left)  # (x_a, x_t)
        joint = joint.T  # (x_t, x_a)
    if right is not None:
        joint = joint[:, :, None] * mpow(p, right - t)[:, None, :]  # (x_t, x_a, x_c)
    return _h(joint) - _h(joint.sum(axis=0))


def entropy_rate(chain: MarkovChain) -> float:
    """``H1 = H(X_t | X_{t−1}) = −Σ_a π_a Σ_b P_ab log P_ab`` (nats), with `π` the stationary law.

    **Raises:** :class:`~hassejax.errors.ParameterError` (from :func:`stationary_distribution`) if the chain is not
    irreducible (e.g. the identity chain), so that `π` is not unique.

    Source: Cover & Thomas, Thm 4.2.4 (textbook).

    **Example:** ``H1 = 5/6 · h(0.1) + 1/6 · log 2`` for ``P = [[0.9, 0.1], [0.5, 0.5]]``:

    ```python
    >>> import jax.numpy as jnp, numpy as np
    >>> from hassejax.nn import MarkovChain, entropy_rate
    >>> chain = MarkovChain(jnp.array([[0.9, 0.1], [0.5, 0.5]]), jnp.array([5 / 6, 1 / 6]))
    >>> h = -(0.9 * np.log(0.9) + 0.1 * np.log(0.1))
    >>> round(entropy_rate(chain), 6), round(float(5 / 6 * h + np.log(2) / 6), 6)
    (0.386427, 0.386427)

    ```
    """
    p, _ = _host(chain)
    pi = stationary_distribution(p)
    return float((pi[:, None] * entr(p)).sum())


def two_sided_entropy(chain: MarkovChain) -> float:
    """``H2 = H(X_t | X_{t−1}, X_{t+1})`` (nats) at an interior position of the stationary chain.

    ``p(a, b, c) = π_a P_ab P_bc``; ``H2 = H(a, b, c) − H(a, c)`` (derived).

    **Raises:** :class:`~hassejax.errors.ParameterError` (from :func:`stationary_distribution`) if the chain is not
    irreducible (e.g. the identity chain), so that `π` is not unique.

    Source: (derived); the stationary chain and its law `π` as in Cover & Thomas, "Elements of Information
    Theory", 2nd ed., §4.2 (textbook).

    **Example:** both neighbours tell more than the previous state alone (``H2 < H1``):

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.nn import MarkovChain, conditional_entropy, entropy_rate, two_sided_entropy
    >>> chain = MarkovChain(jnp.array([[0.9, 0.1], [0.5, 0.5]]), jnp.array([5 / 6, 1 / 6]))
    >>> [round(h, 6) for h in (two_sided_entropy(chain), conditional_entropy(chain, 1, [0, 2]), entropy_rate(chain))]
    [0.333574, 0.333574, 0.386427]

    ```
    """
    p, _ = _host(chain)
    pi = stationary_distribution(p)
    joint = pi[:, None, None] * p[:, :, None] * p[None, :, :]
    return _h(joint) - _h(joint.sum(axis=1))


_ENUMERATION_LIMIT = 1 << 22  # joint configurations enumerated for one slot's floor (V^m, m positions)


def _slot_views(layout, num_layers: int | None) -> list[tuple[int, set[int], list[tuple[int, ...]]]]:
    """What every labelled slot of a layout sees after `num_layers` layers: (target index, the positions whose token it
    knows, the pools of positions of which it knows only the multiset of tokens).

    A reached slot's input is ``Σ_r w_r E[x_{src_r}]`` (mask tokens: a constant). For generic embeddings it tells the
    weighted bag of its sources' tokens, no more: one distinct source is known; an aggregate of equal weights,
    ``(w_{k−1} + w_{k+1}) / 2``, tells only the unordered multiset of its sources' tokens. Given the known positions
    the aggregate's residual (its unknown sources) is what it adds: a residual of one position makes that position
    known too (repeated until nothing changes), one of several equal weights stays a pool.

    **Raises:** :class:`~hassejax.errors.ParameterError` for a layout without labelled slots, or for an aggregate
    whose unknown sources carry unequal weights (its information is no multiset: not implemented)."""
    r = np.asarray(reachability(layout.mask, num_layers))
    src = np.asarray(layout.token_sources)
    wts = np.asarray(layout.token_weights, dtype=np.float64)
    tgt = np.asarray(layout.target_index)
    out = []
    for s in np.flatnonzero(tgt >= 0):
        known: set[int] = set()
        bags: list[dict[int, float]] = []
        for q in np.flatnonzero(r[s]):
            bag: dict[int, float] = {}
            for i, w in zip(src[q].tolist(), wts[q].tolist()):
                if i >= 0:
                    bag[i] = bag.get(i, 0.0) + w
            bag = {i: w for i, w in bag.items() if w != 0}
            if len(bag) == 1:
                known |= set(bag)
            elif bag:
                bags.append(bag)
        changed = True
        while changed:  # an aggregate whose other sources are known reveals the last one
            changed, rest = False, []
            for bag in bags:
                residual = {i: w for i, w in bag.items() if i not in known}
                if len(residual) == 1:
                    known |= set(residual)
                    changed = True
                elif residual:
                    rest.append(residual)
            bags = rest
        for bag in bags:
            if len(set(bag.values())) > 1:
                raise ParameterError(
                    f"`layout` {layout.name!r}: slot {int(s)} sees an aggregate of positions {sorted(bag)} with unequal "
                    f"weights {sorted(set(bag.values()))} whose tokens it does not see otherwise; its information is no "
                    "multiset, and an exact floor for it is not implemented."
                )
        out.append((int(tgt[s]), known, sorted({tuple(sorted(b)) for b in bags})))
    if not out:
        raise ParameterError(f"`layout` {layout.name!r} has no labelled slot.")
    return out


def _pooled_problem(target: int, known: set[int], pools: list[tuple[int, ...]]):
    """The part of a slot's view that bears on its target: (boundary positions, pools, enumerated positions), or None
    when no pool does (then ``H(X_t | X_known)`` is the floor).

    Given the known tokens the sequence splits into independent stretches between them (Markov property); a pool ties
    together the stretches its positions lie in. Only the pools tied (directly or through others) to the target's
    stretch matter, and of the known tokens only the ones bounding those stretches."""
    edges = sorted(known)

    def stretch(p: int) -> int:
        return int(np.searchsorted(edges, p))

    linked, chosen = {stretch(target)}, []
    grew = True
    while grew:
        grew = False
        for pool in pools:
            if pool not in chosen and {stretch(p) for p in pool} & linked:
                chosen.append(pool)
                linked |= {stretch(p) for p in pool}
                grew = True
    if not chosen:
        return None
    bounds = sorted({edges[g - 1] for g in linked if g > 0} | {edges[g] for g in linked if g < len(edges)})
    positions = sorted(set(bounds) | {target} | {p for pool in chosen for p in pool})
    return bounds, sorted(chosen), positions


def _pooled_table(chain: MarkovChain, target: int, problem, layout_name: str):
    """Enumerate the joint law of the positions of `problem` (from :func:`_pooled_problem`): returns (probabilities
    `(C,)`, the view's key columns `(C, k)`, the target's column `(C,)`, a function mapping sequences `(m, n)` to their
    key columns). A pool's key is its tokens sorted (the multiset).

    **Raises:** :class:`~hassejax.errors.MemoryBudgetError` for more than 2^22 configurations."""
    bounds, pools, positions = problem
    p, mu = _host(chain)
    v, m = p.shape[0], len(positions)
    if v**m > _ENUMERATION_LIMIT:
        raise MemoryBudgetError(
            f"`layout` {layout_name!r}: the floor of target {target} needs the joint law of {m} positions "
            f"{positions} ({v}^{m} configurations, limit {_ENUMERATION_LIMIT}): a pooled aggregate whose sources the "
            "slot does not see ties them together."
        )
    col = {q: j for j, q in enumerate(positions)}
    cfg = np.indices((v,) * m).reshape(m, -1).T
    mpow = np.linalg.matrix_power
    prob = (mu @ mpow(p, positions[0]))[cfg[:, 0]]
    for j in range(m - 1):
        prob = prob * mpow(p, positions[j + 1] - positions[j])[cfg[:, j], cfg[:, j + 1]]

    def keys(x: np.ndarray, at=lambda q: q) -> np.ndarray:  # `at`: a sequence position's column of `x`
        parts = [x[:, [at(q) for q in bounds]]] + [np.sort(x[:, [at(q) for q in pool]], axis=1) for pool in pools]
        return np.concatenate(parts, axis=1)

    return prob, keys(cfg, col.__getitem__), cfg[:, col[target]], keys


def _group_mass(rows: np.ndarray, prob: np.ndarray, extra: np.ndarray | None = None):
    """Total probability of every distinct row of `rows` `(C, k)` (and of `extra` rows, appended, mass 0): returns
    (mass per group, group index of every row of `rows` then `extra`)."""
    allrows = rows if extra is None else np.concatenate([rows, extra], axis=0)
    if allrows.shape[1] == 0:
        inverse = np.zeros(allrows.shape[0], dtype=np.int64)
    else:
        inverse = np.unique(allrows, axis=0, return_inverse=True)[1].reshape(-1)
    mass = np.bincount(inverse[: rows.shape[0]], weights=prob, minlength=int(inverse.max(initial=0)) + 1)
    return mass, inverse


def _slot_floor(chain: MarkovChain, target: int, known: set[int], pools, length: int, layout_name: str) -> float:
    """``H(X_target | the slot's view)``: the nearest-neighbour closed form without a pool bearing on the target
    (:func:`conditional_entropy`), else the enumerated joint law of the positions involved."""
    problem = None if target in known else _pooled_problem(target, known, pools)
    if problem is None:
        return conditional_entropy(chain, target, known, length)
    prob, key, tcol, _ = _pooled_table(chain, target, problem, layout_name)
    joint, _ = _group_mass(np.concatenate([key, tcol[:, None]], axis=1), prob)
    marginal, _ = _group_mass(key, prob)
    return _h(joint) - _h(marginal)


def bayes_loss(chain: MarkovChain, layout, sequences: Int[ArrayLike, "m n"], num_layers: int | None = None) -> float:
    """Per-token NLL (nats) of the exact Bayes predictor of `layout` on the given sequences.

    Each labelled slot predicts ``p(x_t | view)`` (as in :func:`optimal_loss`, whose value is this loss's
    expectation): ``p(x_t | x_a, x_c)`` with `a < t < c` its nearest reached positions, or, where an aggregate it
    reaches without its sources bears on `t`, the law conditioned on the multiset of their tokens. Evaluated on
    the same held-out sequences as a model, the difference model − Bayes has far less sampling
    noise than either number alone.

    **Arguments:** `chain`, `layout`, `sequences` int `(m, n)` with `n = layout.sequence_length`,
    `num_layers` (None = the limit).

    **Returns:** a Python float.

    **Raises:** :class:`~hassejax.errors.ParameterError` for `sequences` of the wrong shape (or none), not
    integer, with states outside the chain, or of probability 0 under `chain` (a zero initial probability or
    transition: an infinite loss), a layout without labelled slots, or as :func:`optimal_loss`.

    Source: (derived): the Bayes predictor of the module docstring, each slot seeing its row of ``R^(L)``
    (spec hasse.md §1.2) through its inputs' sources (spec hasse.md §2 "Leakage audit").

    **Example:** on the sequence `0 0 0 0` every next-token slot predicts ``P[0, 0] = 0.9``:

    ```python
    >>> import jax.numpy as jnp, numpy as np
    >>> from hassejax.nn import MarkovChain, bayes_loss, causal_layout
    >>> chain = MarkovChain(jnp.array([[0.9, 0.1], [0.5, 0.5]]), jnp.array([5 / 6, 1 / 6]))
    >>> round(bayes_loss(chain, causal_layout(4), jnp.array([[0, 0, 0, 0]])), 6), round(float(-np.log(0.9)), 6)
    (0.105361, 0.105361)

    ```
    """
    x = np.asarray(sequences)
    if x.ndim != 2 or x.shape[1] != layout.sequence_length or x.shape[0] == 0:
        raise ParameterError(f"`sequences` must have shape (m, {layout.sequence_length}) with m >= 1; got {x.shape}.")
    if not np.issubdtype(x.dtype, np.integer):
        raise ParameterError(f"`sequences` must hold integer states; got dtype {x.dtype}.")
    p, mu = _host(chain)
    v = p.shape[0]
    if x.min() < 0 or x.max() >= v:
        raise ParameterError(f"`sequences` must hold states in [0, {v}); got values in [{x.min()}, {x.max()}].")
    # a sequence the chain cannot produce has no Bayes loss (a conditional probability 0: -log 0 = inf)
    possible = (mu[x[:, 0]] > 0) & np.all(p[x[:, :-1], x[:, 1:]] > 0, axis=1)
    if not possible.all():
        row = int(np.flatnonzero(~possible)[0])
        raise ParameterError(
            f"`sequences` must be possible under `chain`; sequence {row} ({x[row].tolist()}) has probability 0 (a "
            "zero initial probability or transition), so its Bayes loss would be infinite."
        )
    mpow = np.linalg.matrix_power
    total = 0.0
    slots = _slot_views(layout, num_layers)
    rows = np.arange(x.shape[0])
    for t, known, pools in slots:
        if t in known:
            continue  # a slot that sees its target predicts it with probability 1 (a leak)
        problem = _pooled_problem(t, known, pools)
        if problem is not None:  # a pool bears on the target: the enumerated law of the positions involved
            prob, key, tcol, keys = _pooled_table(chain, t, problem, layout.name)
            seq_key = keys(x)
            joint, inv_joint = _group_mass(
                np.concatenate([key, tcol[:, None]], axis=1), prob, np.concatenate([seq_key, x[:, [t]]], axis=1)
            )
            marginal, inv_key = _group_mass(key, prob, seq_key)
            with np.errstate(divide="ignore", invalid="ignore"):
                cond = joint[inv_joint[key.shape[0] :]] / marginal[inv_key[key.shape[0] :]]
        else:
            left = max((a for a in known if a < t), default=None)
            right = min((c for c in known if c > t), default=None)
            # unnormalised p(x_t = b | x_a, x_c) for every sequence: (m, V)
            w = np.tile(mu @ mpow(p, t), (x.shape[0], 1)) if left is None else mpow(p, t - left)[x[:, left]]
            if right is not None:
                w = w * mpow(p, right - t)[:, x[:, right]].T
            with np.errstate(divide="ignore", invalid="ignore"):
                cond = (w / w.sum(axis=1, keepdims=True))[rows, x[:, t]]
        if not np.all(cond > 0):  # possible sequences have positive conditionals: only an underflow gets here
            row = int(np.flatnonzero(~(cond > 0))[0])
            raise ParameterError(
                f"`sequences`: the Bayes probability of sequence {row}'s token {t} underflows to 0 (a chain with "
                "transition probabilities too small for float64 over that distance); no finite loss."
            )
        total -= np.log(cond).sum()
    return float(total / (x.shape[0] * len(slots)))


def optimal_loss(chain: MarkovChain, layout, num_layers: int | None = None) -> float:
    """The smallest achievable per-token cross-entropy of `layout` on data of `chain` (nats).

    The mean over labelled slots of ``H(X_target | view)``, the view being what flows into the slot after
    `num_layers` layers (``R^(L)`` of the layout's mask, or the limit for None): the tokens of the reached
    single-token slots (mask tokens carry none) and, for a reached aggregate (the average of its sources'
    embeddings), the unordered multiset of its sources' tokens, which tells their order only where the slot reaches
    the sources too (or all but one of them). For the Block Two-Stream and Butterfly layouts (dense,
    `L* = 1`) every depth gives the same value.

    **Arguments:** `chain`, `layout` (a :class:`~hassejax.nn.Layout`), `num_layers`.

    **Returns:** a Python float.

    **Raises:** :class:`~hassejax.errors.ParameterError` for a layout without labelled slots, or with an aggregate
    of unequal weights reached without its sources (its view is no multiset: not implemented);
    :class:`~hassejax.errors.MemoryBudgetError` where aggregates reached without their sources tie more than
    ``V^m = 2^22`` joint configurations together.

    Source: (derived): each slot sees its row of ``R^(L)`` (spec hasse.md §1.2), and no predictor beats
    ``H(X_t | X_seen)`` in expected cross-entropy (``D(p‖q) ≥ 0``, the information inequality:
    Cover & Thomas, "Elements of Information Theory", 2nd ed., §2.6) (textbook).

    **Example:** next-token prediction reaches the entropy rate `H1`; Butterfly with `n = 4` has two
    end slots at `H1` and two interior ones at `H2`, so its floor is ``(H1 + H2) / 2``.

    ```python
    >>> import jax.numpy as jnp
    >>> from hassejax.nn import MarkovChain, butterfly_layout, causal_layout, optimal_loss
    >>> from hassejax.nn import entropy_rate, two_sided_entropy
    >>> chain = MarkovChain(jnp.array([[0.9, 0.1], [0.5, 0.5]]), jnp.array([5 / 6, 1 / 6]))
    >>> round(optimal_loss(chain, causal_layout(4)), 6), round(entropy_rate(chain), 6)
    (0.386427, 0.386427)
    >>> h1, h2 = entropy_rate(chain), two_sided_entropy(chain)
    >>> round(optimal_loss(chain, butterfly_layout(4)), 6), round((h1 + h2) / 2, 6)
    (0.36, 0.36)

    ```
    """
    slots = _slot_views(layout, num_layers)
    total = sum(_slot_floor(chain, t, known, pools, layout.sequence_length, layout.name) for t, known, pools in slots)
    return total / len(slots)
