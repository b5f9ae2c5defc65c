"""Plots shared by the lessons.

Every label, title and axis name is an argument, so that a translated edition of the
book passes its own strings; nothing here writes English text of its own.
"""

import matplotlib.pyplot as plt
import numpy as np


def _to_numpy(values):
    """A 2-D float NumPy array from an array, a nested list or a torch tensor."""
    if hasattr(values, "detach"):  # a torch tensor, possibly on a GPU
        values = values.detach().cpu().numpy()
    values = np.asarray(values, dtype=float)
    if values.ndim != 2:
        raise ValueError(f"expected a 2-D array of weights, got shape {values.shape}")
    return values


def plot_attention(
    weights,
    query_tokens,
    key_tokens,
    title="",
    ax=None,
    xlabel="",
    ylabel="",
    colorbar_label="",
    annotate=True,
    value_format="{:.2f}",
    cmap="viridis",
    vmin=0.0,
    vmax=1.0,
):
    """Draw an attention map: one row per query, one column per key.

    Parameters
    ----------
    weights : array-like or torch.Tensor of shape (n_q, n_k)
        Attention weights (or a mask: booleans are drawn as 0 and 1).
    query_tokens, key_tokens : sequences of str
        Labels of the rows (queries) and of the columns (keys).
    title, xlabel, ylabel, colorbar_label : str
        Texts of the plot; empty strings leave them out.
    ax : matplotlib Axes, optional
        Where to draw; a new figure is made when it is None.
    annotate : bool
        Write each weight in its cell (readable for short sentences only).
    value_format : str
        Format of the annotations, e.g. ``"{:.2f}"`` or ``"{:.0f}"`` for a mask.
    cmap, vmin, vmax
        Colour map and its range; weights lie in [0, 1], hence the defaults.

    Returns
    -------
    matplotlib Axes
    """
    values = _to_numpy(weights)
    n_q, n_k = values.shape
    if len(query_tokens) != n_q or len(key_tokens) != n_k:
        raise ValueError(
            f"weights have shape {values.shape} but there are {len(query_tokens)} query "
            f"labels and {len(key_tokens)} key labels"
        )
    if ax is None:
        _, ax = plt.subplots(figsize=(0.6 * n_k + 2.5, 0.55 * n_q + 1.5))

    image = ax.imshow(values, cmap=cmap, vmin=vmin, vmax=vmax, aspect="equal")
    ax.set_xticks(range(n_k), labels=list(key_tokens), rotation=45, ha="right")
    ax.set_yticks(range(n_q), labels=list(query_tokens))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)

    if annotate:
        # White text on dark cells, black on light ones, so every number stays readable.
        middle = vmin + 0.5 * (vmax - vmin)
        for i in range(n_q):
            for j in range(n_k):
                colour = "black" if values[i, j] > middle else "white"
                ax.text(j, i, value_format.format(values[i, j]), ha="center", va="center",
                        color=colour, fontsize=8)

    colorbar = ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    if colorbar_label:
        colorbar.set_label(colorbar_label)
    return ax
