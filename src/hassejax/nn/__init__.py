"""Equinox Transformers that consume any mask (spec hasse.md §3–4; Li & Guo, arXiv:2606.09951).

- :mod:`~hassejax.nn.attention`: :class:`MaskedMultiHeadAttention`, :func:`masked_softmax`
  (a fully masked row gives a zero update, not a uniform average).
- :mod:`~hassejax.nn.transformer`: :class:`Transformer` (token + position-id embeddings,
  pre-norm blocks, a forward from embeddings for the Jacobian).
- :mod:`~hassejax.nn.layouts`: :class:`Layout` read off a (merged) task:
  :func:`causal_layout`, :func:`block_two_stream_layout`, :func:`butterfly_layout`.
- :mod:`~hassejax.nn.flow`: :func:`jacobian_flow`, the model's information flow (== ``R^(L)``).
- :mod:`~hassejax.nn.train`: optax training on a layout (:func:`train`, :func:`layout_loss`).
- :mod:`~hassejax.nn.markov`: Markov-chain data with exact conditional entropies.
- :mod:`~hassejax.nn.floors`: :func:`target_floors`, the exact loss floor of every labelled
  slot (their mean is :func:`optimal_loss`).
- :mod:`~hassejax.nn.generate`: :func:`generate_blocks`, Block Two-Stream inference.
"""

from .attention import MaskedMultiHeadAttention, masked_softmax
from .floors import TargetFloors, target_floors
from .flow import jacobian_flow
from .generate import BlockGeneration, generate_blocks
from .layouts import Layout, SlotInputs, block_two_stream_layout, butterfly_layout, causal_layout, layout_from_task
from .markov import (
    MarkovChain,
    bayes_loss,
    conditional_entropy,
    entropy_rate,
    optimal_loss,
    random_markov_chain,
    stationary_distribution,
    two_sided_entropy,
)
from .train import TrainConfig, TrainHistory, evaluate, layout_loss, make_optimizer, make_schedule, train
from .transformer import Transformer, TransformerBlock

__all__ = [
    "masked_softmax",
    "MaskedMultiHeadAttention",
    "TransformerBlock",
    "Transformer",
    "SlotInputs",
    "Layout",
    "layout_from_task",
    "causal_layout",
    "block_two_stream_layout",
    "butterfly_layout",
    "jacobian_flow",
    "MarkovChain",
    "stationary_distribution",
    "random_markov_chain",
    "entropy_rate",
    "two_sided_entropy",
    "conditional_entropy",
    "optimal_loss",
    "bayes_loss",
    "TargetFloors",
    "target_floors",
    "TrainConfig",
    "TrainHistory",
    "make_schedule",
    "make_optimizer",
    "layout_loss",
    "evaluate",
    "train",
    "BlockGeneration",
    "generate_blocks",
]
