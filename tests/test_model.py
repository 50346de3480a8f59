"""Embedder and encoder: frozen LM pieces, layer semantics, masking and node gathering."""

import pytest
import torch

from model.lm import load_causal_lm
from model.nodes.embedder import FrozenEmbedder
from model.nodes.encoder import EncoderConfig, NodeEncoder


@pytest.fixture(scope="module")
def lm():
    return load_causal_lm()


@pytest.fixture(scope="module")
def batch(lm):
    _, tokenizer = lm
    enc = tokenizer(["select a from b", "select name , age from singer where age > 3"],
                    padding=True, return_tensors="pt")
    return enc.input_ids, enc.attention_mask


def test_layer0_is_the_input_embedding_table_and_nothing_else(lm, batch):
    model, _ = lm
    embedder = FrozenEmbedder(layer=0)
    ids, mask = batch
    assert torch.equal(embedder(ids, mask), model.get_input_embeddings()(ids).detach())
    assert isinstance(embedder.frozen, torch.nn.Embedding)  # no decoder layers kept
    assert list(embedder.parameters()) == [] and embedder.state_dict() == {}  # outside checkpoints
    assert all(not p.requires_grad for p in embedder.frozen_parameters())


def test_layer_k_equals_the_full_lms_hidden_state_k_and_is_cached(lm, batch):
    model, _ = lm
    ids, mask = batch
    embedder = FrozenEmbedder(layer=2)
    assert len(embedder.frozen.layers) == 2
    with torch.no_grad():
        expected = model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states[2]
    real = mask.bool()
    got = embedder(ids, mask)
    # Cached in float16: compare with a relative tolerance.
    torch.testing.assert_close(got[real], expected[real], rtol=2e-3, atol=2e-3)
    assert (got[~real] == 0).all()
    calls = []
    embedder.frozen.register_forward_hook(lambda *a: calls.append(1))
    again = embedder(ids, mask)
    assert calls == [] and torch.equal(again, got)  # second epoch: no LM forward


def test_layer_k_disk_cache_is_reused_by_a_new_embedder(batch, tmp_path):
    ids, mask = batch
    first = FrozenEmbedder(layer=1, cache_dir=tmp_path)(ids, mask)
    assert len(list(tmp_path.rglob("*.pt"))) == 2
    fresh = FrozenEmbedder(layer=1, cache_dir=tmp_path)
    calls = []
    fresh.frozen.register_forward_hook(lambda *a: calls.append(1))
    assert torch.equal(fresh(ids, mask), first) and calls == []


def test_layer_beyond_the_lm_is_an_error():
    with pytest.raises(ValueError, match="exceeds"):
        FrozenEmbedder(layer=31)


def tiny_encoder(d_input=16, **kw):
    torch.manual_seed(0)
    return NodeEncoder(EncoderConfig(d_input=d_input, d_model=16, n_layers=2, n_heads=4, dropout=0.0,
                                     max_positions=64, **kw)).eval()


def test_encoder_sizes_come_from_the_embedder():
    config = EncoderConfig(d_input=576)
    assert config.d_model == 576 and config.d_ff == 4 * 576
    assert isinstance(NodeEncoder(EncoderConfig(d_input=32, n_heads=8, n_layers=1)).input_proj, torch.nn.Identity)
    with pytest.raises(ValueError, match="divisible"):
        EncoderConfig(d_input=30, n_heads=8)


def test_paper_sized_encoder_has_813m_parameters():
    # The paper: 813M trainable parameters with CodeLlama-7B (hidden size 4096). Counted on the
    # meta device, nothing allocated.
    with torch.device("meta"):
        encoder = NodeEncoder(EncoderConfig(d_input=4096, max_positions=2048))
    n = sum(p.numel() for p in encoder.parameters())
    assert 800e6 < n < 830e6, n


def test_encoder_output_ignores_padding_and_gathers_node_positions():
    encoder = tiny_encoder()
    vectors = torch.randn(1, 5, 16)
    positions = torch.tensor([[1, 4]])
    alone = encoder(vectors, torch.zeros(1, 5, dtype=torch.bool), positions, torch.ones(1, 2, dtype=torch.bool))
    # The same example padded to 9 tokens with garbage and 3 node slots (the last one padding).
    padded = torch.cat([vectors, 100 * torch.randn(1, 4, 16)], dim=1)
    pad_mask = torch.tensor([[False] * 5 + [True] * 4])
    out = encoder(padded, pad_mask, torch.tensor([[1, 4, 7]]), torch.tensor([[True, True, False]]))
    assert out.shape == (1, 3)
    torch.testing.assert_close(out[:, :2], alone, rtol=1e-4, atol=1e-5)
    # Each logit reads its own position: moving a node changes only that node's logit.
    moved = encoder(vectors, torch.zeros(1, 5, dtype=torch.bool), torch.tensor([[1, 3]]),
                    torch.ones(1, 2, dtype=torch.bool))
    assert torch.allclose(moved[0, 0], alone[0, 0]) and not torch.allclose(moved[0, 1], alone[0, 1])


def test_encoder_rejects_inputs_longer_than_max_positions():
    with pytest.raises(ValueError, match="max_positions"):
        tiny_encoder()(torch.randn(1, 65, 16), torch.zeros(1, 65, dtype=torch.bool),
                       torch.zeros(1, 1, dtype=torch.long), torch.ones(1, 1, dtype=torch.bool))


class NoMixing(torch.nn.Module):
    def forward(self, x, src_key_padding_mask=None):
        return x


def test_head_tokens_reads_the_tokens_before_each_node_end():
    vectors = torch.randn(1, 6, 16)
    no_pad, one_node = torch.zeros(1, 6, dtype=torch.bool), torch.ones(1, 1, dtype=torch.bool)
    at = torch.tensor([[4]])
    for head_tokens, changed in ((1, False), (2, True)):
        torch.manual_seed(0)
        encoder = tiny_encoder(head_tokens=head_tokens)
        encoder.encoder = NoMixing()  # isolate the gather: no information flows between tokens
        edited = vectors.clone()
        edited[0, 3] = torch.randn(16)  # the token just before the node's last token
        before = encoder(vectors, no_pad, at, one_node)
        after = encoder(edited, no_pad, at, one_node)
        assert (not torch.allclose(before, after)) is changed
