"""Per-dtype tolerances, shared by the kernel tests.

Outputs are compared with a float64 reference computed from the same (rounded) inputs.
``rel`` bounds the relative L2 error of the whole tensor; ``atol`` bounds any single
element, as a fraction of the reference's largest magnitude.  The bf16
bounds are a few units of its 8-bit mantissa; fp16 has 11 bits; fp32 is limited by the
approximate exp the GPU uses."""

import torch

TOL = {
    torch.float64: {"rel": 1e-12, "atol": 1e-13},
    torch.float32: {"rel": 1e-5, "atol": 1e-6},
    torch.float16: {"rel": 2e-3, "atol": 1e-3},
    torch.bfloat16: {"rel": 1e-2, "atol": 8e-3},
}


def assert_close(out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype, what: str = "output") -> None:
    out = out.double().cpu()
    ref = ref.double().cpu()
    assert torch.isfinite(out).all(), f"{what}: non-finite values ({(~torch.isfinite(out)).sum()} of {out.numel()})"
    tol = TOL[dtype]
    err = (out - ref).abs()
    if out.numel():
        bound = tol["atol"] * max(1.0, float(ref.abs().max()))
        assert err.max() <= bound, f"{what}: max abs error {err.max():.3g} > {bound:.3g} ({dtype})"
        rel = torch.linalg.vector_norm(out - ref) / torch.linalg.vector_norm(ref).clamp_min(1e-30)
        assert rel <= tol["rel"], f"{what}: relative L2 error {rel:.3g} > {tol['rel']} ({dtype})"
