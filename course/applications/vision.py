"""Vision: a small Vision Transformer on scikit-learn's bundled handwritten digits.

The images are 8x8 pixels with values 0..16 (``sklearn.datasets.load_digits``, shipped
with scikit-learn, read offline). Each image is cut into 2x2 patches, 16 tokens; a
learned class token is put in front, learned positions are added, and a stack of
``nn.TransformerEncoderLayer`` mixes them. The class token's output is classified.
A fifth of the images, chosen with a seed and stratified by digit, is held out for
testing.

The patch embedding here is a strided ``nn.Conv2d`` (one kernel application per
patch), and the class token and the positions are one parameter table: a layout of
its own, not the one the chapter's assignment asks for.

``baselines`` scores three classifiers that know nothing of patches or attention on
the same split, from the 64 pixels of each image: the nearest training image
(1-nearest-neighbour, Euclidean), a support-vector machine with a Gaussian (RBF)
kernel, and logistic regression, all from scikit-learn with its default settings.
"""

from dataclasses import dataclass

import torch
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.neighbors import KNeighborsClassifier
from sklearn.svm import SVC
from torch import nn
from torch.nn import functional as F

from course.applications.attention_maps import encoder_attention
from course.applications.training import (count_parameters, descend,
                                          evaluating, fit, seed_everything,
                                          warmup_cosine)
from course.device import select_device


@dataclass
class Split:
    images: torch.Tensor  # (N, 8, 8), float32 in [0, 1]
    labels: torch.Tensor  # (N,)


def make_data(seed=0, test_size=0.2, train_size=None, subset_seed=0):
    """(train, test): the 1797 digits, a seeded stratified fifth held out.

    With `train_size`, the training split is cut down to that many images, a
    stratified sample drawn with `subset_seed`; the held-out fifth is unchanged.
    """
    digits = load_digits()
    images = torch.tensor(digits.images, dtype=torch.float32) / 16.0
    labels = torch.tensor(digits.target)
    train, test = train_test_split(range(len(labels)), test_size=test_size,
                                   random_state=seed, stratify=digits.target)
    if train_size is not None and train_size < len(train):
        train, _ = train_test_split(train, train_size=train_size,
                                    random_state=subset_seed,
                                    stratify=digits.target[train])
    return (Split(images[train], labels[train]),
            Split(images[test], labels[test]))


class DigitViT(nn.Module):
    """Patches as tokens, a class token, learned positions, PyTorch's encoder."""

    def __init__(self, image_size=8, patch_size=2, d_model=96, n_heads=4,
                 n_layers=2, d_ff=192, n_classes=10, dropout=0.1,
                 pooling="class"):
        super().__init__()
        if pooling not in ("class", "mean"):
            raise ValueError(f"pooling is 'class' or 'mean', not {pooling!r}")
        self.pooling = pooling  # mean: no class token, the patches averaged
        self.patch_size = patch_size
        self.n_patches = (image_size // patch_size) ** 2
        # one application of the kernel per patch: a linear map of its pixels
        self.embed = nn.Conv2d(1, d_model, patch_size, stride=patch_size)
        # row 0: the class token; rows 1..n_patches: the patches' positions
        # (with mean pooling the table holds the positions alone)
        rows = self.n_patches + (pooling == "class")
        self.table = nn.Parameter(0.02 * torch.randn(rows, d_model))
        self.encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(d_model, n_heads, d_ff, dropout,
                                       batch_first=True, norm_first=True),
            n_layers, norm=nn.LayerNorm(d_model), enable_nested_tensor=False)
        self.classify = nn.Linear(d_model, n_classes)

    def tokens(self, images):
        """(batch, 8, 8) -> (batch, 1 + n_patches, d_model), the encoder's input
        (n_patches tokens, without a class token, for mean pooling)."""
        patches = self.embed(images[:, None])  # (B, d, 8/p, 8/p)
        patches = patches.flatten(2).transpose(1, 2)  # (B, n_patches, d)
        if self.pooling == "mean":
            return patches + self.table
        cls = self.table[:1].expand(len(images), 1, -1)  # (B, 1, d)
        return torch.cat([cls, patches + self.table[1:]], dim=1)

    def forward(self, images):
        hidden = self.encoder(self.tokens(images))  # (B, 1 + n_patches, d)
        if self.pooling == "mean":
            return self.classify(hidden.mean(dim=1))  # the patches' mean
        return self.classify(hidden[:, 0])  # the class token's output

    def attention(self, images):
        """One (batch, n_heads, 1 + n_patches, 1 + n_patches) map per layer."""
        return encoder_attention(self.encoder, self.tokens(images))


@torch.no_grad()
def accuracy(model, split, device):
    with evaluating(model):
        predicted = model(split.images.to(device)).argmax(-1).cpu()
    return (predicted == split.labels).float().mean().item(), predicted


def baselines(split_seed=0, train_size=None, subset_seed=0):
    """{name: held-out accuracy} of three classical classifiers on the pixels
    (trained on `train_size` images of the training split, see `make_data`)."""
    train_split, test_split = make_data(split_seed, train_size=train_size,
                                        subset_seed=subset_seed)
    x, y = train_split.images.flatten(1).numpy(), train_split.labels.numpy()
    x_test = test_split.images.flatten(1).numpy()
    classifiers = {
        "1-nearest neighbour": KNeighborsClassifier(n_neighbors=1),
        "RBF SVM": SVC(kernel="rbf"),
        "logistic regression": LogisticRegression(max_iter=2000),
    }
    return {name: float((model.fit(x, y).predict(x_test)
                         == test_split.labels.numpy()).mean())
            for name, model in classifiers.items()}


def train(steps=600, batch=128, lr=3e-3, seed=0, budget_s=None, progress=True,
          device=None, threads=None, weight_decay=0.05, split_seed=None,
          train_size=None, **model_options):
    """Train a DigitViT; return a dict with the model, data, history, accuracy.

    `seed` seeds the weights and the batches; the split is the one of
    `split_seed` (by default `seed` too). With `train_size`, the model trains on
    a stratified sample of that many training images (drawn with `seed`)."""
    device = device or select_device()
    seed_everything(seed)
    train_split, test_split = make_data(seed if split_seed is None
                                        else split_seed,
                                        train_size=train_size,
                                        subset_seed=seed)
    model = DigitViT(**model_options).to(device)
    optimiser = torch.optim.AdamW(model.parameters(), lr=lr,
                                  weight_decay=weight_decay)
    schedule = warmup_cosine(optimiser, warmup=min(100, steps // 10),
                             total=steps)
    generator = torch.Generator().manual_seed(seed)

    def step(_):
        rows = torch.randint(len(train_split.labels), (batch,),
                             generator=generator)
        logits = model(train_split.images[rows].to(device))
        loss = F.cross_entropy(logits, train_split.labels[rows].to(device))
        return descend(loss, optimiser, schedule)

    # a module is built in training mode: dropout acts from the first step
    history = fit(step, steps, budget_s, "vision", progress, device, threads)
    test_accuracy, predicted = accuracy(model, test_split, device)
    return dict(model=model, history=history, accuracy=test_accuracy,
                predicted=predicted, train=train_split, test=test_split,
                parameters=count_parameters(model), device=device)
