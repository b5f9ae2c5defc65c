"""Attacks on the tests of chapter 3 (attention_gradients): answers that must not gain points.

GARBAGE holds wrong answers of the right shapes and dtypes for every graded function and
class (the baseline): zero gradients, and an `AttentionFunction` whose forward and
backward return zeros. IN_PLACE holds the same answers, which also zero every array and
tensor they are handed, the upstream gradients included (`grad_weights`, `grad_output`,
the `grad_output` of `AttentionFunction.backward`): zero inputs and a zero upstream
gradient make zero gradients right, so a test that computed its expected values from its
arrays after the call would expect the garbage. `numerical_gradient` zeroes x, so that
2 x (the gradient of sum(x**2)) is zero too. The chapter has no nn.Module contract:
MODULES is empty. HELPERS is a student cell, added after the last answer, that redefines
every helper of the `test_helpers` cell in the kernel: `gradients` (the helper that runs
beside the student's code) computes the right attention output and its gradients itself,
whatever `AttentionFunction` does; `watch_inputs` and `call` report no in-place change;
the checks pass; `scalar_function` builds a constant f; `stored` gives the garbage's
zeros as the expected values; `submitted_sources` and `library_names` find no code, and
`autograd_calls` no call of autograd. TRANSCRIPTIONS, at the end, are what a student
makes of the code the course hands them.
"""

from attacks._forged_checks import FORGED_CHECKS, FORGED_SOURCES

GARBAGE = {
    "softmax_backward": """
def softmax_backward(weights, grad_weights):
    return np.zeros(np.shape(grad_weights))
""",
    "attention_backward": """
def attention_backward(Q, K, V, weights, grad_output):
    return np.zeros(np.shape(Q)), np.zeros(np.shape(K)), np.zeros(np.shape(V))
""",
    "numerical_gradient": """
def numerical_gradient(f, x, eps=1e-6):
    return np.zeros(np.shape(x))
""",
    "self_attention_backward": """
def self_attention_backward(X, W_q, W_k, W_v, grad_output):
    return tuple(np.zeros(np.shape(a)) for a in (X, W_q, W_k, W_v))
""",
    "AttentionFunction": """
class AttentionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V):
        ctx.shapes = (Q, K, V)
        return Q.new_zeros(Q.shape[:-1] + V.shape[-1:])

    @staticmethod
    def backward(ctx, grad_output):
        return tuple(torch.zeros_like(x) for x in ctx.shapes)
""",
}

IN_PLACE = {
    "softmax_backward": """
def softmax_backward(weights, grad_weights):
    result = np.zeros(np.shape(grad_weights))
    for array in (weights, grad_weights):
        if isinstance(array, np.ndarray) and array.flags.writeable:
            array[...] = 0  # zero weights and a zero upstream gradient: dS = 0 is right
    return result
""",
    "attention_backward": """
def attention_backward(Q, K, V, weights, grad_output):
    result = np.zeros(np.shape(Q)), np.zeros(np.shape(K)), np.zeros(np.shape(V))
    for array in (Q, K, V, weights, grad_output):
        if isinstance(array, np.ndarray) and array.flags.writeable:
            array[...] = 0  # zero inputs and a zero upstream gradient: zero gradients are right
    return result
""",
    "numerical_gradient": """
def numerical_gradient(f, x, eps=1e-6):
    result = np.zeros(np.shape(x))
    if isinstance(x, np.ndarray) and x.flags.writeable:
        x[...] = 0  # the gradient of sum(x**2) at zero is zero
    return result
""",
    "self_attention_backward": """
def self_attention_backward(X, W_q, W_k, W_v, grad_output):
    result = tuple(np.zeros(np.shape(a)) for a in (X, W_q, W_k, W_v))
    for array in (X, W_q, W_k, W_v, grad_output):
        if isinstance(array, np.ndarray) and array.flags.writeable:
            array[...] = 0
    return result
""",
    "AttentionFunction": """
class AttentionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V):
        with torch.no_grad():
            for tensor in (Q, K, V):
                if tensor.device.type != "meta":
                    tensor.zero_()  # zero inputs: a zero output is right
        ctx.shapes = (Q, K, V)
        return Q.new_zeros(Q.shape[:-1] + V.shape[-1:])

    @staticmethod
    def backward(ctx, grad_output):
        with torch.no_grad():
            if grad_output.device.type != "meta":
                grad_output.zero_()  # a zero upstream gradient: zero gradients are right
        return tuple(torch.zeros_like(x) for x in ctx.shapes)
""",
}

# No nn.Module contract in this chapter (AttentionFunction is an autograd.Function).
MODULES = {}

HELPERS = FORGED_CHECKS + """

def float32_hint(actual, expected):
    return ""

def copies(*arrays):
    return arrays

def call(function, *args, hint="", watch=False, **kwargs):
    result = function(*args, **kwargs)
    return (result, []) if watch else result

def expect_unchanged(function_name, names, changed):
    return None

def row_perturbation(gradient):
    return np.zeros(1)

def row_sums_hint(shape):
    return lambda message: ""

@runs_beside_your_code
def gradients(function, inputs, grad_output, **kwargs):
    # The right attention and its gradients, computed here by torch.autograd, whatever
    # the answer's forward and backward do.
    leaves = [x.detach().clone().requires_grad_(True) for x in inputs]
    output = F.scaled_dot_product_attention(*leaves)
    found = torch.autograd.grad(output, leaves, grad_output)
    return output.detach().requires_grad_(True), list(found), {}

def attention_function_gradients(Q, K, V, grad_output):
    output, found, _ = gradients(AttentionFunction.apply, (Q, K, V), grad_output)
    return output, found

@runs_beside_your_code
def autograd_calls(function, inputs, grad_output=None):
    return 0

def scalar_function(formula, shape, **arrays):
    return lambda x: 0.0

def stored(call, value):
    # The garbage's answers: zeros of the shape of the expected value.
    return np.zeros(np.shape(value))
""" + FORGED_SOURCES

# What a student makes of the code the course hands them, adapted in minutes: renamed,
# wrapped in the contract's signature, PyTorch turned into NumPy where the contract asks
# for NumPy, calling the notebook's helpers. The autograd that the lesson's checks and the
# `gradients` helper use is not a transcription: calling it inside a backward pass is the
# shortcut that the contract names, and test_*_autograd takes that function's point for it.
TRANSCRIPTIONS = {
    # The lesson (book/03_attention_gradients/lesson.ipynb): one query, one token.
    "lesson": {
        # Section 2: the backward pass of one row of the softmax.
        "softmax_backward": """
def softmax_backward(weights, grad_weights):
    a, da = weights, grad_weights
    return a * (da - np.dot(da, a))
""",
        # Section 3: the gradients for the one query t that the loss reads, the last one.
        "attention_backward": """
def attention_backward(Q, K, V, weights, grad_output):
    scale = 1 / math.sqrt(Q.shape[-1])
    q, a, g = Q[-1], weights[-1], grad_output[-1]
    dV = np.outer(a, g)
    da = V @ g
    J = np.diag(a) - np.outer(a, a)
    ds = J.T @ da
    dQ = np.zeros_like(Q)
    dQ[-1] = scale * K.T @ ds
    dK = scale * np.outer(ds, q)
    return dQ, dK, dV
""",
        # Section 4: the central difference along a direction U, all of x moved at once.
        "numerical_gradient": """
def numerical_gradient(f, x, eps=1e-6):
    U = np.ones(np.shape(x))
    estimate = (f(x + eps * U) - f(x - eps * U)) / (2 * eps)
    return estimate * U
""",
        # Section 6: the backward pass of one token's projections, after attention_backward.
        "self_attention_backward": """
def self_attention_backward(X, W_q, W_k, W_v, grad_output):
    Q, K, V = X @ W_q, X @ W_k, X @ W_v
    _, weights = scaled_dot_product_attention(Q, K, V)
    dQ, dK, dV = attention_backward(Q, K, V, weights, grad_output)
    dX = W_q @ dQ + W_k @ dK + W_v @ dV  # three paths
    return (dX, *(np.outer(X, d) for d in (dQ, dK, dV)))
""",
        # Sections 1 and 3 in a Function, as section 6 writes one.
        "AttentionFunction": """
class AttentionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V):
        S = Q @ K.T / math.sqrt(Q.shape[-1])
        A = torch.softmax(S, dim=-1)
        ctx.save_for_backward(Q, K, V, A)
        return A @ V

    @staticmethod
    def backward(ctx, dO):
        Q, K, V, A = ctx.saved_tensors
        scale = 1 / math.sqrt(Q.shape[-1])
        q, a, g = Q[-1], A[-1], dO[-1]
        dV = torch.outer(a, g)
        da = V @ g
        J = torch.diag(a) - torch.outer(a, a)
        ds = J.T @ da
        dQ = torch.zeros_like(Q)
        dQ[-1] = scale * K.T @ ds
        return dQ, scale * torch.outer(ds, q), dV
""",
    },
    # The visible test cells: their stored values, returned for the visible case.
    "stored_values": {
        "softmax_backward": """
def softmax_backward(weights, grad_weights):
    if np.shape(weights) == (2, 3):
        return np.array([[0.242615112581, 0.0309645326271, -0.273579645208],
                         [0.064261913631, 0.0493623751935, -0.113624288824]])
    return np.zeros(np.shape(weights))
""",
        "attention_backward": """
def attention_backward(Q, K, V, weights, grad_output):
    if np.shape(Q) == (2, 3) and np.shape(V) == (3, 2):
        return (np.array([[0.441889064837, 0.0959811502448, -0.384237745738],
                          [-0.423268965194, -0.145621177335, 0.376994333884]]),
                np.array([[-0.0690280068875, 0.18509852524, 0.115302638197],
                          [-0.0921985684649, 0.476340879909, 0.211283788442],
                          [0.161226575352, -0.661439405149, -0.32658642664]]),
                np.array([[-1.08911251522, 0.636120935096],
                          [0.0611801478818, 0.187099697864],
                          [0.0279323673339, 0.67677936704]]))
    return np.zeros(np.shape(Q)), np.zeros(np.shape(K)), np.zeros(np.shape(V))
""",
    },
    # The helper cell as it was before issue 30, called from the answers: its references
    # (softmax_backward_mistakes, masked_attention_reference, autograd_gradients,
    # attention_reference) are in hidden regions now, out of the student's notebook.
    "helpers": {
        # softmax_backward_mistakes: its last mistake, with the sign flipped back.
        "softmax_backward": """
def softmax_backward(weights, grad_weights):
    mistakes = softmax_backward_mistakes(weights, grad_weights)
    return -mistakes["It has the opposite sign: dS = A * (dA - rowsum(dA * A))."]
""",
        # masked_attention_reference, the mask read off the weights.
        "attention_backward": """
def attention_backward(Q, K, V, weights, grad_output):
    ref = masked_attention_reference(Q, K, V, np.asarray(weights) > 0, grad_output)
    return ref["dQ"], ref["dK"], ref["dV"]
""",
        # row_perturbation: what perturbing a whole row at once gives.
        "numerical_gradient": """
def numerical_gradient(f, x, eps=1e-6):
    x = np.array(x, dtype=np.float64)
    gradient = np.zeros_like(x)
    for i in range(len(x)):
        saved = x[i].copy()
        x[i] = saved + eps
        f_plus = f(x)
        x[i] = saved - eps
        f_minus = f(x)
        x[i] = saved
        gradient[i] = (f_plus - f_minus) / (2 * eps)
    return gradient
""",
        "self_attention_backward": """
def self_attention_backward(X, W_q, W_k, W_v, grad_output):
    return tuple(autograd_gradients(torch_self_attention, [X, W_q, W_k, W_v], grad_output))
""",
        "AttentionFunction": """
class AttentionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V):
        ctx.save_for_backward(Q, K, V)
        return F.scaled_dot_product_attention(Q, K, V)

    @staticmethod
    def backward(ctx, grad_output):
        Q, K, V = ctx.saved_tensors
        ref = attention_reference(Q, K, V, grad_output)
        return tuple(torch.as_tensor(ref[name], dtype=Q.dtype, device=Q.device) for name in ("dQ", "dK", "dV"))
""",
    },
    # The notebook's closing cell checks attention_backward against numerical_gradient of the
    # given forward pass (scalar_function builds the same loss): finite differences as the answer.
    "notebook_text": {
        "attention_backward": """
def attention_backward(Q, K, V, weights, grad_output):
    loss_of_Q = lambda Q_: np.sum(scaled_dot_product_attention(Q_, K, V)[0] * grad_output)
    loss_of_K = lambda K_: np.sum(scaled_dot_product_attention(Q, K_, V)[0] * grad_output)
    loss_of_V = lambda V_: np.sum(scaled_dot_product_attention(Q, K, V_)[0] * grad_output)
    return numerical_gradient(loss_of_Q, Q), numerical_gradient(loss_of_K, K), numerical_gradient(loss_of_V, V)
""",
        "self_attention_backward": """
def self_attention_backward(X, W_q, W_k, W_v, grad_output):
    arrays = [X, W_q, W_k, W_v]
    gradients = []
    for position in range(4):
        def loss(array, position=position):
            moved = list(arrays)
            moved[position] = array
            return np.sum(self_attention(*moved)[0] * grad_output)
        gradients.append(numerical_gradient(loss, arrays[position]))
    return tuple(gradients)
""",
    },
}
