"""Diagnosis by behaviour: which known mistake a student's failing function behaves like.

Each catalogue (autograder/catalogues/ASSIGNMENT.yml) may give, next to the answers of a
graded function, its *probes*: a few calls of that function on fixed inputs.

    - probes: softmax                  # the grade_id of the solution cell
      setup: |                         # instructor code: the inputs of the calls
        x = np.array([[1.0, 2.0, 3.0], [1000.0, 0.0, -1000.0]])
      calls:                           # one expression each, evaluated on its own
        - softmax(x)
        - softmax(x, axis=0)
        - watch_inputs(softmax, x.copy())[1]
      rtol: 1.0e-6                     # optional: the tolerance of "the same value"
      atol: 1.0e-9
      same: [[id-a, id-b]]             # optional: wrong answers that are the same mistake here

When a submission's function loses points, the grader runs its probes where the tests
run (autograder/judging/testing.py's probe_submission): the calls reach the student's
function in the sandboxed kernel exactly as a test's do, and only plain values come back. The catalogue's wrong
answers run the same probes here, on the trusted side, in a namespace made from the
instructor's cells and the reference solutions (catalogue code is the instructor's: it
never enters a student's kernel). The student's function *behaves like* a wrong answer
when every call gives the same value (the same type, dtype and shape, numbers equal to
the tolerance, NaN where NaN, the same exception type where one was raised). A function
whose values are the reference's is never labelled, and a diagnosis never changes a
score.

Every value is first reduced to a canonical, JSON-safe form (`encode`), which is what
results/STUDENT.json keeps of an unknown mistake and what the class report
(autograder/reporting/report.py) groups students by.
"""

import math
from dataclasses import dataclass

import numpy as np
import torch

from autograder.isolation import bounded
from autograder.judging import catalogue
from autograder.judging.referee import quiet
from autograder import paths

PROBE_SECONDS = 10.0  # at most, for the probes of one function in a student's kernel
CATALOGUE_SECONDS = 120.0  # for the catalogue's answers to one function's probes, on the trusted side
MAX_ELEMENTS = 4096  # numbers kept of one array; a larger one is kept as its summary
MAX_TEXT = 1000  # characters kept of a text
VALUES = "__autograder_probe_values__"
PROBES = "__autograder_probes__"

DIAGNOSIS_FAILED = ("The diagnosis of the functions that lost points could not be made ({error}); "
                    "the grade stands, and no known mistake is named.")  # a note for the instructor: English


def short_error(error):
    """`Type: message`, at most 200 characters, for a note."""
    return f"{type(error).__name__}: {error}"[:200]


@dataclass(frozen=True)
class Probes:
    function: str
    setup: str
    calls: tuple
    rtol: float = 1e-6
    atol: float = 1e-9
    same: tuple = ()  # pairs of wrong answers declared the same mistake on these probes

    def source(self):
        """The probes as one cell: each call evaluated on its own, its value or the type of
        the exception it raised kept in VALUES."""
        setup = "\n".join("        " + line for line in (self.setup or "pass").splitlines()) or "        pass"
        calls = "".join(f"        lambda: ({call}),\n" for call in self.calls)
        return (f"def {PROBES}():\n"
                f"    try:\n{setup}\n"
                f"    except Exception as error:\n"
                f"        return [('setup raised', getattr(error, 'remote_type', None) or type(error).__name__)]\n"
                f"    values = []\n"
                f"    for call in (\n{calls}    ):\n"
                f"        try:\n"
                f"            values.append(('value', call()))\n"
                f"        except Exception as error:\n"
                f"            values.append(('raised', getattr(error, 'remote_type', None) or type(error).__name__))\n"
                f"    return values\n"
                f"{VALUES} = {PROBES}()\n")


def load_probes(assignment, catalogues=paths.CATALOGUES):
    """grade_id -> Probes of one assignment's catalogue ({} without a catalogue or probes)."""
    path = catalogue.catalogue_path(assignment, catalogues)
    if not path.exists():
        return {}
    probes = {}
    for entry in catalogue.probe_entries(assignment, catalogues):
        calls = entry.get("calls") or []
        if not calls or not all(isinstance(c, str) for c in calls):
            raise ValueError(f"probes of {entry['probes']!r}: `calls` must be a list of expressions")
        probes[entry["probes"]] = Probes(entry["probes"], entry.get("setup", ""), tuple(calls),
                                         float(entry.get("rtol", 1e-6)), float(entry.get("atol", 1e-9)),
                                         tuple(tuple(pair) for pair in entry.get("same", ())))
    return probes


# -- values, canonical -------------------------------------------------------------------

def _number(x):
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def _elements(array):
    flat = array.reshape(-1)
    if array.dtype.kind == "c":
        return [[_number(z.real), _number(z.imag)] for z in flat]
    if array.dtype.kind == "f":
        return [_number(x) for x in flat]
    if array.dtype.kind == "b":
        return [bool(x) for x in flat]
    if array.dtype.kind in "iu":
        return [int(x) for x in flat]
    return [str(x) for x in flat]


def _array(array, kind, dtype, device=None):
    encoded = {kind: dtype, "shape": list(array.shape)}
    if device is not None:
        encoded["device"] = device
    if array.size <= MAX_ELEMENTS:
        encoded["values"] = _elements(array)
    else:  # too large to keep: its summary
        as_float = array.astype(np.complex128 if array.dtype.kind == "c" else np.float64)
        encoded["summary"] = [_number(np.nansum(np.abs(as_float))), _number(np.isnan(as_float).sum())]
    return encoded


def encode(value, depth=0):
    """`value` (an answer: arrays, tensors, numbers, containers, exceptions as names) as
    plain JSON-safe data that `same` compares."""
    if depth > 8:
        return {"object": "too deep"}
    if value is None or isinstance(value, bool):
        return {"plain": value}
    if isinstance(value, str):
        return {"plain": value[:MAX_TEXT]}
    if isinstance(value, (int, np.integer)) and not isinstance(value, np.bool_):
        return {"int": int(value)}
    if isinstance(value, (float, np.floating)):
        return {"float": _number(value)}
    if isinstance(value, np.bool_):
        return {"plain": bool(value)}
    if isinstance(value, np.ndarray):
        return _array(value, "array", str(value.dtype))
    if torch.is_tensor(value):
        dtype = str(value.dtype).replace("torch.", "")
        if value.device.type == "meta":
            return {"tensor": dtype, "shape": list(value.shape), "device": "meta"}
        try:
            tensor = value.detach().cpu().resolve_conj().resolve_neg()
            array = tensor.numpy() if tensor.dtype != torch.bfloat16 else tensor.double().numpy()
        except (TypeError, RuntimeError):  # a layout or dtype NumPy does not have
            return {"tensor": dtype, "shape": list(value.shape), "layout": str(value.layout)}
        return _array(array, "tensor", dtype, value.device.type)
    if isinstance(value, (list, tuple)):
        return {type(value).__name__ if type(value) in (list, tuple) else "list":
                [encode(item, depth + 1) for item in list(value)[:64]]}
    if isinstance(value, dict):
        return {"dict": [[str(key), encode(item, depth + 1)] for key, item in sorted(value.items(), key=str)][:64]}
    return {"object": getattr(value.__class__, "__name__", "object")}


def encode_probed(raw):
    """The list VALUES that the probe cell made, encoded: [[how, encoded value or name]]."""
    if type(raw) is not list:
        return [["raised", "no values"]]
    encoded = []
    for item in raw:
        how, value = item if type(item) is tuple and len(item) == 2 else ("raised", "malformed")
        encoded.append([how, encode(value) if how == "value" else str(value)])
    return encoded


def same(a, b, rtol=1e-6, atol=1e-9):
    """Whether two encoded values are the same behaviour: the same structure, types,
    dtypes and shapes; integers, booleans and text equal; floats equal to the tolerance,
    NaN and infinities where the other has them."""
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y, rtol, atol) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[key], b[key], rtol, atol) for key in a)
    if type(a) is float and type(b) is float:
        return abs(a - b) <= atol + rtol * abs(b)
    return type(a) is type(b) and a == b


# -- the trusted side: what the catalogue's answers do on the probes -------------------------

def behaviours_of(reference_cells, probes, codes):
    """[probe_here(reference_cells, probes, code) for each code], computed in a child of
    this process (autograder/isolation/bounded.py): what the catalogue's code does to its process (one
    wrong answer patches torch.autograd.gradcheck) ends with the child."""
    limits = bounded.Limits(seconds=CATALOGUE_SECONDS)

    def compute():
        return [probe_here(reference_cells, probes, code) for code in codes]

    return bounded.call(compute, [], {}, limits, f"the catalogue's answers to the probes of {probes.function}")


def probe_here(reference_cells, probes, answer_code=None):
    """The probes' encoded values for the reference solution, or for `answer_code` put in
    the place of the function's reference: run in this process, in a namespace of the
    instructor's cells (setup, helpers, the reference solutions) and nothing else."""
    namespace = {"__name__": "__main__"}
    with quiet():
        for source, _ in reference_cells:
            exec(compile(source, "<reference>", "exec"), namespace)
        if answer_code is not None:
            exec(compile(answer_code, f"<catalogue {probes.function}>", "exec"), namespace)
        exec(compile(probes.source(), f"<probes of {probes.function}>", "exec"), namespace)
    return encode_probed(namespace.get(VALUES))


class Catalogue:
    """One assignment's probes and what its wrong answers (and the reference) do on them,
    computed here the first time a function needs them, then kept."""

    def __init__(self, assignment, reference_cells, catalogues=paths.CATALOGUES):
        self.assignment, self.reference_cells = assignment, reference_cells
        self.probes = load_probes(assignment, catalogues)
        path = catalogue.catalogue_path(assignment, catalogues)
        self.answers = catalogue.load(assignment, catalogues) if path.exists() else []
        self.known = {}  # function -> (reference values, [(answer, values)])

    def behaviours(self, function):
        """(the reference's values, [(wrong answer, its values)]) on `function`'s probes."""
        if function not in self.known:
            wrong = [answer for answer in self.answers if answer.function == function and answer.verdict == "wrong"]
            reference, *values = behaviours_of(self.reference_cells, self.probes[function],
                                               [None] + [answer.code for answer in wrong])
            self.known[function] = (reference, list(zip(wrong, values)))
        return self.known[function]

    def diagnose(self, function, values):
        """The wrong answer whose behaviour `values` has, or None (no such answer, or the
        reference's own behaviour)."""
        if function not in self.probes:
            return None
        probes = self.probes[function]
        if self.known.get(function, ()) is None:
            return None  # the catalogue's answers could not be computed: tried once, not again
        try:
            reference, wrong = self.behaviours(function)
        except Exception as error:  # noqa: BLE001 (over the limits, or a broken catalogue: no diagnosis)
            self.known[function] = None
            import sys

            sys.stderr.write(f"no diagnosis for {function}: {type(error).__name__}: {error}\n")
            return None
        if same(values, reference, probes.rtol, probes.atol):
            return None
        for answer, known in wrong:
            if same(values, known, probes.rtol, probes.atol):
                return answer
        return None


_catalogues = {}


def catalogue_for(assignment, reference_cells, catalogues=paths.CATALOGUES):
    """The Catalogue of `assignment`, kept for this process (a grading worker grades one
    assignment's submissions one after another)."""
    key = (assignment, str(catalogues), tuple(reference_cells))
    if key not in _catalogues:
        _catalogues.clear()
        _catalogues[key] = Catalogue(assignment, reference_cells, catalogues)
    return _catalogues[key]


def diagnose(assignment, reference_cells, probed):
    """function -> {"id", "explanation"} of the wrong answer each probed function behaves
    like; functions that behave like none are left out. A catalogue that cannot be used
    gives no diagnosis (grading goes on without one)."""
    if not probed:
        return {}
    try:
        known = catalogue_for(assignment, reference_cells)
        found = {function: known.diagnose(function, values) for function, values in probed.items()}
    except Exception as error:  # noqa: BLE001 (the diagnosis is a help, never a reason to fail a grade)
        import sys

        sys.stderr.write(f"no diagnosis for {assignment}: {type(error).__name__}: {error}\n")
        return {}
    return {function: {"id": answer.id, "explanation": answer.explanation}
            for function, answer in found.items() if answer is not None}


def sentence(label, mistake_id, explanation, language=""):
    """What the feedback says of a function that behaves like a catalogued mistake, in the
    notebook's `language` (autograder/reporting/language.py: the explanation from the
    catalogue's catalog)."""
    from autograder.reporting import language as lang

    _ = lang.words(language)
    return _("Your {label} behaves like a known mistake ({mistake_id}): {explanation}", label=label,
             mistake_id=mistake_id, explanation=lang.explanation(explanation, language))


UNREADABLE = "(this answer is not shown: it could not be parsed and written back without its words)"


def _is_bare_string(statement):
    """A statement that is only a string (a docstring, or a string used as a comment)."""
    import ast

    return isinstance(statement, ast.Expr) and (
        isinstance(statement.value, ast.JoinedStr)
        or isinstance(statement.value, ast.Constant) and isinstance(statement.value.value, (str, bytes)))


def anonymized(code):
    """A student's answer as an example for the class report: written back by `ast.unparse`
    from its parse, so that its comments are gone, with every statement that is only a
    string (docstrings, strings used as comments: where names and notes live) left out.
    Lines of IPython magics are dropped before parsing. An answer that cannot be parsed
    or written back (a syntax error, an expression too deep for the parser) is replaced by
    UNREADABLE, never shown as it was; this never raises, so that the report's example
    can never cost a grade."""
    import ast

    try:
        tree = ast.parse("\n".join(line for line in code.splitlines()
                                   if not line.lstrip().startswith(("%", "!"))))
        for node in ast.walk(tree):
            for field in ("body", "orelse", "finalbody"):
                statements = getattr(node, field, None)
                if isinstance(statements, list) and statements:
                    kept = [statement for statement in statements if not _is_bare_string(statement)]
                    needs_one = field == "body" and not isinstance(node, ast.Module)
                    setattr(node, field, kept or ([ast.Pass()] if needs_one else []))
        return ast.unparse(tree)
    except Exception:  # SyntaxError, RecursionError, MemoryError...: nothing shown
        return UNREADABLE
