"""An HLS kernel's C source, read for what transfers across kernels: the loop each pragma placeholder
annotates and what one iteration of it does, and a design's pragma values turned into the hardware
and the latency they imply (``source_statistics``, the ``src_*`` columns of the tree's features).

The source is the one HLSyn's designs were made from (``#pragma ACCEL PARALLEL FACTOR=auto{__PARA__L0}``
right before a loop). It is read with regular expressions and bracket matching, not a C parser:
comments, preprocessor lines and casts are blanked first, a placeholder annotates the next ``for``
after its pragma, and a loop's trip count is known only when its start, bound and step are literal
numbers (``i = 1; i < 120 - 1; i++``). ``while`` loops, and the loops of functions a loop calls, are
not seen inside that loop.
"""

from __future__ import annotations

import ast
import bisect
import math
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple

from preflight.data.errors import DataError
from preflight.data.fpga import FOR_LOOP, MAX_SOURCE_LOOPS, factor, is_source_text, knob_kind, pipeline_mode
from preflight.data.program_graph import PLACEHOLDER

_TYPE = r"(?:double|float|int|long|char|short|unsigned|signed|bool)"
#: A comment; one never closed runs to the end (else each of its starts would scan the rest of the text).
_COMMENT = re.compile(r"/\*.*?(?:\*/|\Z)|//[^\n]*", re.DOTALL)
_DIRECTIVE = re.compile(r"^[ \t]*#[^\n]*", re.MULTILINE)
_CAST = re.compile(rf"\(\s*(?:(?:const|register)\s+)*{_TYPE}(?:\s+{_TYPE})*\s*\)")
_PRAGMA = re.compile(r"#pragma[ \t]+ACCEL[ \t]+(PARALLEL|PIPELINE|TILE)\b([^\n]*)")
_KEYWORD = re.compile(r"\s*(?:for|while|if)\s*\(")
_STATEMENT_MARK = re.compile(r"[;({]")
_NAME = re.compile(r"[A-Za-z_]\w*")
_ACCESS = re.compile(r"\b([A-Za-z_]\w*)\s*\[")
#: Declarations: possessive quantifiers, as spaces around a ``*`` could be split between them in
#: quadratically many ways before a name that is not there.
_DECLARED_BEFORE = re.compile(rf"\b{_TYPE}\s*+\**+\s*+$")
_DECLARED = re.compile(rf"\b{_TYPE}\s++\**+\s*+([A-Za-z_]\w*)")
_DECLARED_ARRAY = re.compile(rf"\b{_TYPE}\s++\**+\s*+[A-Za-z_]\w*+\s*+((?:\[[^\[\];]{{0,64}}\]\s*)+)")
_NEXT_SUBSCRIPT = re.compile(r"\s*\[")
_CONDITION = re.compile(r"\b(?:if|while|switch)\s*\(")
_ASSIGNED = re.compile(r"\s*(=(?!=)|\+=|-=|\*=|/=|%=|\^=|\|=|&=|<<=|>>=|\+\+|--)")
#: The first name a statement assigns to (type words before it are names that assign nothing).
_SCALAR_ASSIGNMENT = re.compile(r"(?<![.>\w])([A-Za-z_]\w*)\s*(=(?!=)|\+=|-=|\*=)(.*)", re.DOTALL)
#: A name plus or minus a literal offset (``i+1``, ``i-(2``) in a subscript without spaces.
_OFFSET = re.compile(r"\b([A-Za-z_]\w*)([-+])\(?(\d+)\b")
_OPERATOR = re.compile(r"(?<=[\w)\]])\s*[-+*/](?![-+>=])|[-+*/]=")
_INTEGER_SUFFIX = re.compile(r"\b(0[xX][0-9a-fA-F]+|\d+)[uUlL]+\b")
#: Compound assignments that accumulate (an iteration adds to what the others did).
_UPDATES = ("+=", "-=", "*=")
#: Pipeline modes that fully unroll the loops inside the pipelined one (Merlin's fine-grained mode;
#: the default ``''`` pipelines an outer loop coarse-grained, its inner loops as stages).
FINE_PIPELINES = ("flatten", "fg")
#: Expressions longer than this are not evaluated (a loop bound is a number or a short sum).
_LITERAL_CHARACTERS = 64
#: A subscript is read up to this many characters (an index is a short expression).
_SUBSCRIPT_CHARACTERS = 128
#: The largest trip count kept (2^62: far beyond any loop an FPGA runs).
MAX_TRIP = 1 << 62


@dataclass(frozen=True)
class Loop:
    """A ``for`` loop of the source."""

    #: its induction variable ("" when the header does not name one)
    variable: str
    #: iterations as written, 0 when its start, bound or step is not a literal number
    trip: int
    #: 1 for an outermost loop, one more per loop around it
    depth: int
    #: the enclosing loop's position in ``KernelSource.loops`` (-1: none), and its inner loops'
    parent: int
    children: tuple[int, ...]
    #: log2 of the trip product of the loops around it (an unknown trip counts 1)
    outer_log2: float
    #: log2 of the inner-loop iterations one of its iterations runs (sibling nests add up; 0: none)
    inner_log2: float
    #: array reads and writes in its body, inner loops included (``+=`` is both)
    reads: int
    writes: int
    #: the arrays its body touches
    arrays: frozenset[str]
    #: an iteration accumulates into what the others do (``s += ``, ``C[i][j] +=`` in a loop over k)
    #: or its pragma says ``reduction``
    reduction: bool
    #: the largest distance of a dependence it carries (``A[i] = A[i - 1]`` in a loop over i: 1)
    distance: int
    #: arithmetic operations outside subscripts in its own statements (its inner loops' excluded)
    ops: int
    #: array accesses in its own statements, by array
    accesses: Mapping[str, int]


@dataclass(frozen=True)
class KernelSource:
    """A kernel's loops (in source order) and the loop each pragma placeholder annotates."""

    loops: tuple[Loop, ...]
    #: placeholder -> position of its loop in ``loops``
    knobs: Mapping[str, int]
    #: elements of the arrays declared with literal sizes (``double C[60][70]``: 4,200)
    array_elements: int
    #: arithmetic operations written in the innermost loops' bodies
    body_ops: int

    @property
    def max_depth(self) -> int:
        return max((loop.depth for loop in self.loops), default=0)

    def loop(self, placeholder: str) -> Loop | None:
        """The loop a placeholder annotates (None if the source has no such placeholder)."""
        position = self.knobs.get(placeholder)
        return None if position is None else self.loops[position]


class _Span(NamedTuple):
    start: int  # the ``for``
    header_end: int  # past its ``)``
    body_start: int  # past its ``{`` (or where its one statement starts)
    end: int  # its ``}`` or its statement's ``;``


class _Access(NamedTuple):
    name: str
    subscripts: tuple[str, ...]  # whitespace removed
    kind: str  # "" read, "=" written, a compound operator: read and written


class _Statement(NamedTuple):
    """One statement (the code between ``;``, ``{`` and ``}``, loop headers blanked) and what it does."""

    start: int
    end: int
    accesses: tuple[_Access, ...]
    #: the scalar it assigns ("" for none), how (``=``, ``+=``...), the names its value uses outside
    #: subscripts, and whether its value reads the scalar (``s = s + x``)
    target: str
    operator: str
    uses: frozenset[str]
    reads_target: bool
    declared: frozenset[str]
    #: arithmetic operations, unless it computes an index
    ops: int


def parse_source(text: str) -> KernelSource:
    """A kernel's loops and knobs from its C source with pragma placeholders."""
    uncommented = _COMMENT.sub(_blank, text)
    code = _CAST.sub(_blank, _DIRECTIVE.sub(_blank, uncommented))
    brackets = {**_pairs(code, "(", ")"), **_pairs(code, "{", "}")}
    if (count := len(FOR_LOOP.findall(code))) > MAX_SOURCE_LOOPS:
        raise DataError(f"a C source of {count} loops; at most {MAX_SOURCE_LOOPS}")
    spans = [_loop_span(code, brackets, m.start(), m.end() - 1) for m in FOR_LOOP.finditer(code)]
    bare = _without_headers(code, spans)
    parents = _parents(spans)
    children: list[list[int]] = [[] for _ in spans]
    for i, parent in enumerate(parents):
        if parent >= 0:
            children[parent].append(i)
    headers = [_trip(code[s.start : s.header_end]) for s in spans]
    trips = [trip for _, trip in headers]
    inner = _inner_work(trips, children)
    variables = {variable for variable, _ in headers if variable}
    starts = [span.start for span in spans]
    pragmas = [_pragma(m, starts) for m in _PRAGMA.finditer(uncommented)]
    reduced = {loop for loop, _, reduction in pragmas if reduction}
    statements = _Statements(bare, variables)
    loops = []
    for i, (span, (variable, trip)) in enumerate(zip(spans, headers)):
        ancestors = _ancestors(parents, i)
        body = statements.within(span.body_start, span.end)
        inside = {id(x) for c in children[i] for x in statements.within(spans[c].start, spans[c].end + 1)}
        loops.append(
            Loop(
                variable=variable,
                trip=trip,
                depth=1 + len(ancestors),
                parent=parents[i],
                children=tuple(children[i]),
                outer_log2=sum(log2_count(trips[a]) for a in ancestors),
                inner_log2=math.log2(inner[i]),
                **_body_facts(body, [x for x in body if id(x) not in inside], variable, i in reduced),
            )
        )
    return KernelSource(
        loops=tuple(loops),
        knobs={name: loop for loop, names, _ in pragmas for name in names},
        array_elements=_array_elements(code),
        body_ops=sum(loop.ops for loop in loops if not loop.children),
    )


@lru_cache(maxsize=64)
def load_source(spec: str) -> KernelSource | None:
    """A kernel's parsed source from C text or a ``.c`` file's path; None for "" (no source known)."""
    if not spec:
        return None
    if is_source_text(spec):
        return parse_source(spec)
    try:
        return parse_source(Path(spec).read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{spec} is not a readable C source: {exc}") from exc


def _blank(match: re.Match[str]) -> str:
    """Spaces for a match (newlines kept), so positions in the blanked text stay those of the source."""
    return re.sub(r"[^\n]", " ", match.group())


def _pairs(text: str, opening: str, closing: str) -> dict[int, int]:
    """Where each opening bracket of a kind closes (the text's end for one never closed)."""
    out, stack = {}, []
    for m in re.finditer(f"[{re.escape(opening + closing)}]", text):
        if m.group() == opening:
            stack.append(m.start())
        elif stack:
            out[stack.pop()] = m.start()
    return out | dict.fromkeys(stack, len(text))


def _statement_end(code: str, brackets: dict[int, int], at: int) -> int:
    """Where the statement from ``at`` ends (its ``;`` or ``}``), past ``for``/``while``/``if`` headers."""
    while keyword := _KEYWORD.match(code, at):
        at = brackets[keyword.end() - 1] + 1
    at += len(code[at:]) - len(code[at:].lstrip())
    if code.startswith("{", at):
        return brackets[at]
    while (m := _STATEMENT_MARK.search(code, at)) and m.group() != ";":
        at = brackets.get(m.start(), len(code)) + 1  # past a parenthesis or an initializer's braces
    return m.start() if m else len(code)


def _loop_span(code: str, brackets: dict[int, int], start: int, open_paren: int) -> _Span:
    header_end = brackets[open_paren] + 1
    end = _statement_end(code, brackets, header_end)
    body_start = header_end + len(code[header_end:end]) - len(code[header_end:end].lstrip())
    return _Span(start, header_end, body_start + code.startswith("{", body_start), end)


def _without_headers(code: str, spans: list[_Span]) -> str:
    """The code with loop headers blanked: a body's statements are then its own ``;``-separated ones."""
    parts, at = [], 0
    for span in spans:
        parts += [code[at : span.start], " " * (span.header_end - span.start)]
        at = span.header_end
    return "".join(parts) + code[at:]


def _parents(spans: list[_Span]) -> list[int]:
    """Each loop's innermost enclosing loop (-1: none); spans come in source order."""
    parents: list[int] = []
    stack: list[int] = []
    for i, span in enumerate(spans):
        while stack and spans[stack[-1]].end < span.start:
            stack.pop()
        parents.append(stack[-1] if stack else -1)
        stack.append(i)
    return parents


def _ancestors(parents: list[int], i: int) -> list[int]:
    out = []
    while (i := parents[i]) >= 0:
        out.append(i)
    return out


def _inner_work(trips: list[int], children: list[list[int]]) -> list[float]:
    """Inner-loop iterations one iteration of each loop runs (1 without inner loops)."""
    inner = [1.0] * len(trips)
    for i in reversed(range(len(trips))):  # inner loops come after their parents
        inner[i] = max(1.0, sum(max(trips[c], 1) * inner[c] for c in children[i]))
    return inner


class _Statements:
    """The code's statements in order (blank ones left out), found by where they lie."""

    def __init__(self, bare: str, variables: set[str]) -> None:
        self.statements, at = [], 0
        for m in re.finditer(r"[;{}]|\Z", bare):
            if bare[at : m.start()].strip():
                self.statements.append(_statement(bare[at : m.start()], at, m.start(), variables))
            at = m.end()
        self.starts = [x.start for x in self.statements]
        self.ends = [x.end for x in self.statements]

    def within(self, start: int, end: int) -> list[_Statement]:
        """The statements that overlap ``[start, end)``."""
        lo, hi = bisect.bisect_right(self.ends, start), bisect.bisect_left(self.starts, end)
        return self.statements[lo:hi]


def _statement(text: str, start: int, end: int, variables: set[str]) -> _Statement:
    """What a statement does (``variables``: the loops' variables, which mark index arithmetic)."""
    assignment = _SCALAR_ASSIGNMENT.search(text)
    target, operator, value = assignment.groups() if assignment else ("", "", "")
    bare = _outside_subscripts(_without_conditions(text))
    return _Statement(
        start=start,
        end=end,
        accesses=tuple(_accesses(text)),
        target=target,
        operator=operator,
        uses=frozenset(_NAME.findall(_outside_subscripts(value))),
        reads_target=target in _NAME.findall(value),
        declared=frozenset(_DECLARED.findall(text)),
        ops=0 if _mentions(bare, variables) else len(_OPERATOR.findall(bare)),
    )


def _pragma(pragma: re.Match[str], starts: list[int]) -> tuple[int, list[str], bool]:
    """A pragma's loop (the next ``for``: its position among the loops' ``starts``; -1 if none), its
    placeholders and whether it says ``reduction``."""
    loop = bisect.bisect_right(starts, pragma.start())
    if loop == len(starts):
        return -1, [], False
    reduction = pragma.group(1) == "PARALLEL" and "reduction" in pragma.group(2)
    return loop, PLACEHOLDER.findall(pragma.group(2)), reduction


def _literal(expression: str) -> float | None:
    """The value of an expression of literal numbers (``128 - 2``, ``8L``), None for anything else."""
    text = _INTEGER_SUFFIX.sub(r"\1", expression.strip())
    if len(text) > _LITERAL_CHARACTERS:
        return None
    try:
        value = _evaluate(ast.parse(text, mode="eval").body)
    except (SyntaxError, ValueError, ZeroDivisionError, OverflowError):
        return None
    return value if math.isfinite(value) else None


def _evaluate(node: ast.expr) -> float:
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, int | float)
        and not isinstance(node.value, bool)
    ):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _evaluate(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub | ast.Mult | ast.Div):
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Div):
            return float(math.trunc(left / right))  # C's integer division
        if isinstance(node.op, ast.Mult):
            return left * right
        return left + right if isinstance(node.op, ast.Add) else left - right
    raise ValueError("not a literal")


def _trip(loop: str) -> tuple[str, int]:
    """A loop's variable and trip count from its ``for (...)`` (0 when not made of literal numbers)."""
    parts = _split(loop[loop.index("(") + 1 : -1])
    init = re.search(r"(?<!\w)([A-Za-z_]\w*)\s*=\s*([^=,][^,]*)$", parts[0]) if len(parts) == 3 else None
    if init is None:
        names = _NAME.findall(parts[0])
        return (names[-1] if names else ""), 0
    variable, v = init.group(1), re.escape(init.group(1))
    bound = re.fullmatch(rf"[\s(]*{v}[\s)]*(<=|<|>=|>|!=)(.+)", parts[1], re.DOTALL)
    start, step = _literal(init.group(2)), _step(parts[2], v)
    limit = _literal(bound.group(2)) if bound else None
    if bound is None or start is None or limit is None or not step:
        return variable, 0
    return variable, _count(start, bound.group(1), limit, step)


def _split(header: str) -> list[str]:
    """A ``for`` header's init, condition and step (split at its top-level ``;``)."""
    parts, depth, at = [], 0, 0
    for m in re.finditer(r"[()\[\]{};]", header):
        depth += (m.group() in "([{") - (m.group() in ")]}")
        if m.group() == ";" and depth == 0:
            parts.append(header[at : m.start()])
            at = m.end()
    return [*parts, header[at:]]


def _step(text: str, v: str) -> float:
    """The change a loop's step makes to its variable (0 when not a literal)."""
    if re.fullmatch(rf"\s*(\+\+\s*{v}|{v}\s*\+\+)\s*", text):
        return 1.0
    if re.fullmatch(rf"\s*(--\s*{v}|{v}\s*--)\s*", text):
        return -1.0
    if m := re.fullmatch(rf"\s*{v}\s*([-+])=(.+)", text, re.DOTALL):
        value = _literal(m.group(2))
        return 0.0 if value is None else value if m.group(1) == "+" else -value
    return 0.0


def _count(start: float, comparison: str, bound: float, step: float) -> int:
    """Iterations of ``for (v = start; v <comparison> bound; v += step)``."""
    if step > 0 and comparison in ("<", "<=", "!="):
        span = bound - start + (comparison == "<=")
    elif step < 0 and comparison in (">", ">=", "!="):
        span = start - bound + (comparison == ">=")
    else:
        return 0
    return int(min(max(0.0, math.ceil(span / abs(step))), MAX_TRIP))


def _accesses(statement: str) -> list[_Access]:
    """A statement's array accesses in order (declarations are not accesses)."""
    closing, out = _pairs(statement, "[", "]"), []
    for m in _ACCESS.finditer(statement):
        if _DECLARED_BEFORE.search(statement[max(0, m.start() - 32) : m.start()]):
            continue
        subscripts, at = [], m.end() - 1
        while True:
            end = min(closing[at], at + 1 + _SUBSCRIPT_CHARACTERS)
            subscripts.append(re.sub(r"\s+", "", statement[at + 1 : end]))
            if not (following := _NEXT_SUBSCRIPT.match(statement, closing[at] + 1)):
                break
            at = following.end() - 1
        assigned = _ASSIGNED.match(statement, closing[at] + 1)
        out.append(_Access(m.group(1), tuple(subscripts), assigned.group(1) if assigned else ""))
    return out


def _mentions(text: str, names: set[str]) -> bool:
    return any(name in names for name in _NAME.findall(text))


def _body_facts(
    body: list[_Statement], own: list[_Statement], variable: str, reduction: bool
) -> dict[str, Any]:
    """What a loop's body does: its accesses, reduction, carried dependence, and its own work."""
    accesses = [a for x in body for a in x.accesses]
    index = _derived(body, variable)
    return {
        "reads": sum(a.kind != "=" for a in accesses),
        "writes": sum(a.kind != "" for a in accesses),
        "arrays": frozenset(a.name for a in accesses),
        "reduction": reduction or _array_reduction(body, index) or _scalar_reduction(body, index),
        "distance": _distance(accesses, index) if variable else 0,
        "ops": sum(x.ops for x in own),
        "accesses": Counter(a.name for x in own for a in x.accesses),
    }


def _derived(body: list[_Statement], variable: str) -> set[str]:
    """The loop's variable and the scalars its body computes from it outside subscripts (``i_row = i *
    64``, not ``s = A[i]``): the names an index following the loop's variable may use."""
    names = {variable} if variable else set()
    for _ in range(2):
        names |= {x.target for x in body if x.operator == "=" and x.uses & names}
    return names


def _array_reduction(body: list[_Statement], index: set[str]) -> bool:
    """Whether an element at subscripts that do not follow the loop's variable is updated (``+=``,
    ``-=``, ``*=``, or ``y[i] = ... + y[i]``) and never reset (assigned from other values)."""
    updated, reset = set(), set()
    for statement in body:
        last = {(a.name, a.subscripts): i for i, a in enumerate(statement.accesses)}
        for i, a in enumerate(statement.accesses):
            element = (a.name, a.subscripts)
            if a.kind in _UPDATES or (a.kind == "=" and last[element] > i):
                if not any(_mentions(s, index) for s in a.subscripts):
                    updated.add(element)
            elif a.kind == "=":
                reset.add(element)
    return bool(updated - reset)


def _scalar_reduction(body: list[_Statement], index: set[str]) -> bool:
    """Whether a scalar is updated (``s += ...``, ``s = s + ...``) that the body never resets (assigns
    from other values, or declares)."""
    accumulated = {x.target for x in body if x.operator in _UPDATES or x.reads_target}
    resets = {x.target for x in body if x.operator == "=" and not x.reads_target}
    declared = {name for x in body for name in x.declared}
    return bool(accumulated - resets - declared - index - {""})


def _offsets(accesses: list[_Access], index: set[str]) -> dict[tuple, list[int]]:
    """Per (array, rank, dimension): how far each access's subscript lies from the loop's variable
    (``i - 1``: -1, ``i``: 0), for the subscripts that follow it."""
    out: dict[tuple, list[int]] = {}
    for a in accesses:
        for dimension, subscript in enumerate(a.subscripts):
            if _mentions(subscript, index):
                m = next((m for m in _OFFSET.finditer(subscript) if m.group(1) in index), None)
                offset = 0 if m is None else int(m.group(3)) * (1 if m.group(2) == "+" else -1)
                out.setdefault((a.name, len(a.subscripts), dimension), []).append(offset)
    return out


def _distance(accesses: list[_Access], index: set[str]) -> int:
    """The largest distance, along the loop's variable, between an element an iteration writes and
    one of the same array another iteration reads (0: none)."""
    written = _offsets([a for a in accesses if a.kind], index)
    read = _offsets([a for a in accesses if a.kind != "="], index)
    distances = (max(max(w) - min(r), max(r) - min(w)) for key, w in written.items() if (r := read.get(key)))
    return max(distances, default=0)


def _outside_subscripts(statement: str) -> str:
    """A statement with what its subscripts hold left out (``A[i][j]`` → ``A[][]``)."""
    kept, at = [], 0
    for open_at, close_at in sorted(_pairs(statement, "[", "]").items()):
        if open_at >= at:
            kept.append(statement[at : open_at + 1])
            at = close_at
    return "".join(kept) + statement[at:]


def _without_conditions(text: str) -> str:
    """The text without the conditions of its ``if``, ``while`` and ``switch``."""
    closing, parts, at = _pairs(text, "(", ")"), [], 0
    for m in _CONDITION.finditer(text):
        if m.start() >= at:
            parts.append(text[at : m.start()])
            at = closing[m.end() - 1] + 1
    return "".join(parts) + text[at:]


def _array_elements(code: str) -> int:
    """Elements of the arrays declared with literal sizes."""
    total = 0
    for m in _DECLARED_ARRAY.finditer(code):
        sizes = [_literal(s) for s in re.findall(r"\[([^\]]*)\]", m.group(1))]
        if sizes and all(s is not None and s >= 1 for s in sizes):
            total += math.prod(int(s or 1) for s in sizes)
    return total


#: A design's columns from its kernel's source, each explained in ``source_statistics``.
SOURCE_COLUMNS: tuple[str, ...] = (
    "src_loops",
    "src_max_depth",
    "src_array_elements_log2",
    "src_body_ops",
    "src_work_log2",
    "src_unknown_trips",
    "src_unrolled_work_log2",
    "src_copies_log2",
    "src_hardware_log2",
    "src_latency_log2",
    "src_port_pressure_log2",
    "src_reduction_unroll_log2",
    "src_dependence_unroll_log2",
    "src_flattened_inner_log2",
    "src_coarse_pipelines",
    "src_tile_share_max",
    "src_tile_work_log2",
)


@dataclass(frozen=True)
class _Design:
    """A design's knobs per loop of its kernel: how many copies of each loop's body run at once and
    how each loop is pipelined."""

    unroll: list[float]
    copies: list[float]
    modes: list[str]
    tiles: list[float]


def source_statistics(pragmas: Mapping[str, object], source: KernelSource | None) -> dict[str, float]:
    """A design's ``src_*`` columns (all NaN without a source):

    - ``src_loops``, ``src_max_depth``: the kernel's ``for`` loops and its deepest nest;
    - ``src_array_elements_log2``: log2 of the array elements it declares (what BRAM must hold);
    - ``src_body_ops``: arithmetic operations written in its innermost bodies (the datapath's size);
    - ``src_work_log2``: log2 of the loop iterations it runs as written (a latency scale);
    - ``src_unknown_trips``: knobs on loops whose trip count is not a literal (the columns read less);
    - ``src_unrolled_work_log2``: log2 of each PARALLEL loop's unroll times the inner iterations one of
      its iterations runs, summed (the work unrolling replicates);
    - ``src_copies_log2``: log2 of the most copies of one loop body (unrolls multiplied down a nest);
    - ``src_hardware_log2``: log2 of the operations and array accesses instantiated (each body's, times
      its copies): what LUT, FF and DSP grow with;
    - ``src_latency_log2``: log2 of an iteration count with pipelining (``latency``): cycles' scale;
    - ``src_port_pressure_log2``: log2 of the accesses one array serves at once (its accesses times
      their copies, the busiest array): past a BRAM's two ports Merlin must partition it;
    - ``src_reduction_unroll_log2``, ``src_dependence_unroll_log2``: log2 of the largest unroll of a
      loop that accumulates, or that carries a dependence (unrolled copies then wait on each other);
    - ``src_flattened_inner_log2``: log2 of the largest inner trip product a fine-grained pipeline
      (``flatten``) unrolls completely;
    - ``src_coarse_pipelines``: loops with inner loops pipelined coarse-grained (``''``, ``cg``): their
      inner loops become stages with buffers between them;
    - ``src_tile_share_max``: the largest tile factor as a share of its loop's trips;
    - ``src_tile_work_log2``: log2 of the largest tile factor times its loop's inner iterations (the
      work one tile holds on chip).
    """
    if source is None:
        return dict.fromkeys(SOURCE_COLUMNS, math.nan)
    loops, design = source.loops, _design(pragmas, source)
    knobbed = {source.knobs[n] for n in source.knobs}
    parallel = {source.knobs[n] for n in source.knobs if knob_kind(n) == "PARA"}
    inner = [2.0**loop.inner_log2 for loop in loops]
    latency, hardware = _latency(source, design), _hardware(source, design)
    top = [i for i, loop in enumerate(loops) if loop.parent < 0]
    pressure: Counter[str] = Counter()
    for i, loop in enumerate(loops):
        pressure.update({name: design.copies[i] * n for name, n in loop.accesses.items()})
    return {
        "src_loops": float(len(loops)),
        "src_max_depth": float(source.max_depth),
        "src_array_elements_log2": log2_count(source.array_elements),
        "src_body_ops": float(source.body_ops),
        "src_work_log2": log2_count(sum(max(loops[i].trip, 1) * inner[i] for i in top)),
        "src_unknown_trips": float(sum(loops[i].trip == 0 for i in knobbed)),
        "src_unrolled_work_log2": log2_count(sum(design.unroll[i] * inner[i] for i in parallel)),
        "src_copies_log2": log2_count(max(design.copies, default=1.0)),
        "src_hardware_log2": log2_count(sum(hardware[i] for i in top)),
        "src_latency_log2": log2_count(sum(latency[i] for i in top)),
        "src_port_pressure_log2": log2_count(max(pressure.values(), default=0.0)),
        "src_reduction_unroll_log2": _largest(design.unroll, [loop.reduction for loop in loops]),
        "src_dependence_unroll_log2": _largest(design.unroll, [loop.distance > 0 for loop in loops]),
        "src_flattened_inner_log2": max(
            (loop.inner_log2 for loop, mode in zip(loops, design.modes) if mode in FINE_PIPELINES),
            default=0.0,
        ),
        "src_coarse_pipelines": float(
            sum(
                mode not in ("off", *FINE_PIPELINES) and bool(loop.children)
                for loop, mode in zip(loops, design.modes)
            )
        ),
        "src_tile_share_max": max(
            (min(t / loop.trip, 1.0) for loop, t in zip(loops, design.tiles) if loop.trip > 0), default=0.0
        ),
        "src_tile_work_log2": _largest(
            [t * w for t, w in zip(design.tiles, inner)], [t > 1 for t in design.tiles]
        ),
    }


def log2_count(value: float) -> float:
    """log2 of a count, trip or factor; 0 for anything below one."""
    return math.log2(max(value, 1.0))


def _largest(values: list[float], where: list[bool]) -> float:
    """log2 of the largest value where ``where`` holds (0: nowhere)."""
    return log2_count(max((v for v, w in zip(values, where) if w), default=1.0))


def _design(pragmas: Mapping[str, object], source: KernelSource) -> _Design:
    """Each loop's knobs: a loop inside a fine-grained pipeline is unrolled completely, any other by
    its parallel factor (up to its trips)."""
    count = len(source.loops)
    factors, tiles, modes = [1.0] * count, [1.0] * count, ["off"] * count
    for name, at in source.knobs.items():
        kind, value = knob_kind(name), pragmas.get(name)
        if kind == "PIPE":
            modes[at] = pipeline_mode(value)
        else:
            (factors if kind == "PARA" else tiles)[at] = factor(value)
    unroll, copies, flattened = [1.0] * count, [1.0] * count, [False] * count
    for i, loop in enumerate(source.loops):  # parents come first
        parent = loop.parent
        flattened[i] = parent >= 0 and (flattened[parent] or modes[parent] in FINE_PIPELINES)
        trip = float(loop.trip) if loop.trip > 0 else math.inf
        unroll[i] = trip if flattened[i] and loop.trip > 0 else min(factors[i], trip)
        copies[i] = unroll[i] * (copies[parent] if parent >= 0 else 1.0)
    return _Design(unroll, copies, modes, tiles)


def _latency(source: KernelSource, design: _Design) -> list[float]:
    """Each loop's latency in iterations of its own statements, built from the innermost loops out:
    a loop runs ``trip / unroll`` steps (a loop carrying a dependence gains only up to its distance);
    each step runs its own statements (one plus their operations) and its inner loops in turn, unless
    pipelined: a fine-grained pipeline, or one on an innermost loop, starts a step every cycle (steps
    plus one step's latency); a coarse-grained one overlaps its inner loops as stages (steps times the
    slowest stage)."""
    loops, latency = source.loops, [0.0] * len(source.loops)
    for i in reversed(range(len(loops))):
        loop, mode = loops[i], design.modes[i]
        concurrent = min(design.unroll[i], loop.distance) if loop.distance else design.unroll[i]
        steps = math.ceil(max(loop.trip, 1) / concurrent)
        own = 1.0 + loop.ops
        inner = [latency[c] for c in loop.children]
        if mode == "off":
            latency[i] = steps * (own + sum(inner))
        elif mode in FINE_PIPELINES or not inner:
            latency[i] = steps + own + sum(inner)
        else:
            latency[i] = steps * max(own, *inner) + own + sum(inner)
    return latency


def _hardware(source: KernelSource, design: _Design) -> list[float]:
    """Each loop's instantiated operations and array accesses: its own statements' plus its inner
    loops', times its unroll."""
    loops, hardware = source.loops, [0.0] * len(source.loops)
    for i in reversed(range(len(loops))):
        own = loops[i].ops + sum(loops[i].accesses.values())
        hardware[i] = design.unroll[i] * (own + sum(hardware[c] for c in loops[i].children))
    return hardware
