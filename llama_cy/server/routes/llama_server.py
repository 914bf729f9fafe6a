"""llama-server's own endpoints and shapes: ``/completion`` (and its timings),
``/tokenize``, ``/detokenize``, ``/apply-template``, ``/props`` and ``/slots``."""

from __future__ import annotations

import asyncio
import os
import time
from functools import partial
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from llama_cy.errors import StateError
from llama_cy.generation import Job, KVSequence
from llama_cy.grammar import json_schema_to_grammar
from llama_cy.server import respond, schema, worker
from llama_cy.server.core import RouteSpec, Server
from llama_cy.server.inputs import input_prompts, lora_request
from llama_cy.server.lazy_grammar import lazy_grammar
from llama_cy.server.llama_server_shapes import LlamaServerShaper
from llama_cy.server.requests import (
    chat_messages,
    choice,
    n_choices,
    off_loop_if_heavy,
    read_body,
    render_kwargs,
    sampling,
    stop,
    with_generation_fields,
)
from llama_cy.server.schema import ApiError

__all__ = ["infill_tokens", "prepare_native", "routes", "slot_file"]


def routes(server: Server) -> list[RouteSpec]:
    get, post = ["GET"], ["POST"]

    async def completion(request: Request) -> Response:
        server.generating()
        body = await read_body(server, request, schema.NATIVE_COMPLETION, "prompt")

        def prepare() -> list[Job]:
            prompts = input_prompts(server, body["prompt"])
            return [prepare_native(server, tokens, body) for tokens in prompts]

        n = n_choices(server, body)
        jobs: list[tuple[Job, LlamaServerShaper]] = []
        # each prompt's n_cmpl results side by side, as there
        for job in await off_loop_if_heavy(body, body["prompt"], prepare):
            for j in range(n):
                one = choice(job, j)
                jobs.append((one, LlamaServerShaper(server, one, body, index=len(jobs))))
        # The answer is llama-server's own view: no __verbose copy of it.
        return await respond.run(server, request, jobs, body, done_marker=False, verbose_view=False)

    async def infill(request: Request) -> Response:
        server.generating()
        m = server.model
        missing = [
            name
            for name, t in (
                ("prefix", m.token_fim_pre),
                ("suffix", m.token_fim_suf),
                ("middle", m.token_fim_mid),
            )
            if t < 0
        ]
        if missing:
            raise ApiError(
                501,
                f"infill is not supported by this model: it has no FIM {', '.join(missing)} token",
                "not_supported_error",
            )
        body = await read_body(server, request, schema.INFILL, "input_prefix", "input_suffix")
        extra = body.get("input_extra", [])
        for chunk in extra:
            if not (isinstance(chunk, dict) and isinstance(chunk.get("text"), str)):
                raise ApiError(
                    400,
                    "input_extra items must be objects with a string 'text'",
                    param="input_extra",
                )
            if not isinstance(chunk.get("filename", ""), str):
                raise ApiError(400, "an input_extra filename must be a string", param="input_extra")
        engine = server.generating()
        tokens = infill_tokens(
            server,
            body["input_prefix"],
            body["input_suffix"],
            extra,
            body.get("prompt", ""),
            n_ctx=engine.n_ctx_slot,
        )
        job = await asyncio.to_thread(prepare_native, server, tokens, body)
        jobs = [(job, LlamaServerShaper(server, job, body))]
        return await respond.run(server, request, jobs, body, done_marker=False, verbose_view=False)

    async def tokenize(request: Request) -> Response:
        fields = {
            "content": (str,),
            "add_special": (bool,),
            "parse_special": (bool,),
            "with_pieces": (bool,),
        }
        body = schema.check(await worker.read_json(request), fields, ("content",))
        # A long text's tokens (and pieces) are built and encoded off the event loop.
        large = len(body["content"]) > _LARGE_TEXT
        answer = await worker.run(_tokenize, server, body) if large else _tokenize(server, body)
        return await worker.json_response(answer, large=large)

    async def detokenize(request: Request) -> Response:
        body = schema.check(await worker.read_json(request), {"tokens": (list,)}, ("tokens",))
        tokens = body["tokens"]
        if len(tokens) > _LARGE_TEXT:
            return JSONResponse({"content": await worker.run(detokenized, tokens)})
        return JSONResponse({"content": detokenized(tokens)})

    def detokenized(tokens: list[Any]) -> str:
        if not all(isinstance(t, int) and not isinstance(t, bool) for t in tokens):
            raise ApiError(400, "'tokens' must be an array of integers", param="tokens")
        if tokens:
            server.preparer.tokens(tokens)  # range check
        return server.model.detokenize(tokens, unparse_special=True)

    async def apply_template(request: Request) -> Response:
        body = schema.check(await worker.read_json(request), schema.CHAT, ("messages",))
        marked, _ = await asyncio.to_thread(
            server.preparer.split_media, chat_messages(server, body["messages"])
        )
        prompt, _ = await asyncio.to_thread(
            server.preparer.chat_prompt,
            marked,
            grammar=body.get("grammar"),
            **render_kwargs(body),
        )
        return JSONResponse({"prompt": prompt.prompt})

    async def props(request: Request) -> Response:
        if server.sleeping:  # what was shown last, as llama-server keeps it
            return JSONResponse({**server.props_cache, "is_sleeping": True})
        server.props_cache = server.props()
        return JSONResponse({**server.props_cache, "is_sleeping": False})

    async def slots(request: Request) -> Response:
        if not server.settings.slots_endpoint:
            raise ApiError(
                501,
                "this server has no /slots: it was started with --no-slots",
                "not_supported_error",
            )
        if server.engine is None:
            raise ApiError(
                501,
                "this server has no slots: it was started with --embeddings",
                "not_supported_error",
            )
        return JSONResponse(server.engine.slots_info())

    async def slot_action(request: Request) -> Response:
        engine = server.generating()
        try:
            slot_id = int(request.path_params["id_slot"])
        except ValueError:
            raise ApiError(400, "invalid slot id") from None
        action = request.query_params.get("action")
        if action not in ("save", "restore", "erase"):
            raise ApiError(400, "action must be save, restore or erase", param="action")
        folder = server.settings.slot_save_path
        if action != "erase" and folder is None:
            raise ApiError(
                501,
                "this server does not save slots: start it with --slot-save-path",
                "not_supported_error",
            )
        if action == "erase":
            work = _erase
        else:
            assert folder is not None
            body = schema.check(
                await worker.read_json(request), {"filename": (str,)}, ("filename",)
            )
            path = slot_file(folder, body["filename"])
            work = partial(_save if action == "save" else _restore, server, path)
        future = engine.on_slot(slot_id, work)
        out = await asyncio.wrap_future(future)
        return JSONResponse({"id_slot": slot_id, **out})

    async def lora_adapters(request: Request) -> Response:
        return JSONResponse(
            [
                {
                    "id": i,
                    "path": adapter.path,
                    "scale": server.lora_scales[i],
                    "task_name": adapter.metadata.get("adapter.lora.task_name", ""),
                    "prompt_prefix": adapter.metadata.get("adapter.lora.prompt_prefix", ""),
                }
                for i, adapter in enumerate(server.loras)
            ]
        )

    async def set_lora_adapters(request: Request) -> Response:
        body = await worker.read_json(request)
        if not isinstance(body, list):
            raise ApiError(400, "the request body must be an array of {id, scale}")
        # Like llama-server: adapters not named go to scale 0; running requests keep
        # the scales they started with.
        server.lora_scales = lora_request(body, len(server.loras), [0.0] * len(server.loras))
        return JSONResponse({"success": True})

    async def set_props(request: Request) -> Response:
        if not server.settings.props_endpoint:
            raise ApiError(
                501,
                "this server does not change properties: start it with --props",
                "not_supported_error",
            )
        body = await worker.read_json(request)
        if not isinstance(body, dict):
            raise ApiError(400, "the request body must be a JSON object")
        if body:  # as in llama-server, no property can be changed yet: say so
            raise ApiError(400, f"these properties cannot be changed: {', '.join(sorted(body))}")
        return JSONResponse({"success": True})

    return [
        ("/lora-adapters", lora_adapters, get, False),
        ("/lora-adapters", set_lora_adapters, post, False),
        ("/props", set_props, post, False),
        ("/completion", completion, post, False),
        ("/infill", infill, post, False),
        ("/slots/{id_slot}", slot_action, post, False),
        ("/completions", completion, post, False),
        ("/tokenize", tokenize, post, False),
        ("/detokenize", detokenize, post, False),
        ("/apply-template", apply_template, post, False),
        ("/props", props, get, False),
        ("/slots", slots, get, False),
    ]


def infill_tokens(
    server: Server,
    prefix: Any,
    suffix: Any,
    extra: list[dict[str, Any]],
    prompt: str,
    *,
    n_ctx: int,
) -> list[int]:
    """llama-server's /infill prompt (the repo-level FIM pattern): the extra files,
    then prefix, the text before the cursor, suffix and the middle token; ``--spm-infill``
    puts the suffix first. Prefix and suffix are cut to fit a batch (3:1), the extra
    chunks to the room that is left."""
    m = server.model
    s = server.settings

    def tok(text: str) -> list[int]:
        out: list[int] = m.tokenize(text, add_special=False, parse_special=False).tolist()
        return out

    def mixed(value: Any) -> list[int]:
        if isinstance(value, str):
            return tok(value)
        if isinstance(value, list) and all(isinstance(x, (str, int)) for x in value):
            return [t for x in value for t in (tok(x) if isinstance(x, str) else [x])]
        raise ApiError(400, "input_prefix and input_suffix must be strings or token lists")

    extra_tokens: list[int] = []
    if m.token_fim_rep >= 0:
        extra_tokens += [m.token_fim_rep, *tok("myproject\n")]
    for chunk in extra:
        if m.token_fim_sep >= 0:
            extra_tokens += [m.token_fim_sep, *tok(chunk.get("filename", "tmp") + "\n")]
        else:
            extra_tokens += tok("\n\n--- snippet ---\n\n")
        extra_tokens += tok(chunk["text"])
    if m.token_fim_sep >= 0:
        extra_tokens += [m.token_fim_sep, *tok("filename\n")]
    pre, suf, middle = mixed(prefix), mixed(suffix), tok(prompt)
    n_batch = s.batch_size
    n_pre = min(len(pre), 3 * (n_batch // 4))
    n_suf = min(len(suf), max(0, n_batch // 4 - (2 + len(middle))))
    n_extra = min(max(0, n_ctx - n_batch - 2 * max(s.n_predict, 0)), len(extra_tokens))
    pre = [m.token_fim_pre, *pre[len(pre) - n_pre :], *middle]
    suf = [m.token_fim_suf, *suf[:n_suf]]
    first, last = (suf, pre) if s.spm_infill else (pre, suf)
    head = [m.token_bos] if m.add_bos and m.token_bos >= 0 else []
    tail = extra_tokens[len(extra_tokens) - n_extra :] if n_extra else []
    return server.preparer.tokens([*tail, *head, *first, *last, m.token_fim_mid])


def prepare_native(server: Server, tokens: list[int], body: dict[str, Any]) -> Job:
    """A /completion (or /infill) request's job, llama-server's fields read."""
    settings = sampling(server, body)
    if "json_schema" in body and "grammar" not in body:
        settings["grammar"] = json_schema_to_grammar(body["json_schema"])
    grammar, preserved = lazy_grammar(server.model, settings.get("grammar"), body)
    if grammar is not None:
        settings["grammar"] = grammar
    n_probs = body.get("n_probs", 0)
    if n_probs < 0:
        raise ApiError(400, "n_probs must be >= 0", param="n_probs")
    job = server.preparer.completion(
        tokens,
        max_tokens=body.get("n_predict", body.get("max_tokens")),
        stop=stop(server, body),
        logprobs=n_probs if n_probs > 0 else None,
        media=getattr(tokens, "media", None),
        **settings,
    )
    # llama-server's probabilities of the distribution the sampler chain left; its
    # message delimiters, read as common_chat_msg_delimiters_parse reads them (entries
    # that are not objects skipped)
    delims = [d for d in body.get("message_delimiters") or () if isinstance(d, dict)]
    if any(not isinstance(d.get(k, ""), str) for d in delims for k in ("role", "delimiter")):
        raise ApiError(400, "message_delimiters: role and delimiter are strings")
    return with_generation_fields(
        job,
        body,
        server,
        post_sampling_probs=bool(body.get("post_sampling_probs")),
        message_delimiters=tuple((d.get("role", ""), d.get("delimiter", "")) for d in delims),
        preserved=preserved,
    )


#: A /tokenize text (a /detokenize list) longer than this is handled off the event loop.
_LARGE_TEXT = 32 * 1024


def _tokenize(server: Server, body: dict[str, Any]) -> dict[str, Any]:
    model = server.model
    tokens = model.tokenize(
        body["content"],
        add_special=body.get("add_special", False),
        parse_special=body.get("parse_special", True),
    ).tolist()
    if not body.get("with_pieces"):
        return {"tokens": tokens}
    pieces: dict[int, Any] = {}  # a vocabulary's worth at most, however long the text
    out = []
    for t in tokens:
        piece = pieces.get(t)
        if piece is None:
            raw = model.token_to_piece(t, special=True)
            try:
                piece = raw.decode("utf-8")
            except UnicodeDecodeError:
                piece = list(raw)
            pieces[t] = piece
        out.append({"id": t, "piece": piece})
    return {"tokens": out}


def slot_file(folder: str, name: str) -> str:
    """``name`` in ``folder``, refused unless it is a plain file name (llama.cpp's
    ``fs_validate_filename``: no separators, no ``..``, nothing hidden or special)."""
    bad = (
        not name
        or len(name.encode()) > 255
        or name in (".", "..")
        or name.startswith(".")
        or any(c in name for c in '/\\:*?"<>|')
        or any(ord(c) < 32 or ord(c) == 127 for c in name)
        or name != name.strip()
    )
    if bad:
        raise ApiError(400, f"invalid file name {name!r}", param="filename")
    return os.path.join(folder, name)


def _save(server: Server, path: str, slot: KVSequence) -> dict[str, Any]:
    t0 = time.perf_counter()
    tokens = list(slot.cache)
    if any(t < 0 for t in tokens):  # as llama-server: a slot file holds tokens only
        raise ApiError(
            501, "saving a slot that holds images or audio is not supported", "not_supported_error"
        )
    try:  # written under a temporary name: a failed save leaves no partial file
        n_bytes = slot.ctx.state_seq_save_file(path, slot.id, tokens)
    except (StateError, OSError):
        raise ApiError(500, "Unable to save slot", "server_error") from None
    ms = (time.perf_counter() - t0) * 1e3
    return {
        "filename": os.path.basename(path),
        "n_saved": len(tokens),
        "n_written": n_bytes,
        "timings": {"save_ms": ms},
    }


def _restore(server: Server, path: str, slot: KVSequence) -> dict[str, Any]:
    if not os.path.isfile(path):
        raise ApiError(404, f"no saved slot named {os.path.basename(path)!r}", "not_found_error")
    t0 = time.perf_counter()
    slot.release()
    try:
        # The file is checked before llama.cpp reads it (a short one aborts llama-server).
        tokens = slot.ctx.state_seq_load_file(path, slot.id)
    except StateError as exc:
        slot.forget()
        # Without the path: the slot folder is the server's business.
        raise ApiError(400, f"Unable to restore slot: {str(exc).replace(path, '<file>')}") from None
    # llama-server's checks of what it restored, in its words
    problem = None
    if len(tokens) > server.generating().n_ctx_slot:
        problem = "Restored prompt does not fit in the slot context"
    elif len(tokens) and (tokens.min() < 0 or tokens.max() >= server.model.n_vocab):
        problem = "Invalid tokens in slot save file"
    if problem is not None:
        slot.forget()
        raise ApiError(400, f"Unable to restore slot: {problem}")
    slot.restored(tokens.tolist())
    ms = (time.perf_counter() - t0) * 1e3
    return {
        "filename": os.path.basename(path),
        "n_restored": len(tokens),
        "n_read": os.path.getsize(path),
        "timings": {"restore_ms": ms},
    }


def _erase(slot: KVSequence) -> dict[str, Any]:
    n = len(slot.cache)
    slot.release()
    slot.forget()
    return {"n_erased": n}
