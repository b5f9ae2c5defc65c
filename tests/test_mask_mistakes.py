"""A catalogued mask mistake is recognised however the answer is written around it.

Inverting the mask, or masking one key too many, can leave a query with no key it may
attend to, and what an answer gives for such a query depends on how it was written
(NaN from a softmax of -inf alone, uniform weights from -1e9, zeros from a guard): the
mistake is the same. The probes of these functions (autograder/catalogues/*.yml) call
them only where no way of writing the mistake leaves a query without a key, so each
variant below, the catalogued mistake written another way, is diagnosed as that mistake
(autograder/judging/diagnosis.py, on the trusted side: no grading run). Before the
probes left such queries out, chapter 2's inverted mask and chapter 8's causal mask
that excludes the diagonal were recognised only when written as catalogued.
"""

import nbformat
import pytest

from autograder import paths
from autograder.judging import catalogue, diagnosis, executor

SDPA_GUARD = "        scores = np.where(allowed.any(axis=-1, keepdims=True), scores, 0.0)\n"
SDPA_ZEROED = ("    if mask is not None:\n"
               "        weights = np.where(allowed, weights, 0.0)\n")
MHA_GUARD = "            scores = scores.masked_fill(mask.all(dim=-1, keepdim=True), 0.0)\n"
MHA_ZEROED = ("        if mask is not None:\n"
              "            weights = weights.masked_fill(mask, 0.0)\n")
TILED_GUARD = "            safe = np.where(np.isfinite(new_m), new_m, 0)\n"

# (assignment, catalogued mistake, {variant: [(text of the catalogued code, what the variant writes)]})
VARIANTS = [
    ("soft_lookup", "attend-mask-inverted", {
        "-1e9, no NaN clean-up": [("-np.inf", "-1e9"), ("np.nan_to_num(", "(")],
        "-inf, NaN left": [("np.nan_to_num(", "(")],
    }),
    ("self_attention", "sdpa-mask-inverted", {
        "-inf, no guard: NaN for a query with no key": [(SDPA_GUARD, ""), (SDPA_ZEROED, "")],
        "-1e9: uniform weights for a query with no key": [(SDPA_GUARD, ""), (SDPA_ZEROED, ""),
                                                          ("-np.inf", "-1e9")],
        "the most negative float, weights zeroed": [(SDPA_GUARD, ""), ("-np.inf", "np.finfo(scores.dtype).min")],
    }),
    ("multi_head_attention", "mha-mask-inverted", {
        "-inf, no guard: NaN for a query with no key": [(MHA_GUARD, ""), (MHA_ZEROED, "")],
        "-1e9: uniform weights for a query with no key": [(MHA_GUARD, ""), (MHA_ZEROED, ""),
                                                          ('float("-inf")', "-1e9")],
    }),
    ("efficient_attention", "tiled-causal-diagonal-excluded", {
        "no guard: NaN for the first query": [(TILED_GUARD, "            safe = new_m\n"),
                                              ("np.where(s > 0, o / s, 0)", "o / s")],
        "-1e30: uniform weights for the first query": [(TILED_GUARD, "            safe = new_m\n"),
                                                       ("-np.inf)\n            new_m", "-1e30)\n            new_m")],
    }),
]


def _reference_cells(assignment):
    (source,) = paths.assignment_notebooks(assignment)
    return executor.reference_cells(nbformat.read(source, as_version=4))


def _rewritten(code, changes):
    for old, new in changes:
        assert old in code, f"the catalogued code no longer holds {old!r}"
        code = code.replace(old, new)
    return code


@pytest.mark.parametrize("assignment, mistake, variants", VARIANTS, ids=[v[1] for v in VARIANTS])
def test_a_mask_mistake_is_recognised_however_a_query_without_keys_is_handled(assignment, mistake, variants):
    known = diagnosis.Catalogue(assignment, _reference_cells(assignment))
    (answer,) = [a for a in known.answers if a.id == mistake]
    codes = {name: _rewritten(answer.code, changes) for name, changes in variants.items()}
    probes = known.probes[answer.function]
    values = diagnosis.behaviours_of(known.reference_cells, probes, list(codes.values()))
    missed = []
    for name, found in zip(codes, values):
        diagnosed = known.diagnose(answer.function, found)
        if diagnosed is None or diagnosed.id != mistake:
            missed.append(f"{name}: {diagnosed.id if diagnosed else 'no diagnosis'}")
    assert not missed, f"{mistake} written another way is not recognised: " + "; ".join(missed)


def test_the_variants_are_written_otherwise_where_a_query_has_no_key():
    """The variants really differ from the catalogued code where a query has no key (else
    the test above proves nothing): called with a mask that, read inverted, blocks every
    key, chapter 2's give NaN, uniform weights and (the third) the catalogued zeros."""
    import numpy as np

    (answer,) = [a for a in catalogue.load("self_attention") if a.id == "sdpa-mask-inverted"]
    namespace = {"np": np}
    for source, _ in _reference_cells("self_attention"):
        exec(compile(source, "<reference>", "exec"), namespace)
    Q, K, V = np.ones((1, 2)), np.ones((3, 2)), np.arange(6.0).reshape(3, 2)
    blocked = np.ones((1, 3), dtype=bool)  # read inverted: no key allowed

    def weights(code):
        exec(compile(code, "<variant>", "exec"), namespace)
        with np.errstate(all="ignore"):
            return namespace["scaled_dot_product_attention"](Q, K, V, blocked)[1]

    catalogued = weights(answer.code)
    assert np.array_equal(catalogued, np.zeros((1, 3)))
    (variants,) = [v for _, mistake, v in VARIANTS if mistake == "sdpa-mask-inverted"]
    seen = [weights(_rewritten(answer.code, changes)) for changes in variants.values()]
    assert np.isnan(seen[0]).all() and np.allclose(seen[1], 1 / 3) and np.array_equal(seen[2], catalogued)
