"""`flow-fuse-elementwise`: group chains and trees of elementwise ops into `flow.fused`.

Each group becomes one `flow.fused` and, after `flow-lower-to-linalg`, one
`linalg.generic`: one loop nest that reads each input once and writes each
result once, instead of one loop nest and one intermediate tensor per op.
IREE fuses elementwise dispatches on its own, so run time barely changes;
the IR handed to IREE gets several times smaller, which makes lowering and
printing faster and, on long chains, IREE's compile too (a 5,000-op chain
compiles ~4x faster).

What is fused (per block, in program order):

* **Members** are the elementwise primitives (unary, binary, compare, select,
  cast) on local tensors. An op joins the group of an operand's producer when
  the producer's result has the same shape: reductions, matmuls, reshapes,
  transposes, slices, concats, gathers, convolutions and collectives are never
  members, so fusion stops at them and at every shape change.
* **Leaves** are `flow.full` (a scalar constant in the loop body),
  `flow.broadcast_in_dim` (an indexing map on its operand) and a `flow.cast`
  with several uses (one instruction per element, cheaper to redo than to
  write and re-read). They are copied into every group that reads them, never
  materialized by it; the original is erased when nothing else uses it. (A
  shared int32-to-int64 cast of gather indices was also what lavapipe got
  wrong: IREE kept it in workgroup memory, where lavapipe reads int64 back
  zero-extended.)
* **Multi-use producers stay unfused by default**: a group only takes in an
  operand's group when the operand is used by nothing else, so each group
  has one result (its last op) and multi-use values are materialized by
  their own group. With `multi-output=true`, a producer used outside its
  group instead becomes an extra result of the `flow.fused` (nothing is
  recomputed), which saves writing and re-reading that value. It is off in
  the pipeline because IREE 3.13 crashes on a multi-result `linalg.generic`
  whose result is transposed (`iree-global-opt-propagate-linalg-transpose`
  leaves the generic's yield with more values than outputs), and because
  IREE's own dispatch formation fuses multi-use elementwise producers with
  their consumers later, where it is safe: the gain is not worth the risk.
* **Convexity** (with `multi-output=true`): a group stops growing at an op
  that already used one of its values (e.g. `y = a * b; s = reduce(y);
  z = y / s`): joining `z` would need `s`, which needs the group's result —
  a cycle. `z` starts a new group. Fused ops sit where their last member
  was, so this rule also keeps every value defined before its uses.
* A group of one op with no leaves stays as it is (nothing to gain).

Global tensors (types with `#flow.dist`) are not fused: run the pass after
`flow-partition`, as the `flow-to-iree-input` pipeline does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, NoneAttr, TensorType
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass

from flow.dialect import ops as flow
from flow.dialect.fused import FusedOp, YieldOp


def _local_shape(value: SSAValue) -> tuple[int, ...] | None:
    ty = value.type
    if not isinstance(ty, TensorType) or ty.encoding != NoneAttr():
        return None
    return tuple(ty.get_shape())


def _is_member(op: Operation) -> bool:
    return isinstance(op, flow.ElementwiseOp) and _local_shape(op.results[0]) is not None


def _is_leaf(op: Operation, shared_casts: set[Operation]) -> bool:
    """Whether `op` is copied into the groups that read it; `shared_casts`: the casts that had
    several uses before any fusion of the block."""
    return (isinstance(op, (flow.FullOp, flow.BroadcastInDimOp)) or op in shared_casts) and (
        _local_shape(op.results[0]) is not None
    )


def _shared_casts(block: Block) -> set[Operation]:
    return {op for op in block.ops
            if isinstance(op, flow.CastOp) and len(list(op.results[0].uses)) > 1}  # fmt: skip


@dataclass(eq=False)
class _Group:
    shape: tuple[int, ...]
    members: list[Operation] = field(default_factory=list)
    early_users: set[Operation] = field(default_factory=set)
    """Ops outside the group, already visited, that use one of its values."""

    @property
    def root(self) -> Operation:
        """The member added last: the latest in the block, whose value the group computes."""
        return self.members[-1]


def _used_values(op: Operation) -> list[SSAValue]:
    """The values `op` uses, including those used inside its regions."""
    if not op.regions:
        return list(op.operands)
    return [v for inner in op.walk() for v in inner.operands]


def _group_block(block: Block, multi_output: bool, shared_casts: set[Operation]) -> list[_Group]:
    """Form the groups of `block` in one walk (see the module docstring)."""
    group_of: dict[Operation, _Group] = {}
    for op in block.ops:
        if _is_member(op) and op not in shared_casts:
            shape = _local_shape(op.results[0])
            candidates: list[_Group] = []
            for v in op.operands:
                g = group_of.get(v.owner)  # type: ignore[arg-type]
                if g is not None and g.shape == shape and g not in candidates:
                    candidates.append(g)
            merged: list[_Group] = []
            grew = True
            while grew:  # a group whose early users are all in merged groups may join too
                grew = False
                for g in candidates:
                    if g in merged or not all(group_of.get(u) in merged for u in g.early_users):
                        continue
                    if not multi_output and any(
                        u.operation is not op for u in g.root.results[0].uses
                    ):
                        continue
                    merged.append(g)
                    grew = True
            if merged:
                group = max(merged, key=lambda g: len(g.members))
                for g in merged:
                    if g is not group:
                        group.members.extend(g.members)
                        group_of.update(dict.fromkeys(g.members, group))
                group.early_users.clear()  # they were all members of the merged groups
            else:
                group = _Group(shape)  # type: ignore[arg-type]
            group.members.append(op)
            group_of[op] = group
        mine = group_of.get(op)
        for v in _used_values(op):
            g = group_of.get(v.owner)  # type: ignore[arg-type]
            if g is not None and g is not mine:
                g.early_users.add(op)
    return list({id(g): g for g in group_of.values()}.values())


def _fuse(
    group: _Group, order: dict[Operation, int], shared_casts: set[Operation]
) -> FusedOp | None:
    """Replace the group's ops by one `flow.fused` placed at its last member.

    `order` numbers the ops of the group's block as they were before any fusion.
    """
    members = sorted(group.members, key=order.__getitem__)
    block = members[0].parent
    inside = set(members)
    leaves: dict[Operation, None] = {}
    inputs: dict[SSAValue, None] = {}
    for m in members:
        for v in m.operands:
            owner = v.owner
            if owner in inside:
                continue
            if (
                isinstance(owner, Operation)
                and owner.parent is block
                and _is_leaf(owner, shared_casts)
                and not any(o.owner in inside for o in owner.operands)
            ):
                leaves[owner] = None
                inputs.update(dict.fromkeys(owner.operands))
            else:
                inputs[v] = None
    if len(members) + len(leaves) < 2:
        return None
    outputs = [m.results[0] for m in members
               if any(u.operation not in inside for u in m.results[0].uses)]  # fmt: skip
    if not outputs:
        return None
    root = members[-1]
    body = Block(arg_types=[v.type for v in inputs])
    fused = FusedOp(list(inputs), [v.type for v in outputs], Region(body))
    fused.location = root.location
    block.insert_op_before(fused, root)
    mapping: dict[SSAValue, SSAValue] = dict(zip(inputs, body.args))
    for v, arg in mapping.items():
        arg.name_hint = v.name_hint
    for leaf in sorted(leaves, key=order.__getitem__):
        clone = leaf.clone(value_mapper=mapping)
        body.add_op(clone)
        mapping[leaf.results[0]] = clone.results[0]
    for m in members:
        block.detach_op(m)
        m.operands = [mapping.get(v, v) for v in m.operands]
        body.add_op(m)
    body.add_op(YieldOp(*outputs))
    for old, new in zip(outputs, fused.res):
        new.name_hint = old.name_hint
        old.replace_uses_with_if(new, lambda use: use.operation.parent is not body)
    for leaf in leaves:
        if all(not r.uses for r in leaf.results):
            block.erase_op(leaf)
    return fused


def fuse_elementwise(module: ModuleOp, *, multi_output: bool = False) -> int:
    """Fuse every block of `module`; returns the number of `flow.fused` ops made."""
    blocks = [b for op in module.walk() if not isinstance(op, FusedOp)
              for r in op.regions for b in r.blocks]  # fmt: skip
    made = 0
    for block in blocks:
        order = {op: i for i, op in enumerate(block.ops)}
        shared_casts = _shared_casts(block)
        for group in _group_block(block, multi_output, shared_casts):
            if _fuse(group, order, shared_casts) is not None:
                made += 1
    return made


@dataclass(frozen=True)
class FuseElementwisePass(ModulePass):
    """Fuse chains and trees of elementwise flow ops into `flow.fused` (module docstring)."""

    name = "flow-fuse-elementwise"

    multi_output: bool = False
    """Also fuse producers used outside their group, as extra results (see above)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        fuse_elementwise(op, multi_output=self.multi_output)
