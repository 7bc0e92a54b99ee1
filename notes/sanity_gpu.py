import torch

from kernels.softmax import softmax

torch.manual_seed(0)
for shape in [(1024, 1024), (32, 127), (7, 50257), (4096, 4097), (3, 5, 300)]:
    for dt in (torch.bfloat16, torch.float32):
        x = torch.randn(shape, device="cuda", dtype=dt, requires_grad=True)
        for _ in range(3):
            y = softmax(x)
        ref = torch.softmax(x.double(), -1)
        assert (y.double() - ref).abs().max() < 2e-2, shape
        g = torch.randn_like(y)
        (dx,) = torch.autograd.grad(y, x, g)
        (rdx,) = torch.autograd.grad(ref, x, g.double()) if False else (None,)
        yd, gd = ref.detach(), g.double()
        rdx = yd * (gd - (yd * gd).sum(-1, keepdim=True))
        assert (dx.double() - rdx).abs().max() < 5e-2, ("bwd", shape)
print("sanity ok")
