"""Splitting a process's output into lines: whole lines, any chunking, and an endless line bounded."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kimitui.host.lines import MAX_LINE_BYTES, LineSplitter


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([b"a", b"bc", b"\n", b"\r\n", "é".encode(), b"x" * 50]), max_size=60),
       st.lists(st.integers(1, 40), min_size=1, max_size=20))
def test_any_chunking_gives_the_same_lines(parts: list[bytes], cuts: list[int]) -> None:
    data = b"".join(parts)
    expected = [line.removesuffix(b"\r").decode() for line in data.split(b"\n")]
    split = LineSplitter()
    got: list[str] = []
    pos, i = 0, 0
    while pos < len(data):
        n = cuts[i % len(cuts)]
        got += split.feed(data[pos:pos + n])
        pos, i = pos + n, i + 1
    got += split.flush()
    if expected and expected[-1] == "":
        expected.pop()  # a final newline ends the last line; no empty line after it
    assert got == expected


def test_an_endless_line_is_cut_and_memory_stays_bounded() -> None:
    split = LineSplitter()
    for _ in range(40):  # 40 MiB without a newline
        assert split.feed(b"9" * (1 << 20)) == []
        assert split.pending_bytes <= MAX_LINE_BYTES
    lines = split.feed(b"tail\nnext line\n")
    assert [len(lines[0]), lines[1]] == [MAX_LINE_BYTES, "next line"]
    # one chunk holding a whole overlong line is cut the same way
    assert [len(x) for x in LineSplitter().feed(b"z" * (3 << 20) + b"\nok\n")] == [MAX_LINE_BYTES, 2]
