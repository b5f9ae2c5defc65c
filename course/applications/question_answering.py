"""Question answering as span extraction on generated reading passages.

A passage states nine facts about three invented people, one fact per sentence, in a
random order and in one of two wordings per fact ("bramo lenanri was born in varno ."
or "varno is where bramo lenanri was born ."). A question asks for one fact ("where
was bramo lenanri born ?") or for the person behind one ("who was born in varno ?"),
and its answer is a span of the passage: a first and a last word. Names, cities and
years are drawn at random for every passage, so nothing can be learned by heart, and
the held-out passages are new draws.

The reader follows the shape of DrQA (Chen et al., 2017) with Transformer layers in
place of its recurrent ones:

* the question and the passage are encoded separately by the same layers;
* every passage word also gets a flag, "this word occurs in the question" (DrQA's
  exact-match feature; DrQA also had an aligned question embedding, which carries
  much the same match and which this reader lacks): it marks where the question's
  name or city sits in the passage, but not which fact belongs to it;
* the question is summed up in one vector q, the plain mean of its encoded words
  (DrQA's q is a learned, attention-weighted average of them), and the
  start and end scores of passage word i are bilinear, ``p_i . W_start q`` and
  ``p_i . W_end q``: the softmax over i is the question's attention over the passage,
  Luong's "general" score of chapter 1 used as a pointer.

Which fact belongs to which name is a question of word order, so the reader needs
positions: ``positions="rotary"`` turns queries and keys by their position (RoPE, Su et
al., 2021, chapter 5), ``"learned"`` adds a learned vector per absolute position,
``"sinusoidal"`` adds the fixed sines and cosines of chapter 5, and ``"none"`` leaves
the encoder a bag of words. The added vectors start at the scale of the word
embeddings (``nn.Embedding`` draws N(0, 1) entries, a vector of squared norm about
d_model): the learned table is drawn N(0, ``position_scale`` ** 2) with
``position_scale=1.0``, and the sinusoidal table, whose rows have squared norm d_model
/ 2, is multiplied by sqrt(2). ``nn.TransformerEncoderLayer`` has no
place to turn queries and keys, so the layers here are written out, on PyTorch's
``F.scaled_dot_product_attention``.

References: Rajpurkar et al., 2016 (SQuAD: spans and exact match); Chen et al., 2017
(DrQA); Su et al., 2021 (RoFormer).
"""

import math
import random
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from course.applications.training import (count_parameters, descend,
                                          evaluating, fit, seed_everything,
                                          warmup_cosine)
from course.device import select_device
from course.positional import rope_half_split, sinusoid_table

SYLLABLES = ("ka ri mo ta len vor is an del sa pe lu nor ti bra gen ol "
             "ma fi ro").split()
JOBS = ("baker painter sailor doctor farmer teacher weaver miner potter "
        "judge singer tailor").split()
YEARS = [str(year) for year in range(1800, 1900)]
KINDS = ("where", "when", "what", "who")
# Two wordings of each fact; NAME is the person's two-word name, X the fact.
TEMPLATES = {
    "where": ("NAME was born in X .", "X is where NAME was born ."),
    "when": ("NAME was born in X .", "in X , NAME was born ."),
    "what": ("NAME works as a X .", "NAME is a X ."),
}
QUESTIONS = {
    "where": "where was NAME born ?",
    "when": "when was NAME born ?",
    "what": "what does NAME do ?",
    "who": "who was born in X ?",
}
PAD = "<pad>"
ROTARY_BASE = 100.0  # passages are short: the slowest turn still separates 70 words


def made_up_words(rng, count, syllables, avoid=()):
    """`count` distinct words of `syllables` random syllables, none of them in `avoid`."""
    made = set()
    while len(made) < count:
        word = "".join(rng.choice(SYLLABLES) for _ in range(syllables))
        if word not in avoid:
            made.add(word)
    return sorted(made)


class World:
    """The vocabulary: made-up first names, last names and cities, plus fixed words."""

    def __init__(self, seed=0, n_first=40, n_last=40, n_cities=30):
        rng = random.Random(seed)
        self.first = made_up_words(rng, n_first, 2)
        self.last = made_up_words(rng, n_last, 3)
        self.cities = made_up_words(rng, n_cities, 2,
                                     avoid=set(self.first) | set(self.last))
        fixed = " ".join([*TEMPLATES["where"], *TEMPLATES["when"],
                          *TEMPLATES["what"], *QUESTIONS.values()]).split()
        words = [PAD, *fixed, *JOBS, *YEARS, *self.first, *self.last, *self.cities]
        self.words = [w for w in dict.fromkeys(words) if w not in ("NAME", "X")]
        self.ids = {word: i for i, word in enumerate(self.words)}  # PAD is 0


def fill(template, name, fact):
    """The words of a template with NAME and X filled in, and where X landed."""
    words, fact_at = [], None
    for word in template.split():
        if word == "NAME":
            words += name
        elif word == "X":
            fact_at = len(words)
            words.append(fact)
        else:
            words.append(word)
    return words, fact_at


@dataclass
class Example:
    question: list  # words
    passage: list  # words
    start: int  # the answer's first word, an index into the passage
    end: int  # its last word (inclusive)
    kind: str  # "where", "when", "what" or "who"

    @property
    def answer(self):
        return self.passage[self.start:self.end + 1]


def make_example(world, rng):
    """One passage about three people and one question about it.

    The answer is marked where the passage states the fact asked about: for "who was
    born in varno ?" it is the name in the sentence about varno, though the same name
    also opens two other sentences."""
    firsts, lasts = rng.sample(world.first, 3), rng.sample(world.last, 3)
    facts = {"where": rng.sample(world.cities, 3), "when": rng.sample(YEARS, 3),
             "what": rng.sample(JOBS, 3)}
    statements = [(person, fact) for person in range(3) for fact in TEMPLATES]
    rng.shuffle(statements)
    asked, kind = rng.randrange(3), rng.choice(KINDS)
    passage, start, end = [], None, None
    for person, fact in statements:
        name = [firsts[person], lasts[person]]
        words, fact_at = fill(rng.choice(TEMPLATES[fact]), name, facts[fact][person])
        if person == asked and fact == ("where" if kind == "who" else kind):
            if kind == "who":  # the two words of the name in this sentence
                start = len(passage) + words.index(name[0])
                end = start + 1
            else:
                start = end = len(passage) + fact_at
        passage += words
    question, _ = fill(QUESTIONS[kind], [firsts[asked], lasts[asked]],
                       facts["where"][asked])
    return Example(question, passage, start, end, kind)


def pad(rows, ids):
    """(len(rows), longest) tensor of word ids, PAD (0) after each row's end."""
    tokens = torch.zeros(len(rows), max(map(len, rows)), dtype=torch.long)
    for i, row in enumerate(rows):
        tokens[i, :len(row)] = torch.tensor([ids[w] for w in row])
    return tokens


@dataclass
class Batch:
    examples: list
    questions: torch.Tensor  # (N, n_q) word ids, padded
    passages: torch.Tensor  # (N, n_p)
    starts: torch.Tensor  # (N,) index of the answer's first word in the passage
    ends: torch.Tensor  # (N,) its last word


def make_batch(world, n, rng):
    examples = [make_example(world, rng) for _ in range(n)]
    return Batch(examples,
                 pad([e.question for e in examples], world.ids),
                 pad([e.passage for e in examples], world.ids),
                 torch.tensor([e.start for e in examples]),
                 torch.tensor([e.end for e in examples]))


class ReaderLayer(nn.Module):
    """A pre-norm encoder layer whose attention can turn queries and keys (RoPE)."""

    def __init__(self, d_model, n_heads, rotary):
        super().__init__()
        self.n_heads, self.rotary = n_heads, rotary
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.feed_forward = nn.Sequential(nn.Linear(d_model, 4 * d_model),
                                          nn.GELU(),
                                          nn.Linear(4 * d_model, d_model))

    def heads(self, x):
        """Queries, keys, values of the normed input, each (B, H, n, d_head)."""
        batch, n, d_model = x.shape
        qkv = self.qkv(self.norm1(x)).view(batch, n, 3, self.n_heads, -1)
        queries, keys, values = qkv.permute(2, 0, 3, 1, 4)  # each (B, H, n, d_head)
        if self.rotary:
            queries, keys = rope_half_split(queries, keys, ROTARY_BASE)
        return queries, keys, values

    def forward(self, x, keep):
        """x (B, n, d_model); keep (B, n) True for real words, False for padding."""
        queries, keys, values = self.heads(x)
        # scaled_dot_product_attention's boolean mask is True where attention is allowed
        mixed = F.scaled_dot_product_attention(queries, keys, values,
                                               attn_mask=keep[:, None, None, :])
        x = x + self.out(mixed.transpose(1, 2).flatten(2))  # (B, n, d_model)
        return x + self.feed_forward(self.norm2(x))

    def weights(self, x, keep):
        """The attention weights this layer uses, (B, H, n, n)."""
        queries, keys, _ = self.heads(x)
        scores = queries @ keys.transpose(-2, -1) / math.sqrt(queries.shape[-1])
        return scores.masked_fill(~keep[:, None, None, :], float("-inf")).softmax(-1)


class SpanReader(nn.Module):
    """Encode question and passage; point at the answer's first and last word."""

    def __init__(self, vocabulary, d_model=64, n_heads=4, n_layers=2,
                 positions="rotary", flags=True, max_length=96,
                 position_scale=1.0):
        super().__init__()
        if positions not in ("rotary", "learned", "sinusoidal", "none"):
            raise ValueError("positions must be rotary, learned, sinusoidal or "
                             f"none, not {positions!r}")
        self.positions = positions
        self.embedding = nn.Embedding(vocabulary, d_model)
        self.flag = nn.Embedding(2, d_model) if flags else None
        # an added position vector starts at the word embeddings' scale
        if positions == "learned":
            self.table = nn.Parameter(position_scale
                                      * torch.randn(max_length, d_model))
        elif positions == "sinusoidal":  # fixed: a buffer, not a parameter
            self.register_buffer("table", math.sqrt(2)
                                 * sinusoid_table(max_length, d_model))
        else:
            self.table = None
        self.layers = nn.ModuleList(
            ReaderLayer(d_model, n_heads, rotary=positions == "rotary")
            for _ in range(n_layers))
        self.norm = nn.LayerNorm(d_model)
        self.start_map = nn.Linear(d_model, d_model, bias=False)  # W_start
        self.end_map = nn.Linear(d_model, d_model, bias=False)  # W_end

    def inputs(self, tokens, flags=None):
        """The first layer's input, (B, n, d_model)."""
        x = self.embedding(tokens)
        if self.flag is not None and flags is not None:
            x = x + self.flag(flags.long())
        if self.table is not None:
            x = x + self.table[:tokens.shape[1]]
        return x

    def encode(self, tokens, flags=None):
        """(states (B, n, d_model), keep (B, n))."""
        keep = tokens != 0
        x = self.inputs(tokens, flags)
        for layer in self.layers:
            x = layer(x, keep)
        return self.norm(x), keep

    def question_flags(self, questions, passages):
        """(B, n_p): True where the passage word occurs in the question."""
        same = passages[:, :, None] == questions[:, None, :]  # (B, n_p, n_q)
        return same.any(-1) & (passages != 0)

    def forward(self, questions, passages):
        """Start and end scores over the passage, each (B, n_p); padding -inf."""
        asked, asked_keep = self.encode(questions)
        # q: the mean of the question's encoded words, (B, d_model)
        q = (asked * asked_keep[..., None]).sum(1) / asked_keep.sum(1, keepdim=True)
        read, keep = self.encode(passages, self.question_flags(questions, passages))
        starts = (read @ self.start_map(q)[:, :, None]).squeeze(-1)  # (B, n_p)
        ends = (read @ self.end_map(q)[:, :, None]).squeeze(-1)  # (B, n_p)
        return (starts.masked_fill(~keep, float("-inf")),
                ends.masked_fill(~keep, float("-inf")))

    @torch.no_grad()
    def passage_attention(self, questions, passages):
        """The passage encoder's attention weights: one (B, H, n_p, n_p) per layer."""
        keep = passages != 0
        x = self.inputs(passages, self.question_flags(questions, passages))
        maps = []
        for layer in self.layers:
            maps.append(layer.weights(x, keep))
            x = layer(x, keep)
        return maps


MAX_ANSWER = 3  # words: the longest span the reader may return


@torch.no_grad()
def predict_spans(model, batch, device):
    """(starts, ends, start probabilities, end probabilities), all on the CPU.

    The span chosen is the (start, end) with start <= end < start + MAX_ANSWER of
    largest summed score."""
    with evaluating(model):
        starts, ends = model(batch.questions.to(device),
                             batch.passages.to(device))
    n = starts.shape[1]
    spans = starts[:, :, None] + ends[:, None, :]  # (B, n, n): span (i, j)
    i, j = torch.meshgrid(torch.arange(n, device=spans.device),
                          torch.arange(n, device=spans.device), indexing="ij")
    allowed = (j >= i) & (j - i < MAX_ANSWER)
    best = spans.masked_fill(~allowed, float("-inf")).flatten(1).argmax(1).cpu()
    return (best // n, best % n, starts.softmax(-1).cpu(), ends.softmax(-1).cpu())


def exact_match(model, batch, device):
    """SQuAD's exact match: the fraction of answers whose words are exactly right.

    Returns (overall, {kind: fraction})."""
    starts, ends, _, _ = predict_spans(model, batch, device)
    right = torch.tensor([e.passage[s:t + 1] == e.answer for e, s, t in
                          zip(batch.examples, starts.tolist(), ends.tolist())])
    kinds = [e.kind for e in batch.examples]
    by_kind = {kind: right[[k == kind for k in kinds]].float().mean().item()
               for kind in KINDS}
    return right.float().mean().item(), by_kind


def training_stream(world, seed, batch):
    """The training batches, in order: the same seed gives the same passages."""
    rng = random.Random(seed)
    while True:
        yield make_batch(world, batch, rng)


def train(steps=800, batch=32, lr=3e-3, seed=0, budget_s=None, progress=True,
          device=None, threads=None, positions="rotary", flags=True,
          test_size=2000, **model_options):
    """Train a SpanReader; return a dict with model, world, history, exact match."""
    device = device or select_device()
    seed_everything(seed)
    world = World(seed)
    model = SpanReader(len(world.words), positions=positions, flags=flags,
                       **model_options).to(device)
    optimiser = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    schedule = warmup_cosine(optimiser, warmup=min(100, steps // 10), total=steps)
    stream = training_stream(world, seed, batch)
    # held out: passages drawn by a generator the training stream never uses
    test = make_batch(world, test_size, random.Random(10_000 + seed))

    def step(_):
        data = next(stream)
        starts, ends = model(data.questions.to(device), data.passages.to(device))
        loss = (F.cross_entropy(starts, data.starts.to(device))
                + F.cross_entropy(ends, data.ends.to(device))) / 2
        return descend(loss, optimiser, schedule)

    # a module is built in training mode: dropout acts from the first step
    described = "no" if positions == "none" else positions
    name = f"question answering ({described} positions{', flags' if flags else ''})"
    history = fit(step, steps, budget_s, name, progress, device, threads)
    accuracy, by_kind = exact_match(model, test, device)
    return dict(model=model, world=world, history=history, test=test,
                accuracy=accuracy, by_kind=by_kind,
                parameters=count_parameters(model), device=device)
