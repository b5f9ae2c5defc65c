"""Choose the device a lesson runs on, the same way in every notebook."""

import os

FORCE_CPU_VARIABLE = "COURSE_FORCE_CPU"


def select_device(force_cpu=None):
    """Return ``torch.device("cuda")`` when a GPU is available, else the CPU.

    Setting the environment variable ``COURSE_FORCE_CPU`` to anything but ``""`` or
    ``"0"`` forces the CPU; the argument ``force_cpu`` overrides the variable. On a GPU,
    TF32 matrix products are switched off so that float32 results agree with the CPU
    to float32 precision (TF32 keeps only about three decimal digits).
    """
    import torch  # imported here so that the plotting helpers do not need torch

    if force_cpu is None:
        force_cpu = os.environ.get(FORCE_CPU_VARIABLE, "0") not in ("", "0")
    if torch.cuda.is_available() and not force_cpu:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        return torch.device("cuda")
    return torch.device("cpu")
