"""The codec between the grader and a student's kernel carries plain values, and only them.

Fast checks of autograder/isolation/codec.py, without a kernel: what crosses keeps its dtype,
shape, device and requires_grad; what arrives is always built by the decoder (a builtin,
an array, a tensor), whatever the bytes say; malformed or oversized messages raise
CodecError instead of running code or exhausting memory.
"""

import json
import struct

import numpy as np
import pytest
import torch

from autograder.isolation import codec


def round_trip(value, **hooks):
    frame = codec.pack({"value": value}, hooks.pop("other", None))
    (size,) = struct.unpack_from("<Q", frame)
    assert size == len(frame) - 8
    return codec.unpack(frame[8:], **hooks)["value"]


def frame_of(tree, buffers=()):
    header = json.dumps({"tree": tree, "sizes": [len(b) for b in buffers]}).encode()
    return struct.pack("<I", len(header)) + header + b"".join(buffers)


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "bool", "complex128", "uint8"])
def test_arrays_keep_dtype_shape_and_values(dtype):
    array = (np.arange(24).reshape(2, 3, 4) % 3).astype(dtype)
    back = round_trip(array)
    assert type(back) is np.ndarray and back.dtype == array.dtype and back.shape == array.shape
    assert np.array_equal(back, array)
    back[0, 0, 0] = 1  # a writable copy, not a view of the message
    assert round_trip(np.float32(2.5)) == np.float32(2.5) and type(round_trip(np.float32(2.5))) is np.float32


def test_tensors_keep_dtype_device_and_requires_grad():
    tensor = torch.randn(3, 2, dtype=torch.float64, requires_grad=True)
    back = round_trip(tensor)
    assert back.dtype == torch.float64 and back.requires_grad and back.is_leaf
    assert torch.equal(back.detach(), tensor.detach())
    meta = round_trip(torch.empty(4, 5, device="meta"))
    assert meta.device.type == "meta" and meta.shape == (4, 5)
    assert round_trip(torch.ones(3, dtype=torch.bfloat16)).dtype == torch.bfloat16
    assert round_trip(torch.tensor(7)).item() == 7
    assert round_trip(torch.zeros(0, 3)).shape == (0, 3)


def test_containers_scalars_and_library_values():
    value = [1, 2.5, None, "text", True, (1, (2,)), {"a": 1, 3: [4]}, slice(1, None, 2), Ellipsis, 1 + 2j,
             float("nan"), torch.float64, np.dtype("int32"), torch.device("cpu")]
    back = round_trip(value)
    assert back[:10] == value[:10] and np.isnan(back[10])
    assert back[11] is torch.float64 and back[12] == np.dtype("int32") and back[13] == torch.device("cpu")


def test_exceptions_cross_as_their_type_name_and_message():
    error = round_trip(ValueError("shapes do not match"))
    assert isinstance(error, ValueError) and isinstance(error, codec.RemoteError)
    assert str(error) == "shapes do not match" and error.remote_type == "ValueError"
    custom = round_trip(type("LinAlgWoe", (Exception,), {})("singular"))
    assert type(custom).__name__ == "RemoteError" and custom.remote_type == "LinAlgWoe"
    assert not isinstance(custom, ValueError)


def test_other_objects_need_a_hook():
    class Lying(float):
        def __eq__(self, other):
            return True

    with pytest.raises(TypeError):
        codec.pack({"value": object()})
    back = round_trip([Lying(1.0), object()], other=lambda v: {"handle": [7, "x.Y", "<y>"]},
                      on_handle=lambda number, path, text: ("handle", number, path))
    assert back == [("handle", 7, "x.Y")] * 2, "a float subclass crosses as a handle, never as a float"


@pytest.mark.parametrize("tree, buffers, what", [
    ({"ndarray": ["object", [1], 0]}, [b"x" * 8], "object dtype"),
    ({"ndarray": ["float64", [3], 0]}, [b"x" * 16], "a buffer shorter than the shape"),
    ({"ndarray": ["float64", [-1], 0]}, [b""], "a negative dimension"),
    ({"ndarray": ["float64", [2], 5]}, [b"x" * 16], "a buffer that is not there"),
    ({"tensor": ["float64", [2], "cpu", False, 0]}, [b"x" * 8], "a tensor buffer too short"),
    ({"tensor": ["float64", [2], "tpu", False, 0]}, [b"x" * 16], "an unknown device"),
    ({"pickle": "cos\nsystem\n"}, [], "an unknown tag"),
    ({"handle": [1, "a", "b"]}, [], "a handle where none is expected"),
    ({"dict": [[[1, 2], 3]]}, [], "an unhashable key"),
    ({"list": [1], "tuple": [2]}, [], "two tags in one node"),
])
def test_malformed_messages_are_refused(tree, buffers, what):
    with pytest.raises(codec.CodecError):
        codec.unpack(frame_of(tree, buffers))


def test_limits_on_nesting_size_and_frames():
    deep = 1
    for _ in range(codec.MAX_DEPTH + 5):
        deep = {"list": [deep]}
    with pytest.raises(codec.CodecError):
        codec.unpack(frame_of(deep))
    with pytest.raises(codec.CodecError):
        codec.unpack(frame_of({"list": [0] * (codec.MAX_NODES + 1)}))
    with pytest.raises(codec.CodecError):
        codec.unpack(b"\x10\x00\x00\x00{}")  # a header longer than the message
    with pytest.raises(codec.CodecError):
        codec.pack({"value": np.zeros(codec.MAX_FRAME // 8 + 1)})
    with pytest.raises(codec.CodecError):
        codec.unpack(frame_of("x" * (codec.MAX_TEXT + 1)))
