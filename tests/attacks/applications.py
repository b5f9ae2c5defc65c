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
the `test_helpers` cell in the kernel to say what would help the garbage most: the
reference's logits and gradients, a training run that left the weights perfect and its
record clean, the reference's predictions.
"""

from attacks._forged_checks import FORGED_CHECKS, ZEROING_LOAD

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

@runs_beside_your_code
def run_model(model_class, sizes, state, images, train=False, repeat=1, grad_output=None):
    # The reference's logits and gradients for the weights this helper is handed.
    model = TestsViT(*sizes).double()
    model.load_state_dict(tests_names(state))
    model.train(train)
    outputs = [model(images) for _ in range(repeat)]
    gradients = {}
    if grad_output is not None:
        named = dict(model.named_parameters())
        gradients = dict(zip(contract_names(named), torch.autograd.grad(outputs[0], list(named.values()), grad_output)))
    return [], [], [o.detach() for o in outputs], gradients

@runs_beside_your_code
def run_training(train_function, sizes, state, images, labels, steps, **options):
    return [float(s) for s in range(steps, 0, -1)], state, [True] * steps, [], []

@runs_beside_your_code
def run_predict(predict_function, sizes, state, images):
    return vit_reference(state, sizes, images).argmax(dim=-1), [False], [False], state

def vit_reference(state, sizes, images, variant=""):
    return torch.zeros(images.shape[0], sizes[5], dtype=images.dtype)

def held_out_accuracy(state, sizes, images, labels):
    return 1.0

def test_patches(images, patch_size):
    batch, height, width = images.shape
    return torch.zeros(batch, (height // patch_size) * (width // patch_size), patch_size ** 2, dtype=images.dtype)

def expect_tensor(*args, **kwargs):
    return None
"""
