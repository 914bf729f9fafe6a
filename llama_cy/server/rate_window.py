"""llama-server's throughput gauges: tokens and seconds between two /metrics scrapes."""

from __future__ import annotations

__all__ = ["RateWindow"]


class RateWindow:
    """Tokens and seconds since the last reading: llama-server's throughput gauges cover
    the time between two /metrics scrapes."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.n_prompt = self.n_gen = 0
        self.t_prompt = self.t_gen = 0.0

    def add(self, n_prompt: int, t_prompt: float, n_gen: int, t_gen: float) -> None:
        self.n_prompt += n_prompt
        self.t_prompt += t_prompt
        self.n_gen += n_gen
        self.t_gen += t_gen

    def read(self) -> tuple[float, float]:
        """Prompt and generation tokens per second since the last read (then reset)."""
        prompt = self.n_prompt / self.t_prompt if self.t_prompt else 0.0
        gen = self.n_gen / self.t_gen if self.t_gen else 0.0
        self._reset()
        return prompt, gen
