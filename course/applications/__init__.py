"""Small training modules for chapter 7's applications, one per task.

Each module generates or reads its data offline, builds its model from PyTorch's own
layers, trains it with explicit seeds (on ``cuda`` when available, see
:mod:`course.device`) behind a progress bar, and reports held-out quality. The lesson
notebooks, the committed full-run scripts and ``benchmarks/applications.py`` import
the same code.

* :mod:`course.applications.training`: the shared loop (seeds, timing, progress bar).
* :mod:`course.applications.translation`: English number words to Spanish ones.
* :mod:`course.applications.vision`: a Vision Transformer on scikit-learn's digits.
* :mod:`course.applications.language_model`: a causal model on characters or on
  byte-pair-encoding tokens.
* :mod:`course.applications.classification`: docstrings classified by package,
  with the pretrained MiniLM fine-tuned, the same model from scratch, and
  baselines.
* :mod:`course.applications.attention_maps`: reading the weights of PyTorch's layers.
"""
