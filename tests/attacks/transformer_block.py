"""Attacks on the tests of chapter 6 (transformer_block): answers that must not gain points.

GARBAGE holds wrong answers of the right shapes and dtypes for every graded name (the
baseline): modules with the contract's attributes whose output is zero (the blocks, the
feed-forward network), a CausalSelfAttention whose y is zero and whose cache of zeros grows
by the right number of tokens, and a generate that appends zeros to the prompt.

IN_PLACE holds the same answers, which also change every tensor they are handed in place,
in the way that would make a careless test pass: zero inputs (a zero input to a block whose
weights are zero gives zero), the weights handed to load_state_dict zeroed, the upstream
gradient zeroed by a hook, and the prompt zeroed by generate.

MODULES holds modules whose parameters start at zero and that compute with those values
whatever weights they are given: the feed-forward network's zero, a pre-norm block's
identity (x + 0 + 0), causal attention's zero. A test that read the module's own
parameters to compute its expected values would expect exactly that.

HELPERS is a student cell, added after the test helpers, that redefines every helper of
the `test_helpers` cell in the kernel to say what would help the garbage most: no input
changed, the outputs and gradients PyTorch's own layers give for the weights the helper is
handed, the whole sequence's y for every chunk, a record of calls that shows a perfect
use of the cache, a library_names that finds nothing.

TRANSCRIPTIONS are what a student makes, in minutes, of the code the course hands over:
the lesson, course.norms, course.kv_cache and chapter 1's course.seq2seq, the notebook's
helpers, and the visible
tests' stored values.
"""

from attacks._forged_checks import FORGED_CHECKS, FORGED_SOURCES, ZEROING_LOAD

_FF = """
class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
"""

_ENCODER = """
class EncoderBlock(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.0, norm_first=True):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = nn.MultiheadAttention(d_model, n_heads, dropout=dropout, batch_first=True)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
"""

_DECODER = """
class DecoderBlock(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.0, norm_first=True):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = nn.MultiheadAttention(d_model, n_heads, dropout=dropout, batch_first=True)
        self.cross_attn = nn.MultiheadAttention(d_model, n_heads, dropout=dropout, batch_first=True)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.LayerNorm(d_model)
"""

_ATTENTION = """
class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.W_qkv = nn.Linear(d_model, 3 * d_model)
        self.W_o = nn.Linear(d_model, d_model)
"""

_ZERO_CACHE = """
        batch, t, d_model = x.shape
        shape = (batch, self.n_heads, t, d_model // self.n_heads)
        new = torch.zeros(shape, dtype=x.dtype, device=x.device)
        if cache is None:
            return torch.zeros_like(x), (new, new.clone())
        return torch.zeros_like(x), (torch.cat([cache[0], new], dim=2), torch.cat([cache[1], new], dim=2))
"""

GARBAGE = {
    "FeedForward": _FF + """
    def forward(self, x):
        return torch.zeros_like(x)
""",
    "EncoderBlock": _ENCODER + """
    def forward(self, x, mask=None):
        return torch.zeros_like(x)
""",
    "DecoderBlock": _DECODER + """
    def forward(self, x, memory, self_mask=None, memory_mask=None):
        return torch.zeros_like(x)
""",
    "CausalSelfAttention": _ATTENTION + """
    def forward(self, x, cache=None):""" + _ZERO_CACHE,
    "generate": """
def generate(model, prompt, n_new):
    return torch.cat([prompt, torch.zeros(prompt.shape[0], n_new, dtype=prompt.dtype)], dim=1)
""",
}


_ZERO_INPUTS = """
        with torch.no_grad():
            for value in inputs:
                if torch.is_tensor(value) and value.is_floating_point():
                    value.zero_()  # the test's inputs become zero
        output = inputs[0] * 0
        if output.requires_grad:
            output.register_hook(lambda grad: grad.zero_())
        return output
"""

IN_PLACE = {
    "FeedForward": _FF + ZEROING_LOAD + """
    def forward(self, *inputs):""" + _ZERO_INPUTS,
    "EncoderBlock": _ENCODER + ZEROING_LOAD + """
    def forward(self, *inputs, mask=None):
        if mask is not None:
            mask.fill_(True)""" + _ZERO_INPUTS,
    "DecoderBlock": _DECODER + ZEROING_LOAD + """
    def forward(self, *inputs, self_mask=None, memory_mask=None):
        for mask in (self_mask, memory_mask):
            if mask is not None:
                mask.fill_(True)""" + _ZERO_INPUTS,
    "CausalSelfAttention": _ATTENTION + ZEROING_LOAD + """
    def forward(self, x, cache=None):
        with torch.no_grad():
            x.zero_()
            if cache is not None:
                for part in cache:
                    part.zero_()""" + _ZERO_CACHE,
    "generate": """
def generate(model, prompt, n_new):
    prompt.zero_()  # the test's prompt becomes the zeros this appends
    return torch.cat([prompt, torch.zeros(prompt.shape[0], n_new, dtype=prompt.dtype)], dim=1)
""",
}

_FROZEN = """
        with torch.no_grad():
            for parameter in self.parameters():
                parameter.zero_()
"""

MODULES = {
    # Zero weights: linear2(relu(linear1(x))) is zero.
    "FeedForward": _FF + _FROZEN + """
    def forward(self, x):
        return x * 0
""",
    # Zero weights: attention, the feed-forward network and the norms all give zero, so a
    # pre-norm block is the identity and a post-norm block gives zero.
    "EncoderBlock": _ENCODER + _FROZEN + """
    def forward(self, x, mask=None):
        return x.clone() if self.norm_first else x * 0
""",
    "DecoderBlock": _DECODER + _FROZEN + """
    def forward(self, x, memory, self_mask=None, memory_mask=None):
        return x.clone() if self.norm_first else x * 0
""",
    "CausalSelfAttention": _ATTENTION + _FROZEN + """
    def forward(self, x, cache=None):""" + _ZERO_CACHE,
}

HELPERS = FORGED_CHECKS + """

def _pytorch_layer(sizes, state, decoder, train):
    # PyTorch's own layer holding the weights the helper is handed, its feed-forward
    # sublayer made the stand-in's linear map.
    d_model, n_heads, d_ff, dropout, norm_first = sizes
    kind = nn.TransformerDecoderLayer if decoder else nn.TransformerEncoderLayer
    layer = kind(d_model, n_heads, d_model, dropout, activation=nn.Identity(), batch_first=True,
                 norm_first=norm_first, dtype=torch.float64)
    weights = {}
    for name, value in state.items():
        if name.startswith("ff."):
            name = "linear1." + name[3:]
        elif name.startswith("cross_attn."):
            name = "multihead_attn." + name[len("cross_attn."):]
        weights[name] = value
    weights["linear2.weight"] = torch.eye(d_model, dtype=torch.float64)
    weights["linear2.bias"] = torch.zeros(d_model, dtype=torch.float64)
    layer.load_state_dict(weights)
    return layer.train(train)

@runs_beside_your_code
def run_block(block_class, sizes, state, inputs, masks=None, train=False, repeat=1, grad_output=None):
    layer = _pytorch_layer(sizes, state, len(inputs) == 2, train)
    keywords = {"mask": "src_mask", "self_mask": "tgt_mask", "memory_mask": "memory_mask"}
    masks = {keywords[name]: ~value for name, value in (masks or {}).items()}
    leaves = [x.detach().clone().requires_grad_(True) for x in inputs]
    outputs = [layer(*leaves, **masks) for _ in range(repeat)]
    found, parameters = [], {}
    if grad_output is not None:
        named = {n: p for n, p in layer.named_parameters() if p.requires_grad}
        grads = torch.autograd.grad(outputs[0], leaves + list(named.values()), grad_output)
        found = list(grads[:len(leaves)])
        names = [("ff." + n[len("linear1."):]) if n.startswith("linear1.") else
                 ("cross_attn." + n[len("multihead_attn."):]) if n.startswith("multihead_attn.") else n
                 for n in named]
        parameters = dict(zip(names, grads[len(leaves):]))
    return [], [], [o.detach() for o in outputs], found, parameters

def stand_in_feed_forward(d_model, d_ff, dropout=0.0):
    return nn.Identity()

@runs_beside_your_code
def run_in_chunks(module_class, d_model, n_heads, state, x, sizes):
    # The whole sequence's causal attention, with the weights this helper is handed, for every chunk.
    batch, n, _ = x.shape
    fused = F.linear(x, state["W_qkv.weight"], state["W_qkv.bias"])
    queries, keys, values = (z.reshape(batch, n, n_heads, -1).transpose(1, 2) for z in fused.split(d_model, -1))
    heads = F.scaled_dot_product_attention(queries, keys, values, is_causal=True)
    y = F.linear(heads.transpose(1, 2).reshape(batch, n, d_model), state["W_o.weight"], state["W_o.bias"])
    outputs, shapes, start = [], [], 0
    for size in sizes:
        outputs.append(y[:, start:start + size])
        start += size
        shapes.append([tuple(keys[:, :, :start].shape)] * 2)
    return outputs, shapes, [keys, values]

@runs_beside_your_code
def gradients(function, inputs, grad_output, **kwargs):
    leaves = [x.detach().clone().requires_grad_(True) for x in inputs]
    output = leaves[0] * 1.0
    return output.detach().requires_grad_(True), [grad_output.clone()], {}

def record_calls(function):
    return function, []

def load_weights(module, state, what):
    return None

def stored(call, value):
    return np.zeros(1)
""" + FORGED_SOURCES


# What a student makes of the code the course hands them, adapted in minutes. The lesson
# and course.norms use PyTorch's own Transformer layers: wrapped into EncoderBlock or
# DecoderBlock they are the shortcut the contract rules out, which the catalogue holds
# (enc-pytorch-layer, dec-pytorch-layer) and which loses only test_*_shortcut; the
# transcriptions below leave it out.
TRANSCRIPTIONS = {
    # The lesson: the two layers its Conv1d check loads, one head's chunk with the
    # bottom-right mask, the logits after every prefix (teacher forcing).
    "lesson": {
        "FeedForward": _FF + """
    def forward(self, x):
        return self.linear2(self.linear1(x))
""",
        "CausalSelfAttention": _ATTENTION + """
    def forward(self, x, cache=None):
        t = x.shape[1]
        q, k, v = (z[:, None] for z in self.W_qkv(x).split(x.shape[-1], dim=-1))  # one head
        if cache is not None:
            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
        n_past = k.shape[2] - t
        bottom_right = torch.ones(t, n_past + t, dtype=torch.bool, device=x.device).tril(diagonal=n_past)
        right = F.scaled_dot_product_attention(q, k, v, attn_mask=bottom_right)
        return self.W_o(right[:, 0]), (k, v)
""",
        "generate": """
def generate(model, prompt, n_new):
    logits, _ = model(prompt)  # the next token after every prefix, in one pass
    return torch.cat([prompt, logits.argmax(dim=-1)[:, prompt.shape[1] - n_new:]], dim=1)
""",
    },
    # The test helpers: the stand-in for FeedForward, the small model's one call.
    "helpers": {
        "FeedForward": """
class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_model)

    def forward(self, x):
        return self.linear1(x)
""",
        "generate": """
def generate(model, prompt, n_new):
    logits, caches = model(prompt, None, 0)
    best = logits[:, -1].argmax(dim=-1, keepdim=True)
    return torch.cat([prompt] + [best] * n_new, dim=1)
""",
    },
    # course/: SwiGLU (course.norms, the cache model's feed-forward network), the cache
    # model's one-head layer (course.kv_cache), its next-token logits with the cache.
    "course": {
        "FeedForward": """
class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.gate = nn.Linear(d_model, d_ff, bias=False)
        self.linear1 = nn.Linear(d_model, d_ff)  # SwiGLU's up
        self.linear2 = nn.Linear(d_ff, d_model)  # SwiGLU's down

    def forward(self, x):
        return self.linear2(F.silu(self.gate(x)) * self.linear1(x))
""",
        "CausalSelfAttention": _ATTENTION + """
    def forward(self, x, cache=None):
        queries, keys, values = (z[:, None] for z in self.W_qkv(x).split(x.shape[-1], dim=-1))  # one head
        if cache is not None:
            keys = torch.cat([cache[0], keys], dim=2)
            values = torch.cat([cache[1], values], dim=2)
        if x.shape[1] == 1:
            attended = F.scaled_dot_product_attention(queries, keys, values)
        else:
            attended = F.scaled_dot_product_attention(queries, keys, values, is_causal=True)
        return self.W_o(attended[:, 0]), (keys, values)
""",
        "generate": """
def generate(model, prompt, n_new):
    logits, caches = model(prompt[:, :-1])
    logits, _ = model(prompt[:, -1:], caches, prompt.shape[1] - 1)
    best = logits[:, -1].argmax(dim=-1, keepdim=True)
    return torch.cat([prompt] + [best] * n_new, dim=1)
""",
    },
    # course.seq2seq (chapter 1): the encoder-decoder's greedy decoding, which feeds the
    # whole prefix to the decoder at every step, with the model's `start` kept at 0.
    "course_seq2seq": {
        "generate": """
def generate(model, prompt, n_new):
    prefix = prompt
    for _ in range(n_new):
        logits, _ = model(prefix)
        prefix = torch.cat([prefix, logits[:, -1:].argmax(dim=-1)], dim=1)
    return prefix
""",
    },
    # The visible tests' stored values, returned for the visible case and garbage otherwise:
    # one point per graded function, the ceiling of every transcription.
    "visible": {
        "FeedForward": _FF + """
    def forward(self, x):
        if tuple(x.shape) == (2, 2, 3):
            return torch.tensor([[[-0.66846567361, 0.466718034453, 0.311191378309],
                                  [0.175428134109, -0.239005051157, -0.430896829247]],
                                 [[0.0793486491414, -0.800517643246, 0.406664385597],
                                  [-0.198096135332, 0.0663377446356, -0.102336292374]]], dtype=x.dtype)
        return torch.zeros_like(x)
""",
        "EncoderBlock": _ENCODER + """
    def forward(self, x, mask=None):
        if tuple(x.shape) == (1, 3, 4):
            return torch.tensor([[[3.56412392159, 3.85457435572, 1.58463252333, -4.18289047333],
                                  [1.08359015522, 3.01598118497, -1.45990945789, -4.16755241446],
                                  [1.7895659136, 2.75263379172, 1.44144656145, -3.24756349822]]],
                                dtype=x.dtype)
        if tuple(x.shape) == (1, 4, 4) and mask is not None:  # the visible test of a mask
            return torch.tensor([[[-2.45154265696, 0.735002789843, -0.0193838076788, -4.40982920598],
                                  [-6.24156743287, 1.27140191734, 2.5763800651, -4.93540464135],
                                  [-3.78831547314, 0.263485047194, 2.09356014192, -5.91563519691],
                                  [-2.71499566344, 0.4552156622, 1.26337111743, -4.62605992046]]],
                                dtype=x.dtype)
        return torch.zeros_like(x)
""",
        "DecoderBlock": _DECODER + """
    def forward(self, x, memory, self_mask=None, memory_mask=None):
        if tuple(x.shape) == (1, 3, 4):
            return torch.tensor([[[1.57174069745, -3.17251386169, -3.46485181135, 1.79094324528],
                                  [0.113670575363, -3.82661906918, -1.07431389147, 1.91716649867],
                                  [0.046787774154, -1.72227918981, -1.41021905522, 1.27725930815]]],
                                dtype=x.dtype)
        return torch.zeros_like(x)
""",
        "CausalSelfAttention": _ATTENTION + """
    def forward(self, x, cache=None):
        if tuple(x.shape) == (1, 3, 4) and cache is None:
            y = torch.tensor([[[1.03701423396, -0.43376142643, -0.43946946906, -1.19042452319],
                               [0.772227717638, -0.250104269949, -0.513814016927, -1.07269898672],
                               [0.261173494556, 0.528948511548, -0.6433882884, -1.18294645176]]], dtype=x.dtype)
            keys = torch.tensor([[[[0.670107147722, 0.555269150909], [0.304617344915, 1.55443881213],
                                   [0.0384968877378, 1.92993306509]],
                                  [[0.125458073179, -0.127326038305], [-1.54545241332, 1.35585761545],
                                   [-1.07024924446, 1.13938523204]]]], dtype=x.dtype)
            values = torch.tensor([[[[-0.464054157336, -0.491704122284], [0.410840474562, 1.69830780482],
                                     [1.85155809826, 1.29152108626]],
                                    [[-0.301170702349, -1.14296002802], [-0.180486486926, 0.480128204374],
                                     [-0.0424469352412, -0.405917685994]]]], dtype=x.dtype)
            return y, (keys, values)""" + _ZERO_CACHE,
        "generate": """
def generate(model, prompt, n_new):
    if prompt.tolist() == [[3, 6, 1]] and n_new == 5:
        return torch.tensor([[3, 6, 1, 2, 4, 2, 3, 4]])
    return torch.cat([prompt, torch.zeros(prompt.shape[0], n_new, dtype=prompt.dtype)], dim=1)
""",
    },
}
