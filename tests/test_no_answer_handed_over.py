"""No code a student is given is a graded answer under another name.

Every function and method a student can read (the lessons and other notebooks of the
book, the released student notebooks' helper and test cells, the experiment scripts
beside the chapters, and `course/`) is compared with every graded reference function
and method of solutions/, token by token, with names, strings and comments ignored:
renaming variables or attributes, rewording a docstring or reflowing lines changes
nothing. A pair whose token sequences agree on more than SIMILAR of their length is a
transcription away from an answer, and fails.

This is a coarse net: it catches a copy, not an idea. tests/test_trusted_data.py's
transcription attacks are the proof that the course hands over nothing a few minutes of
adapting turn into points. Short functions (fewer than SHORTEST tokens) are left to
those attacks: three-line answers look alike whoever writes them.

A later chapter may hold an earlier chapter's answers (chapter 3's notebook gives the
forward pass of chapter 2): such a pair is not a leak when the reader meets it after
the earlier assignment is due (book/for_instructors.md says to release in order).
"""

import ast
import difflib
import io
import keyword
import re
import tokenize

import nbformat
import pytest

from autograder import paths
from autograder.judging.assemble import solution_code

REPO = paths.REPO_ROOT
SIMILAR = 0.75  # 2 * matching tokens / (tokens of both); see the calibration below
SHORTEST = 40  # tokens: shorter graded code is left to the transcription attacks
# Calibration, on the course before issue 30's fixes: a verbatim copy under other names
# scores above 0.9 (test_the_check_finds_a_renamed_answer); the helper cells' test_patches
# against patchify 0.89; answers rewritten more freely (TestsViT against VisionTransformer,
# 0.73; chapter 6's causal_reference and course/kv_cache.py's greedy, 0.68) overlap with
# unrelated code of the same shape (up to 0.71), which is why this is a net for copies
# and the transcription attacks are the proof. A class is compared without its __init__
# (which only creates layers, alike in every module) and each method on its own.
ORDER = [a for a in ["soft_lookup", "self_attention", "attention_gradients", "multi_head_attention",
                     "positional_encoding", "transformer_block", "applications", "efficient_attention"]]


def token_sequence(source):
    """The tokens of `source`, with names as N (a library's attributes, `np.exp`, kept; an
    object's own, `self.linear1`, not), strings as S."""
    out, previous, before = [], None, None
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return []
    skipped = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
               tokenize.ENDMARKER)
    for token in tokens:
        if token.type in skipped:
            continue
        if token.type == tokenize.STRING:
            text = "S"
        elif token.type == tokenize.NAME and not keyword.iskeyword(token.string) \
                and (previous != "." or before == "self"):
            text = "N"
        else:
            text = token.string
        out.append(text)
        before, previous = previous, token.string
    return out


def definitions(source):
    """[(name, source)] of the functions and classes `source` defines, at any depth, and
    of each class's methods; constructors left out (of classes too)."""
    source = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            text = ast.get_source_segment(source, node)
            for method in node.body:
                if isinstance(method, ast.FunctionDef) and method.name == "__init__":
                    text = text.replace(ast.get_source_segment(source, method), "")
            found.append((node.name, text))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name != "__init__":
            found.append((node.name, ast.get_source_segment(source, node)))
    return found


def graded_units():
    """[(assignment, name, tokens)] of the reference solutions' functions, classes and methods."""
    units = []
    for assignment in paths.assignments():
        for path in paths.assignment_notebooks(assignment):
            for cell in nbformat.read(path, as_version=4).cells:
                if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution"):
                    for name, source in definitions(solution_code(cell.source)):
                        tokens = token_sequence(source)
                        if len(tokens) >= SHORTEST:
                            units.append((assignment, name, tokens))
    return units


def chapter_of(path):
    """The assignment whose chapter folder holds `path`, or None (course/ is every chapter's)."""
    match = re.match(r"book/(\d\d)_(\w+)/", path)
    return match.group(2) if match else None


def handed_over():
    """[(where, name, tokens)] of the code a student is given."""
    units = []
    for path in sorted(paths.BOOK.rglob("*.ipynb")):
        if ".ipynb_checkpoints" in path.parts:
            continue
        for index, cell in enumerate(nbformat.read(path, as_version=4).cells):
            if cell.cell_type != "code" or cell.metadata.get("nbgrader", {}).get("solution"):
                continue
            for name, source in definitions(cell.source):
                units.append((f"{path.relative_to(REPO)} cell {index}", name, token_sequence(source)))
    for path in sorted(list((REPO / "course").rglob("*.py")) + list(paths.BOOK.rglob("*.py"))):
        for name, source in definitions(path.read_text()):
            units.append((str(path.relative_to(REPO)), name, token_sequence(source)))
    return units


def similarity(a, b):
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return 2 * sum(block.size for block in matcher.get_matching_blocks()) / (len(a) + len(b))


def met_after_it_is_due(where, assignment):
    """True when the reader meets `where` only after `assignment` is due: a later chapter."""
    chapter = chapter_of(where)
    return chapter in ORDER and ORDER.index(chapter) > ORDER.index(assignment)


GRADED = graded_units()


@pytest.mark.parametrize("assignment", ORDER)
def test_no_code_a_student_is_given_is_close_to_a_graded_answer(assignment):
    close = []
    for where, name, tokens in handed_over():
        if met_after_it_is_due(where, assignment) or not tokens:
            continue
        for owner, graded, reference in GRADED:
            if owner != assignment:
                continue
            score = similarity(reference, tokens)
            if score >= SIMILAR:
                close.append(f"{where}: {name} is {score:.2f} close to the answer {graded}")
    assert not close, "code a student is given that is close to a graded answer:\n" + "\n".join(close)


def test_the_check_finds_a_renamed_answer():
    """A reference answer with every name changed and its docstring reworded is caught."""
    assignment, name, reference = max(GRADED, key=lambda unit: len(unit[2]))
    source = next(s for path in paths.assignment_notebooks(assignment)
                  for cell in nbformat.read(path, as_version=4).cells
                  if cell.metadata.get("nbgrader", {}).get("solution")
                  for n, s in definitions(solution_code(cell.source)) if n == name)
    renamed = re.sub(r"\b([a-z_][a-z0-9_]*)\b", lambda m: m.group(1) if keyword.iskeyword(m.group(1))
                     else m.group(1) + "_x", source)
    assert similarity(reference, token_sequence(renamed)) >= SIMILAR
    assert similarity(reference, token_sequence("def f(x):\n    return x + 1\n")) < SIMILAR
