"""A small GRU encoder-decoder, with or without Luong-style attention (Chapter 1).

The decoder without attention sees the source only through the encoder's last state,
the single context vector of a classic encoder-decoder. The decoder with attention
also looks back at every encoder state at every step, through a bilinear ("general")
score (Luong et al., 2015). Everything else is the same, so that a difference
in accuracy measures what the attention adds.

Shapes: B sequences in a batch, S source and T target positions, H hidden units.
"""

import torch
from torch import nn


class Encoder(nn.Module):
    """Embeds the source tokens and runs a GRU over them."""

    def __init__(self, vocab_size, embed_size, hidden_size):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size, hidden_size, batch_first=True)

    def forward(self, source):
        """source (B, S) token ids -> states (B, S, H) and the last state (1, B, H)."""
        states, last = self.rnn(self.embedding(source))
        return states, last


class Decoder(nn.Module):
    """A GRU decoder; with `attention=True` each step also reads a context vector.

    At step t the GRU state h_t (the query) scores every encoder state h_s (the keys)
    by h_t W h_s, the softmax of these scores weights the encoder states (the values)
    into a context c_t, and the output layer reads tanh(W_c [c_t; h_t]). Without
    attention it reads tanh(W_c h_t).
    """

    def __init__(self, vocab_size, embed_size, hidden_size, attention):
        super().__init__()
        self.attention = attention
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size, hidden_size, batch_first=True)
        # W of the score h_t W h_s. Made even without attention (then unused), so that
        # both models draw the same initial weights for the layers made before it.
        self.score_matrix = nn.Linear(hidden_size, hidden_size, bias=False)
        combined = 2 * hidden_size if attention else hidden_size
        self.combine = nn.Linear(combined, hidden_size)  # W_c
        self.output = nn.Linear(hidden_size, vocab_size)

    def forward(self, inputs, hidden, encoder_states):
        """inputs (B, T) previous tokens, hidden (1, B, H), encoder_states (B, S, H).

        Returns logits (B, T, vocab), the new hidden state (1, B, H) and the attention
        weights (B, T, S), or None without attention.
        """
        states, hidden = self.rnn(self.embedding(inputs), hidden)  # (B, T, H)
        if not self.attention:
            return self.output(torch.tanh(self.combine(states))), hidden, None
        keys = self.score_matrix(encoder_states)  # (B, S, H): W h_s for every s
        # One matrix product per sentence of the batch: (B, T, H) x (B, H, S).
        scores = torch.bmm(states, keys.transpose(1, 2))  # (B, T, S)
        weights = torch.softmax(scores, dim=2)  # over the source positions
        context = torch.bmm(weights, encoder_states)  # (B, T, H)
        combined = torch.tanh(self.combine(torch.cat([context, states], dim=-1)))
        return self.output(combined), hidden, weights


class Seq2Seq(nn.Module):
    """Encoder and decoder together; `begin` is the id of the start-of-output token.

    With `bridge=True` the decoder starts from the encoder's last state; with
    `bridge=False` it starts from zeros, so that with attention everything it learns of
    the source comes through the attention weights.
    """

    def __init__(self, source_vocab, target_vocab, begin, embed_size=16, hidden_size=32,
                 attention=True, bridge=True):
        super().__init__()
        self.begin = begin
        self.bridge = bridge
        self.encoder = Encoder(source_vocab, embed_size, hidden_size)
        self.decoder = Decoder(target_vocab, embed_size, hidden_size, attention)

    def _encode(self, source):
        encoder_states, last = self.encoder(source)  # (B, S, H), (1, B, H)
        return encoder_states, last if self.bridge else torch.zeros_like(last)

    def forward(self, source, target):
        """Teacher forcing: the decoder reads <begin> and target[:, :-1].

        Returns logits (B, T, vocab) and attention weights (B, T, S) or None.
        """
        encoder_states, hidden = self._encode(source)
        start = torch.full_like(target[:, :1], self.begin)
        inputs = torch.cat([start, target[:, :-1]], dim=1)  # (B, T), shifted right
        logits, _, weights = self.decoder(inputs, hidden, encoder_states)
        return logits, weights

    @torch.no_grad()
    def generate(self, source, length):
        """Greedy decoding of `length` tokens, each step fed the previous predictions.

        Returns tokens (B, length) and attention weights (B, length, S) or None.
        """
        encoder_states, hidden = self._encode(source)
        prefix = torch.full_like(source[:, :1], self.begin)  # (B, 1): <begin>
        for _ in range(length):
            # The decoder reads the whole prefix again, from the encoder's state, at
            # every step: nothing is carried from one step to the next. Simple, and
            # cheap at these lengths; chapter 6 shows what a cache saves.
            logits, _, weights = self.decoder(prefix, hidden, encoder_states)  # (B, t, V)
            prefix = torch.cat([prefix, logits[:, -1:].argmax(dim=-1)], dim=1)
        return prefix[:, 1:], weights


def train(model, make_batch, steps, learning_rate=3e-3, clip=1.0):
    """Adam on the cross-entropy of teacher-forced predictions; returns the losses.

    `make_batch()` returns (source (B, S), target (B, T)) token ids.
    """
    optimiser = torch.optim.Adam(model.parameters(), lr=learning_rate)
    losses = []
    for _ in range(steps):
        source, target = make_batch()
        logits, _ = model(source, target)
        loss = nn.functional.cross_entropy(logits.flatten(0, 1), target.flatten())
        optimiser.zero_grad()
        loss.backward()
        # Recurrent networks have occasional gradient spikes: clip their norm.
        nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimiser.step()
        losses.append(loss.item())
    return losses
