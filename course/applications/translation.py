"""Translation: numbers written in English words to the same numbers in Spanish words.

The pairs come from the ``num2words`` package (``num2words(21) == "twenty-one"``,
``num2words(21, lang="es") == "veintiuno"``) for the numbers 0 to 9999; a fixed,
seeded tenth of the numbers is held out and never seen in training. Tokens are
*words*: the English side is split at spaces, hyphens and commas, the Spanish side at
spaces, so that both vocabularies have a few dozen entries and a sentence a handful of
tokens. The model is an encoder-decoder built from PyTorch's ``nn.TransformerEncoder``
and ``nn.TransformerDecoder`` with learned positions, trained with teacher forcing and
evaluated by greedy decoding on the held-out numbers (exact match of the whole
sentence). ``train_recurrent`` trains chapter 1's GRU encoder-decoder on the same
split, with or without attention, as a baseline.
"""

import re
import time
from dataclasses import dataclass

import torch
from num2words import num2words
from torch import nn
from torch.nn import functional as F

from course.applications.training import (count_parameters, descend,
                                          evaluating, fit, seed_everything,
                                          warmup_cosine)
from course.device import select_device

PAD, BOS, EOS = "<pad>", "<bos>", "<eos>"
SPECIALS = (PAD, BOS, EOS)
N_NUMBERS = 10_000


def english_words(number):
    """['twenty', 'one'] for 21: words of num2words without hyphens or commas."""
    return re.findall(r"[a-z]+", num2words(number))


def spanish_words(number):
    """['veintiuno'] for 21, ['mil', 'doscientos', ...] for 1200."""
    return num2words(number, lang="es").split()


class Vocabulary:
    """Word <-> id, with the ids of <pad> = 0, <bos> = 1 and <eos> = 2."""

    def __init__(self, sentences):
        words = sorted({word for sentence in sentences for word in sentence})
        self.words = list(SPECIALS) + words
        self.ids = {word: i for i, word in enumerate(self.words)}

    def __len__(self):
        return len(self.words)

    def encode(self, sentence, length, bos=False):
        """A list of `length` ids: [<bos>] + words + [<eos>], padded with <pad>."""
        ids = ([self.ids[BOS]] if bos else []) + [self.ids[w] for w in sentence]
        ids.append(self.ids[EOS])
        return ids + [self.ids[PAD]] * (length - len(ids))

    def decode(self, ids):
        """The words up to the first <eos>, specials left out."""
        words = []
        for i in ids:
            word = self.words[int(i)]
            if word == EOS:
                break
            if word not in SPECIALS:
                words.append(word)
        return words


@dataclass
class Data:
    """Encoded pairs: `source (N, n_in)`, `target (N, n_out)` with <bos> first."""
    numbers: torch.Tensor
    source: torch.Tensor
    target: torch.Tensor


def as_characters(words):
    """The words joined by spaces, one token per character ('t', 'w', ...)."""
    return list(" ".join(words))


def make_data(seed=0, held_out=0.1, level="word"):
    """(train, test, source_vocabulary, target_vocabulary) for the numbers 0..9999.

    ``level="word"`` makes one token per word, ``level="char"`` one per character.
    """
    numbers = list(range(N_NUMBERS))
    english = [english_words(n) for n in numbers]
    spanish = [spanish_words(n) for n in numbers]
    if level == "char":
        english = [as_characters(s) for s in english]
        spanish = [as_characters(s) for s in spanish]
    source_vocab, target_vocab = Vocabulary(english), Vocabulary(spanish)
    n_in = max(map(len, english)) + 1  # + <eos>
    n_out = max(map(len, spanish)) + 2  # + <bos>, <eos>
    source = torch.tensor([source_vocab.encode(s, n_in) for s in english])
    target = torch.tensor([target_vocab.encode(s, n_out, bos=True)
                           for s in spanish])
    order = torch.randperm(N_NUMBERS,
                           generator=torch.Generator().manual_seed(seed))
    n_test = int(held_out * N_NUMBERS)
    test, train = order[:n_test], order[n_test:]
    as_data = lambda rows: Data(torch.tensor(numbers)[rows], source[rows],
                                target[rows])
    return as_data(train), as_data(test), source_vocab, target_vocab


class Translator(nn.Module):
    """Encoder-decoder Transformer from PyTorch's layers, with learned positions."""

    def __init__(self, source_size, target_size, d_model=128, n_heads=4,
                 n_layers=2, d_ff=256, max_length=16):
        super().__init__()
        self.source_embedding = nn.Embedding(source_size, d_model)
        self.target_embedding = nn.Embedding(target_size, d_model)
        self.source_position = nn.Embedding(max_length, d_model)
        self.target_position = nn.Embedding(max_length, d_model)
        layer = dict(d_model=d_model, nhead=n_heads, dim_feedforward=d_ff,
                     dropout=0.0, batch_first=True, norm_first=True)
        # norm_first layers cannot use the nested-tensor fast path: say so
        # instead of letting PyTorch warn about it.
        self.encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(**layer), n_layers,
            norm=nn.LayerNorm(d_model), enable_nested_tensor=False)
        self.decoder = nn.TransformerDecoder(
            nn.TransformerDecoderLayer(**layer), n_layers,
            norm=nn.LayerNorm(d_model))
        self.output = nn.Linear(d_model, target_size)

    def embed_source(self, source):
        positions = torch.arange(source.shape[1], device=source.device)
        return self.source_embedding(source) + self.source_position(positions)

    def embed_target(self, target):
        positions = torch.arange(target.shape[1], device=target.device)
        return self.target_embedding(target) + self.target_position(positions)

    def encode(self, source):
        """(batch, n_in) ids -> memory (batch, n_in, d_model)."""
        padding = source == 0  # True = blocked, PyTorch's convention
        return self.encoder(self.embed_source(source),
                            src_key_padding_mask=padding)

    def decode(self, target_in, memory, source):
        """Logits (batch, n_out, target vocabulary) for each next word."""
        n = target_in.shape[1]
        causal = nn.Transformer.generate_square_subsequent_mask(
            n, device=target_in.device)  # (n, n), -inf above the diagonal
        hidden = self.decoder(self.embed_target(target_in), memory,
                              tgt_mask=causal, tgt_is_causal=True,
                              memory_key_padding_mask=source == 0)
        return self.output(hidden)

    def forward(self, source, target_in):
        return self.decode(target_in, self.encode(source), source)

    @torch.no_grad()
    def translate(self, source, max_length):
        """Greedy decoding: (batch, n_in) -> (batch, max_length) word ids."""
        memory = self.encode(source)
        out = torch.full((source.shape[0], 1), 1, dtype=torch.long,
                         device=source.device)  # <bos>
        for _ in range(max_length - 1):
            logits = self.decode(out, memory, source)[:, -1]  # (batch, vocab)
            out = torch.cat([out, logits.argmax(-1, keepdim=True)], dim=1)
        return out[:, 1:]


def exact_match(model, data, target_vocab, device, batch=1000):
    """Share of sentences translated word for word, and the predictions."""
    predictions = []
    with evaluating(model):
        for start in range(0, len(data.numbers), batch):
            source = data.source[start:start + batch].to(device)
            out = model.translate(source, data.target.shape[1]).cpu()
            predictions += [target_vocab.decode(row) for row in out]
    truth = [target_vocab.decode(row[1:]) for row in data.target]
    hits = sum(p == t for p, t in zip(predictions, truth))
    return hits / len(truth), predictions


def train(steps=400, batch=128, lr=2e-3, seed=0, budget_s=None,
          progress=True, device=None, threads=None, level="word",
          evaluate=True, checkpoints=None, **model_options):
    """Train a Translator; return a dict with the model, data and history.

    The learning rate warms up over a tenth of `steps` (at most 200) and decays
    over all of them: a run cut short by `budget_s` leaves its schedule unfinished,
    so a run that must fit a time gets the steps that fit it (`seconds_per_step`).
    `evaluate=False` skips the held-out exact match at the end. `checkpoints=(every,
    n)` also measures exact match on the first n held-out numbers every `every`
    steps, outside the training time, into the result's "checkpoints"."""
    device = device or select_device()
    seed_everything(seed)
    train_data, test_data, source_vocab, target_vocab = make_data(
        seed, level=level)
    longest = max(train_data.source.shape[1], train_data.target.shape[1])
    model_options.setdefault("max_length", longest)
    model = Translator(len(source_vocab), len(target_vocab),
                       **model_options).to(device)
    optimiser = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    warmup = min(200, steps // 10)
    schedule = warmup_cosine(optimiser, warmup=warmup, total=steps)
    generator = torch.Generator().manual_seed(seed)
    source_all = train_data.source.to(device)
    target_all = train_data.target.to(device)

    measured, evaluation_seconds = [], [0.0]

    def checkpoint(i):
        """Exact match on a slice of the held-out numbers, its time not counted."""
        start = time.perf_counter()
        every, n = checkpoints
        part = Data(test_data.numbers[:n], test_data.source[:n],
                    test_data.target[:n])
        measured.append((i, round(exact_match(model, part, target_vocab,
                                              device)[0], 4)))
        evaluation_seconds[0] += time.perf_counter() - start

    def step(i):
        if checkpoints and i and i % checkpoints[0] == 0:
            checkpoint(i)
        rows = torch.randint(len(source_all), (batch,), generator=generator)
        rows = rows.to(device)
        source, target = source_all[rows], target_all[rows]
        logits = model(source, target[:, :-1])  # predict word t+1 from 0..t
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                               target[:, 1:].reshape(-1), ignore_index=0)
        return descend(loss, optimiser, schedule)

    # a module is built in training mode: dropout acts from the first step
    history = fit(step, steps, budget_s, f"translation ({level} tokens)",
                  progress, device, threads)
    history.seconds -= evaluation_seconds[0]
    if checkpoints:
        checkpoint(history.steps)
    accuracy, predictions = (exact_match(model, test_data, target_vocab, device)
                             if evaluate else (None, None))
    return dict(model=model, history=history, accuracy=accuracy,
                predictions=predictions, train=train_data, test=test_data,
                source_vocab=source_vocab, target_vocab=target_vocab,
                parameters=count_parameters(model), device=device,
                checkpoints=measured, warmup=warmup)


def seconds_per_step(steps=12, level="word", threads=1, **options):
    """The mean training time of a step over a short run of `steps` steps."""
    run = train(steps=steps, level=level, threads=threads, progress=False,
                evaluate=False, **options)
    return run["history"].seconds / run["history"].steps


def padded_in_front(source):
    """The same rows with their padding moved to the front: a recurrent encoder
    then ends on <eos>, so that its last state follows the whole sentence."""
    length = (source != 0).sum(1, keepdim=True)  # (N, 1)
    n = source.shape[1]
    shift = (torch.arange(n) - (n - length)) % n  # (N, n): where each slot reads
    return source.gather(1, shift)


def train_recurrent(attention, steps=2000, batch=128, lr=3e-3, seed=0,
                    embed_size=128, hidden_size=256, progress=True,
                    threads=None, clip=1.0):
    """Chapter 1's GRU encoder-decoder (`course.seq2seq.Seq2Seq`) on the same
    split and word tokens: with `attention=False` the decoder reads the source
    only through the encoder's last state. The same AdamW and schedule as the
    Transformer, with chapter 1's gradient clipping; runs on the CPU. Returns a
    dict with the model, history, held-out exact match and parameter count."""
    from course.seq2seq import Seq2Seq  # chapter 1's model

    device = torch.device("cpu")
    seed_everything(seed)
    train_data, test_data, source_vocab, target_vocab = make_data(seed)
    model = Seq2Seq(len(source_vocab), len(target_vocab),
                    begin=target_vocab.ids[BOS], embed_size=embed_size,
                    hidden_size=hidden_size, attention=attention)
    optimiser = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    warmup = min(200, steps // 10)
    schedule = warmup_cosine(optimiser, warmup=warmup, total=steps)
    generator = torch.Generator().manual_seed(seed)
    source_all = padded_in_front(train_data.source)
    target_all = train_data.target[:, 1:]  # Seq2Seq puts <bos> in itself

    def step(_):
        rows = torch.randint(len(source_all), (batch,), generator=generator)
        logits, _ = model(source_all[rows], target_all[rows])
        loss = F.cross_entropy(logits.flatten(0, 1),
                               target_all[rows].flatten(), ignore_index=0)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimiser.step()
        schedule.step()
        optimiser.zero_grad()
        return loss.item()

    name = "with attention" if attention else "last state only"
    history = fit(step, steps, None, f"GRU encoder-decoder ({name})",
                  progress, device, threads)
    with evaluating(model):
        out, _ = model.generate(padded_in_front(test_data.source),
                                target_all.shape[1])
    predictions = [target_vocab.decode(row) for row in out]
    truth = [target_vocab.decode(row[1:]) for row in test_data.target]
    accuracy = sum(p == t for p, t in zip(predictions, truth)) / len(truth)
    return dict(model=model, history=history, accuracy=accuracy,
                predictions=predictions, parameters=count_parameters(model),
                warmup=warmup)
