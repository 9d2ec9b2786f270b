"""affine_fit_residual against SciPy's least squares and a closed form."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg

from hassejax.dynamics.affine_fit import affine_fit_residual
from hassejax.errors import ParameterError


def test_against_scipy_lstsq():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((200, 3))
    v = np.tanh(x @ rng.standard_normal((3, 3))) + 0.1 * x**2
    fit = affine_fit_residual(x, v)
    design = np.hstack([x, np.ones((200, 1))])
    coef = scipy.linalg.lstsq(design, v)[0]
    res = v - design @ coef
    np.testing.assert_allclose(fit.residual, np.sum(res**2) / np.sum((v - v.mean(0)) ** 2), rtol=1e-10)
    np.testing.assert_allclose(fit.M, coef[:3].T, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(fit.c, coef[3], rtol=1e-10, atol=1e-12)


def test_closed_forms():
    # v = (x1², 0) on a grid symmetric in x1: the best affine fit is the constant mean, r = 1
    g = np.linspace(-1.0, 1.0, 11)
    x = np.stack(np.meshgrid(g, g), -1).reshape(-1, 2)
    assert affine_fit_residual(x, np.stack([x[:, 0] ** 2, 0 * x[:, 0]], 1)).residual == pytest.approx(1.0, abs=1e-12)
    assert affine_fit_residual(x, np.ones_like(x)).residual == 0.0  # a constant field


def test_errors(no_typecheck):
    x = np.random.default_rng(0).standard_normal((10, 2))
    with pytest.raises(ParameterError, match="shape"):
        affine_fit_residual(x, x[:, :1])
    with pytest.raises(ParameterError, match="d \\+ 2"):
        affine_fit_residual(x[:3], x[:3])
    with pytest.raises(ParameterError, match="hyperplane"):
        affine_fit_residual(np.stack([x[:, 0], x[:, 0]], 1), x)
    with pytest.raises(ParameterError, match="finite"):
        affine_fit_residual(np.where(x > 1, np.nan, x), x)
