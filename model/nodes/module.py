"""LightningModule for node-level confidence: one logit per RAT node, trained with weighted binary
cross-entropy and evaluated with node AUC, Brier and ECE. Two architectures:

- frozen embedder -> scratch bidirectional encoder (the paper's; ``model=smollm2``,
  ``model=codellama_paper``);
- a pre-trained encoder fine-tuned end to end (``model=minilm``: ``embedder.fine_tune=true``,
  ``model.nodes.backbone``), with its own learning rate ``embedder.lr``.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Iterable, Mapping
from typing import Any

import lightning as L
import numpy as np
import torch
import torch.nn.functional as F

from model import metrics
from model.nodes.backbone import FineTunedEncoder
from model.nodes.embedder import FrozenEmbedder
from model.nodes.encoder import EncoderConfig, NodeEncoder


class NodeConfidenceModule(L.LightningModule):
    """Hyperparameters are plain values (so checkpoints are self-describing and reload anywhere).

    ``pos_weight``: ``"auto"`` = negatives/positives over the training node labels (read from the
    datamodule when fitting starts, as PyTorch's ``BCEWithLogitsLoss`` documentation suggests),
    a number, or ``None``/``"none"`` for an unweighted loss. Label 1 means "this node is correct".
    """

    def __init__(
        self,
        embedder: Mapping[str, Any] | None = None,
        encoder: Mapping[str, Any] | None = None,
        pos_weight: str | float | None = "auto",
        lr: float = 3e-4,
        weight_decay: float = 0.01,
        warmup_steps: int = 100,
        ece_bins: int = 10,
        consensus: bool = False,  # each node's agreement with the other outputs is an input
    ):
        super().__init__()
        embedder, encoder = dict(embedder or {}), dict(encoder or {})
        self.save_hyperparameters({
            "embedder": dict(embedder), "encoder": encoder, "pos_weight": pos_weight, "lr": lr,  # (as given: with fine_tune)
            "weight_decay": weight_decay, "warmup_steps": warmup_steps, "ece_bins": ece_bins,
            "consensus": consensus,
        })
        self.fine_tune = bool(embedder.pop("fine_tune", False))
        self.backbone_lr = float(embedder.pop("lr", lr))
        if self.fine_tune:  # model=minilm: one pre-trained encoder, trained end to end
            self.backbone = FineTunedEncoder(
                embedder["name_or_path"], head_tokens=encoder.get("head_tokens", 1),
                max_positions=encoder.get("max_positions", 512), consensus=consensus,
                dropout=encoder.get("dropout", 0.1), backbone_dropout=encoder.get("backbone_dropout", 0.0))
        else:
            self.embedder = FrozenEmbedder(**embedder)
            self.encoder = scratch_encoder(self.embedder.hidden_size, encoder, consensus)
        # A buffer, so the value resolved from the training labels is saved in every checkpoint.
        self.register_buffer("pos_weight", torch.tensor(_fixed_pos_weight(pos_weight)))
        self._outputs: dict[str, list[tuple[torch.Tensor, torch.Tensor]]] = {"val": [], "test": []}

    # ------------------------------------------------------------------ forward

    def forward(self, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Node logits ``(batch, nodes)`` for a collated batch (see ``model.nodes.datamodule.collate``)."""
        agreement = batch.get("node_agreement") if self.hparams.get("consensus") else None
        if self.fine_tune:
            return self.backbone(batch["input_ids"], batch["attention_mask"], batch["node_positions"],
                                 batch["node_mask"], agreement)
        vectors = self.embedder(batch["input_ids"], batch["attention_mask"])  # (batch, tokens, d_input)
        return self.encoder(
            vectors, batch["attention_mask"] == 0, batch["node_positions"], batch["node_mask"], agreement
        )  # (batch, nodes)

    def loss(self, logits: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
        """Mean BCE (positives weighted by ``pos_weight``) over real nodes; ``logits``/``labels``
        are flat ``(nodes,)``; ``weights`` counts how many identical outputs a node stands for."""
        if weights is None:
            return F.binary_cross_entropy_with_logits(logits, labels.float(), pos_weight=self.pos_weight)
        losses = F.binary_cross_entropy_with_logits(logits, labels.float(), pos_weight=self.pos_weight,
                                                    reduction="none")
        return (losses * weights).sum() / weights.sum()

    # ------------------------------------------------------------------ fitting

    def resolve_pos_weight(self, negatives: int, positives: int) -> None:
        """``pos_weight=auto``: negatives/positives of the training node labels, given by the
        caller (``model.train`` reads them from the datamodule) before fitting."""
        if positives == 0 or negatives == 0:
            raise ValueError(f"pos_weight=auto needs both labels in training, found {negatives} wrong "
                             f"and {positives} correct nodes")
        self.pos_weight.fill_(negatives / positives)
        self._pos_weight_resolved = True

    def setup(self, stage: str) -> None:
        auto = str(self.hparams.pos_weight).lower() == "auto"
        if stage == "fit" and auto and not getattr(self, "_pos_weight_resolved", False):
            raise ValueError("pos_weight=auto: call module.resolve_pos_weight(*datamodule.train_label_counts()) "
                             "before fit (train.py does), or give pos_weight a number")

    def training_step(self, batch, batch_idx):
        logits = self(batch)
        mask = batch["node_mask"]
        weights = batch["node_weights"][mask] if "node_weights" in batch else None
        loss = self.loss(logits[mask], batch["node_labels"][mask], weights)
        self.log("train/loss", loss, on_step=True, on_epoch=True, prog_bar=True, batch_size=int(mask.sum()))
        return loss

    def validation_step(self, batch, batch_idx):
        self._collect("val", batch)

    def test_step(self, batch, batch_idx):
        self._collect("test", batch)

    def _collect(self, split: str, batch) -> None:
        mask = batch["node_mask"]
        logits = self(batch)
        self._outputs[split].append((logits[mask].float().cpu(), batch["node_labels"][mask].cpu()))

    def on_validation_epoch_end(self) -> None:
        self._log_epoch("val")

    def on_test_epoch_end(self) -> None:
        self._log_epoch("test")

    def _log_epoch(self, split: str) -> None:
        """Loss and calibration metrics over *all* nodes of the split (gathered across processes)."""
        outputs, self._outputs[split] = self._outputs[split], []
        logits = torch.cat([o[0] for o in outputs]) if outputs else torch.zeros(0)
        labels = torch.cat([o[1] for o in outputs]) if outputs else torch.zeros(0)
        if self.trainer.world_size > 1:
            logits, labels = _gather_all(logits), _gather_all(labels)
        if logits.numel() == 0:
            return
        values = {"loss": float(self.loss(logits.to(self.pos_weight.device), labels.to(self.pos_weight.device)))}
        values.update(node_metrics(torch.sigmoid(logits).numpy(), labels.numpy(), self.hparams.ece_bins))
        values["node_accuracy"] = float(labels.float().mean())  # share of correct nodes: context for AUC
        for name, value in values.items():
            self.log(f"{split}/{name}", value, prog_bar=name in ("loss", "auc"))

    def configure_optimizers(self):
        groups = []
        if self.fine_tune:  # the pre-trained encoder at embedder.lr, the new head at lr
            parts = [(self.backbone.backbone, self.backbone_lr), (self.backbone.head, self.hparams.lr)]
        else:
            parts = [(self.encoder, self.hparams.lr)]
        for module, lr in parts:
            named = list(module.named_parameters())
            decay = [p for n, p in named if p.ndim >= 2 and "position" not in n]
            no_decay = [p for n, p in named if p.ndim < 2 or "position" in n]
            groups += [{"params": decay, "weight_decay": self.hparams.weight_decay, "lr": lr},
                       {"params": no_decay, "weight_decay": 0.0, "lr": lr}]
        optimizer = torch.optim.AdamW([g for g in groups if g["params"]], lr=self.hparams.lr)
        warmup = max(1, self.hparams.warmup_steps)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / warmup))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    # ------------------------------------------------------------------ inference

    @torch.no_grad()
    def node_confidences(self, batches: Iterable[Mapping[str, torch.Tensor]]) -> list[list[float]]:
        """Per example (in batch order), the confidence of each RAT node in post-order."""
        was_training = self.training
        self.eval()
        out: list[list[float]] = []
        try:
            for batch in batches:
                batch = {k: v.to(self.device) if torch.is_tensor(v) else v for k, v in batch.items()}
                probs = torch.sigmoid(self(batch).float()).cpu()  # (batch, nodes)
                for row, mask in zip(probs, batch["node_mask"].cpu()):
                    out.append(row[mask].tolist())
        finally:
            self.train(was_training)
        return out


# What a checkpoint's hyperparameters may hold: NodeConfidenceModule's arguments, the embedder's
# (FrozenEmbedder's, and fine_tune/lr of a fine-tuned encoder), the encoder's (EncoderConfig's,
# or those a fine-tuned encoder reads).
HYPERPARAMETERS = frozenset(inspect.signature(NodeConfidenceModule.__init__).parameters) - {"self"}
EMBEDDER_SETTINGS = frozenset(inspect.signature(FrozenEmbedder.__init__).parameters) - {"self"} | {"fine_tune", "lr"}
ENCODER_SETTINGS = frozenset(f.name for f in dataclasses.fields(EncoderConfig)) - {"d_input", "consensus"}
FINE_TUNED_SETTINGS = frozenset({"head_tokens", "max_positions", "dropout", "backbone_dropout"})


def scratch_encoder(d_input: int, encoder: Mapping[str, Any], consensus: bool) -> NodeEncoder:
    """The trainable encoder of the frozen-embedder architecture, over ``d_input``-wide vectors."""
    return NodeEncoder(EncoderConfig(d_input=d_input, consensus=consensus, **encoder))


def check_weights(hparams: Mapping[str, Any], state_dict: Mapping[str, torch.Tensor]) -> None:
    """A one-line ``ValueError`` unless ``state_dict`` holds the trainable weights ``hparams``
    build, each of its shape: compared on the meta device (nothing allocated, nothing loaded)
    before the module is built, so hyperparameters its weights do not hold build nothing. (The
    weights a fine-tuned encoder's pre-trained part holds are the LM's own, compared as it loads.)"""
    embedder, encoder = dict(hparams.get("embedder") or {}), dict(hparams.get("encoder") or {})
    consensus = hparams.get("consensus", False)
    shapes = {name: tuple(value.shape) for name, value in state_dict.items()}
    if embedder.get("fine_tune"):
        head, tokens = shapes.get("backbone.head.linear.weight"), encoder.get("head_tokens", 1)
        width = head[1] - (2 if consensus else 0) if head and len(head) == 2 else 0
        if head is None:
            raise ValueError("the state_dict holds no backbone.head.linear.weight (no fine-tuned encoder's head)")
        if type(tokens) is not int or not 0 < tokens <= width or width % tokens:
            raise ValueError(f"encoder.head_tokens={tokens!r} (consensus={consensus!r}) does not fit "
                             f"backbone.head.linear.weight of shape {list(head)}"[:300])
        return
    width = shapes.get("encoder.input_proj.weight") or shapes.get("encoder.input_norm.weight")
    if not width:
        raise ValueError("the state_dict holds no encoder.input_norm.weight (no node encoder's weights)")
    layers = {name.split(".")[3] for name in shapes if name.startswith("encoder.encoder.layers.")}
    n_layers = encoder.get("n_layers", EncoderConfig.n_layers)  # (checked first: each is built, if on meta)
    if n_layers != len(layers):
        raise ValueError(f"encoder.n_layers={n_layers!r} but the state_dict holds {len(layers)} layers"[:300])
    try:
        with torch.device("meta"):
            built = scratch_encoder(width[-1], encoder, consensus)
    except (TypeError, ValueError, RuntimeError, AssertionError, OverflowError) as e:
        raise ValueError(f"hyperparameters that build no encoder ({type(e).__name__}: "
                         f"{(str(e).splitlines() or [''])[0]})"[:300]) from None
    expected = {f"encoder.{name}": tuple(value.shape) for name, value in built.state_dict().items()}
    expected["pos_weight"] = ()
    for name in sorted(expected.keys() | shapes.keys()):
        if expected.get(name) != shapes.get(name):
            found = "missing" if name not in shapes else f"of shape {list(shapes[name])}"
            wanted = "none" if name not in expected else f"shape {list(expected[name])}"
            raise ValueError(f"the state_dict's {name} is {found}; the hyperparameters give {wanted}"[:300])


def node_metrics(confidences: np.ndarray, labels: np.ndarray, ece_bins: int = 10) -> dict[str, float]:
    """AUC, Brier and ECE of node confidences against 0/1 node labels."""
    return metrics.core_metrics(confidences, labels, ece_bins)


def _fixed_pos_weight(pos_weight: str | float | None) -> float:
    """The loss weight of positives before training data is seen (``auto`` is resolved in setup)."""
    if pos_weight is None or str(pos_weight).lower() in ("none", "auto"):
        return 1.0
    value = float(pos_weight)
    if value <= 0:
        raise ValueError(f"pos_weight must be positive, 'auto' or none; found {pos_weight!r}")
    return value


def _gather_all(values: torch.Tensor) -> torch.Tensor:
    """Concatenate a 1-D tensor of any length from every process (shapes may differ per rank)."""
    gathered: list[torch.Tensor | None] = [None] * torch.distributed.get_world_size()
    torch.distributed.all_gather_object(gathered, values)
    return torch.cat([g for g in gathered if g is not None])
