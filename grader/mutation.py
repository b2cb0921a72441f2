"""Mutants of an assignment's reference: small wrong versions of the correct code. Pure.

Two steps, both on the syntax tree of ``hidden/reference.py``:

1. ``specialise``: the reference with no known mistake, as a submission would be written. The
   mistake switches (``mistakes``, ``self.mistakes`` and local aliases of them) are replaced by
   an empty set and every test on them is folded away, so that only the correct code is left;
   every definition loses its ``mistakes`` parameter and every call loses the argument that
   filled it (a helper shared by several entry points is specialised like them);
   the ``namespace`` and ``MISTAKES`` bookkeeping and the ``assignments`` imports go, as does
   every module-level definition the required names do not reach.
2. ``mutants``: every single-point change of that code by the operators below, each with the
   line it changed and the text before and after.

Operators: ``constant`` (ints ±1 and negated, which flips and shifts axes; floats negated,
doubled or made 1; ``"-inf"`` to ``"inf"``), ``sign`` (unary minus dropped, + and - swapped),
``operator`` (* and /, @ and *, comparisons, ``and``/``or``, ``in``/``not in``; ``not`` and
``~`` dropped, which inverts masks), ``drop-method`` (``x.f(...)`` to ``x``: a dropped
transpose, mask fill, triangle or cast), ``drop-call`` (``f(x, ...)`` to ``x``: a dropped
square root, softmax or broadcast), ``drop-operand`` (``a * s`` to ``a``: a dropped scale),
``swap-operands`` (non-commutative binary operators), ``swap-args`` (adjacent positional
arguments), ``move-transpose`` (``a @ b.transpose(...)`` to ``a.transpose(...) @ b``) and
``drop-statement`` (a ``raise``, or an update ``x = f(x)``, removed).
"""

from __future__ import annotations

import ast
import copy
import functools
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from grader.parsing import parse_python

OPERATORS = ("constant", "sign", "operator", "drop-method", "drop-call", "drop-operand",
             "swap-operands", "swap-args", "move-transpose", "drop-statement")
"""The mutation operators, by the name each mutant's id ends with."""

_MISTAKE_PARAMETER = "mistakes"
_SKIPPED_FIELDS = frozenset({"annotation", "returns", "type_comment", "decorator_list"})


class SpecialiseError(ValueError):
    """The reference does not have the shape the mutation search needs."""


@dataclass(frozen=True)
class Mutant:
    id: str
    """``m<index>-<operator>``, stable for one reference source."""
    operator: str
    line: int
    """Line of the change in the specialised source."""
    before: str
    after: str
    source: str
    """The whole mutated submission."""


def specialise(source: str, required_names: tuple[str, ...],
               constants: Mapping[str, Any]) -> str:
    """The reference without its mistake switches, as a standalone submission file.

    ``constants``: the reference module's globals (strings and sets used in the mistake tests,
    e.g. ``FINITE_FILL``), used to fold those tests.
    """
    tree = parse_python(source)
    stripper = _EmptyMistakes(_takers(tree), _imported_modules(tree))
    tree = ast.fix_missing_locations(stripper.visit(tree))
    tree = _Fold(constants).visit(tree)
    tree = _keep_reachable(tree, required_names)
    _fill_empty_bodies(tree)
    ast.fix_missing_locations(tree)
    result = ast.unparse(tree)
    missing = [name for name in required_names if name not in _defined(parse_python(result))]
    if missing:
        raise SpecialiseError(f"the reference does not define {', '.join(missing)}")
    return result + "\n"


def mutants(source: str) -> list[Mutant]:
    """Every single-point mutant of ``source``, duplicates and no-ops left out."""
    tree = parse_python(source)
    original = ast.unparse(tree)
    seen = {original}
    found: list[Mutant] = []
    for path, operator, build in _opportunities(tree):
        mutated = copy.deepcopy(tree)
        parent, field, index = _locate(mutated, path)
        node = getattr(parent, field) if index is None else getattr(parent, field)[index]
        replacement = build(node)
        before = _text(node)
        if index is None:
            setattr(parent, field, replacement)
        elif replacement is None:
            del getattr(parent, field)[index]
            if not getattr(parent, field):
                getattr(parent, field).append(ast.Pass())
        else:
            getattr(parent, field)[index] = replacement
        ast.fix_missing_locations(mutated)
        try:
            text = ast.unparse(mutated)
            with warnings.catch_warnings():  # "is" with a literal, and the like: still a mutant
                warnings.simplefilter("ignore", SyntaxWarning)
                compile(text, "<mutant>", "exec")
        except (SyntaxError, ValueError):
            continue
        if text in seen:
            continue
        seen.add(text)
        found.append(Mutant(
            id=f"m{len(found) + 1:03d}-{operator}", operator=operator,
            line=getattr(node, "lineno", 0), before=before,
            after="(removed)" if replacement is None else _text(replacement),
            source=text + "\n"))
    return found


# --- specialising -------------------------------------------------------------------------

def _is_switch(node: ast.AST, aliases: set[str]) -> bool:
    if isinstance(node, ast.Name):
        return node.id == _MISTAKE_PARAMETER or node.id in aliases
    return (isinstance(node, ast.Attribute) and node.attr == _MISTAKE_PARAMETER
            and isinstance(node.value, ast.Name) and node.value.id == "self")


def _empty() -> ast.expr:
    return ast.Call(func=ast.Name("frozenset", ast.Load()), args=[], keywords=[])


@dataclass(frozen=True)
class _Takers:
    """Where the definitions that take a ``mistakes`` parameter expect it, by how they are
    called: ``f(...)`` for functions and classes (``__init__``), ``x.f(...)`` for methods.
    A position is the index among the call's positional arguments, None when keyword-only."""
    by_name: dict[str, int | None]
    by_attribute: dict[str, int | None]


def _mistake_position(node: ast.FunctionDef | ast.AsyncFunctionDef, *, bound: bool) -> tuple[
        bool, int | None]:
    positional = [*node.args.posonlyargs, *node.args.args]
    names = [arg.arg for arg in positional]
    if _MISTAKE_PARAMETER in names:
        return True, names.index(_MISTAKE_PARAMETER) - (1 if bound else 0)
    return any(arg.arg == _MISTAKE_PARAMETER for arg in node.args.kwonlyargs), None


def _takers(tree: ast.Module) -> _Takers:
    by_name: dict[str, int | None] = {}
    by_attribute: dict[str, int | None] = {}
    methods: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        for statement in node.body:
            if not isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            methods.add(id(statement))
            static = any(isinstance(d, ast.Name) and d.id == "staticmethod"
                         for d in statement.decorator_list)
            takes, position = _mistake_position(statement, bound=not static)
            if takes:
                by_attribute[statement.name] = position
                if statement.name == "__init__":
                    by_name[node.name] = position
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and id(node) not in methods:
            takes, position = _mistake_position(node, bound=False)
            if takes:
                by_name[node.name] = position
    return _Takers(by_name, by_attribute)


class _EmptyMistakes(ast.NodeTransformer):
    """``mistakes``/``self.mistakes``/aliases become ``frozenset()``; the parameter, the
    assignments of the switch and the arguments that pass it go.

    A helper shared by several entry points takes the switches as an argument; since every
    definition loses its ``mistakes`` parameter, every call loses the argument that fills it
    (the keyword ``mistakes=``, or the positional argument at the parameter's place), so the
    helper is specialised to no mistake like its callers."""

    def __init__(self, takers: _Takers, modules: set[str]) -> None:
        self.aliases: set[str] = set()
        self.takers = takers
        self.modules = modules  # ``torch.softmax(...)`` is never a method of the reference

    def visit_Call(self, node: ast.Call) -> ast.AST:
        node.keywords = [keyword for keyword in node.keywords
                         if keyword.arg != _MISTAKE_PARAMETER]
        function = node.func
        position: int | None = None
        if isinstance(function, ast.Name):
            position = self.takers.by_name.get(function.id)
        elif isinstance(function, ast.Attribute) and not (
                isinstance(function.value, ast.Name) and function.value.id in self.modules):
            position = self.takers.by_attribute.get(function.attr)
        if position is not None and 0 <= position < len(node.args) and not any(
                isinstance(arg, ast.Starred) for arg in node.args[:position + 1]):
            del node.args[position]
        self.generic_visit(node)
        return node

    def visit_arguments(self, node: ast.arguments) -> ast.arguments:
        for names, defaults in ((node.kwonlyargs, node.kw_defaults), (node.args, None)):
            for position, arg in enumerate(names):
                if arg.arg == _MISTAKE_PARAMETER:
                    del names[position]
                    if defaults is not None:
                        del defaults[position]
                    elif node.defaults:
                        offset = position - (len(names) + 1 - len(node.defaults))
                        if offset >= 0:
                            del node.defaults[offset]
                    break
        return node

    def visit_Assign(self, node: ast.Assign) -> ast.AST | None:
        if len(node.targets) == 1 and _is_switch(node.value, self.aliases):
            target = node.targets[0]
            if isinstance(target, ast.Name):
                self.aliases.add(target.id)
                return None
            if _is_switch(target, self.aliases):
                return None
        self.generic_visit(node)
        return node

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return _empty() if _is_switch(node, self.aliases) and isinstance(node.ctx, ast.Load) \
            else node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if _is_switch(node, self.aliases) and isinstance(node.ctx, ast.Load):
            return _empty()
        self.generic_visit(node)
        return node


class _Fold(ast.NodeTransformer):
    """Evaluate the tests on the (now empty) switches and keep only the branch taken."""

    def __init__(self, constants: Mapping[str, Any]) -> None:
        self.names: dict[str, Any] = {
            name: value for name, value in constants.items()
            if isinstance(value, str | frozenset | set | int | float | bool)}
        self.names.update({"frozenset": frozenset, "set": set})

    def _value(self, node: ast.expr) -> tuple[bool, Any]:
        names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        calls = [n for n in ast.walk(node) if isinstance(n, ast.Call)]
        if "frozenset" not in names or not names <= set(self.names):
            return False, None
        if any(not (isinstance(c.func, ast.Name) and c.func.id in {"frozenset", "set"})
               for c in calls):
            return False, None
        try:
            value = eval(compile(ast.Expression(node), "<fold>", "eval"),
                         {"__builtins__": {}}, dict(self.names))
        except Exception:  # not foldable: keep the expression
            return False, None
        return isinstance(value, bool), value

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        """``-1`` is one constant, so that a constant mutation of it is one mutant."""
        self.generic_visit(node)
        if isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) and \
                isinstance(node.operand.value, int | float) and \
                not isinstance(node.operand.value, bool):
            return ast.copy_location(ast.Constant(-node.operand.value), node)
        if isinstance(node, ast.expr):
            folded, value = self._value(node)
            if folded:
                return ast.copy_location(ast.Constant(value), node)
        return node

    def generic_visit(self, node: ast.AST) -> ast.AST:
        if isinstance(node, ast.expr) and not isinstance(node, ast.Constant):
            folded, value = self._value(node)
            if folded:
                return ast.copy_location(ast.Constant(value), node)
        return super().generic_visit(node)

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        folded, value = self._value(node)
        if folded:
            return ast.copy_location(ast.Constant(value), node)
        self.generic_visit(node)
        neutral = isinstance(node.op, ast.And)
        values = []
        for item in node.values:
            if isinstance(item, ast.Constant) and isinstance(item.value, bool):
                if item.value is not neutral:
                    return ast.copy_location(ast.Constant(not neutral), node)
                continue
            values.append(item)
        if not values:
            return ast.copy_location(ast.Constant(neutral), node)
        if len(values) == 1:
            return values[0]
        node.values = values
        return node

    def visit_IfExp(self, node: ast.IfExp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.test, ast.Constant) and isinstance(node.test.value, bool):
            return node.body if node.test.value else node.orelse
        return node

    def visit_If(self, node: ast.If) -> Any:
        self.generic_visit(node)
        if isinstance(node.test, ast.Constant) and isinstance(node.test.value, bool):
            return node.body if node.test.value else (node.orelse or None)
        return node


def _fill_empty_bodies(tree: ast.Module) -> None:
    """``pass`` where every statement went (an ``__init__`` that only stored the switches)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.For
                      | ast.While | ast.With | ast.If | ast.Try | ast.ExceptHandler) \
                and not node.body:
            node.body = [ast.Pass()]


def _defined(tree: ast.Module) -> dict[str, ast.stmt]:
    names: dict[str, ast.stmt] = {}
    for statement in tree.body:
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names[statement.name] = statement
        elif isinstance(statement, ast.Assign):
            for target in statement.targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        names[name.id] = statement
        elif isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            names[statement.target.id] = statement
    return names


def _keep_reachable(tree: ast.Module, required: tuple[str, ...]) -> ast.Module:
    """Imports, the required names and what they use; no ``assignments`` imports."""
    defined = _defined(tree)
    keep: set[int] = set()
    todo = [name for name in required if name in defined]
    while todo:
        statement = defined[todo.pop()]
        if id(statement) in keep:
            continue
        keep.add(id(statement))
        for node in ast.walk(statement):
            if isinstance(node, ast.Name) and node.id in defined:
                todo.append(node.id)
    body: list[ast.stmt] = []
    for position, statement in enumerate(tree.body):
        if isinstance(statement, ast.ImportFrom) and (statement.module or "").startswith(
                "assignments"):
            continue
        if isinstance(statement, ast.Import | ast.ImportFrom) or id(statement) in keep:
            body.append(statement)
        elif position == 0 and isinstance(statement, ast.Expr):
            continue  # the reference's docstring talks about variants
    tree.body = body
    return tree


# --- mutating -----------------------------------------------------------------------------

Path = tuple[tuple[str, int | None], ...]
Build = Callable[[Any], Any]


def _locate(tree: ast.AST, path: Path) -> tuple[ast.AST, str, int | None]:
    node: Any = tree
    for field, index in path[:-1]:
        node = getattr(node, field) if index is None else getattr(node, field)[index]
    field, index = path[-1]
    return node, field, index


def _walk(node: ast.AST, path: Path = ()) -> Iterator[tuple[Path, ast.AST]]:
    for field, value in ast.iter_fields(node):
        if field in _SKIPPED_FIELDS:
            continue
        if isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, ast.AST):
                    yield (*path, (field, index)), item
                    yield from _walk(item, (*path, (field, index)))
        elif isinstance(value, ast.AST):
            yield (*path, (field, None)), value
            yield from _walk(value, (*path, (field, None)))


def _imported_modules(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.update(alias.asname or alias.name for alias in node.names)
    return names


def _docstring(node: ast.AST) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) \
        and isinstance(node.value.value, str)


_SWAPPED_OPERATORS: dict[type, type] = {
    ast.Mult: ast.Div, ast.Div: ast.Mult, ast.MatMult: ast.Mult, ast.Pow: ast.Mult,
    ast.FloorDiv: ast.Div, ast.Mod: ast.FloorDiv,
}
_SWAPPED_COMPARISONS: dict[type, type] = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
_NON_COMMUTATIVE = (ast.Sub, ast.Div, ast.MatMult, ast.Pow, ast.FloorDiv)
_SYMMETRIC_METHODS = frozenset({"transpose", "swapaxes", "swapdims"})


def _with(node: ast.AST, **changes: Any) -> ast.AST:
    copied = copy.deepcopy(node)
    for name, value in changes.items():
        setattr(copied, name, value)
    return copied


def _opportunities(tree: ast.Module) -> Iterator[tuple[Path, str, Build]]:
    modules = _imported_modules(tree)
    skip_docstrings = {id(statement.body[0]) for statement in ast.walk(tree)
                       if isinstance(statement, ast.FunctionDef | ast.ClassDef | ast.Module)
                       and statement.body and _docstring(statement.body[0])}
    inside_function: set[int] = set()
    for statement in ast.walk(tree):
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
            inside_function.update(id(node) for node in ast.walk(statement))
    negated = {id(node.operand) for node in ast.walk(tree)
               if isinstance(node, ast.UnaryOp) and _negative_number(node)}
    for path, node in _walk(tree):
        if id(node) in skip_docstrings or id(node) not in inside_function or id(node) in negated:
            continue
        yield from _node_opportunities(path, node, modules)


def _node_opportunities(path: Path, node: ast.AST,
                        modules: set[str]) -> Iterator[tuple[Path, str, Build]]:
    if isinstance(node, ast.Constant) and not isinstance(node.value, bool):
        value = node.value
        if isinstance(value, int | float):
            for other in _other_numbers(value):
                yield path, "constant", functools.partial(_constant, other)
        elif value in ("-inf", "inf"):
            yield path, "constant", lambda n: _with(n, value="inf" if n.value == "-inf"
                                                    else "-inf")
    elif _negative_number(node):
        value = -node.operand.value  # type: ignore[attr-defined]
        for other in dict.fromkeys(_other_numbers(value)):
            yield path, "constant", functools.partial(_constant, other)
    elif isinstance(node, ast.UnaryOp):
        kind = "sign" if isinstance(node.op, ast.USub) else "operator"
        if isinstance(node.op, ast.USub | ast.Not | ast.Invert):
            yield path, kind, lambda n: copy.deepcopy(n.operand)
    elif isinstance(node, ast.BinOp):
        if isinstance(node.op, ast.Add | ast.Sub):
            yield path, "sign", lambda n: _with(n, op=ast.Sub() if isinstance(n.op, ast.Add)
                                                else ast.Add())
        swapped = _SWAPPED_OPERATORS.get(type(node.op))
        if swapped is not None:
            yield path, "operator", functools.partial(_set_operator, swapped)
        yield path, "drop-operand", lambda n: copy.deepcopy(n.left)
        if not isinstance(node.op, ast.MatMult):
            yield path, "drop-operand", lambda n: copy.deepcopy(n.right)
        if isinstance(node.op, _NON_COMMUTATIVE):
            yield path, "swap-operands", lambda n: _with(n, left=copy.deepcopy(n.right),
                                                          right=copy.deepcopy(n.left))
        if isinstance(node.op, ast.MatMult) and _is_transpose(node.right):
            yield path, "move-transpose", _move_transpose
    elif isinstance(node, ast.Compare) and len(node.ops) == 1:
        swapped = _SWAPPED_COMPARISONS.get(type(node.ops[0]))
        if swapped is not None:
            yield path, "operator", functools.partial(_set_comparison, swapped)
    elif isinstance(node, ast.BoolOp):
        yield path, "operator", lambda n: _with(n, op=ast.Or() if isinstance(n.op, ast.And)
                                                else ast.And())
    elif isinstance(node, ast.Call):
        function = node.func
        if isinstance(function, ast.Attribute) and not (
                isinstance(function.value, ast.Name) and function.value.id in modules):
            yield path, "drop-method", lambda n: copy.deepcopy(n.func.value)
        elif node.args and not isinstance(node.args[0], ast.Starred):
            yield path, "drop-call", lambda n: copy.deepcopy(n.args[0])
        symmetric = isinstance(function, ast.Attribute) and function.attr in _SYMMETRIC_METHODS
        if not symmetric:
            for position in range(len(node.args) - 1):
                yield path, "swap-args", functools.partial(_swap_args, position)
    elif isinstance(node, ast.Raise) or _is_update(node):
        yield path, "drop-statement", _removed


def _removed(node: ast.AST) -> None:
    return None


def _is_update(node: ast.AST) -> bool:
    """``x = f(x)``: dropping it keeps the program running with the step skipped."""
    if not (isinstance(node, ast.Assign) and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)):
        return False
    target = node.targets[0].id
    return any(isinstance(name, ast.Name) and name.id == target for name in ast.walk(node.value))


def _negative_number(node: ast.AST) -> bool:
    return isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(
        node.operand, ast.Constant) and isinstance(node.operand.value, int | float) and \
        not isinstance(node.operand.value, bool)


def _other_numbers(value: float) -> list[float]:
    """Axes flip and shift (ints ±1, negated); scales and fills flip sign, double or vanish."""
    others = [value + 1, value - 1, -value] if isinstance(value, int) else \
        [-value, 2 * value, 1.0]
    return [other for other in dict.fromkeys(others) if other != value]


def _is_transpose(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
        and node.func.attr in _SYMMETRIC_METHODS | {"t", "permute"}


def _move_transpose(node: ast.BinOp) -> ast.BinOp:
    right: Any = node.right
    moved = copy.deepcopy(right)
    moved.func.value = copy.deepcopy(node.left)
    return ast.BinOp(left=moved, op=ast.MatMult(), right=copy.deepcopy(right.func.value))


def _constant(value: float, node: ast.AST) -> ast.Constant:
    return ast.Constant(value)


def _set_operator(operator: type, node: ast.AST) -> ast.AST:
    return _with(node, op=operator())


def _set_comparison(operator: type, node: ast.AST) -> ast.AST:
    return _with(node, ops=[operator()])


def _swap_args(position: int, node: ast.Call) -> ast.Call:
    copied = copy.deepcopy(node)
    args = copied.args
    args[position], args[position + 1] = args[position + 1], args[position]
    return copied


def _text(node: Any) -> str:
    try:
        text = ast.unparse(node)
    except Exception:  # a fragment without a form
        return type(node).__name__
    text = " ".join(text.split())
    return text if len(text) <= 90 else text[:87] + "..."
