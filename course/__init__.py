"""Helpers shared by the lesson notebooks of the course.

Lessons may import this package; graded assignment notebooks never do, so that a
student can open an assignment anywhere with only NumPy, PyTorch and matplotlib.

* :mod:`course.plotting`: labelled heatmaps of attention weights and masks.
* :mod:`course.device`: the device a lesson runs on, chosen the same way everywhere.
* :mod:`course.figure_words`: the figures' words in the reader's language; importing
  the package turns it on when ``COURSE_LANGUAGE`` names one (the Spanish edition),
  and does nothing in English.
"""

import os

from course.device import select_device
from course.plotting import plot_attention

if os.environ.get("COURSE_LANGUAGE"):  # the Spanish edition's build sets it
    from course import figure_words

    figure_words.install_from_environment()

__all__ = ["plot_attention", "select_device"]
