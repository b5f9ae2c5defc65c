"""Attacks on the tests of chapter 7 (applications): answers that must not gain points.

GARBAGE holds wrong answers of the right shapes and dtypes for every graded name (the
baseline): a patchify of zeros, a Vision Transformer with the contract's attributes whose
logits are zero, a train_model that trains nothing and returns zero losses, and a predict
that answers class 0 for every image.

IN_PLACE holds the same answers, which also change every tensor they are handed in place,
in the way that would make a careless test pass: zero images and labels, the weights
handed to load_state_dict zeroed, the model's parameters zeroed.

MODULES holds a Vision Transformer whose parameters start at zero and that computes with
those values whatever weights it is given: zero logits. A test that read the model's own
parameters to compute its expected values would expect exactly that.

HELPERS is a student cell, added after the test helpers, that redefines every helper of
the `test_helpers` cell in the kernel to say what would help the garbage most: stored
values and weights that are the garbage's zeros, a model that returns zeros, a training
run that left the weights as they were and its record clean, the garbage's predictions.

TRANSCRIPTIONS are what a student makes of the code the course hands them: the lessons,
`course/applications`, the helper and visible-test cells of the student notebook.
"""

import inspect

from attacks._forged_checks import FORGED_CHECKS, ZEROING_LOAD
from course.applications import training


def _course(*names):
    """The source of course.applications.training's functions `names`, as a student pastes
    it: read from the module, so that a transcription follows the course when it changes."""
    return "\n" + "\n\n".join(inspect.getsource(getattr(training, name)) for name in names) + "\n"

_VIT = """
class VisionTransformer(nn.Module):
    def __init__(self, image_size, patch_size, d_model, n_heads, n_layers, n_classes, dropout=0.0):
        super().__init__()
        self.n_classes = n_classes
        self.patch_embedding = nn.Linear(patch_size ** 2, d_model)
        self.class_token = nn.Parameter(torch.zeros(1, 1, d_model))
        self.positions = nn.Parameter(torch.zeros(1, (image_size // patch_size) ** 2 + 1, d_model))
        layer = nn.TransformerEncoderLayer(d_model, n_heads, 4 * d_model, dropout, batch_first=True,
                                           norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, n_classes)
"""

GARBAGE = {
    "patchify": """
def patchify(images, patch_size):
    batch, height, width = images.shape
    return torch.zeros(batch, (height // patch_size) * (width // patch_size), patch_size ** 2, dtype=images.dtype)
""",
    "VisionTransformer": _VIT + """
    def forward(self, images):
        return torch.zeros(images.shape[0], self.n_classes, dtype=images.dtype)
""",
    "train_model": """
def train_model(model, images, labels, steps, batch_size=64, lr=3e-3, seed=0):
    return [0.0] * steps
""",
    "predict": """
def predict(model, images):
    return torch.zeros(images.shape[0], dtype=torch.long)
""",
}

IN_PLACE = {
    "patchify": """
def patchify(images, patch_size):
    images.zero_()  # the test's images become the zeros this returns
    batch, height, width = images.shape
    return torch.zeros(batch, (height // patch_size) * (width // patch_size), patch_size ** 2, dtype=images.dtype)
""",
    "VisionTransformer": _VIT + ZEROING_LOAD + """
    def forward(self, images):
        with torch.no_grad():
            images.zero_()
        return torch.zeros(images.shape[0], self.n_classes, dtype=images.dtype)
""",
    "train_model": """
def train_model(model, images, labels, steps, batch_size=64, lr=3e-3, seed=0):
    with torch.no_grad():
        images.zero_()
        labels.zero_()
        for parameter in model.parameters():
            parameter.zero_()
    return [0.0] * steps
""",
    "predict": """
def predict(model, images):
    with torch.no_grad():
        images.zero_()
        for parameter in model.parameters():
            parameter.zero_()
    return torch.zeros(images.shape[0], dtype=torch.long)
""",
}

MODULES = {
    # Zero weights: the head's output is its zero bias, whatever the images.
    "VisionTransformer": _VIT + """
        with torch.no_grad():
            for parameter in self.parameters():
                parameter.zero_()

    def forward(self, images):
        return self.head.bias.expand(images.shape[0], -1) * 1
""",
}

HELPERS = FORGED_CHECKS + """

def stored(call, value):
    # Every stored value becomes the garbage's zeros.
    return np.zeros(np.shape(value), dtype=np.asarray(value).dtype)

def expect_tensor(*args, **kwargs):
    return None

def random_weights(shapes, generator, dtype):
    return {name: torch.zeros(shape, dtype=dtype) for name, shape in shapes.items()}

def vit_state(sizes, generator, dtype=torch.float64):
    return {}

def classifier_state(sizes, generator, dtype=torch.float64):
    return {}

def initial_state(sizes, seed):
    return {}

class TestsClassifier(nn.Module):
    def __init__(self, n_pixels, n_hidden, n_classes, dropout=0.0):
        super().__init__()
        self.n_classes = n_classes
        self.modes, self.recording = [], []

    def forward(self, images):
        return torch.zeros(len(images), self.n_classes, dtype=images.dtype)

@runs_beside_your_code
def run_model(model_class, sizes, state, images, train=False, repeat=1, grad_output=None):
    # Logits of zeros, gradients of zeros, every weight loaded.
    logits = torch.zeros(images.shape[0], sizes[5], dtype=images.dtype)
    gradients = {name: torch.zeros_like(value) for name, value in state.items()}
    return [], [], [logits] * repeat, gradients

@runs_beside_your_code
def run_training(train_function, sizes, state, images, labels, steps, leftover_gradients=False, **options):
    # Falling losses, the training mode at every step, each gradient its own.
    gradients = [torch.zeros(sizes[2]) for _ in range(steps)]
    return [float(s) for s in range(steps, 0, -1)], state, [True] * steps, gradients, gradients

@runs_beside_your_code
def run_predict(predict_function, sizes, state, images):
    return torch.zeros(images.shape[0], dtype=torch.long), [False], [False], state
"""

_COURSE_VIT = """
class VisionTransformer(nn.Module):
    def __init__(self, image_size, patch_size, d_model, n_heads, n_layers, n_classes, dropout=0.0):
        super().__init__()
        self.patch_size = patch_size
        self.n_patches = (image_size // patch_size) ** 2
        self.patch_embedding = nn.Conv2d(1, d_model, patch_size, stride=patch_size)
        self.positions = nn.Parameter(0.02 * torch.randn(1, self.n_patches + 1, d_model))
        self.class_token = nn.Parameter(0.02 * torch.randn(1, 1, d_model))
        self.encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(d_model, n_heads, 4 * d_model, dropout, batch_first=True, norm_first=True),
            n_layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, n_classes)

    def forward(self, images):
        patches = self.patch_embedding(images[:, None]).flatten(2).transpose(1, 2)
        cls = (self.class_token + self.positions[:, :1]).expand(len(images), 1, -1)
        tokens = torch.cat([cls, patches + self.positions[:, 1:]], dim=1)
        return self.head(self.norm(self.encoder(tokens)[:, 0]))
"""

# What a student makes of the code the course hands them, adapted in minutes.
TRANSCRIPTIONS = {
    # The lessons: the vision lesson's patches of its 8 x 8 images (the ink it sums per
    # patch, not summed) and its convolution's tokens.
    "lesson": {
        "patchify": """
def patchify(images, patch_size):
    p = patch_size
    batch, height, width = images.shape
    if height % p or width % p:
        raise ValueError("not a multiple of the patch size")
    return images.reshape(batch, height // p, p, width // p, p).reshape(batch, -1, p * p)
""",
        "VisionTransformer": _COURSE_VIT,
    },
    # The notebook's helper cell: the weights' names and shapes as a trivial __init__, the
    # tests' classifier as a forward pass, run_model's evaluation-mode call as predict.
    "helpers": {
        "VisionTransformer": _VIT + """
        self.patch_size = patch_size

    def forward(self, images):
        tokens = torch.relu(self.patch_embedding(patchify(images, self.patch_size)))
        return self.head(self.norm(tokens.mean(dim=1)))
""",
        "predict": """
def predict(model, images):
    model.train(False)
    return model(images.clone()).argmax(dim=-1)
""",
    },
    # course/applications: vision.py's DigitViT under the contract's names, its training run
    # (with training.py's descend, fit and warmup_cosine) and its accuracy's predictions
    # (with training.py's evaluating).
    "course": {
        "VisionTransformer": _COURSE_VIT,
        "train_model": _course("warmup_cosine", "descend") + """
def train_model(model, images, labels, steps, batch_size=64, lr=3e-3, seed=0):
    optimiser = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.05)
    schedule = warmup_cosine(optimiser, warmup=min(100, steps // 10), total=steps)
    generator = torch.Generator().manual_seed(seed)

    def step(_):
        rows = torch.randint(len(labels), (batch_size,), generator=generator)
        logits = model(images[rows])
        loss = F.cross_entropy(logits, labels[rows])
        return descend(loss, optimiser, schedule)

    return [float(step(i)) for i in range(steps)]
""",
        "predict": "from contextlib import contextmanager\n" + _course("evaluating") + """
@torch.no_grad()
def predict(model, images):
    with evaluating(model):
        predicted = model(images).argmax(-1).cpu()
    return predicted
""",
    },
}
