"""Expected values that visible tests carry as data, computed from the reference solution.

A visible test checks one small case against values written into its cell:

    scores = call(dot_score, q.copy(), K.copy())
    expect_close(scores, stored("dot_score(q, K)", [1.0, 2.0, 0.0, 3.0]), "dot_score(q, K)")

In the notebook, `stored(call, value)` only returns `value` as an array: the student's
notebook holds the numbers, never the code that computes them. `make release` (and
`python -m autograder release`) runs the solution notebook's instructor and reference
cells here, evaluates each `call` (a Python expression, at the top level of its cell) on
the reference solution, and writes the result in place of `value` in solutions/ before
it generates the student versions. tests/test_stored_values.py recomputes them and fails
when a stored value drifts from what the reference gives.

Values are written with 12 significant digits; a stored value is rewritten only when it
differs from the reference beyond RTOL/ATOL, so that releases on machines whose last
digits differ leave the notebooks as they are.
"""

import ast
import builtins
import contextlib
import io
import warnings

import nbformat
import numpy as np
import torch

from autograder.judging.assemble import solution_code

STORED = "stored"
RTOL, ATOL = 1e-9, 1e-12
DIGITS = 12


class StoredValueError(ValueError):
    """A `stored(...)` that cannot be computed (not at the top level, not a string, an error)."""


def as_plain_array(value):
    if torch.is_tensor(value):
        value = value.detach().cpu()
        if value.dtype == torch.bfloat16:
            value = value.float()
        value = value.numpy()
    return np.asarray(value)


def _number(x, kind):
    if kind == "b":
        return repr(bool(x))
    if kind in "iu":
        return repr(int(x))
    x = float(f"{float(x):.{DIGITS}g}")
    return repr(x) if np.isfinite(x) else f'float("{x!r}")'


def literal(value, indent=0, width=100):
    """`value` (an array or tensor) as a Python literal of nested lists: each innermost
    row on a line of its own (wrapped at `width`), continuation lines indented to line
    up under the first bracket, which stands at column `indent`."""
    array = as_plain_array(value)
    if array.dtype.kind not in "biuf":
        raise StoredValueError(f"a stored value must be numbers or booleans, not {array.dtype}")
    kind = array.dtype.kind

    def rows(part, column):
        if part.ndim == 0:
            return _number(part, kind)
        if part.ndim == 1:
            items, lines, line = [_number(x, kind) for x in part], [], "["
            for i, item in enumerate(items):
                piece = item + (", " if i < len(items) - 1 else "]")
                if len(line) + len(piece) + column > width and line != "[":
                    lines.append(line.rstrip())
                    line = " " + piece  # under the first item, once joined at `column`
                else:
                    line += piece
            lines.append(line if items else "[]")
            return ("\n" + " " * column).join(lines)
        inner = [rows(sub, column + 1) for sub in part]
        return "[" + (",\n" + " " * (column + 1)).join(inner) + "]"

    return rows(array, indent)


def stored_calls(source):
    """[(call node, expression text)] of the `stored(...)` calls at the top level of a cell."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found = []
    for statement in tree.body:
        for node in ast.walk(statement):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == STORED:
                if len(node.args) != 2 or not isinstance(node.args[0], ast.Constant) \
                        or not isinstance(node.args[0].value, str):
                    raise StoredValueError(f"line {node.lineno}: stored() takes a call as a string and a value")
                found.append((node, node.args[0].value))
    for statement in tree.body:  # stored() inside a function or class would run at another time
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            for node in ast.walk(statement):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == STORED:
                    raise StoredValueError(f"line {node.lineno}: stored() must be at the top level of its cell")
    return found


def _cells_to_run(notebook):
    """(index, source, has stored values) of the cells whose code computes the stored values:
    the instructor's cells, the reference solutions, and the test cells that store values."""
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution"):
            yield index, solution_code(cell.source), False
        elif meta.get("grade"):
            if stored_calls(cell.source):
                yield index, cell.source, True
        elif meta.get("locked"):
            yield index, cell.source, False


def compute(notebook):
    """{cell index: [(call node, expression, value)]}: each stored call evaluated on the
    reference solution, the notebook's cells run in order in a namespace of their own."""
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    results = {}
    for index, source, has_stored in _cells_to_run(notebook):
        pending = {}  # expression -> its call nodes not yet evaluated, in order
        for node, text in (stored_calls(source) if has_stored else []):
            pending.setdefault(text, []).append(node)
        computed = []

        def record(expression, _value, _pending=pending, _computed=computed, _index=index):
            if not _pending.get(expression):
                raise StoredValueError(f"cell {_index}: stored({expression!r}) ran more often than it is written "
                                       "(in a loop?): store each value once, at the top level of the cell")
            node = _pending[expression].pop(0)
            try:
                value = eval(compile(expression, f"<stored value of cell {_index}>", "eval"), namespace)
            except Exception as error:
                raise StoredValueError(f"cell {_index}: stored({expression!r}) raised "
                                       f"{type(error).__name__}: {error}") from error
            _computed.append((node, expression, value))
            return np.asarray(as_plain_array(value))

        if has_stored:
            namespace[STORED] = record
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                exec(compile(source, f"<cell {index}>", "exec"), namespace)
            except StoredValueError:
                raise
            except Exception as error:
                raise StoredValueError(f"cell {index} failed on the reference solution: "
                                       f"{type(error).__name__}: {error}") from error
        if has_stored:
            results[index] = computed
    return results


def stored_value(node):
    """The value a stored call holds now, or None when it is not a literal."""
    try:
        return np.asarray(ast.literal_eval(_literal_source(node.args[1])))
    except (ValueError, SyntaxError, TypeError):
        return None


def _literal_source(node):
    # float("nan") is not a literal: read it as one.
    text = ast.unparse(node)
    for sign in ("", "-"):
        for quote in "\"'":
            text = text.replace(f"float({quote}{sign}inf{quote})", f"{sign}1e999")
            text = text.replace(f"float({quote}{sign}nan{quote})", "0.0")
    return text


def agrees(old, new):
    new = as_plain_array(new)
    if old is None or old.shape != new.shape:
        return False
    if new.dtype.kind == "b" or old.dtype.kind == "b":
        return old.dtype.kind == new.dtype.kind and bool(np.array_equal(old, new))
    both = np.isnan(new.astype(float)) & np.isnan(old.astype(float)) if new.dtype.kind == "f" else False
    return bool(np.all(np.isclose(old, new, rtol=RTOL, atol=ATOL) | both))


def drifted(notebook):
    """[(cell index, expression, why)] of the stored values that the reference no longer gives."""
    problems = []
    for index, computed in compute(notebook).items():
        for node, text, value in computed:
            old = stored_value(node)
            if not agrees(old, value):
                got = "not a literal" if old is None else f"{old.shape} {np.array2string(old, threshold=20)}"
                problems.append((index, text, f"stored {got}; the reference gives {as_plain_array(value).shape} "
                                              f"{np.array2string(as_plain_array(value), threshold=20)}"))
    return problems


def refresh(notebook):
    """Write into `notebook` every stored value that drifted; return how many changed."""
    changed = 0
    for index, computed in compute(notebook).items():
        cell = notebook.cells[index]
        lines = cell.source.splitlines(keepends=True)
        offsets = [0]
        for line in lines:
            offsets.append(offsets[-1] + len(line))
        edits = []
        for node, _, value in computed:
            if agrees(stored_value(node), value):
                continue
            argument = node.args[1]
            start = offsets[argument.lineno - 1] + _char_offset(lines[argument.lineno - 1], argument.col_offset)
            end = offsets[argument.end_lineno - 1] + _char_offset(lines[argument.end_lineno - 1],
                                                                   argument.end_col_offset)
            column = len(cell.source[offsets[argument.lineno - 1]:start])
            edits.append((start, end, literal(value, indent=column)))
        for start, end, text in sorted(edits, reverse=True):
            cell.source = cell.source[:start] + text + cell.source[end:]
        changed += len(edits)
    return changed


def _char_offset(line, byte_offset):
    """ast's column offsets count UTF-8 bytes."""
    return len(line.encode()[:byte_offset].decode(errors="ignore"))


def refresh_file(path):
    notebook = nbformat.read(path, as_version=4)
    changed = refresh(notebook)
    if changed:
        nbformat.write(notebook, path)
    return changed
