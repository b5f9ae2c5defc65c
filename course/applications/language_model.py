"""Language modelling: a character-level causal Transformer on Python's own docstrings.

The text is the documentation that ships with the Python interpreter: the docstrings of
a fixed list of standard-library modules and of their public functions and classes,
read at run time with ``inspect.getdoc`` (no download, and not written by this course).
Characters outside printable ASCII are dropped. Every tenth docstring is held out.

The model is decoder-only: character and learned position embeddings, a stack of
``nn.TransformerEncoderLayer`` run with a causal mask, and a linear read-out. Weights
start small, GPT-style (Radford et al., 2019): normal with standard deviation 0.02, and
the projections that write into the residual stream scaled down by
``1 / sqrt(2 * n_layers)``. Quality is measured in bits per character on the held-out
text, against the unigram and bigram models of the training text.
"""

import importlib
import inspect
import math
import string
import warnings

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
    """The docstrings of MODULES and of their public members, in a fixed order."""
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
                texts.append("".join(c for c in doc if c in ALPHABET))
    return texts


class Corpus:
    """Train and held-out text as id tensors, and the character vocabulary."""

    def __init__(self, held_out_every=10):
        texts = docstrings()
        train = [t for i, t in enumerate(texts) if i % held_out_every]
        test = [t for i, t in enumerate(texts) if not i % held_out_every]
        self.train_text, self.test_text = "\n\n".join(train), "\n\n".join(test)
        self.characters = sorted(set(self.train_text) | set(self.test_text))
        self.ids = {c: i for i, c in enumerate(self.characters)}
        self.train = self.encode(self.train_text)
        self.test = self.encode(self.test_text)

    def encode(self, text):
        return torch.tensor([self.ids[c] for c in text])

    def decode(self, ids):
        return "".join(self.characters[int(i)] for i in ids)


def unigram_and_bigram_bits(corpus):
    """Held-out bits per character of the training text's unigram and bigram models.

    Both are smoothed by adding one to every count, so that no held-out character
    has probability zero.
    """
    v = len(corpus.characters)
    unigram = torch.bincount(corpus.train, minlength=v).double() + 1
    log_p1 = (unigram / unigram.sum()).log2()
    pairs = corpus.train[:-1] * v + corpus.train[1:]
    bigram = torch.bincount(pairs, minlength=v * v).double().view(v, v) + 1
    log_p2 = (bigram / bigram.sum(dim=1, keepdim=True)).log2()
    test = corpus.test
    return (-log_p1[test].mean().item(),
            -log_p2[test[:-1], test[1:]].mean().item())


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
def bits_per_character(model, text, device, windows=64, seed=1234):
    """Mean held-out loss in bits over `windows` fixed windows of full context."""
    generator = torch.Generator().manual_seed(seed)
    batch = random_windows(text, windows, model.context, generator).to(device)
    with evaluating(model):
        logits = model(batch[:, :-1])
    nats = F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                           batch[:, 1:].reshape(-1))
    return nats.item() / math.log(2)


def train(steps=1400, batch=32, lr=3e-3, seed=0, budget_s=None, progress=True,
          device=None, threads=None, corpus=None, **model_options):
    """Train a CharTransformer; return a dict with model, corpus, history, quality."""
    device = device or select_device()
    seed_everything(seed)
    corpus = corpus or Corpus()
    model = CharTransformer(len(corpus.characters), **model_options).to(device)
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
    return dict(model=model, corpus=corpus, history=history,
                bits=bits_per_character(model, corpus.test, device),
                parameters=count_parameters(model), device=device)
