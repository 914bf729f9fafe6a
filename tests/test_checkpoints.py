"""Context checkpoints (llama-server's ``--ctx-checkpoints``): where the cache cannot be
cut back to a prefix it shares with a new prompt (Gemma 3's SWA layers with
``swa_full=False``, llama-server's default; recurrent and hybrid models), the latest
checkpoint that holds the prefix is restored and only what follows it is decoded.

The counts asserted are native llama-server's (b11434) in the same case, measured with
``-c 2048 -np 1 -ub 64``: a second turn that extends the first decodes only its new
tokens (Gemma 5 of 981, the tiny recurrent and hybrid models 7 of 312); a second prompt
that drops the first reply restores the checkpoint taken 4 tokens before the first
prompt's end (Gemma, after a 300-token reply: 9 of 975; recurrent and hybrid, after an
80-token reply: 10 of 306).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from serving import Server
from tiny_model import write_tiny_recurrent

import llama_cy as lc
from llama_cy.checkpoints import Checkpoints, user_starts
from llama_cy.generation import common_prefix

STORY = " ".join(f"Day {i}: the fox ran to the river and back." for i in range(70))
MORE = " Then it slept."


def complete(llm: lc.Llama, prompt: list[int], n: int) -> tuple[str, list[int], int]:
    """The greedy reply, its tokens, and how many prompt tokens were decoded for it."""
    chunks = list(llm.stream(prompt, max_tokens=n, temperature=0))
    timings = chunks[-1].timings
    assert timings is not None
    return "".join(c.text for c in chunks), [t for c in chunks for t in c.tokens], timings.prompt_n


def two_turns(llm: lc.Llama, first: list[int], n_reply: int, extend: bool) -> tuple[int, str]:
    """The second turn's decoded tokens and reply: after the first prompt's reply
    (``extend``) or in its place."""
    llm.reset()
    _, reply, n1 = complete(llm, first, n_reply)
    assert n1 == len(first)
    cached = list(llm.sequence.cache)
    more = llm.tokenize(MORE.encode(), add_bos=False)
    second = first + reply + more if extend else first + more
    text2, _, n2 = complete(llm, second, 6)
    if extend:  # only what the cache does not hold
        assert n2 == len(second) - common_prefix(cached, second)
    llm.reset()
    assert complete(llm, second, 6)[0] == text2  # as decoded from nothing
    return n2, text2


def test_gemma_second_turn(gemma_path: Path) -> None:
    kw: dict[str, Any] = {"n_ctx": 2048, "n_ubatch": 64, "n_threads": 2, "swa_full": False}
    llm = lc.Llama(gemma_path, **kw)
    assert llm.ctx.swa_full is False
    first = llm.tokenize(STORY.encode())
    assert len(first) == 971
    assert two_turns(llm, first, 6, extend=True)[0] == 5
    n2, text = two_turns(llm, first, 300, extend=False)
    assert n2 == 9  # len(first) + 4 - 966: the checkpoint at 967 tokens, up to its pos_max
    # the last prompt's (975 tokens): 4 + n_ubatch and 4 tokens before its end
    assert [c.n_tokens for c in llm.sequence.checkpoints.items] == [907, 971]
    llm.close()
    # Without checkpoints the whole prompt is decoded again: the window no longer holds
    # the prefix, so a plain cut would attend to nothing there.
    off = lc.Llama(gemma_path, ctx_checkpoints=0, **kw)
    assert two_turns(off, first, 300, extend=False) == (975, text)
    off.close()


def test_gemma_second_turn_with_a_draft_model(gemma_path: Path) -> None:
    """With a draft model (Gemma drafting for itself: SWA layers too), a checkpoint holds
    the draft context's state as well (llama-server's update_dft/load_dft), so the
    second turn decodes what it decodes without one; without that, the draft's window
    could not be cut back either and the whole prompt went again."""
    kw: dict[str, Any] = {"n_ctx": 2048, "n_ubatch": 64, "n_threads": 2, "swa_full": False}
    llm = lc.Llama(gemma_path, draft_model=gemma_path, draft_max=4, **kw)
    assert llm._spec is not None
    draft = llm._spec.draft_context
    assert draft is not None
    assert draft.swa_full is False  # as the target's
    first = llm.tokenize(STORY.encode())
    n2, _ = two_turns(llm, first, 300, extend=False)
    assert n2 == 9
    items = llm.sequence.checkpoints.items
    assert items
    assert all(c.draft for c in items)
    llm.close()


@pytest.mark.parametrize("hybrid", [False, True], ids=["recurrent", "hybrid"])
def test_recurrent_second_turn(tmp_path: Path, hybrid: bool) -> None:
    path = str(write_tiny_recurrent(tmp_path / "r.gguf", hybrid=hybrid))
    kw: dict[str, Any] = {"n_ctx": 2048, "n_ubatch": 64, "n_threads": 2}
    llm = lc.Llama(path, **kw)
    assert llm.sequence.checkpoints.enabled
    first = llm.tokenize(STORY.encode())[:300]
    assert two_turns(llm, first, 6, extend=True)[0] == 7
    n2, text = two_turns(llm, first, 80, extend=False)
    assert n2 == 10  # the checkpoint 4 tokens before the first prompt's end
    llm.close()
    # A recurrent state cannot be cut back at all: without checkpoints, all again.
    off = lc.Llama(path, ctx_checkpoints=0, **kw)
    assert two_turns(off, first, 80, extend=False) == (306, text)
    off.close()


def test_checkpoint_policy(tmp_path: Path) -> None:
    path = write_tiny_recurrent(tmp_path / "r.gguf")
    model = lc.LlamaModel.load(path)
    ctx = lc.LlamaContext(model, n_ctx=1024, n_batch=256, n_ubatch=64, n_threads=2)
    cps = Checkpoints(ctx, 0, n_max=3, min_step=100)
    # A 500-token prompt breaks 68 and 4 tokens before its end.
    assert cps.chunk_end(0, 256, 500) == 256
    assert cps.chunk_end(256, 500, 500) == 432
    assert cps.chunk_end(432, 500, 500) == 496
    assert cps.chunk_end(496, 500, 500) == 500
    # Nothing decoded yet: no checkpoint.
    cps.before_chunk(0, 256, 300, job=1)
    assert cps.items == []
    batch = lc.LlamaBatch(256)
    tokens = model.tokenize(STORY)[:200]
    batch.add_sequence(tokens[:100], 0, 0)
    ctx.decode(batch)
    cps.before_chunk(100, 150, 400, job=1)  # far from the end: none
    assert cps.items == []
    for start in (100, 110, 120, 130):
        cps.before_chunk(start, start + 4, start + 8, job=2)
    # at most 3: the oldest goes first
    assert [c.n_tokens for c in cps.items] == [110, 120, 130]
    # A full list first loses those within min_step of an earlier one, unless the job
    # adding one made them.
    for start in (140, 150):
        cps.before_chunk(start, start + 4, start + 8, job=3)
    assert [c.n_tokens for c in cps.items] == [110, 140, 150]
    # One at the same point is superseded.
    cps.before_chunk(150, 154, 158, job=4)
    assert [(c.n_tokens, c.job) for c in cps.items][-1] == (150, 4)
    # Extending the cache needs no checkpoint; cutting a recurrent state back does.
    assert cps.usable_prefix(100, 120) == 100
    # A corrupt checkpoint is dropped, with a warning, and the prompt decoded again.
    cps.items.append(type(cps.items[-1])(41, 0, 40, b"\x00" * 16, 5))
    assert cps.usable_prefix(50, 120) == 0
    assert cps.items == []
    ctx.close()
    model.close()


CHAT_TEMPLATE = Path(__file__).parent / "data" / "chat_template.jinja"


def test_a_chat_checkpoints_its_last_user_message(tmp_path: Path) -> None:
    """As llama-server: a chat's prompt is split at its user messages (the template's
    message delimiters) and checkpointed at the last one's start, so that a conversation
    whose last message is edited decodes from there, not from nothing."""
    # A BPE vocabulary: a delimiter tokenizes alike alone and after a newline (with
    # SentencePiece's leading space it would not, in llama-server too).
    path = str(write_tiny_recurrent(tmp_path / "r.gguf", vocab="llama-bpe"))
    llm = lc.Llama(
        path, n_ctx=4096, n_ubatch=64, n_threads=2, chat_template=CHAT_TEMPLATE.read_text()
    )
    history: list[dict[str, str]] = []
    for i in range(3):
        history += [
            {"role": "user", "content": STORY[i * 200 : i * 200 + 300]},
            {"role": "assistant", "content": f"Noted, part {i}."},
        ]

    def turn(last: str) -> tuple[list[int], int, list[int], tuple[tuple[str, str], ...]]:
        job = llm.preparer.chat(
            [*history, {"role": "user", "content": last}], max_tokens=4, temperature=0.0
        )
        assert job.chat is not None
        out = lc.completion.join_chunks(llm.generate(job))
        assert out.timings is not None
        return out.tokens, out.timings.prompt_n, job.tokens, job.chat.message_delimiters

    _, decoded, prompt, delims = turn("What did the fox do?")
    assert ("user", "<start_of_turn>user") in delims  # found by llama.cpp's autoparser
    starts = user_starts(llm.model, prompt, delims)
    assert len(starts) == 4
    for s in starts:
        assert llm.model.detokenize(prompt[s : s + 8]).startswith("<start_of_turn>user")
    assert decoded == len(prompt)
    kept = [c.n_tokens for c in llm.sequence.checkpoints.items]
    assert starts[0] in kept  # the first (none before it), and the last
    assert starts[-1] in kept
    assert not set(starts[1:-1]) & set(kept)  # within min_step of the first
    # The last message edited: decoding restarts at its start.
    tokens2, decoded2, prompt2, _ = turn("Where did the fox go?")
    assert prompt2[: starts[-1]] == prompt[: starts[-1]]
    assert decoded2 == len(prompt2) - starts[-1]
    llm.reset()
    assert turn("Where did the fox go?")[0] == tokens2  # as decoded from nothing
    # Where the template gives no delimiters, nothing is found.
    assert user_starts(llm.model, prompt, ()) == ()
    llm.close()


def test_completion_takes_llama_servers_message_delimiters(tmp_path: Path) -> None:
    """/completion's ``message_delimiters`` (what llama-server's chat route passes on)
    checkpoint a raw prompt at its last user message too; bad ones are a 400."""
    path = write_tiny_recurrent(tmp_path / "r.gguf", vocab="llama-bpe")
    turns = "".join(
        f"<start_of_turn>user\n{STORY[i * 200 : i * 200 + 300]}<end_of_turn>\n"
        f"<start_of_turn>model\nNoted.<end_of_turn>\n"
        for i in range(3)
    )
    delims = [{"role": "user", "delimiter": "<start_of_turn>user"}]
    with Server(path, "-c", "4096", "-ub", "64", "-np", "1", "-t", "2") as server:

        def ask(last: str, **extra: Any) -> tuple[int, dict[str, Any]]:
            prompt = f"{turns}<start_of_turn>user\n{last}<end_of_turn>\n<start_of_turn>model\n"
            body = {"prompt": prompt, "n_predict": 2, "temperature": 0, **extra}
            status, _, out = server.request("POST", "/completion", body)
            return status, out

        status, first = ask("What did the fox do?", message_delimiters=delims)
        assert status == 200, first
        n = first["tokens_evaluated"]
        status, second = ask("Where did the fox go?", message_delimiters=delims)
        assert status == 200
        # decoded from the last user message's start: its own tokens and what follows
        tail = "<start_of_turn>user\nWhere did the fox go?<end_of_turn>\n<start_of_turn>model\n"
        status, _, toks = server.request("POST", "/tokenize", {"content": tail})
        assert second["timings"]["prompt_n"] == len(toks["tokens"])
        assert second["tokens_evaluated"] == n  # as long, in tokens
        # the checkpoint stays the slot's: a prompt without delimiters restores it too
        status, third = ask("Who saw the fox?")
        assert third["timings"]["prompt_n"] < 30
        status, err = ask("x", message_delimiters=[{"role": 1, "delimiter": "<"}])
        assert status == 400, err
