"""Draws tiles.svg, the figure of tiled attention in the chapter text.

One step of the forward pass of tiled attention: the block of queries Q_i against the
block of keys K_j gives one tile S_ij of the scores, never the whole matrix; its
weights times V_j are folded into the running output O_i, with the running maximum m_i
and sum s_i. The tiles of row i on its left are done, those on its right still to come.

Run from anywhere (`python book/08_efficient_attention/tiles_figure.py [--out DIR]`); it
writes tiles.svg beside itself, the same bytes on every run, then the same figure in
Spanish, tiles.es.svg (the file the Spanish edition shows), its words translated by the
figures' catalog (course/figure_words.py), and their English words in figure_words.json,
which the catalog's template reads.
"""

import importlib.util
import sys
from pathlib import Path

import matplotlib

matplotlib.use("svg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, Patch, Rectangle  # noqa: E402

HERE = Path(__file__).resolve().parent
N = 4  # blocks per axis
ROW, COL = 2, 1  # the step drawn: query block i = 2, key block j = 1 (0-based)
NOW, DONE, LATER = "#f28e2b", "#fcd9b5", "#ffffff"
EDGE, INK = "#444444", "#222222"
D = 0.6  # the width of d (or d_v) columns, in block units


def block(ax, x, y, w, h, colour, label=None, size=14):
    ax.add_patch(Rectangle((x, y), w, h, facecolor=colour, edgecolor=EDGE, linewidth=1))
    if label:
        ax.text(x + w / 2, y + h / 2, label, ha="center", va="center", fontsize=size,
                color=INK)


def main(out=HERE):
    plt.rcParams.update({"svg.hashsalt": "tiles", "font.size": 14,
                         "font.family": "DejaVu Sans"})
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    ax.set_aspect("equal")
    ax.axis("off")

    # S = Q K^T / sqrt(d), N x N tiles; row r from the top occupies y in [N-r-1, N-r].
    sx = 1.1
    for r in range(N):
        for c in range(N):
            if r == ROW and c == COL:
                colour, label = NOW, "$S_{ij}$"
            elif r == ROW and c < COL:
                colour, label = DONE, None
            else:
                colour, label = LATER, None
            block(ax, sx + c, N - r - 1, 1, 1, colour, label, size=16)
    ax.text(sx + N / 2, -0.2, "scores $S = QK^\\top/\\sqrt{d}$,\none $B \\times B$ tile at a time:\n"
            "never the whole $n \\times n$", ha="center", va="top", fontsize=13)

    # Q: N row blocks of width d, left of S.
    for r in range(N):
        block(ax, 0, N - r - 1, D, 1, NOW if r == ROW else LATER,
              "$Q_i$" if r == ROW else None)
    ax.text(D / 2, -0.2, "$Q$", ha="center", va="top", fontsize=15)

    # K^T: N column blocks of height d, above S.
    for c in range(N):
        block(ax, sx + c, N + 0.3, 1, D, NOW if c == COL else LATER,
              "$K_j^\\top$" if c == COL else None)
    ax.text(sx - 0.15, N + 0.3 + D / 2, "$K^\\top$", ha="right", va="center",
            fontsize=15)

    # The running maximum and sum (m, s) of each query and the output O, right of S,
    # then V: N row blocks, one per block of keys.
    mx = sx + N + 0.7
    ox = mx + 0.6
    for r in range(N):
        block(ax, mx, N - r - 1, 0.6, 1, NOW if r == ROW else LATER,
              "$m_i$\n$s_i$" if r == ROW else None, size=13)
        block(ax, ox, N - r - 1, D, 1, NOW if r == ROW else LATER,
              "$O_i$" if r == ROW else None)
    ax.text(ox + D / 2, N + 0.15, "$O$", ha="center", va="bottom", fontsize=15)
    vx = ox + D + 0.9
    for r in range(N):
        block(ax, vx, N - r - 1, D, 1, NOW if r == COL else LATER,
              "$V_j$" if r == COL else None)
    ax.text(vx + D / 2, N + 0.15, "$V$", ha="center", va="bottom", fontsize=15)

    # The tile's weights P_ij = exp(S_ij - m_i') update m_i and s_i and, times V_j,
    # the running output O_i.
    ax.add_patch(FancyArrowPatch((sx + COL + 1.0, N - ROW - 0.5), (mx, N - ROW - 0.5),
                                 arrowstyle="-|>", mutation_scale=14, color=INK,
                                 linewidth=1.2, zorder=3))
    ax.add_patch(FancyArrowPatch((vx, N - COL - 0.5), (ox + D, N - ROW - 0.5),
                                 arrowstyle="-|>", mutation_scale=14, color=INK,
                                 linewidth=1.2, zorder=3))
    ax.text((mx + vx + D) / 2, -0.2, "$O_i \\leftarrow \\alpha_i O_i + P_{ij} V_j$",
            ha="center", va="top", fontsize=14)

    ax.legend(handles=[Patch(facecolor=NOW, edgecolor=EDGE, label="in fast memory now"),
                       Patch(facecolor=DONE, edgecolor=EDGE,
                             label="done: folded into $O_i$, $m_i$, $s_i$"),
                       Patch(facecolor=LATER, edgecolor=EDGE, label="still to come")],
              loc="upper center", bbox_to_anchor=(0.5, -0.04), ncol=1, frameon=False,
              fontsize=13, handlelength=1.4)
    ax.set_xlim(-0.1, vx + D + 0.1)
    ax.set_ylim(-1.4, N + 1.0)
    figures = figure_words().StaticFigures(out, "es")
    figures.save(fig, "tiles.svg", bbox_inches="tight", metadata={"Date": None})
    figures.write_words()


def figure_words():
    """course/figure_words.py, loaded alone (the `course` package would import torch)."""
    path = HERE.parent.parent / "course" / "figure_words.py"
    spec = importlib.util.spec_from_file_location("figure_words", path)
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


if __name__ == "__main__":
    main(Path(sys.argv[2]) if sys.argv[1:2] == ["--out"] else HERE)
