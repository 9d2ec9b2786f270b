"""Masks from task families (spec hasse.md §2–3; Li & Guo, arXiv:2606.09951).

A training task is (inputs, labels, mask); merging the Hasse diagrams of a task family
into its minimal common supergraph derives the mask. Causal attention, Block Two-Stream
attention and Butterfly attention all come out of :func:`merge_tasks`.
"""

from .audit import AuditReport, SlotAudit, audit, reached_tokens
from .families import (
    FAMILIES,
    TaskFamily,
    autoregressive,
    block_diffusion_task,
    block_generation,
    block_two_stream_mask,
    butterfly,
    butterfly_mask,
    xlnet_two_stream_task,
)
from .merge import MergedTask, Sparsified, merge_tasks, node_signatures, sparsify
from .task import Task, TaskStructure, Token

__all__ = [
    "Token",
    "Task",
    "TaskStructure",
    "TaskFamily",
    "MergedTask",
    "Sparsified",
    "node_signatures",
    "merge_tasks",
    "sparsify",
    "autoregressive",
    "block_generation",
    "butterfly",
    "xlnet_two_stream_task",
    "block_diffusion_task",
    "block_two_stream_mask",
    "butterfly_mask",
    "FAMILIES",
    "SlotAudit",
    "AuditReport",
    "audit",
    "reached_tokens",
]
