"""The trainable node scorer: a bidirectional transformer encoder over frozen token vectors that
gives one logit per RAT node, read at the node's last token (the paper's architecture)."""

from __future__ import annotations

import math
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
    position_init: str = "sinusoidal"  # start of the learnable encodings: "sinusoidal" or "normal"
    head_tokens: int = 1  # tokens ending at each node's last token read by the head (1 = the paper)
    consensus: bool = False  # the head also reads each node's agreement with other outputs

    def __post_init__(self):
        self.d_model = self.d_model or self.d_input
        self.d_ff = self.d_ff or 4 * self.d_model
        if self.position_init not in ("sinusoidal", "normal"):
            raise ValueError(f"position_init must be 'sinusoidal' or 'normal', found {self.position_init!r}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} is not divisible by n_heads {self.n_heads}")


class NodeEncoder(nn.Module):
    """``forward(token_vectors, padding_mask, node_positions, node_mask) -> (batch, nodes)`` logits."""

    def __init__(self, config: EncoderConfig):
        super().__init__()
        self.config = config
        c = config
        self.input_proj = nn.Linear(c.d_input, c.d_model) if c.d_model != c.d_input else nn.Identity()
        # Frozen LM embeddings are tiny (std ~0.1); normalising them puts tokens and positions on
        # the same scale whatever the embedder.
        self.input_norm = nn.LayerNorm(c.d_model)
        self.positions = nn.Embedding(c.max_positions, c.d_model)
        self.dropout = nn.Dropout(c.dropout)
        layer = nn.TransformerEncoderLayer(
            c.d_model, c.n_heads, c.d_ff, c.dropout, activation="gelu", batch_first=True, norm_first=True
        )
        # Nested tensors would change results with the padding pattern; keep one code path.
        self.encoder = nn.TransformerEncoder(
            layer, c.n_layers, norm=nn.LayerNorm(c.d_model), enable_nested_tensor=False
        )
        self.head = NodeHead(c.d_model, c.head_tokens, c.consensus)
        with torch.no_grad():
            if c.position_init == "sinusoidal":
                # Still learnable; starting from sinusoids gives every token its neighbours at
                # once. From N(0, 0.02) the encoder needs many more steps to learn to read the
                # node label just before a node's last token (measured: val AUC 0.61 vs 0.70
                # after 300 steps on the demo corpus).
                self.positions.weight.copy_(sinusoidal_positions(c.max_positions, c.d_model))
            else:
                nn.init.normal_(self.positions.weight, std=0.02)

    def forward(
        self,
        token_vectors: torch.Tensor,  # (batch, tokens, d_input) from the frozen embedder
        padding_mask: torch.Tensor,  # (batch, tokens) bool, True at padding
        node_positions: torch.Tensor,  # (batch, nodes) long, index of each node's last token
        node_mask: torch.Tensor,  # (batch, nodes) bool, True at real nodes
        node_agreement: torch.Tensor | None = None,  # (batch, nodes) float, NaN = no other output
    ) -> torch.Tensor:
        tokens = token_vectors.shape[1]
        if tokens > self.config.max_positions:
            raise ValueError(f"input of {tokens} tokens exceeds max_positions={self.config.max_positions}")
        positions = torch.arange(tokens, device=token_vectors.device)
        x = self.input_norm(self.input_proj(token_vectors)) + self.positions(positions)  # (batch, tokens, d_model)
        x = self.encoder(self.dropout(x), src_key_padding_mask=padding_mask)  # (batch, tokens, d_model)
        return self.head(x, node_positions, node_mask, node_agreement)  # (batch, nodes) logits


class NodeHead(nn.Module):
    """One logit per node from the token vectors ending at the node's last token; with
    ``consensus`` also from the node's agreement with the other outputs (and whether any exist).

    The agreement enters as its logit (clipped to [0.02, 0.98]) with a weight initialised at 1:
    the untrained head already ranks nodes as agreement does, and training learns what the text
    adds. (Fed as a raw share with a small random weight, a few hundred Adam steps at lr 1e-3
    cannot grow the weight to the ~5 that agreement needs, and the model stays far below it.)

    A node's last token is its closing parenthesis; with ``head_tokens`` > 1 the head also reads
    the tokens just before it (the node's label), clamped at the start of the input.
    """

    def __init__(self, d_model: int, head_tokens: int = 1, consensus: bool = False):
        super().__init__()
        self.head_tokens, self.consensus = head_tokens, consensus
        self.linear = nn.Linear(head_tokens * d_model + (2 if consensus else 0), 1)
        if consensus:
            with torch.no_grad():
                self.linear.weight[0, -2] = 1.0  # the agreement logit's column

    def forward(self, x: torch.Tensor, node_positions: torch.Tensor, node_mask: torch.Tensor,
                node_agreement: torch.Tensor | None = None) -> torch.Tensor:
        # x: (batch, tokens, d); node_positions, node_mask, node_agreement: (batch, nodes)
        # Padded node slots point at token 0; their logits are computed but masked out by callers.
        index = torch.where(node_mask, node_positions, 0)  # (batch, nodes)
        index = torch.stack([(index - k).clamp(min=0) for k in range(self.head_tokens)], dim=2)
        nodes = torch.gather(  # (batch, nodes, head_tokens, d)
            x.unsqueeze(1).expand(-1, index.shape[1], -1, -1), 2,
            index.unsqueeze(-1).expand(-1, -1, -1, x.shape[-1]),
        )
        features = nodes.flatten(2)  # (batch, nodes, head_tokens * d)
        if self.consensus:
            if node_agreement is None:
                raise ValueError("model.consensus=true needs node agreements in the batch")
            known = ~torch.isnan(node_agreement)
            share = torch.nan_to_num(node_agreement, nan=0.5).clamp(0.02, 0.98)
            agreement_logit = torch.where(known, torch.log(share) - torch.log1p(-share), 0.0)
            features = torch.cat([features, agreement_logit.unsqueeze(-1), known.float().unsqueeze(-1)], dim=-1)
        return self.linear(features).squeeze(-1)  # (batch, nodes) logits


def sinusoidal_positions(n_positions: int, d_model: int) -> torch.Tensor:
    """The Transformer's sine/cosine position table, ``(n_positions, d_model)``.

    >>> sinusoidal_positions(4, 6)[0].tolist()
    [0.0, 1.0, 0.0, 1.0, 0.0, 1.0]
    """
    position = torch.arange(n_positions, dtype=torch.float32).unsqueeze(1)  # (positions, 1)
    frequency = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    table = torch.zeros(n_positions, d_model)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency[: d_model // 2])
    return table
