"""``/metrics``: the engine's counters in Prometheus' text format, named as llama-server's."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from llama_cy.server.core import RouteSpec, Server
from llama_cy.server.http_protocol import CasedName
from llama_cy.server.schema import ApiError

__all__ = ["routes"]

#: spelled as llama-server spells it
_START_TIME = CasedName(b"Process-Start-Time-Unix")


def routes(server: Server) -> list[RouteSpec]:
    async def metrics(request: Request) -> Response:
        if not server.settings.metrics:
            raise ApiError(
                501,
                "this server does not support the metrics endpoint: start it with --metrics",
                "not_supported_error",
            )
        counters, gauges = _values(server)
        rows = [(name, "counter", HELP[name], v) for name, v in counters.items()]
        rows += [(name, "gauge", HELP[name], v) for name, v in gauges.items()]
        lines = []
        for name, kind, text, value in rows:
            lines += [
                f"# HELP llamacpp:{name} {text}",
                f"# TYPE llamacpp:{name} {kind}",
                f"llamacpp:{name} {value}",
            ]
        response = PlainTextResponse(
            "\n".join(lines) + "\n", media_type="text/plain; version=0.0.4"
        )
        # A raw header: Starlette would lower-case a dict's names.
        response.raw_headers.append((_START_TIME, str(server.started).encode()))
        return response

    return [("/metrics", metrics, ["GET"], False)]


#: llama-server's metrics and their help lines
HELP = {
    "prompt_tokens_total": "Number of prompt tokens processed, excluding cached tokens",
    "prompt_tokens_cached_total": "Number of prompt tokens reused from the cache",
    "prompt_seconds_total": "Total time spent processing prompts",
    "tokens_predicted_total": "Number of generation tokens processed",
    "tokens_predicted_seconds_total": "Total time spent generating tokens",
    "n_decode_total": "Total number of llama_decode() calls",
    "n_tokens_max": "Largest observed sequence length (prompt + generation)",
    "spec_decode_num_draft_tokens_total": "Speculative: Total draft tokens generated",
    "spec_decode_num_accepted_tokens_total": (
        "Speculative: Total draft tokens accepted by the target model"
    ),
    "spec_decode_num_drafts_total": "Speculative: Total speculative decoding verification steps",
    "prompt_tokens_seconds": "Average prompt throughput in tokens/s",
    "predicted_tokens_seconds": "Average generation throughput in tokens/s",
    "requests_processing": "Number of requests processing",
    "requests_deferred": "Number of requests deferred",
    "n_busy_slots_per_decode": "Average number of busy slots per llama_decode() call",
}


def _values(server: Server) -> tuple[dict[str, float], dict[str, float]]:
    """The counters and gauges; the throughputs cover the time since the last scrape
    (a sleeping server's, since the last scrape before it slept)."""
    total = server.counters()
    busy = total.pop("n_busy_slots")
    e = server.engine
    window = e.window if e is not None else server.frozen_window
    prompt_rate, gen_rate = window.read() if window is not None else (0.0, 0.0)
    emb = server.embedder
    if e is None and emb is not None:
        prompt_rate = emb.n_tokens / emb.t_s if emb.t_s else 0.0
    gauges = {
        "prompt_tokens_seconds": prompt_rate,
        "predicted_tokens_seconds": gen_rate,
        "requests_processing": float(e.n_processing) if e is not None else 0.0,
        "requests_deferred": float(e.n_waiting) if e is not None else 0.0,
        "n_busy_slots_per_decode": busy / max(1.0, total["n_decode_total"]),
    }
    return total, gauges
