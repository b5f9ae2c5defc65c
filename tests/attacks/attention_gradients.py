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
the checks pass; `scalar_function` builds a constant f.
"""

from attacks._forged_checks import FORGED_CHECKS

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

def right_without_batch(function, args, expected):
    return True

def row_perturbation(gradient):
    return np.zeros(1)

def softmax_backward_mistakes(weights, grad_weights):
    return {}

def row_sums_hint(shape):
    return lambda message: ""

def autograd_gradients(function, inputs, grad_output):
    return [np.zeros(np.shape(x)) for x in inputs]

def attention_reference(Q, K, V, grad_output):
    return {name: np.zeros(1) for name in ("dQ", "dK", "dV", "dS", "A")}

def masked_attention_reference(Q, K, V, mask, grad_output):
    return {name: np.zeros(1) for name in ("dQ", "dK", "dV", "dS", "A")}

def torch_self_attention(X, W_q, W_k, W_v):
    return torch.zeros(1)

def missing_paths(X, W_q, W_k, W_v, grad_output):
    return {}

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

def scalar_function(formula, shape, **arrays):
    return lambda x: 0.0
"""
