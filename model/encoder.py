"""The trainable node scorer: a bidirectional transformer encoder over frozen token vectors that
gives one logit per RAT node, read at the node's last token (the paper's architecture)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class EncoderConfig:
    d_input: int  # hidden size of the frozen embedder; filled from the embedder, never typed
    d_model: int | None = None  # None = d_input (the paper); smaller projects the input (CPU runs)
    n_layers: int = 4  # bidirectional encoder layers (the paper: 4)
    n_heads: int = 8  # attention heads (the paper: 8)
    d_ff: int | None = None  # feed-forward width; None = 4 * d_model
    dropout: float = 0.1
    max_positions: int = 2048  # learnable positional encodings; longer inputs are an error

    def __post_init__(self):
        self.d_model = self.d_model or self.d_input
        self.d_ff = self.d_ff or 4 * self.d_model
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} is not divisible by n_heads {self.n_heads}")


class NodeEncoder(nn.Module):
    """``forward(token_vectors, padding_mask, node_positions, node_mask) -> (batch, nodes)`` logits."""

    def __init__(self, config: EncoderConfig):
        super().__init__()
        self.config = config
        c = config
        self.input_proj = nn.Linear(c.d_input, c.d_model) if c.d_model != c.d_input else nn.Identity()
        self.positions = nn.Embedding(c.max_positions, c.d_model)
        self.dropout = nn.Dropout(c.dropout)
        layer = nn.TransformerEncoderLayer(
            c.d_model, c.n_heads, c.d_ff, c.dropout, activation="gelu", batch_first=True, norm_first=True
        )
        # Nested tensors would change results with the padding pattern; keep one code path.
        self.encoder = nn.TransformerEncoder(
            layer, c.n_layers, norm=nn.LayerNorm(c.d_model), enable_nested_tensor=False
        )
        self.head = nn.Linear(c.d_model, 1)
        nn.init.normal_(self.positions.weight, std=0.02)

    def forward(
        self,
        token_vectors: torch.Tensor,  # (batch, tokens, d_input) from the frozen embedder
        padding_mask: torch.Tensor,  # (batch, tokens) bool, True at padding
        node_positions: torch.Tensor,  # (batch, nodes) long, index of each node's last token
        node_mask: torch.Tensor,  # (batch, nodes) bool, True at real nodes
    ) -> torch.Tensor:
        batch, tokens, _ = token_vectors.shape
        if tokens > self.config.max_positions:
            raise ValueError(f"input of {tokens} tokens exceeds max_positions={self.config.max_positions}")
        positions = torch.arange(tokens, device=token_vectors.device)
        x = self.input_proj(token_vectors) + self.positions(positions)  # (batch, tokens, d_model)
        x = self.encoder(self.dropout(x), src_key_padding_mask=padding_mask)  # (batch, tokens, d_model)
        # Padded node slots point at token 0; their logits are computed but masked out by callers.
        index = torch.where(node_mask, node_positions, 0)  # (batch, nodes)
        nodes = torch.gather(x, 1, index.unsqueeze(-1).expand(-1, -1, x.shape[-1]))  # (batch, nodes, d_model)
        return self.head(nodes).squeeze(-1)  # (batch, nodes) logits
