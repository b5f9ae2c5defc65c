"""Language modelling: a character-level causal Transformer on Python's own docstrings.

The text is the documentation that ships with the Python interpreter: the docstrings of
a fixed list of standard-library modules and of their public functions and classes,
read at run time with ``inspect.getdoc`` (no download, and not written by this course).
Characters outside printable ASCII are dropped.

The held-out text is held out by module: a seeded tenth of the top-level packages
(``urllib.parse`` and ``urllib.request`` count as one) gives its docstrings to the
held-out side and none to training, and a held-out docstring that shares any
64-character span with the training text is dropped, so that no held-out character
sits in text that training has seen verbatim.

The model is decoder-only: character and learned position embeddings, a stack of
``nn.TransformerEncoderLayer`` run with a causal mask, and a linear read-out. Weights
start small, GPT-style (Radford et al., 2019): normal with standard deviation 0.02, and
the projections that write into the residual stream scaled down by
``1 / sqrt(2 * n_layers)``. Quality is measured in bits per character on every
held-out character but the first (sliding windows, so that each is predicted with
nearly a full context), against counting models of the training text on the same
characters: unigram, bigram, and interpolated Kneser-Ney n-grams (Kneser and Ney,
1995; Chen and Goodman, 1999).

The same model also reads byte-pair-encoding tokens (Sennrich et al., 2016) of a
tokenizer trained on the training text (`SubwordCorpus`); it is then scored on the
same held-out characters, its summed bits over the tokens divided by the number
of characters they cover.
"""

import importlib
import inspect
import math
import random
import string
import warnings

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from course.applications.training import (count_parameters, descend,
                                          evaluating, fit, seed_everything,
                                          warmup_cosine)
from course.device import select_device

MODULES = (
    "abc argparse array ast asyncio base64 bisect calendar cmd codecs collections "
    "concurrent.futures configparser contextlib copy csv dataclasses datetime "
    "decimal difflib doctest email enum filecmp fnmatch fractions ftplib functools "
    "getopt gettext glob gzip hashlib heapq hmac html http.client imaplib inspect "
    "io ipaddress itertools json locale logging lzma mailbox mimetypes multiprocessing "
    "numbers operator optparse os pathlib pickle pkgutil platform plistlib poplib "
    "pprint queue random re sched secrets selectors shelve shlex shutil signal "
    "smtplib socket socketserver sqlite3 ssl statistics string struct subprocess "
    "tarfile tempfile textwrap threading timeit tokenize trace traceback turtle "
    "typing unittest urllib.parse urllib.request uuid warnings wave weakref "
    "xml.dom.minidom zipfile zoneinfo").split()
ALPHABET = set(string.printable) - set("\t\r\x0b\x0c")


def docstrings():
    """(module, docstring) pairs of MODULES and their public members, in order."""
    with warnings.catch_warnings():
        # reading `typing`'s members touches its deprecated aliases (typing.io):
        # the text does not depend on them, so their warnings are noise here
        warnings.simplefilter("ignore", DeprecationWarning)
        return _docstrings()


def _docstrings():
    texts, seen = [], set()
    for name in MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:  # e.g. an interpreter built without sqlite3 or ssl
            continue
        members = [module] + [value for key, value in sorted(vars(module).items())
                              if not key.startswith("_")
                              and (inspect.isfunction(value) or inspect.isclass(value))
                              and getattr(value, "__module__", None) == name]
        for member in members:
            doc = inspect.getdoc(member)
            if doc and len(doc) > 40 and doc not in seen:
                seen.add(doc)
                texts.append((name, "".join(c for c in doc if c in ALPHABET)))
    return texts


def spans(text, length=64):
    """The set of every `length`-character span of `text`."""
    return {text[i:i + length] for i in range(len(text) - length + 1)}


def shared_span_share(text, seen_spans, length=64):
    """The share of the characters of `text` that lie inside a `length`-character
    span found in `seen_spans` (the spans of the training text)."""
    covered = bytearray(len(text))
    for i in range(len(text) - length + 1):
        if text[i:i + length] in seen_spans:
            covered[i:i + length] = b"\1" * length
    return sum(covered) / max(1, len(text))


def package(module):
    """The top-level package of a module name: urllib.parse -> urllib."""
    return module.split(".")[0]


def held_out_packages(texts, share=0.1, seed=0):
    """A seeded set of packages holding about `share` of the characters."""
    sizes = {}
    for module, text in texts:
        sizes[package(module)] = sizes.get(package(module), 0) + len(text)
    order = sorted(sizes)
    random.Random(seed).shuffle(order)
    held, total = set(), 0
    for name in order:
        if total >= share * sum(sizes.values()):
            break
        held.add(name)
        total += sizes[name]
    return held


class Corpus:
    """Train and held-out text as id tensors, and the character vocabulary.

    Split by package (no package on both sides); held-out docstrings that share a
    `span`-character stretch with the training text are dropped. Kept for the
    record: `held_out` (the packages), `dropped` (docstrings dropped) and
    `shared_before` / `shared_after` (the share of held-out characters inside a
    span seen in training, before and after the drop).
    """

    def __init__(self, share=0.1, seed=0, span=64):
        texts = docstrings()
        self.held_out = held_out_packages(texts, share, seed)
        train = [t for m, t in texts if package(m) not in self.held_out]
        test = [t for m, t in texts if package(m) in self.held_out]
        self.train_text = "\n\n".join(train)
        seen = spans(self.train_text, span)
        self.shared_before = shared_span_share("\n\n".join(test), seen, span)
        kept = [t for t in test if not spans(t, span) & seen]
        self.dropped = len(test) - len(kept)
        self.test_text = "\n\n".join(kept)
        self.shared_after = shared_span_share(self.test_text, seen, span)
        self.characters = sorted(set(self.train_text) | set(self.test_text))
        self.ids = {c: i for i, c in enumerate(self.characters)}
        self.train = self.encode(self.train_text)
        self.test = self.encode(self.test_text)
        self.vocabulary = len(self.characters)
        # the characters every model is scored on: all held-out ones but the first
        self.scored_characters = len(self.test_text) - 1

    def encode(self, text):
        return torch.tensor([self.ids[c] for c in text])

    def decode(self, ids):
        return "".join(self.characters[int(i)] for i in ids)


# GPT-2's split of text into pieces that merges may not cross (without its English
# contractions): a word with the space before it, a number, a run of punctuation,
# a run of white space. The pieces are substrings, so joining them gives the text.
PIECES = r" ?[A-Za-z]+| ?[0-9]+| ?[^A-Za-z0-9\s]+|\s+(?!\S)|\s+"


def train_bpe(text, vocabulary, alphabet):
    """A byte-pair-encoding tokenizer (the `tokenizers` package) trained on `text`.

    Every character of `alphabet` is a token of its own; merges of the most
    frequent adjacent pair then add tokens until there are `vocabulary`, never
    across the pieces of PIECES. Tokens are substrings of the text, so decoding
    is joining them.
    """
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex(PIECES), "isolated")
    trainer = trainers.BpeTrainer(vocab_size=vocabulary, initial_alphabet=list(
        alphabet), limit_alphabet=len(alphabet), show_progress=False)
    tokenizer.train_from_iterator([text], trainer)
    return tokenizer


class SubwordCorpus:
    """The text of a :class:`Corpus` as byte-pair-encoding tokens.

    The same split as `characters`; the tokenizer is trained on the training text
    alone. `scored_characters` counts the held-out characters that the tokens
    after the first one cover: a model's bits per character are its summed bits
    on those tokens divided by that count.
    """

    def __init__(self, characters, vocabulary=512):
        self.characters = characters
        self.tokenizer = train_bpe(characters.train_text, vocabulary,
                                   characters.characters)
        self.vocabulary = self.tokenizer.get_vocab_size()
        self.pieces = [self.tokenizer.id_to_token(i)
                       for i in range(self.vocabulary)]
        self.train = self.encode(characters.train_text)
        self.test = self.encode(characters.test_text)
        assert self.decode(self.test) == characters.test_text
        first = len(self.pieces[int(self.test[0])])
        self.scored_characters = len(characters.test_text) - first

    def encode(self, text):
        return torch.tensor(self.tokenizer.encode(text).ids)

    def decode(self, ids):
        return "".join(self.pieces[int(i)] for i in ids)


def unigram_and_bigram_bits(corpus):
    """Held-out bits per character of the training text's unigram and bigram models.

    Both are smoothed by adding one to every count, so that no held-out character
    has probability zero. Both score every held-out character but the first, the
    characters the other models score.
    """
    v = len(corpus.characters)
    unigram = torch.bincount(corpus.train, minlength=v).double() + 1
    log_p1 = (unigram / unigram.sum()).log2()
    pairs = corpus.train[:-1] * v + corpus.train[1:]
    bigram = torch.bincount(pairs, minlength=v * v).double().view(v, v) + 1
    log_p2 = (bigram / bigram.sum(dim=1, keepdim=True)).log2()
    test = corpus.test
    return (-log_p1[test[1:]].mean().item(),
            -log_p2[test[:-1], test[1:]].mean().item())


def _keys(ids, n, v):
    """The n-grams of `ids` as integers in base v, one per start."""
    key = np.zeros(len(ids) - n + 1, dtype=np.int64)
    for k in range(n):
        key = key * v + ids[k:len(ids) - n + 1 + k]
    return key


class KneserNey:
    """An interpolated Kneser-Ney character n-gram model, counted with NumPy.

    The highest order uses the counts c(h w); every lower order uses continuation
    counts, the number of distinct characters seen before (h w). Each order
    subtracts its discount D = n1 / (n1 + 2 n2) (n1, n2: how many of its n-grams
    have count one, two) from every seen count and gives the mass it freed,
    D * (distinct followers of h) / (total of h), to the next lower order; the
    lowest interpolates with the uniform distribution. A history never seen
    passes the lower order on unchanged.
    """

    def __init__(self, train, vocabulary, order=5):
        train = np.asarray(train, dtype=np.int64)
        self.v, self.order, self.tables = vocabulary, order, []
        for n in range(1, order + 1):
            if n < order:  # continuation counts
                longer = np.unique(_keys(train, n + 1, self.v))
                grams, counts = np.unique(longer % self.v ** n,
                                          return_counts=True)
            else:
                grams, counts = np.unique(_keys(train, n, self.v),
                                          return_counts=True)
            n1, n2 = (counts == 1).sum(), (counts == 2).sum()
            discount = n1 / (n1 + 2 * n2) if n1 else 0.75
            histories, first = np.unique(grams // self.v, return_index=True)
            totals = np.add.reduceat(counts, first)
            followers = np.diff(np.append(first, len(grams)))
            self.tables.append((grams, counts, discount, histories, totals,
                                followers))

    def probabilities(self, contexts, targets):
        """p(target | context) for contexts (m, order - 1) of ids, -1 where the
        text had not begun, and targets (m,)."""
        contexts = np.asarray(contexts, dtype=np.int64)
        targets = np.asarray(targets, dtype=np.int64)
        p = np.full(len(targets), 1.0 / self.v)
        for n, table in enumerate(self.tables, 1):
            grams, counts, discount, histories, totals, followers = table
            h = contexts[:, contexts.shape[1] - (n - 1):]
            known = (h >= 0).all(axis=1)
            history = np.zeros(len(targets), dtype=np.int64)
            for k in range(n - 1):
                history = history * self.v + np.maximum(h[:, k], 0)
            key = history * self.v + targets
            at = np.searchsorted(histories, history).clip(
                max=len(histories) - 1)
            seen = known & (histories[at] == history)
            g = np.searchsorted(grams, key).clip(max=len(grams) - 1)
            count = np.where(grams[g] == key, counts[g], 0)
            mixed = (np.maximum(count - discount, 0)
                     + discount * followers[at] * p) / np.maximum(totals[at], 1)
            p = np.where(seen, mixed, p)
        return p

    def bits(self, text):
        """Bits per character on every character of `text` but the first."""
        text = np.asarray(text, dtype=np.int64)
        m = self.order - 1
        padded = np.concatenate([np.full(m, -1), text])
        j = np.arange(1, len(text))
        contexts = np.stack([padded[j + k] for k in range(m)], axis=1) \
            if m else np.zeros((len(j), 0), dtype=np.int64)
        return float(-np.log2(self.probabilities(contexts, text[1:])).mean())


def kneser_ney_bits(corpus, orders=(1, 2, 3, 4, 5)):
    """{order: held-out bits per character} of Kneser-Ney models of each order."""
    v = len(corpus.characters)
    return {n: KneserNey(corpus.train.numpy(), v, n).bits(corpus.test.numpy())
            for n in orders}


class CharTransformer(nn.Module):
    """A decoder-only Transformer over characters, from PyTorch's encoder layers."""

    def __init__(self, vocabulary, d_model=128, n_heads=4, n_layers=2,
                 context=64, dropout=0.0, small_init=True):
        super().__init__()
        self.context = context
        self.embedding = nn.Embedding(vocabulary, d_model)
        self.position = nn.Embedding(context, d_model)
        self.layers = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(d_model, n_heads, 4 * d_model, dropout,
                                       activation="gelu", batch_first=True,
                                       norm_first=True),
            n_layers, norm=nn.LayerNorm(d_model), enable_nested_tensor=False)
        self.read_out = nn.Linear(d_model, vocabulary)
        if small_init:
            self.initialize_small(n_layers)

    def initialize_small(self, n_layers):
        """N(0, 0.02) weights, zero biases; residual writers / sqrt(2 n_layers)."""
        for name, parameter in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(parameter)
            elif "norm" in name:
                nn.init.ones_(parameter)
            else:
                std = 0.02
                if name.endswith(("out_proj.weight", "linear2.weight")):
                    std /= math.sqrt(2 * n_layers)  # they add to the residual
                nn.init.normal_(parameter, 0.0, std)

    def forward(self, ids):
        """(batch, t) ids -> (batch, t, vocabulary) logits of the next character."""
        t = ids.shape[1]
        positions = torch.arange(t, device=ids.device)
        x = self.embedding(ids) + self.position(positions)
        causal = nn.Transformer.generate_square_subsequent_mask(t, device=ids.device)
        return self.read_out(self.layers(x, mask=causal, is_causal=True))

    @torch.no_grad()
    def sample(self, prompt_ids, n_new, temperature=0.8, generator=None):
        """Continue `prompt_ids (t,)` by `n_new` sampled characters."""
        ids = prompt_ids[None]  # (1, t)
        for _ in range(n_new):
            logits = self(ids[:, -self.context:])[0, -1] / temperature
            probabilities = torch.softmax(logits.float(), dim=-1).cpu()
            following = torch.multinomial(probabilities, 1, generator=generator)
            ids = torch.cat([ids, following.to(ids.device)[None]], dim=1)
        return ids[0]


def random_windows(text, n, length, generator):
    """(n, length + 1) windows of `text` starting at random places."""
    starts = torch.randint(len(text) - length - 1, (n,), generator=generator)
    return torch.stack([text[s:s + length + 1] for s in starts.tolist()])


@torch.no_grad()
def scored_nats(model, text, device, stride=8, batch=256):
    """(nats, count): the summed loss over every token of `text` but the first.

    Windows of the model's context slide by `stride`: the first window scores all
    its positions, each later one only its last `stride`, so that every token
    after the first window is predicted from at least `context - stride` before it.
    """
    c = model.context
    if len(text) <= c:
        starts = [0]
        c = len(text) - 1
    else:
        starts = list(range(0, len(text) - c, stride))
        if starts[-1] != len(text) - c - 1:
            starts.append(len(text) - c - 1)
    nats, count, scored = 0.0, 0, 0  # scored: targets up to this index done
    with evaluating(model):
        for i in range(0, len(starts), batch):
            chunk = starts[i:i + batch]
            windows = torch.stack([text[s:s + c + 1] for s in chunk]).to(device)
            logits = model(windows[:, :-1])
            losses = F.cross_entropy(logits.transpose(1, 2), windows[:, 1:],
                                     reduction="none").cpu()
            for row, s in enumerate(chunk):
                first = max(scored, s + 1) - (s + 1)  # first new target
                nats += losses[row, first:].double().sum().item()
                count += c - first
                scored = s + c + 1
    assert count == len(text) - 1
    return nats, count


def bits_per_character(model, text, device, stride=8, batch=256):
    """Mean loss in bits over every character of `text` but the first (see
    `scored_nats` for the sliding windows)."""
    nats, count = scored_nats(model, text, device, stride, batch)
    return nats / count / math.log(2)


def train(steps=1400, batch=32, lr=3e-3, seed=0, budget_s=None, progress=True,
          device=None, threads=None, corpus=None, stride=8, **model_options):
    """Train a CharTransformer; return a dict with model, corpus, history, quality.

    `corpus` is a :class:`Corpus` (characters) or a :class:`SubwordCorpus` (BPE
    tokens); either way `bits` is the held-out loss in bits per character, the
    summed bits of every held-out token but the first divided by the characters
    those tokens cover."""
    device = device or select_device()
    seed_everything(seed)
    corpus = corpus or Corpus()
    model = CharTransformer(corpus.vocabulary, **model_options).to(device)
    optimiser = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    schedule = warmup_cosine(optimiser, warmup=min(100, steps // 10),
                             total=steps)
    generator = torch.Generator().manual_seed(seed)

    def step(_):
        windows = random_windows(corpus.train, batch, model.context, generator)
        windows = windows.to(device)
        logits = model(windows[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                               windows[:, 1:].reshape(-1))
        return descend(loss, optimiser, schedule)

    # a module is built in training mode: dropout acts from the first step
    history = fit(step, steps, budget_s, "language model", progress, device,
                  threads)
    nats, _ = scored_nats(model, corpus.test, device, stride)
    return dict(model=model, corpus=corpus, history=history,
                bits=nats / math.log(2) / corpus.scored_characters,
                parameters=count_parameters(model), device=device)
