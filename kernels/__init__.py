"""Kernel Lab Notes: Triton kernels with a functional API shaped like ``torch.nn.functional``.

Each operator works on CUDA tensors (CPU tensors under ``TRITON_INTERPRET=1``), trains
through autograd and is a ``torch.library`` custom op, so ``torch.compile`` can trace it.
"""

from kernels.softmax import softmax

__all__ = ["softmax"]
