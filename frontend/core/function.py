"""Custom differentiable ops (`flow.autograd.Function`): a forward run without recording and
one autograd node whose VJP calls the user's backward (see flow.core.autograd)."""

from __future__ import annotations

from flow.core.autograd import no_grad, record

__all__ = ["Function", "FunctionCtx"]


class FunctionCtx:
    """The `ctx` of a custom `Function`: saved tensors and flags for backward."""

    def __init__(self):
        self.saved_tensors: tuple = ()
        self.needs_input_grad: tuple = ()

    def save_for_backward(self, *tensors) -> None:
        self.saved_tensors = tensors

    def mark_non_differentiable(self, *tensors) -> None:
        self._non_diff = {id(t) for t in tensors}


class Function:
    """A custom differentiable op: subclass with static `forward(ctx, ...)` and `backward(ctx, g)`.

    `MyOp.apply(*args)` runs `forward` without recording, then records one node
    whose VJP calls `backward` (which returns one gradient per forward input).
    """

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError

    @classmethod
    def apply(cls, *args):
        from flow.core.tensor import Tensor

        ctx = FunctionCtx()
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a._requires_grad for a in args)
        with no_grad():
            out = cls.forward(ctx, *args)
        tensors = [a for a in args if isinstance(a, Tensor)]
        positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]

        def vjp(ct, *inputs, out=None):
            grads = cls.backward(ctx, ct)
            if not isinstance(grads, (tuple, list)):
                grads = (grads,)
            if len(grads) != len(args):
                from flow.core.errors import op_error

                raise op_error(f"{cls.__name__}.backward", f"returned {len(grads)} gradients, "
                               f"expected one per forward input ({len(args)})",
                               cls=RuntimeError)  # fmt: skip
            return tuple(grads[i] for i in positions)

        outs = out if isinstance(out, tuple) else (out,)
        for o in outs:
            if isinstance(o, Tensor) and id(o) not in getattr(ctx, "_non_diff", ()):
                record(cls.__name__, vjp, tensors, {}, o)
        return out
