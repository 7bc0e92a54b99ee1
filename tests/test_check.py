"""The build's check that measured numbers come only from data helpers."""

from publish.check import stray_numbers
from publish.numbers import Num, Source, render


def test_numbers_from_helpers_pass() -> None:
    num = render(Num(68.5, "us", (Source("run-1", "fwd/bf16/1x1/cold", "triton", "median of 30 samples"),)))
    assert stray_numbers(f"Ours took {num}, on a 16384×4096 bf16 case.") == []


def test_typed_numbers_are_found_with_context() -> None:
    for text in (
        "Liger took 68.5 µs.",
        "it reached 4,012 GB/s",
        "a 2.31× speedup",
        "at 97% of copy",
        "about 3x faster",
        "ran at 1980 MHz",
    ):
        found = stray_numbers(text)
        assert len(found) == 1 and found[0] in text, text


def test_shapes_dtypes_links_and_definitions_are_not_measurements() -> None:
    text = (
        "fwd/bf16/32x127/warm and 8192×32768 in fp32; [run](sources.md#run-softmax-20261129T091353Z-38f9bf8); "
        "a 95% interval; above 1.00× we are faster; "
        '<a href="x" title="median 68.5 µs">link</a>'
    )
    assert stray_numbers(text) == []
