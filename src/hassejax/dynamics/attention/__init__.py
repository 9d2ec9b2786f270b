"""Attention kernels as Equinox modules, one kernel a file (spec dynamics.md §1–§2; arXiv:2501.18322).

- :mod:`._base`: :class:`AbstractAttention` (velocity field, weights, Gaussian map,
  batch checks) and :class:`AbstractBilinearAttention` (fields `V`, `A | Q, K`, `beta` and
  the logits `β yᵀAx`).
- one file per kernel: :class:`Softmax`, :class:`L2`, :class:`Sinkhorn`, :class:`Sigmoid`,
  :class:`Linear`; the compositions :class:`MultiHead` (sum over heads) and :class:`Masked`
  (a kernel under a fixed mask, optional attention sink).

A new kernel is one subclass of :class:`AbstractAttention` (see its example); the solvers
:func:`~hassejax.dynamics.solve_particles` and :func:`~hassejax.dynamics.solve_gaussian`
take any kernel.
"""

from ._base import AbstractAttention, AbstractBilinearAttention, TimeParam, check_model
from ._l2 import L2
from ._linear import Linear
from ._masked import Masked
from ._multihead import MultiHead
from ._sigmoid import Sigmoid
from ._sinkhorn import Sinkhorn
from ._softmax import Softmax

# the base, one kernel a file, the model check
__all__ = [
    "AbstractAttention", "AbstractBilinearAttention", "TimeParam",
    "Softmax", "L2", "Sinkhorn", "Sigmoid", "Linear", "MultiHead", "Masked", "check_model",
]  # fmt: skip
