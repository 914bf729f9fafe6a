"""``/metrics``: the engine's counters in Prometheus' text format, named as llama-server's."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from llama_cy.server.schema import ApiError

if TYPE_CHECKING:
    from llama_cy.server.app import RouteSpec, Server

__all__ = ["routes"]


def routes(server: Server) -> list[RouteSpec]:
    async def metrics(request: Request) -> Response:
        if not server.settings.metrics:
            raise ApiError(
                501,
                "this server does not support the metrics endpoint: start it with --metrics",
                "not_supported_error",
            )
        e = server.generating()
        rows = [
            ("prompt_tokens_total", "counter", "Number of prompt tokens processed.",
             e.n_prompt_tokens),
            ("prompt_seconds_total", "counter", "Prompt process time", e.t_prompt_s),
            ("tokens_predicted_total", "counter", "Number of generation tokens processed.",
             e.n_predicted),
            ("tokens_predicted_seconds_total", "counter", "Predict process time",
             e.t_predicted_s),
            ("n_decode_total", "counter", "Total number of llama_decode() calls", e.n_decode),
            ("n_busy_slots_per_decode", "counter",
             "Average number of busy slots per llama_decode() call",
             e.n_busy_slots / max(1, e.n_decode)),
            ("prompt_tokens_seconds", "gauge", "Average prompt throughput in tokens/s.",
             e.n_prompt_tokens / e.t_prompt_s if e.t_prompt_s else 0.0),
            ("predicted_tokens_seconds", "gauge", "Average generation throughput in tokens/s.",
             e.n_predicted / e.t_predicted_s if e.t_predicted_s else 0.0),
            ("requests_processing", "gauge", "Number of requests processing.", e.n_processing),
            ("requests_deferred", "gauge", "Number of requests deferred.", e.n_waiting),
        ]  # fmt: skip
        lines = []
        for name, kind, text, value in rows:
            lines += [
                f"# HELP llamacpp:{name} {text}",
                f"# TYPE llamacpp:{name} {kind}",
                f"llamacpp:{name} {value}",
            ]
        return PlainTextResponse("\n".join(lines) + "\n", media_type="text/plain; version=0.0.4")

    return [("/metrics", metrics, ["GET"], False)]
