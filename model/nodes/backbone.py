"""The fine-tuned node scorer (``model=minilm``): a pre-trained bidirectional encoder (the packaged
all-MiniLM-L6-v2 by default, or any ``AutoModel``) trained end to end, one logit per RAT node
read at the node's last token.

It reads the same text as the frozen-embedder configurations (schema + question + tree, the
schema pruned to ``max_positions`` tokens) with the encoder's own tokenizer. With
``consensus=true`` the head also reads each node's agreement with the other outputs for the same
question (``model.nodes.features.node_agreements``) and whether there were any.
"""

from __future__ import annotations

import torch
from torch import nn

from model.lm import load_encoder
from model.nodes.encoder import NodeHead


class FineTunedEncoder(nn.Module):
    """``forward(input_ids, attention_mask, node_positions, node_mask, node_agreement) -> (batch, nodes)``."""

    def __init__(self, name_or_path: str, head_tokens: int = 1, max_positions: int = 512,
                 consensus: bool = False, dropout: float = 0.1, backbone_dropout: float = 0.0):
        super().__init__()
        self.backbone, _ = load_encoder(name_or_path)
        # Trained, so in train mode; its own dropout is backbone_dropout (0 by default: on a CPU
        # dropout inside attention costs more than it gives in one or two epochs).
        self.backbone.train()
        for module in self.backbone.modules():
            if isinstance(module, nn.Dropout):
                module.p = backbone_dropout
        limit = getattr(self.backbone.config, "max_position_embeddings", max_positions)
        if max_positions > limit:
            raise ValueError(f"encoder.max_positions={max_positions} exceeds {name_or_path}'s {limit} positions")
        self.hidden_size: int = self.backbone.config.hidden_size
        self.dropout = nn.Dropout(dropout)
        self.head = NodeHead(self.hidden_size, head_tokens, consensus)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, node_positions: torch.Tensor,
                node_mask: torch.Tensor, node_agreement: torch.Tensor | None = None) -> torch.Tensor:
        # input_ids, attention_mask: (batch, tokens); node_*: (batch, nodes)
        x = self.backbone(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state  # (batch, tokens, H)
        return self.head(self.dropout(x), node_positions, node_mask, node_agreement)  # (batch, nodes) logits
