"""Draw the figures of chapter 6's text as SVG files beside this script.

* `block_orders.svg`: the block in both norm orders, post-norm (2017) and pre-norm (GPT-2);
* `encoder_decoder.svg`: the encoder-decoder, with cross-attention reading the memory;
* `kv_cache.svg`: the key-value cache growing by one position per decoding step.

Each is written twice: in English, then in Spanish as `NAME.es.svg` (the file the Spanish
edition shows), its words translated by the figures' catalog (course/figure_words.py);
their English words go to `figure_words.json`, which the catalog's template reads.

Run from the repository root (a few seconds; the files are committed with this script):

    .venv/bin/python book/06_transformer_block/draw_figures.py [--out DIR]
"""

import importlib.util
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

HERE = Path(__file__).parent
OUT = HERE  # where the files go: `--out DIR` for another folder
FONT = 11
BOXES = []  # (patch, text, x, widest) of the figure being drawn, for `fit_boxes`
COLOURS = {"attention": "#cfe2f3", "cross": "#d9d2e9", "ff": "#fce5cd", "norm": "#d9ead3",
           "embed": "#eeeeee", "head": "#eeeeee"}
plt.rcParams.update({"font.size": FONT, "svg.fonttype": "none", "svg.hashsalt": "chapter-6"})


def box(ax, x, y, text, kind, width=2.6, height=0.62, room=0.0):
    """A rounded box centred at (x, y); `room`: how much wider it may grow for a longer
    translation of its text (`fit_boxes`)."""
    patch = FancyBboxPatch((x - width / 2, y - height / 2), width, height,
                           boxstyle="round,pad=0.02,rounding_size=0.12", linewidth=1.2,
                           edgecolor="#333333", facecolor=COLOURS[kind])
    ax.add_patch(patch)
    BOXES.append((patch, ax.text(x, y, text, ha="center", va="center"), x, width + room))


def fit_boxes(fig):
    """Fit each box to its (translated) text: widen it within its room, then, if the
    text is still wider, set the text a little smaller."""
    renderer = fig.canvas.get_renderer()
    for patch, text, x, most in BOXES:
        text.axes.apply_aspect()  # the equal aspect, as the drawing will have it

        def text_width():
            to_data = text.axes.transData.inverted()
            extent = text.get_window_extent(renderer).get_points()
            (x0, _), (x1, _) = to_data.transform(extent)
            return x1 - x0

        width = min(max(patch.get_width(), text_width() + 0.2), most)
        patch.set_x(x - width / 2)
        patch.set_width(width)
        while text_width() > width - 0.1 and text.get_fontsize() > FONT - 2:
            text.set_fontsize(text.get_fontsize() - 0.5)
    BOXES.clear()


def plus(ax, x, y):
    """The residual sum: a circle with a plus."""
    ax.add_patch(plt.Circle((x, y), 0.2, facecolor="white", edgecolor="#333333", linewidth=1.2))
    ax.text(x, y - 0.01, "+", ha="center", va="center", fontsize=FONT + 2)


def arrow(ax, start, end, colour="#333333", style="-|>", bend=0.0):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle=style, mutation_scale=12, linewidth=1.2,
                                 color=colour, connectionstyle=f"arc3,rad={bend}", shrinkA=0, shrinkB=0))


def residual(ax, x, y_from, y_to, side=1.7):
    """The identity path: from the stream at y_from around the sublayer into the sum at y_to."""
    ax.plot([x, x + side, x + side], [y_from, y_from, y_to], color="#b45f06", linewidth=1.6)
    arrow(ax, (x + side, y_to), (x + 0.2, y_to), colour="#b45f06")


def save(fig, ax, name, xlim, ylim):
    """Frame the drawing in data units (equal aspect, no axes) and write it beside this
    script, with no date, so that a rerun writes the same bytes."""
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.set_aspect("equal")
    ax.axis("off")
    FIGURES.save(fig, name, fit=fit_boxes, bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)


def sublayer_post(ax, x, y, text, kind):
    """Post-norm: x -> sublayer -> + (residual) -> LayerNorm. Returns the top y."""
    box(ax, x, y + 0.6, text, kind, room=0.6)
    arrow(ax, (x, y), (x, y + 0.29))
    arrow(ax, (x, y + 0.91), (x, y + 1.3))
    plus(ax, x, y + 1.5)
    residual(ax, x, y + 0.1, y + 1.5)
    arrow(ax, (x, y + 1.7), (x, y + 2.0))
    box(ax, x, y + 2.3, "LayerNorm", "norm")
    return y + 2.61


def sublayer_pre(ax, x, y, text, kind):
    """Pre-norm: x -> LayerNorm -> sublayer -> + (residual). Returns the top y."""
    arrow(ax, (x, y), (x, y + 0.29))
    box(ax, x, y + 0.6, "LayerNorm", "norm")
    arrow(ax, (x, y + 0.91), (x, y + 1.2))
    box(ax, x, y + 1.5, text, kind, room=0.6)
    arrow(ax, (x, y + 1.81), (x, y + 2.1))
    plus(ax, x, y + 2.3)
    residual(ax, x, y + 0.1, y + 2.3)
    return y + 2.5


def block_orders():
    fig, ax = plt.subplots(figsize=(6.4, 6.6))
    for x, title, step in ((2.0, "post-norm (2017)", sublayer_post), (6.6, "pre-norm (GPT-2, Llama)", sublayer_pre)):
        ax.text(x, -0.45, "x  (B, n, d)", ha="center", va="center")
        y = step(ax, x, -0.2, "self-attention", "attention")
        y = step(ax, x, y, "feed-forward", "ff")
        arrow(ax, (x, y), (x, y + 0.35))
        ax.text(x, y + 0.55, "to the next block", ha="center", va="center")
        ax.text(x, 6.6, title, ha="center", va="center", fontsize=FONT + 1, fontweight="bold")
    ax.text(6.6, 5.95, "(a last LayerNorm before the head)", ha="center", va="center", fontsize=FONT - 1)
    ax.text(4.3, -1.0, "orange: the residual (identity) path", ha="center", va="center", color="#b45f06")
    save(fig, ax, "block_orders.svg", xlim=(0.2, 8.9), ylim=(-1.3, 6.9))


def encoder_decoder():
    fig, ax = plt.subplots(figsize=(6.4, 6.4))
    enc, dec = 1.8, 6.2
    # encoder column
    ax.text(enc, 0.0, "source ids (B, m)", ha="center", va="center")
    arrow(ax, (enc, 0.2), (enc, 0.55))
    box(ax, enc, 0.85, "embed + positions", "embed", room=0.8)
    arrow(ax, (enc, 1.16), (enc, 1.6))
    ax.add_patch(FancyBboxPatch((enc - 1.55, 1.6), 3.1, 2.25, boxstyle="round,pad=0.02,rounding_size=0.15",
                                facecolor="none", edgecolor="#666666", linestyle="--"))
    box(ax, enc, 2.15, "self-attention (m x m)", "attention", width=2.8)
    box(ax, enc, 3.1, "feed-forward", "ff", width=2.8)
    arrow(ax, (enc, 2.46), (enc, 2.79))
    ax.text(enc, 4.05, "L encoder blocks", ha="center", va="center", fontsize=FONT - 1)
    arrow(ax, (enc, 3.85), (enc, 4.6))
    box(ax, enc, 4.9, "memory (B, m, d)", "embed", width=2.8)
    # decoder column
    ax.text(dec, 0.0, "target ids (B, n)", ha="center", va="center")
    arrow(ax, (dec, 0.2), (dec, 0.55))
    box(ax, dec, 0.85, "embed + positions", "embed", room=0.8)
    arrow(ax, (dec, 1.16), (dec, 1.6))
    ax.add_patch(FancyBboxPatch((dec - 1.65, 1.6), 3.3, 3.2, boxstyle="round,pad=0.02,rounding_size=0.15",
                                facecolor="none", edgecolor="#666666", linestyle="--"))
    box(ax, dec, 2.15, "causal self-attention", "attention", width=3.0)
    box(ax, dec, 3.1, "cross-attention (n x m)", "cross", width=3.0)
    box(ax, dec, 4.05, "feed-forward", "ff", width=3.0)
    arrow(ax, (dec, 2.46), (dec, 2.79))
    arrow(ax, (dec, 3.41), (dec, 3.74))
    ax.text(dec, 5.0, "L decoder blocks", ha="center", va="center", fontsize=FONT - 1)
    arrow(ax, (dec, 4.8), (dec, 5.5))
    box(ax, dec, 5.8, "linear: logits (B, n, V)", "head", width=3.0)
    # memory into every cross-attention: keys and values
    ax.plot([enc + 1.4, 3.9, 3.9], [4.9, 4.9, 3.1], color="#674ea7", linewidth=1.6)
    arrow(ax, (3.9, 3.1), (dec - 1.5, 3.1), colour="#674ea7")
    ax.text(3.72, 4.0, "keys, values", ha="center", va="center", rotation=90, color="#674ea7",
            fontsize=FONT - 1)
    ax.text(dec - 0.1, 2.62, "queries", ha="right", va="center", color="#674ea7", fontsize=FONT - 1)
    ax.text(4.0, 6.55, "Every decoder block reads the encoder's last output", ha="center", va="center",
            fontsize=FONT + 1, fontweight="bold")
    save(fig, ax, "encoder_decoder.svg", xlim=(0.0, 8.1), ylim=(-0.3, 6.8))


def kv_cache():
    fig, ax = plt.subplots(figsize=(6.4, 3.9))
    prompt, steps = 3, 4
    size = 0.62
    for step in range(steps):
        y = (steps - 1 - step) * 0.95
        n = prompt + step  # positions cached before this step
        ax.text(-0.25, y + size / 2, f"step {step + 1}", ha="right", va="center")
        for j in range(n + 1):
            new = j == n
            colour = "#f6b26b" if new else "#cfe2f3"
            ax.add_patch(plt.Rectangle((j * size, y), size * 0.92, size * 0.92, facecolor=colour,
                                       edgecolor="#333333", linewidth=1.0))
            ax.text(j * size + size * 0.46, y + size * 0.46, f"{j}", ha="center", va="center",
                    fontsize=FONT - 1)
        ax.text((n + 1) * size + 0.15, y + size / 2,
                f"query {n} reads {n + 1} keys and values", ha="left", va="center", fontsize=FONT - 1)
    ax.text(0.0, steps * 0.95 + 0.05, "blue: cached keys and values, read again;  orange: the new token's, "
            "written once", ha="left", va="bottom", fontsize=FONT - 1)
    ax.text(0.0, -0.45, "positions 0-2: the prompt, fed once (prefill); then one token per step (decode)",
            ha="left", va="center", fontsize=FONT - 1)
    save(fig, ax, "kv_cache.svg", xlim=(-1.4, 8.6), ylim=(-0.7, steps * 0.95 + 0.5))


def figure_words():
    """course/figure_words.py, loaded alone (the `course` package would import torch)."""
    path = Path(__file__).resolve().parent.parent.parent / "course" / "figure_words.py"
    spec = importlib.util.spec_from_file_location("figure_words", path)
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


if __name__ == "__main__":
    if sys.argv[1:2] == ["--out"]:
        OUT = Path(sys.argv[2])
    FIGURES = figure_words().StaticFigures(OUT, "es")
    block_orders()
    encoder_decoder()
    kv_cache()
    FIGURES.write_words()
    print("wrote", ", ".join(sorted(p.name for p in OUT.glob("*.svg"))))
