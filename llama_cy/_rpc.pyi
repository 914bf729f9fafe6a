from collections.abc import Iterable, Sequence

from llama_cy._backend import Device

def rpc_devices(servers: Iterable[str]) -> list[Device]: ...
def with_rpc_devices(
    devices: Sequence[Device] | None, rpc_servers: str | Sequence[str]
) -> Sequence[Device] | None: ...
def rpc_start_server(
    endpoint: str, devices: Sequence[Device], n_threads: int, cache_dir: str | None = None
) -> None: ...
