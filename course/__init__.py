"""Helpers shared by the lesson notebooks of the course.

Lessons may import this package; graded assignment notebooks never do, so that a
student can open an assignment anywhere with only NumPy, PyTorch and matplotlib.

* :mod:`course.plotting`: labelled heatmaps of attention weights and masks.
* :mod:`course.device`: the device a lesson runs on, chosen the same way everywhere.
"""

from course.device import select_device
from course.plotting import plot_attention

__all__ = ["plot_attention", "select_device"]
