"""TextAssembler: whole characters only, stop strings held back and cut, never emitted."""

from __future__ import annotations

import pytest

from llama_cy.streaming import TextAssembler


def feed(pieces: list[bytes], stop: list[str]) -> tuple[list[str], TextAssembler]:
    a = TextAssembler(stop)
    out = [a.push(p) for p in pieces]
    out.append(a.finish())
    return out, a


def test_characters_split_over_pieces_come_out_whole() -> None:
    data = "héllo 🙂 ꙮ!".encode()
    out, _ = feed([data[i : i + 1] for i in range(len(data))], [])
    assert "".join(out) == "héllo 🙂 ꙮ!"
    assert all("\ufffd" not in o for o in out)


def test_a_dangling_partial_character_becomes_one_replacement() -> None:
    out, _ = feed([b"ok ", "🙂".encode()[:2]], [])
    assert "".join(out) == "ok \ufffd"


@pytest.mark.parametrize(
    ("pieces", "stop", "text"),
    [
        ([b"Hello", b" wor", b"ld! Bye"], ["world"], "Hello "),
        ([b"ab", b"c<", b"/", b"s>", b"x"], ["</s>"], "abc"),
        ([b"a<", b"/b"], ["</s>"], "a</b"),  # a near miss is released at the end
        ([b"one\n", b"\ntwo"], ["\n\n", "two"], "one"),  # the earliest match wins
        ([b"xyz"], [], "xyz"),
    ],
)
def test_stop_strings(pieces: list[bytes], stop: list[str], text: str) -> None:
    out, a = feed(pieces, stop)
    assert "".join(out) == text
    assert a.emitted == len(text)
    assert not any(s and s in o for o in out for s in stop)


def test_held_back_text_is_released_as_soon_as_it_cannot_be_a_stop() -> None:
    a = TextAssembler(["STOP"])
    assert a.push(b"go ST") == "go "
    assert a.pending == "ST"
    assert a.push(b"ART") == "START"
    assert a.push(b" STOP now") == " "
    assert a.stop == "STOP"
    assert a.push(b"more") == ""
    assert a.finish() == ""


@pytest.mark.parametrize(
    ("pieces", "n_indent", "want", "short"),
    [
        # a line after the first indented less than n_indent ends the text before it,
        # its newline and blanks kept (llama-server erases from its first other character)
        (["def f():", "\n    ret", "urn 1\n", "x = 2"], 4, "def f():\n    return 1\n", True),
        (["def f():", "\n    return 1\n  ", "  y\n"], 4, "def f():\n    return 1\n    y", False),
        (["a\n", "\n", "b"], 2, "a\n", True),  # an empty line is short too, as there
        (["x\n  y"], 2, "x\n  y", False),  # the first line is not checked
        (["a\n", "b"], 0, "a\nb", False),
    ],
)
def test_n_indent(pieces: list[str], n_indent: int, want: str, short: bool) -> None:
    asm = TextAssembler((), n_indent)
    out = "".join(asm.push(p.encode()) for p in pieces)
    assert out + asm.finish() == want
    assert asm.short_line is short


def test_n_indent_with_stop_strings() -> None:
    """The held newline and blanks go on to the stop-string matching."""
    asm = TextAssembler(["\n  END"], 2)
    out = "".join(asm.push(p.encode()) for p in ["a", "\n  b", "\n  EN", "D more"])
    assert out + asm.finish() == "a\n  b"
    assert asm.stop == "\n  END"
