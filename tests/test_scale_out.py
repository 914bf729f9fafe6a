"""Beyond one machine: LiteLLM's ``Router``, as people deploy it, in front of two
``llama-cy serve`` replicas with least-busy routing (docs/server.md, "Scaling out").
One replica dies mid-run (SIGKILL, as a lost machine): the requests in flight on it
fail with a clear error, the rest and every later request go to the survivor, and
nothing hangs."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

# LiteLLM fetches its model price list at import unless told to use its own copy.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from litellm.exceptions import APIConnectionError, InternalServerError
from litellm.router import Router
from offload import timeout
from serving import Server

ARGS = ("-np", "4", "-c", "4096", "-t", "1", "--no-warmup", "-a", "m")


def deployment(server: Server) -> dict[str, Any]:
    return {
        "model_name": "m",
        "litellm_params": {
            "model": "openai/m",
            "api_base": server.url + "/v1",
            "api_key": "none",
        },
    }


def busy(server: Server) -> int:
    return sum(bool(s["is_processing"]) for s in server.slots())


def api_base(response: Any) -> str:
    return str(response._hidden_params["api_base"])


def test_a_replica_lost_mid_run(tiny_model_path: Path) -> None:
    doomed = Server(tiny_model_path, *ARGS)
    survivor = Server(tiny_model_path, *ARGS)
    try:
        router = Router(
            model_list=[deployment(doomed), deployment(survivor)],
            routing_strategy="least-busy",
            num_retries=0,  # a request half generated is not sent again
            allowed_fails=0,  # a replica that fails is set aside at once
            cooldown_time=600,
            timeout=timeout(120),
        )

        async def ask(i: int, n: int) -> Any:
            return await router.acompletion(
                model="m",
                messages=[{"role": "user", "content": f"Tell story number {i}."}],
                max_tokens=n,
                extra_body={"ignore_eos": True},  # every request runs its whole length
            )

        async def first_wave() -> tuple[list[Any], tuple[int, int]]:
            calls = [asyncio.create_task(ask(i, 900)) for i in range(8)]
            deadline = time.monotonic() + timeout(60)
            while True:  # both replicas generating: least-busy spread the requests
                counts = await asyncio.to_thread(lambda: (busy(doomed), busy(survivor)))
                if min(counts) > 0 or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.05)
            doomed.proc.kill()
            done = await asyncio.wait_for(
                asyncio.gather(*calls, return_exceptions=True), timeout(120)
            )
            return done, counts

        done, (on_doomed, on_survivor) = asyncio.run(first_wave())
        assert on_doomed > 0, "least-busy sent nothing to one replica"
        assert on_survivor > 0, "least-busy sent nothing to one replica"
        failed = [r for r in done if isinstance(r, BaseException)]
        answered = [r for r in done if not isinstance(r, BaseException)]
        assert failed, "the requests in flight on the lost replica did not fail"
        assert answered, "the survivor's requests did not complete"
        for exc in failed:
            # LiteLLM's own exception for a lost connection, saying so
            assert isinstance(exc, InternalServerError | APIConnectionError), exc
            assert "Connection error" in str(exc), exc
        for r in answered:
            assert api_base(r).startswith(survivor.url)
            assert r.usage.completion_tokens == 900
            assert r.choices[0].finish_reason == "length"

        async def second_wave() -> list[Any]:
            return await asyncio.wait_for(
                asyncio.gather(*(ask(100 + i, 16) for i in range(6))), timeout(120)
            )

        later = asyncio.run(second_wave())  # after the loss: the survivor alone
        assert [api_base(r).startswith(survivor.url) for r in later] == [True] * 6
        assert all(r.usage.completion_tokens == 16 for r in later)
        assert survivor.request("GET", "/health")[0] == 200
    finally:
        if doomed.proc.poll() is None:
            doomed.proc.kill()
        doomed.proc.wait()
        doomed.log.close()
        survivor.close()
