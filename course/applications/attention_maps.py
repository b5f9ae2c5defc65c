"""Attention weights out of PyTorch's Transformer layers.

``nn.TransformerEncoderLayer`` and ``nn.TransformerDecoderLayer`` call their
``nn.MultiheadAttention`` with ``need_weights=False``, and in evaluation mode without
gradients the encoder layer may skip the Python module altogether (a fused "fast
path"), so a forward hook does not always see the weights. These helpers run the
layers' own attention modules again on the layers' own inputs, asking for the weights,
and return them head by head. They assume ``norm_first=True`` layers.
"""

import torch


def _self_weights(layer, x, attn_mask=None, key_padding_mask=None):
    """(batch, n_heads, n, n): the self-attention weights of one pre-norm layer."""
    normed = layer.norm1(x)
    _, weights = layer.self_attn(
        normed, normed, normed, attn_mask=attn_mask,
        key_padding_mask=key_padding_mask, need_weights=True,
        average_attn_weights=False)
    return weights


@torch.no_grad()
def encoder_attention(encoder, x, attn_mask=None, key_padding_mask=None):
    """Self-attention weights of every layer of an ``nn.TransformerEncoder``.

    ``x (batch, n, d_model)`` is the encoder's input (embeddings plus positions).
    Returns a list with one ``(batch, n_heads, n, n)`` tensor per layer. Masks follow
    ``nn.MultiheadAttention``: ``True`` means *blocked*.
    """
    maps = []
    for layer in encoder.layers:
        maps.append(_self_weights(layer, x, attn_mask, key_padding_mask))
        x = layer(x, src_mask=attn_mask, src_key_padding_mask=key_padding_mask)
    return maps


@torch.no_grad()
def decoder_cross_attention(decoder, y, memory, tgt_mask=None,
                            memory_key_padding_mask=None,
                            tgt_key_padding_mask=None):
    """Cross-attention weights of every layer of an ``nn.TransformerDecoder``.

    ``y (batch, n_out, d_model)`` is the decoder's input, ``memory (batch, n_in,
    d_model)`` the encoder's output. Returns one ``(batch, n_heads, n_out, n_in)``
    tensor per layer: row ``i`` says which source tokens output position ``i`` read.
    """
    maps = []
    for layer in decoder.layers:
        # the layer's first sublayer, masked self-attention, as the layer runs it
        normed = layer.norm1(y)
        attended = layer.self_attn(
            normed, normed, normed, attn_mask=tgt_mask,
            key_padding_mask=tgt_key_padding_mask, need_weights=False)[0]
        after_self = y + layer.dropout1(attended)
        queries = layer.norm2(after_self)
        _, weights = layer.multihead_attn(
            queries, memory, memory,
            key_padding_mask=memory_key_padding_mask, need_weights=True,
            average_attn_weights=False)
        maps.append(weights)
        y = layer(y, memory, tgt_mask=tgt_mask,
                  tgt_key_padding_mask=tgt_key_padding_mask,
                  memory_key_padding_mask=memory_key_padding_mask)
    return maps
