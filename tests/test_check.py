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


def test_commands_in_code_are_shown_as_written_and_prose_is_still_checked() -> None:
    command = "python -m bench run matmul --only 'fwd/fp16/4096x&#124;fwd/bf16/16x'"
    assert stray_numbers(f"- **Command** <code>{command}</code>") == []
    assert stray_numbers("run it with `--only fwd/fp16/4096x|x`") == []
    assert len(stray_numbers(f"<code>{command}</code> then it took 3.2 µs")) == 1


def test_every_pages_loss_reasons_are_prose_without_measured_numbers() -> None:
    """A reason is shown under a losses table only when a run loses that way: a measured number
    written into one would fail the build at the first such loss, long after it was written."""
    from publish.pages import study_pages

    specs = study_pages()
    reasons = [(s.study, key, text) for s in specs for key, (_, text) in s.reasons.items()]
    assert len(reasons) >= 10
    assert [(study, key) for study, key, text in reasons if stray_numbers(text)] == []
