"""Values that cross between the grader and a student's kernel, and nothing else.

The grader (autograder/judging/referee.py) and the sandboxed kernel (autograder/isolation/agent.py, which
runs this file's text) exchange messages made of plain values only: no pickle, nothing
that runs code when it is read. A message is one frame:

    8 bytes: the frame's length | 4 bytes: the header's length | header (JSON) | buffers

The header is a JSON tree in which every value is either a JSON scalar (None, bool,
int, float, str) or a one-key object naming what it is:

    {"list": [...]}  {"tuple": [...]}  {"dict": [[key, value], ...]}
    {"ndarray": [dtype, shape, buffer]}   {"scalar": [dtype, buffer]}
    {"tensor": [dtype, shape, device type, requires_grad, buffer or -1]}
    {"complex": [re, im]}  {"slice": [start, stop, step]}  {"ellipsis": 0}
    {"dtype": [library, name]}  {"device": name}  {"error": [type name, message]}
    {"handle": [id, type path, repr]}   an object that stays in the kernel
    {"ref": id}                          that object again, as an argument
    {"name": name}                       a global of the student's notebook
    {"callable": id}                     a function of the grader's, called back there

Arrays and tensors travel as raw little-endian buffers with their dtype and shape.
`decode` builds only builtin containers, NumPy arrays and PyTorch tensors of numeric
or boolean dtypes, checks every size against the buffers it has, and refuses frames,
trees and strings beyond fixed limits: whatever a kernel sends, the grader gets plain
values or an error. This file imports nothing outside the standard library at import
time (it is executed in the kernel from its text).
"""

import json
import struct

MAX_FRAME = 64 * 1024 * 1024  # bytes of one message
MAX_DEPTH = 40  # nesting of containers
MAX_NODES = 200_000  # values in one message
MAX_TEXT = 1_000_000  # characters of one string
MAX_DIMS = 32

NUMPY_DTYPES = {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                "float16", "float32", "float64", "complex64", "complex128"}
TORCH_DTYPES = NUMPY_DTYPES - {"uint16", "uint32", "uint64"} | {"bfloat16"}
DEVICES = {"cpu", "cuda", "meta", "mps"}


class CodecError(ValueError):
    """A message that is not made of plain values within the limits."""


# -- encoding --------------------------------------------------------------------------

def encode(value, other=None):
    """(tree, buffers) for `value`; `other(value)` encodes what is not a plain value
    (a handle in the kernel); without it such a value raises TypeError."""
    buffers = []
    count = [0]

    def walk(item, depth):
        count[0] += 1
        if depth > MAX_DEPTH or count[0] > MAX_NODES:
            raise CodecError("the value is nested too deeply or holds too many items to send")
        kind = type(item)
        if item is None or kind in (bool, str):
            return item
        if kind is int:
            if item.bit_length() > 3000:
                raise CodecError("an integer too large to send")
            return item
        if kind is float:
            return item
        if kind is complex:
            return {"complex": [item.real, item.imag]}
        if kind in (list, tuple):
            return {kind.__name__: [walk(x, depth + 1) for x in item]}
        if kind is dict:
            return {"dict": [[walk(k, depth + 1), walk(v, depth + 1)] for k, v in item.items()]}
        if kind is slice:
            return {"slice": [walk(item.start, depth + 1), walk(item.stop, depth + 1), walk(item.step, depth + 1)]}
        if item is Ellipsis:
            return {"ellipsis": 0}
        if isinstance(item, BaseException):
            return error_tree(item)
        module = getattr(kind, "__module__", "") or ""
        if module.startswith("numpy"):
            tree = _encode_numpy(item, buffers)
            if tree is not None:
                return tree
        if module.startswith("torch"):
            tree = _encode_torch(item, buffers)
            if tree is not None:
                return tree
        if other is None:
            raise TypeError(f"a {kind.__name__} cannot be sent to the other side (values only)")
        return other(item)

    return walk(value, 0), buffers


def _encode_numpy(item, buffers):
    import numpy as np

    if isinstance(item, np.ndarray):
        array = np.ascontiguousarray(item)
        name = array.dtype.name
        if name not in NUMPY_DTYPES:
            return None
        buffers.append(array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes())
        return {"ndarray": [name, list(array.shape), len(buffers) - 1]}
    if isinstance(item, np.generic) and item.dtype.name in NUMPY_DTYPES:
        buffers.append(np.asarray(item).astype(item.dtype.newbyteorder("<")).tobytes())
        return {"scalar": [item.dtype.name, len(buffers) - 1]}
    if isinstance(item, np.dtype):
        return {"dtype": ["numpy", item.name]}
    if isinstance(item, type) and issubclass(item, np.generic):
        return {"dtype": ["numpy", np.dtype(item).name]}
    return None


def _encode_torch(item, buffers):
    import torch

    if isinstance(item, torch.Tensor):
        tensor = item.detach()
        name = str(tensor.dtype).removeprefix("torch.")
        if name not in TORCH_DTYPES or tensor.layout != torch.strided:
            return None
        device = tensor.device.type
        index = -1
        if device != "meta":
            flat = tensor.resolve_conj().resolve_neg().to("cpu").contiguous().reshape(-1)
            buffers.append(flat.view(torch.uint8).numpy().tobytes())
            index = len(buffers) - 1
        return {"tensor": [name, list(tensor.shape), device, bool(item.requires_grad), index]}
    if isinstance(item, torch.dtype):
        return {"dtype": ["torch", str(item).removeprefix("torch.")]}
    if isinstance(item, torch.device):
        return {"device": str(item)}
    return None


def pack(message, other=None):
    """One frame holding `message` (a dict of plain values)."""
    tree, buffers = encode(message, other)
    header = json.dumps({"tree": tree, "sizes": [len(b) for b in buffers]}, allow_nan=True).encode()
    body = struct.pack("<I", len(header)) + header + b"".join(buffers)
    if len(body) > MAX_FRAME:
        raise CodecError(f"the value is too large to send ({len(body) / 2**20:.0f} MiB; "
                         f"the limit is {MAX_FRAME / 2**20:.0f} MiB)")
    return struct.pack("<Q", len(body)) + body


# -- decoding --------------------------------------------------------------------------

def unpack(body, on_handle=None, on_ref=None, on_name=None, on_callable=None):
    """The message in a frame body (without its 8-byte length)."""
    if len(body) < 4:
        raise CodecError("a truncated message")
    (size,) = struct.unpack_from("<I", body)
    if size > len(body) - 4:
        raise CodecError("a truncated message")
    try:
        header = json.loads(bytes(body[4:4 + size]))
    except (ValueError, RecursionError) as error:
        raise CodecError(f"a message that is not JSON ({type(error).__name__})") from None
    if type(header) is not dict or type(header.get("sizes")) is not list:
        raise CodecError("a message without a header")
    buffers, offset = [], 4 + size
    for length in header["sizes"]:
        if type(length) is not int or length < 0 or offset + length > len(body):
            raise CodecError("a message whose buffers do not add up")
        buffers.append(memoryview(body)[offset:offset + length])
        offset += length
    return decode(header.get("tree"), buffers, on_handle, on_ref, on_name, on_callable)


def decode(tree, buffers, on_handle=None, on_ref=None, on_name=None, on_callable=None):
    count = [0]

    def walk(node, depth):
        count[0] += 1
        if depth > MAX_DEPTH or count[0] > MAX_NODES:
            raise CodecError("a message nested too deeply or with too many items")
        kind = type(node)
        if node is None or kind in (bool, int, float):
            return node
        if kind is str:
            if len(node) > MAX_TEXT:
                raise CodecError("a string beyond the size limit")
            return node
        if kind is not dict or len(node) != 1:
            raise CodecError("a message with an unknown kind of value")
        ((tag, body),) = node.items()
        if tag in ("list", "tuple"):
            _expect(type(body) is list, tag)
            items = [walk(x, depth + 1) for x in body]
            return items if tag == "list" else tuple(items)
        if tag == "dict":
            _expect(type(body) is list, tag)
            result = {}
            for pair in body:
                _expect(type(pair) is list and len(pair) == 2, tag)
                key = walk(pair[0], depth + 1)
                _expect(key is None or type(key) in (str, int, float, bool, tuple), "dict key")
                try:
                    result[key] = walk(pair[1], depth + 1)
                except TypeError:
                    raise CodecError("a dict key that cannot be used") from None
            return result
        if tag == "complex":
            _expect(type(body) is list and len(body) == 2 and all(type(x) in (int, float) for x in body), tag)
            return complex(body[0], body[1])
        if tag == "slice":
            _expect(type(body) is list and len(body) == 3, tag)
            parts = [walk(x, depth + 1) for x in body]
            _expect(all(p is None or type(p) is int for p in parts), tag)
            return slice(*parts)
        if tag == "ellipsis":
            return Ellipsis
        if tag == "ndarray":
            return _decode_array(body, buffers)
        if tag == "scalar":
            _expect(type(body) is list and len(body) == 2, tag)
            return _decode_array([body[0], [], body[1]], buffers)[()]
        if tag == "tensor":
            return _decode_tensor(body, buffers)
        if tag == "dtype":
            return _decode_dtype(body)
        if tag == "device":
            _expect(type(body) is str and body.split(":")[0] in DEVICES and len(body) < 20, tag)
            import torch

            return torch.device(body)
        if tag == "error":
            _expect(type(body) is list and len(body) == 2 and all(type(x) is str for x in body), tag)
            return RemoteError.make(body[0][:200], body[1][:20000])
        if tag == "handle" and on_handle is not None:
            _expect(type(body) is list and len(body) == 3 and type(body[0]) is int
                    and type(body[1]) is str and type(body[2]) is str, tag)
            return on_handle(body[0], body[1][:300], body[2][:300])
        if tag == "ref" and on_ref is not None:
            _expect(type(body) is int, tag)
            return on_ref(body)
        if tag == "callable" and on_callable is not None:
            _expect(type(body) is int, tag)
            return on_callable(body)
        if tag == "name" and on_name is not None:
            _expect(type(body) is str and len(body) < 200, tag)
            return on_name(body)
        raise CodecError(f"a message with an unknown kind of value ({str(tag)[:40]})")

    return walk(tree, 0)


def _expect(condition, what):
    if not condition:
        raise CodecError(f"a malformed {what} in a message")


def _shape(shape):
    _expect(type(shape) is list and len(shape) <= MAX_DIMS and all(type(n) is int and 0 <= n < 1 << 40
                                                                    for n in shape), "shape")
    total = 1
    for n in shape:
        total *= n
    return tuple(shape), total


def _buffer(buffers, index):
    _expect(type(index) is int and 0 <= index < len(buffers), "buffer index")
    return buffers[index]


def _decode_array(body, buffers):
    import numpy as np

    _expect(type(body) is list and len(body) == 3 and body[0] in NUMPY_DTYPES, "array")
    dtype = np.dtype(body[0]).newbyteorder("<")
    shape, total = _shape(body[1])
    data = _buffer(buffers, body[2])
    _expect(len(data) == total * dtype.itemsize, "array size")
    array = np.frombuffer(data, dtype=dtype).reshape(shape)
    return array.astype(array.dtype.newbyteorder("="))  # a writable copy, native byte order


def _decode_tensor(body, buffers):
    import torch

    _expect(type(body) is list and len(body) == 5 and body[0] in TORCH_DTYPES and body[2] in DEVICES
            and type(body[3]) is bool and type(body[4]) is int, "tensor")
    dtype = getattr(torch, body[0])
    shape, total = _shape(body[1])
    if body[2] == "meta":
        tensor = torch.empty(shape, dtype=dtype, device="meta")
    else:
        data = _buffer(buffers, body[4])
        itemsize = torch.empty((), dtype=dtype).element_size()
        _expect(len(data) == total * itemsize, "tensor size")
        raw = torch.frombuffer(bytearray(data), dtype=torch.uint8) if total else torch.empty(0, dtype=torch.uint8)
        tensor = raw.view(dtype).reshape(shape)
        if body[2] != "cpu" and _available(body[2]):
            tensor = tensor.to(body[2])
    if body[3] and (tensor.is_floating_point() or tensor.is_complex()):
        tensor.requires_grad_(True)
    return tensor


def _available(device):
    import torch

    module = getattr(torch, device, None)
    return bool(module is not None and getattr(module, "is_available", lambda: False)())


def _decode_dtype(body):
    _expect(type(body) is list and len(body) == 2 and body[0] in ("numpy", "torch"), "dtype")
    library, name = body
    _expect(name in (NUMPY_DTYPES if library == "numpy" else TORCH_DTYPES), "dtype")
    import numpy as np
    import torch

    return getattr(torch, name) if library == "torch" else np.dtype(name)


# -- exceptions that crossed -------------------------------------------------------------

class RemoteError(Exception):
    """An exception raised on the other side, rebuilt from its type name and message.

    An error named after a builtin exception (ValueError, NotImplementedError...) is an
    instance of that builtin too, so that `except ValueError` behaves as it would have
    in one process."""

    remote_type = "Exception"
    _classes = {}

    @classmethod
    def make(cls, type_name, message):
        import builtins

        base = getattr(builtins, type_name, None)
        if not (isinstance(base, type) and issubclass(base, Exception)) or base is Exception:
            base = None
        key = type_name if base is not None else None
        if key not in cls._classes:
            bases = (cls, base) if base is not None else (cls,)
            cls._classes[key] = type(type_name if base is not None else "RemoteError", bases,
                                     {"remote_type": type_name, "__module__": "builtins"})
        error = cls._classes[key](message)
        error.remote_type = type_name
        return error


def error_tree(error):
    """How an exception crosses: its type's name and its message (both bounded)."""
    try:
        message = str(error)
    except BaseException:
        message = "(the exception's message could not be read)"
    name = error.remote_type if isinstance(error, RemoteError) else type(error).__name__  # as it was raised
    return {"error": [name if type(name) is str else "Exception", message[:20000]]}
