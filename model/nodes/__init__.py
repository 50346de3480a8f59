"""The node model: labelled examples -> datamodule -> (embedder + encoder) LightningModule ->
per-node confidences; ``infer`` scores queries with a trained checkpoint."""
