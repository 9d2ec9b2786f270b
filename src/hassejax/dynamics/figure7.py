"""The authors' random parameter sets of figure 7, the rank histograms (arXiv:2501.18322; spec dynamics.md §7a item 7).

Softmax and L2 attention in `d = 3, 4, 5` with `Q` standard normal `⌊d/2⌋ × d`, `K = −Q`;
rows `V = I` and `V = GᵀG` random SPD; `Σ0 = SSᵀ`, `S` standard normal. Drawn with the
authors' legacy NumPy seeds (``np.random.seed``: 40 for `Q`, 26 / 27 for the softmax / L2 `V`,
41 for `Σ0` in each dimension), in the order of their ``histograms.py``, so the parameter sets
are theirs.
"""

from __future__ import annotations

import numpy as np

from ..errors import ParameterError

__all__ = ["DIMS", "ROWS", "SEEDS", "parameter_sets"]

DIMS = (3, 4, 5)
"""The dimensions of the figure's columns."""
ROWS = ("V = I", "V random SPD")
"""The figure's rows."""
SEEDS = {"Q": 40, "V_softmax": 26, "V_l2": 27, "Sigma0_per_dim": 41}
"""The authors' ``np.random.seed`` values."""


def parameter_sets(kind: str, per_dim: int) -> list[dict]:
    """The authors' draws (legacy NumPy ``RandomState``, same order as their ``histograms.py``).

    The authors draw 100 `Q` (and `V`) per dimension; with `per_dim < 100` the first
    `per_dim` of each dimension are used. Each parameter set gets the next `Σ0` of the seed-41
    stream of its dimension (what their loop does when every solve converges).

    **Arguments:** `kind`: ``"softmax"`` or ``"l2"`` (which `V` stream); `per_dim`: parameter
    sets per (row, dimension), 1 to 100.

    **Returns:** a list of `2 · 3 · per_dim` dicts (rows, then dimensions, then index) with
    `d`, `row`, `index`, raw `Q` (`⌊d/2⌋ × d` float64), `V` (`d × d`), `Sigma0` (`d × d`).

    **Raises:** :class:`~hassejax.errors.ParameterError` for another `kind` or `per_dim`
    outside 1..100.

    Source: the authors' code (vcastin/2025-transformers-PDEs, ``histograms.py``).

    **Example:**

    ```python
    >>> import numpy as np
    >>> from hassejax.dynamics.figure7 import parameter_sets
    >>> members = parameter_sets("softmax", 2)
    >>> len(members), members[0]["row"], members[0]["Q"].shape, bool(np.all(members[0]["V"] == np.eye(3)))
    (12, 'V = I', (1, 3), True)

    ```
    """
    if kind not in ("softmax", "l2"):
        raise ParameterError(f"`kind` must be 'softmax' or 'l2'; got {kind!r}.")
    if isinstance(per_dim, bool) or not isinstance(per_dim, int | np.integer) or not 1 <= per_dim <= 100:
        raise ParameterError(f"`per_dim` must be an integer in 1..100 (the authors draw 100); got {per_dim!r}.")
    dims_all = np.repeat(DIMS, 100)
    rs = np.random.RandomState(SEEDS["Q"])
    Qs = [rs.randn(d // 2, d) for d in dims_all]
    rs = np.random.RandomState(SEEDS["V_softmax" if kind == "softmax" else "V_l2"])
    Vs = [rs.randn(d, d) for d in dims_all]
    Vs = [v.T @ v for v in Vs]
    sigma0 = {}
    for d in DIMS:
        rs = np.random.RandomState(SEEDS["Sigma0_per_dim"])
        draws = [rs.randn(d, d) for _ in range(per_dim)]
        sigma0[d] = [s @ s.T for s in draws]
    members = []
    for row in ROWS:
        for j, d in enumerate(DIMS):
            for i in range(per_dim):
                k = 100 * j + i
                V = np.eye(d) if row == "V = I" else Vs[k]
                members.append({"d": d, "row": row, "index": i, "Q": Qs[k], "V": V, "Sigma0": sigma0[d][i]})
    return members
