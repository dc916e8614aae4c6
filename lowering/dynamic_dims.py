"""Dynamic dims from static programs: one compiled program for every size of a dim.

    dyn = generalize(low_a, low_b)     # two lowered programs of one function, two sizes
    dyn.module                         # low_a with the sizes that differ made dynamic
    dyn.matches(low_c)                 # is low_c this program at its own sizes?

Two traces of one function at different sizes of some argument dims (a batch size, a
sequence length) lower to programs (IREE input: linalg, tensor, arith) that differ only in
integers wherever the function depends on those sizes through its shapes. `generalize`
walks both modules in step, reads every integer in them as a *slot* (a dim of a type, an
entry of a static offset / size array, an integer constant or an integral float one, such
as a mean's divisor) and everything else as their *structure*. Each argument dim that differs is a symbol `s`; every other slot that differs
is fit as `k*s + c` of one symbol. The generalized module is the first one with those slots
made dynamic: `?` dims, sizes and constants computed at entry from `tensor.dim` of the
arguments. A difference in structure (another op, a float constant, a different
attribute) or a slot that fits no symbol refuses with `NotDynamic`, naming it.

Two sizes fix `k` and `c` but cannot show that the function is linear in the size, nor
that its Python code takes the same branches at every size. So a caller traces each new
size and uses the dynamic program only where `matches` holds: the new program's structure
is the same, and every slot is the first program's or its form at the new sizes. What the
dynamic program computes at such a size is then what that size's static program would.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.dialects import arith, tensor
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    FloatAttr,
    FunctionType,
    IndexType,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    TensorType,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

__all__ = ["Dynamic", "Form", "NotDynamic", "generalize"]


class NotDynamic(Exception):
    """Two programs that are not one program at two sizes (the message says where)."""


@dataclass(frozen=True)
class Form:
    """A slot's value `k * size(symbol) + c`."""

    symbol: int
    k: int
    c: int

    def at(self, sizes: list[int]) -> int:
        return self.k * sizes[self.symbol] + self.c


# Ops with static integer lists whose entries may be dynamic operands instead: the property
# and the operand segment that holds its dynamic entries, in order.
_DYNAMIC_LISTS = {
    "tensor.extract_slice": {"static_offsets": 1, "static_sizes": 2, "static_strides": 3},
    "tensor.insert_slice": {"static_offsets": 2, "static_sizes": 3, "static_strides": 4},
    "tensor.pad": {"static_low": 1, "static_high": 2},
    "tensor.expand_shape": {"static_output_shape": 1},
}


@dataclass
class _Flat:
    """A module read as structure (compared for equality) and integer slots."""

    structure: list = field(default_factory=list)
    slots: list[int] = field(default_factory=list)
    refs: list[tuple] = field(default_factory=list)  # per slot: (op number, where...)
    ops: list[Operation] = field(default_factory=list)
    main: int = -1  # the op number of the function with a body (the program)


def _flatten(module: ModuleOp) -> _Flat:
    flat = _Flat()
    numbers: dict[SSAValue, int] = {}

    def slot(value: int, ref: tuple) -> None:
        flat.slots.append(value)
        flat.refs.append(ref)

    def type_(t: Attribute, ref: tuple) -> None:
        if isinstance(t, TensorType):
            flat.structure.append(("tensor", len(t.shape), t.element_type, t.encoding))
            for d, n in enumerate(t.get_shape()):
                slot(n, (*ref, d))
        elif isinstance(t, FunctionType):
            flat.structure.append(("function", len(t.inputs), len(t.outputs)))
            for side, types in (("in", t.inputs), ("out", t.outputs)):
                for i, x in enumerate(types.data):
                    type_(x, (*ref, side, i))
        else:
            flat.structure.append(t)

    def attr(a: Attribute, ref: tuple) -> None:
        if isinstance(a, IntegerAttr) and not isinstance(a.type, IntegerType | IndexType):
            flat.structure.append(a)
        elif isinstance(a, IntegerAttr):
            flat.structure.append(("int", a.type))
            slot(a.value.data, ref)
        elif isinstance(a, FloatAttr) and float(a.value.data).is_integer() \
                and abs(a.value.data) < 2**53:  # a count (a mean's divisor) is a slot too
            flat.structure.append(("float", a.type))
            slot(int(a.value.data), ref)
        elif isinstance(a, DenseArrayBase) and isinstance(a.elt_type, IntegerType):
            values = a.get_values()
            flat.structure.append(("array", a.elt_type, len(values)))
            for i, v in enumerate(values):
                slot(v, (*ref, i))
        elif isinstance(a, ArrayAttr):
            flat.structure.append(("list", len(a.data)))
            for i, x in enumerate(a.data):
                attr(x, (*ref, i))
        elif isinstance(a, DictionaryAttr):
            flat.structure.append(("dict", tuple(sorted(a.data))))
            for name in sorted(a.data):
                attr(a.data[name], (*ref, name))
        elif isinstance(a, TensorType | FunctionType):
            type_(a, ref)
        else:
            flat.structure.append(a)

    def op_(op: Operation) -> None:
        n = len(flat.ops)
        flat.ops.append(op)
        if op.name == "func.func" and op.regions[0].blocks and flat.main < 0:
            flat.main = n
        flat.structure.append((op.name, tuple(numbers.get(o, -1) for o in op.operands),
                               len(op.results), len(op.regions), tuple(sorted(op.properties)),
                               tuple(sorted(op.attributes))))  # fmt: skip
        for i, r in enumerate(op.results):
            type_(r.type, (n, "result", i))
        for where, attrs in (("prop", op.properties), ("attr", op.attributes)):
            for name in sorted(attrs):
                attr(attrs[name], (n, where, name))
        for ri, region in enumerate(op.regions):
            flat.structure.append(("region", len(region.blocks)))
            for bi, block in enumerate(region.blocks):
                flat.structure.append(("block", len(block.args)))
                for ai, arg in enumerate(block.args):
                    numbers[arg] = len(numbers)
                    type_(arg.type, (n, "arg", ri, bi, ai))
                for inner in block.ops:
                    op_(inner)
        for r in op.results:
            numbers[r] = len(numbers)

    op_(module)
    return flat


def _where(flat: _Flat, i: int) -> str:
    ref = flat.refs[i]
    op = flat.ops[ref[0]]
    return f"{op.name} (op {ref[0]}), {' '.join(map(str, ref[1:]))}"


def _first_difference(a: _Flat, b: _Flat) -> str:
    for n, (x, y) in enumerate(zip(a.structure, b.structure)):
        if x != y:
            return f"{x} vs {y}"
    return f"{len(a.structure)} vs {len(b.structure)} entries"


@dataclass
class Dynamic:
    """A program made dynamic in some dims (see the module docstring)."""

    module: ModuleOp  # the generalized program
    sources: list[tuple[int, int]]  # per symbol: (argument, dim) it is read from
    forms: dict[int, Form]  # slot index -> its form
    _flat: _Flat  # of the first static program

    @property
    def dynamic_args(self) -> dict[int, tuple[int, ...]]:
        """The argument dims that are dynamic: argument index -> dims."""
        out: dict[int, list[int]] = {}
        for i in self.forms:
            ref = self._flat.refs[i]
            if ref[0] == self._flat.main and ref[1] == "arg" and ref[2:4] == (0, 0):
                out.setdefault(ref[4], []).append(ref[5])
        return {a: tuple(sorted(ds)) for a, ds in sorted(out.items())}

    def matches(self, module: ModuleOp) -> bool:
        """Whether the static `module` is this program at its own sizes."""
        flat = _flatten(module)
        if flat.structure != self._flat.structure:
            return False
        sizes = [_arg_dim(flat, arg, dim) for arg, dim in self.sources]
        for i, (mine, theirs) in enumerate(zip(self._flat.slots, flat.slots)):
            form = self.forms.get(i)
            if (mine if form is None else form.at(sizes)) != theirs:
                return False
        return True


def _arg_dim(flat: _Flat, arg: int, dim: int) -> int:
    return flat.ops[flat.main].regions[0].blocks[0].args[arg].type.get_shape()[dim]


def generalize(a: ModuleOp, b: ModuleOp) -> Dynamic:
    """The program of `a` and `b` (one function lowered at two sizes) with every size that
    differs made dynamic; raises `NotDynamic` when they are not one program."""
    fa, fb = _flatten(a), _flatten(b)
    if fa.structure != fb.structure:
        raise NotDynamic(f"the programs differ in more than sizes: {_first_difference(fa, fb)}")
    if fa.main < 0:
        raise NotDynamic("no function with a body")
    pairs: dict[tuple[int, int], int] = {}  # (size in a, size in b) -> symbol
    sources: list[tuple[int, int]] = []
    for i, ref in enumerate(fa.refs):
        x, y = fa.slots[i], fb.slots[i]
        if x != y and ref[0] == fa.main and ref[1] == "arg" and (x, y) not in pairs:
            pairs[(x, y)] = len(sources)
            sources.append((ref[4], ref[5]))
    if not sources:
        raise NotDynamic("no argument dim differs")
    forms: dict[int, Form] = {}
    for i, (x, y) in enumerate(zip(fa.slots, fb.slots)):
        if x == y:
            continue
        form = _fit(x, y, pairs)
        if form is None:
            raise NotDynamic(f"{_where(fa, i)}: {x} vs {y} is no multiple of a dynamic "
                             "argument dim plus a constant")  # fmt: skip
        forms[i] = form
    module = a.clone()
    _make_dynamic(module, fa, forms, sources)
    module.verify()
    return Dynamic(module, sources, forms, fa)


def _fit(x: int, y: int, pairs: dict[tuple[int, int], int]) -> Form | None:
    """`x` (in a) and `y` (in b) as `k * s + c` of one symbol, the simplest form found."""
    best = None
    for (p, q), symbol in pairs.items():
        if (x - y) % (p - q) == 0:
            k = (x - y) // (p - q)
            form = Form(symbol, k, x - k * p)
            if best is None or (abs(form.k) + abs(form.c)) < (abs(best.k) + abs(best.c)):
                best = form
    return best


def _make_dynamic(module: ModuleOp, fa: _Flat, forms: dict[int, Form],
                  sources: list[tuple[int, int]]) -> None:  # fmt: skip
    """Rewrite the clone `module` of `fa`'s module: the slots in `forms` become dynamic."""
    ops = _flatten(module).ops  # the clone's ops, numbered as `fa`'s
    by_op: dict[int, list[tuple[tuple, Form]]] = {}
    for i, form in forms.items():
        ref = fa.refs[i]
        by_op.setdefault(ref[0], []).append((ref[1:], form))
    entry = ops[fa.main].regions[0].blocks[0]
    values = _Values(entry, sources)
    # Types first: every `?` dim, of results, block arguments and function types.
    for n, slots in by_op.items():
        op = ops[n]
        for where, _ in slots:
            if where[0] == "result":
                _retype(op.results[where[1]], where[2])
            elif where[0] == "arg":
                _retype(op.regions[where[1]].blocks[where[2]].args[where[3]], where[4])
    for n, slots in by_op.items():
        op = ops[n]
        props = [(where, form) for where, form in slots if where[0] in ("prop", "attr")]
        if not props:
            continue
        if op.name == "func.func":
            if any(w[1] != "function_type" for w, _ in props):
                raise NotDynamic(f"{op.name}: a size in {props[0][0][1]}")
            continue  # retyped below, from its arguments and results
        if op.name == "arith.constant" and len(props) == 1 and props[0][0][1:] == ("value",):
            value = values.form(props[0][1])
            ty = op.results[0].type
            if isinstance(ty, IntegerType):
                value = values.insert(arith.IndexCastOp(value, ty)).result
            elif not isinstance(ty, IndexType):  # a float count: exact, as the constant was
                wide = values.insert(arith.IndexCastOp(value, i64)).result
                value = values.insert(arith.SIToFPOp(wide, ty)).result
            op.results[0].replace_all_uses_with(value)
            op.detach()
            op.erase()
            continue
        lists = _DYNAMIC_LISTS.get(op.name)
        if lists is None or any(w[1] not in lists or len(w) != 3 for w, _ in props):
            raise NotDynamic(f"{op.name}: cannot make {props[0][0][1]} dynamic")
        _dynamic_lists(op, lists, {(w[1], w[2]): f for w, f in props}, values)
    for op in module.walk():
        if op.name == "tensor.empty":
            shape = op.results[0].type.get_shape()
            if op.operands or DYNAMIC_INDEX not in shape:
                continue
            n = ops.index(op)
            dims = {w[2]: f for w, f in by_op.get(n, ()) if w[0] == "result"}
            op.operands = [values.form(dims[d]) for d, s in enumerate(shape) if s == DYNAMIC_INDEX]
    for n in by_op:
        if ops[n].name == "func.func":
            _retype_function(ops[n], fa, by_op[n])


def _retype(value: SSAValue, dim: int) -> None:
    t = value.type
    shape = list(t.get_shape())
    shape[dim] = DYNAMIC_INDEX
    value._type = TensorType(t.element_type, shape, t.encoding)  # noqa: SLF001 (in place)


def _retype_function(f: Operation, fa: _Flat, slots: list) -> None:
    """`f`'s function type with the dims of `slots` dynamic (a body's: its arguments')."""
    ft = f.function_type
    sides = {"in": list(ft.inputs.data), "out": list(ft.outputs.data)}
    for where, _ in slots:
        if where[:2] == ("prop", "function_type"):
            side, i, d = where[2:]
            t = sides[side][i]
            shape = list(t.get_shape())
            shape[d] = DYNAMIC_INDEX
            sides[side][i] = TensorType(t.element_type, shape, t.encoding)
    if f.regions[0].blocks:
        sides["in"] = [a.type for a in f.regions[0].blocks[0].args]
    f.function_type = FunctionType.from_lists(sides["in"], sides["out"])


def _dynamic_lists(op: Operation, lists: dict[str, int], dynamic: dict[tuple, Form],
                   values: _Values) -> None:  # fmt: skip
    """`op`'s static lists with the entries of `dynamic` as operands instead."""
    if "operandSegmentSizes" in op.properties:
        sizes = list(op.properties["operandSegmentSizes"].get_values())
    else:  # one variadic segment, after the fixed operands
        sizes = [1, len(op.operands) - 1]
    groups, at = [], 0
    for size in sizes:
        groups.append(list(op.operands[at : at + size]))
        at += size
    for name, segment in lists.items():
        static = list(op.properties[name].get_values())
        if groups[segment] or DYNAMIC_INDEX in static:
            raise NotDynamic(f"{op.name}: {name} already has dynamic entries")
        for i in range(len(static)):
            form = dynamic.get((name, i))
            if form is not None:
                static[i] = DYNAMIC_INDEX
                groups[segment].append(values.form(form))
        op.properties[name] = DenseArrayBase.from_list(i64, static)
    op.operands = [v for group in groups for v in group]
    if "operandSegmentSizes" in op.properties:
        op.properties["operandSegmentSizes"] = DenseArrayBase.from_list(
            i32, [len(g) for g in groups])


class _Values:
    """The index values of forms, computed once each at the top of the function."""

    def __init__(self, entry: Block, sources: list[tuple[int, int]]):
        self.entry = entry
        self.sources = sources
        self._last: Operation | None = None
        self._consts: dict[int, SSAValue] = {}
        self._forms: dict[tuple, SSAValue] = {}

    def insert(self, op: Operation) -> Operation:
        where = (InsertPoint.after(self._last) if self._last is not None
                 else InsertPoint.at_start(self.entry))  # fmt: skip
        Rewriter.insert_op(op, where)
        self._last = op
        return op

    def const(self, value: int) -> SSAValue:
        if value not in self._consts:
            self._consts[value] = self.insert(arith.ConstantOp.from_int_and_width(
                value, IndexType())).result  # fmt: skip
        return self._consts[value]

    def form(self, form: Form) -> SSAValue:
        key = (form.symbol, form.k, form.c)
        if key not in self._forms:
            size = (form.symbol, 1, 0)
            if size not in self._forms:
                arg, dim = self.sources[form.symbol]
                op = tensor.DimOp(self.entry.args[arg], self.const(dim))
                self._forms[size] = self.insert(op).result
            value = self._forms[size]
            if form.k != 1:
                value = self.insert(arith.MuliOp(value, self.const(form.k))).result
            if form.c != 0:
                value = self.insert(arith.AddiOp(value, self.const(form.c))).result
            self._forms[key] = value
        return self._forms[key]
