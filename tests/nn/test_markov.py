"""Markov-chain data: exact entropies against brute-force enumeration of the joint law."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hassejax.errors import ParameterError
from hassejax.nn import (
    MarkovChain,
    bayes_loss,
    block_two_stream_layout,
    butterfly_layout,
    causal_layout,
    conditional_entropy,
    entropy_rate,
    optimal_loss,
    random_markov_chain,
    stationary_distribution,
    two_sided_entropy,
)


def _joint(chain: MarkovChain, n: int) -> np.ndarray:
    """The joint law of (X_1..X_n) as an n-dimensional array, by enumerating every sequence."""
    p = np.asarray(chain.transition, np.float64)
    p = p / p.sum(1, keepdims=True)
    mu = np.asarray(chain.initial, np.float64)
    mu = mu / mu.sum()
    v = p.shape[0]
    joint = np.zeros((v,) * n)
    for seq in itertools.product(range(v), repeat=n):
        prob = mu[seq[0]]
        for a, b in itertools.pairwise(seq):
            prob *= p[a, b]
        joint[seq] = prob
    return joint


def _entropy(q: np.ndarray) -> float:
    q = q[q > 0]
    return float(-(q * np.log(q)).sum())


def _brute_conditional(joint: np.ndarray, target: int, visible) -> float:
    """H(X_t | X_S) = H(X_t, X_S) − H(X_S) from the enumerated joint."""
    n = joint.ndim
    keep = sorted(set(visible) | {target})
    a = joint.sum(axis=tuple(i for i in range(n) if i not in keep))
    b = joint.sum(axis=tuple(i for i in range(n) if i not in set(visible)))
    return _entropy(a) - _entropy(b)


@pytest.fixture(scope="module")
def chain():
    return random_markov_chain(jax.random.key(11), 3, concentration=0.7)


def test_stationary_distribution(chain):
    pi = stationary_distribution(chain.transition)
    p = np.asarray(chain.transition, np.float64)
    np.testing.assert_allclose(pi @ p, pi, atol=1e-12)
    np.testing.assert_allclose(pi.sum(), 1.0)
    np.testing.assert_allclose(np.asarray(chain.initial), pi, rtol=1e-6)


def test_h1_h2_against_enumeration(chain):
    n = 5
    joint = _joint(chain, n)
    h1 = entropy_rate(chain)
    h2 = two_sided_entropy(chain)
    for t in range(1, n):
        assert _brute_conditional(joint, t, [t - 1]) == pytest.approx(h1, rel=1e-9)
        assert _brute_conditional(joint, t, range(t)) == pytest.approx(
            h1, rel=1e-9
        )  # Markov: the past = the last state
    for t in range(1, n - 1):
        assert _brute_conditional(joint, t, [t - 1, t + 1]) == pytest.approx(h2, rel=1e-9)
        others = [s for s in range(n) if s != t]
        assert _brute_conditional(joint, t, others) == pytest.approx(h2, rel=1e-9)
    assert h2 < h1 < np.log(3)


def test_conditional_entropy_against_enumeration_for_every_visible_set():
    """Any target, any visible set, non-stationary initial law: the formula equals enumeration."""
    p = np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8], [0.5, 0.3, 0.2]])
    chain = MarkovChain(jnp.asarray(p), jnp.asarray([0.6, 0.3, 0.1]))
    n = 5
    joint = _joint(chain, n)
    for t in range(n):
        others = [s for s in range(n) if s != t]
        for r in range(len(others) + 1):
            for vis in itertools.combinations(others, r):
                got = conditional_entropy(chain, t, vis, n)
                assert got == pytest.approx(_brute_conditional(joint, t, vis), rel=1e-9, abs=1e-12)
    assert conditional_entropy(chain, 2, [2, 4]) == 0.0


def test_optimal_loss_of_the_layouts_against_enumeration(chain):
    n = 4
    joint = _joint(chain, n)
    # causal: predict w_{t+1} from w_1..w_t, t = 1..n−1 -> H1 each
    assert optimal_loss(chain, causal_layout(n)) == pytest.approx(entropy_rate(chain), rel=1e-9)
    # butterfly: predict w_k from every other token (boundaries exact)
    bfly = np.mean([_brute_conditional(joint, k, [s for s in range(n) if s != k]) for k in range(n)])
    assert optimal_loss(chain, butterfly_layout(n)) == pytest.approx(bfly, rel=1e-9)
    # block two-stream, l = 2: predict block b from the prefix w_1..w_{2b}
    bts = np.mean([_brute_conditional(joint, t, range(2 * (t // 2))) for t in range(n)])
    assert optimal_loss(chain, block_two_stream_layout(n, 2)) == pytest.approx(bts, rel=1e-9)


def test_bayes_loss_against_enumeration_and_its_expectation(chain):
    n = 4
    joint = _joint(chain, n)
    seqs = np.asarray(chain.sample(jax.random.key(8), 6, n))

    def cond_prob(seq, t, visible):  # p(x_t | x_visible) from the enumerated joint
        keep = sorted(set(visible) | {t})
        marg = joint.sum(axis=tuple(i for i in range(n) if i not in keep))
        idx = tuple(seq[i] for i in keep)
        row = tuple(slice(None) if i == t else seq[i] for i in keep)
        return marg[idx] / marg[row].sum()

    bf = -np.mean([np.log(cond_prob(s, k, [j for j in range(n) if j != k])) for s in seqs for k in range(n)])
    assert bayes_loss(chain, butterfly_layout(n), seqs) == pytest.approx(bf, rel=1e-9)
    bts = -np.mean([np.log(cond_prob(s, t, range(2 * (t // 2)))) for s in seqs for t in range(n)])
    assert bayes_loss(chain, block_two_stream_layout(n, 2), seqs) == pytest.approx(bts, rel=1e-9)
    many = chain.sample(jax.random.key(9), 20000, n)
    assert bayes_loss(chain, butterfly_layout(n), many) == pytest.approx(
        optimal_loss(chain, butterfly_layout(n)), abs=0.02
    )


def test_sampling_statistics():
    p = np.array([[0.9, 0.1, 0.0], [0.2, 0.3, 0.5], [0.3, 0.3, 0.4]])
    chain = MarkovChain(jnp.asarray(p), jnp.asarray([0.2, 0.5, 0.3]))
    x = np.asarray(chain.sample(jax.random.key(0), 4000, 6))
    assert x.shape == (4000, 6) and x.dtype == np.int32
    np.testing.assert_allclose(np.bincount(x[:, 0], minlength=3) / 4000, [0.2, 0.5, 0.3], atol=0.03)
    counts = np.zeros((3, 3))
    np.add.at(counts, (x[:, :-1].ravel(), x[:, 1:].ravel()), 1)
    np.testing.assert_allclose(counts / counts.sum(1, keepdims=True), p, atol=0.03)
    assert counts[0, 2] == 0  # a zero transition never happens


def test_sample_takes_numpy_integers():
    """``chain.sample(key, np.int64(5), 6)`` was refused ("must be a positive int") where Python ints work: NumPy
    integers are counts too, with the same draw; bools and floats are still refused by name (next test)."""
    chain = random_markov_chain(jax.random.key(3), np.int64(4), 0.5)
    assert chain.vocab_size == 4
    want = np.asarray(chain.sample(jax.random.key(0), 5, 6))
    for num_sequences, length in ((np.int64(5), np.int64(6)), (np.int32(5), 6), (5, np.uint16(6))):
        got = chain.sample(jax.random.key(0), num_sequences, length)
        np.testing.assert_array_equal(np.asarray(got), want)


def test_sample_refuses_bool_and_float_counts(no_runtime_typecheck):
    chain = random_markov_chain(jax.random.key(3), 4, 0.5)
    for bad in (True, np.True_, 5.0, np.float64(5.0)):
        with pytest.raises(ParameterError, match=r"`num_sequences` must be a positive int; got"):
            chain.sample(jax.random.key(0), bad, 6)
        with pytest.raises(ParameterError, match=r"`length` must be a positive int; got"):
            chain.sample(jax.random.key(0), 5, bad)
    with pytest.raises(ParameterError, match=r"`vocab_size` must be an int >= 2; got np\.True_"):
        random_markov_chain(jax.random.key(3), np.True_, 0.5)


def test_a_draw_that_is_not_irreducible_names_concentration():
    """A tiny concentration underflows Dirichlet entries to 0 (key 0, V = 3, 1e-3: two or three classes); the error named
    `transition`, an argument the caller never passed (a fresh user)."""
    with pytest.raises(
        ParameterError, match=r"^`concentration` = 0\.001 drew a chain that is not irreducible \(it has \d"
    ):
        random_markov_chain(jax.random.PRNGKey(0), 3, 1e-3)


def test_random_chain_is_reproducible_and_peaked():
    a = random_markov_chain(jax.random.key(3), 8, 0.3)
    b = random_markov_chain(jax.random.key(3), 8, 0.3)
    np.testing.assert_array_equal(np.asarray(a.transition), np.asarray(b.transition))
    assert entropy_rate(a) < 0.8 * np.log(8)


def test_markov_errors(no_runtime_typecheck):
    with pytest.raises(ParameterError, match="rows must sum to 1"):
        MarkovChain(jnp.asarray([[0.5, 0.4], [0.5, 0.5]]), jnp.asarray([0.5, 0.5]))
    with pytest.raises(ParameterError, match=r"`initial` must be a probability vector of shape \(2,\)"):
        MarkovChain(jnp.asarray([[0.5, 0.5], [0.5, 0.5]]), jnp.asarray([0.5, 0.2, 0.3]))
    with pytest.raises(ParameterError, match="must be irreducible"):
        stationary_distribution(jnp.eye(2))
    with pytest.raises(ParameterError, match="`vocab_size` must be an int >= 2"):
        random_markov_chain(jax.random.key(0), 1)
    with pytest.raises(ParameterError, match="`concentration` must be a positive number"):
        random_markov_chain(jax.random.key(0), 4, 0.0)
    chain = MarkovChain(jnp.asarray([[0.5, 0.5], [0.5, 0.5]]), jnp.asarray([0.5, 0.5]))
    with pytest.raises(ParameterError, match=r"^`target`: positions must lie in \[0, 4\)"):
        conditional_entropy(chain, 4, [0], 4)
    with pytest.raises(ParameterError, match=r"^`target`: positions must lie in \[0, ∞\)"):  # was "[0, None)"
        conditional_entropy(chain, -1, [1])
    with pytest.raises(ParameterError, match=r"^`visible`: positions must lie in \[0, 4\)"):
        conditional_entropy(chain, 1, [0, 5], 4)
    lay = causal_layout(3)
    lay = type(lay)(
        lay.mask,
        lay.token_sources,
        lay.token_weights,
        lay.position_ids,
        -jnp.ones_like(lay.target_index),
        lay.sequence_length,
        lay.streams,
        lay.slot_names,
        lay.name,
    )
    with pytest.raises(ParameterError, match="has no labelled slot"):
        optimal_loss(chain, lay)
    with pytest.raises(ParameterError, match=r"`sequences` must have shape \(m, 3\)"):
        bayes_loss(chain, causal_layout(3), np.zeros((2, 4), int))
    with pytest.raises(ParameterError, match=r"`sequences` must hold states in \[0, 2\)"):
        bayes_loss(chain, causal_layout(3), np.full((2, 3), 2))


def test_examples_print_the_same_in_float32_and_float64():
    """Review: two docstring examples printed other numbers under JAX's default float32 than the suite's x64 showed:
    MarkovChain's row sums ([0.9999999776…, 1.1000000238…] for [1.0, 1.1]) and make_optimizer's updates
    ([-0.099999, -0.199999] for [-0.1, -0.2]). Both now round; each runs in both modes."""
    import doctest

    from hassejax.nn import make_optimizer

    finder, flags = doctest.DocTestFinder(recurse=False), doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS
    old = jax.config.jax_enable_x64
    try:
        for x64 in (False, True):
            jax.config.update("jax_enable_x64", x64)
            for obj in (MarkovChain, make_optimizer):
                runner = doctest.DocTestRunner(optionflags=flags)
                for test in finder.find(obj, obj.__name__, globs={}):
                    runner.run(test)
                result = runner.summarize(verbose=False)
                assert result.attempted > 0 and result.failed == 0, f"{obj.__name__}, x64={x64}: {result}"
    finally:
        jax.config.update("jax_enable_x64", old)


def test_bayes_loss_refuses_sequences_of_probability_zero():
    """A review: on the alternating chain the sequence 0 0 0 0 is impossible, and bayes_loss returned inf with a raw
    NumPy divide-by-zero warning; it now names `sequences`. The possible sequence 0 1 0 1 is predicted with
    certainty (independent: each next state is forced), loss 0."""
    import warnings

    from hassejax.nn import bayes_loss, causal_layout

    chain = MarkovChain(jnp.array([[0.0, 1.0], [1.0, 0.0]]), jnp.array([0.5, 0.5]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ParameterError, match=r"`sequences` must be possible under `chain`; sequence 1 "):
            bayes_loss(chain, causal_layout(4), jnp.array([[0, 1, 0, 1], [0, 0, 0, 0]]))
        assert bayes_loss(chain, causal_layout(4), jnp.array([[0, 1, 0, 1]])) == 0.0
        with pytest.raises(ParameterError, match=r"`sequences` must have shape \(m, 4\) with m >= 1"):
            bayes_loss(chain, causal_layout(4), jnp.zeros((0, 4), jnp.int32))
