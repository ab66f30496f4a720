"""The Ray cluster a grid's units may run on (`executors`' "ray" executor): connecting to it, and what its live nodes
hold (CPUs, GPUs by model), read from Ray's node resources. Ray is imported only when one of these is called."""
from __future__ import annotations

from typing import Optional

from ..errors import UsageError


#: A GPU node whose model Ray does not know (no accelerator_type resource).
UNKNOWN_MODEL = "unknown"


def ray_gpu_models() -> dict[str, float]:
    """The GPUs of the Ray cluster's live nodes, by model (Ray's `accelerator_type:<model>` node resource, which it
    sets for NVIDIA GPUs; `UNKNOWN_MODEL` where a node has none)."""
    models: dict[str, float] = {}
    for res in live_resources():
        if res.get("GPU", 0) > 0:
            types = sorted(k.split(":", 1)[1] for k in res if k.startswith("accelerator_type:"))
            model = types[0] if types else UNKNOWN_MODEL
            models[model] = models.get(model, 0) + res["GPU"]
    return models


#: How a results file's provenance names where CPU units ran on a Ray cluster (`ray_cpus`' figures).
RAY_CPUS = "ray cluster: {cpus:g} CPU(s) on {nodes} live node(s)"


def ray_cpus() -> dict[str, float]:
    """The Ray cluster's CPUs and live nodes, as numbers: {"cpus": N, "nodes": M}."""
    nodes = live_resources()
    return {"cpus": sum(r.get("CPU", 0) for r in nodes), "nodes": len(nodes)}


def live_resources() -> list[dict]:
    """The resources (CPU, GPU, accelerator_type:<model>, ...) of each live node of the Ray cluster."""
    import ray

    return [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive", True)]


def connect(address: Optional[str], workers: int) -> None:
    """Ray, started here: connected to the cluster at `address` ("auto": the one this machine belongs to), or a new
    local instance of `workers` CPUs when none is given (UsageError where Ray is not installed or nothing answers)."""
    try:
        import ray
    except ImportError:
        raise UsageError("the ray executor needs Ray, which is not installed; install it with "
                         "`pip install 'metacl-lite[cluster]'` (or `pip install ray`)") from None
    if ray.is_initialized():
        return
    if address and address != "auto":
        check_reachable(address)
    try:
        if address:
            ray.init(address=address, log_to_driver=False, configure_logging=False)
        else:
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False, configure_logging=False)
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise UsageError(f"cannot reach a Ray cluster at {address or 'a new local instance'}: {e}") from None


def check_reachable(address: str, timeout: float = 5.0) -> None:
    """A cluster address must answer a TCP connection within `timeout` s (Ray itself retries for minutes)."""
    import socket

    hostport = address.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise UsageError(f"Ray address {address!r} is not HOST:PORT (or ray://HOST:PORT)")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as e:
        raise UsageError(f"cannot reach a Ray cluster at {address}: {e}; check the address and that the head node "
                         f"is running (`ray start --head` prints it)") from None


def ray_options(plan) -> dict:
    """`ray.remote`'s options for a unit of `plan` (`executors.Plan`): one CPU, its share of a GPU, pinned to the
    plan's GPU model."""
    opts: dict = {"num_cpus": 1, "num_gpus": plan.gpu_share}
    if plan.accelerator_type:
        opts["accelerator_type"] = plan.accelerator_type
    return opts
