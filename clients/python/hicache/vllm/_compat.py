"""vLLM's KV connector base classes when vLLM is installed, stand-ins with the same names when it is not.

vLLM loads an external connector through ``KVConnectorFactory.get_connector_class``
(``vllm/distributed/kv_transfer/kv_connector/factory.py``): ``importlib.import_module(kv_connector_module_path)``,
then ``getattr(module, kv_connector)``, and (recent releases) it refuses a class whose constructor does not take
``kv_cache_config`` as its third argument. The scheduler and the model runner call the connector only through the
methods of ``KVConnectorBase_V1`` (``vllm/distributed/kv_transfer/kv_connector/v1/base.py``), so with vLLM installed
the connector derives from the real base class; without it (tests, tools) it derives from the stand-in below, which
has the same method names, arguments and defaults. Nothing here imports torch.
"""

from __future__ import annotations

import enum
import inspect
from typing import TYPE_CHECKING, Any, Iterable, Optional

if TYPE_CHECKING:
    # mypy checks the connector against the stand-ins below; vLLM itself (optional, untyped here) is not looked at.
    VLLM_AVAILABLE: bool
else:
    try:  # pragma: no cover - depends on the environment
        from vllm.distributed.kv_transfer.kv_connector.v1.base import (
            KVConnectorBase_V1,
            KVConnectorMetadata,
            KVConnectorRole,
        )

        VLLM_AVAILABLE = True
    except Exception:  # ImportError, or vLLM present but broken (no torch, no GPU libraries...)
        VLLM_AVAILABLE = False

if TYPE_CHECKING or not VLLM_AVAILABLE:
    class KVConnectorRole(enum.Enum):
        """Stand-in for vLLM's ``KVConnectorRole``: which process the connector lives in."""

        SCHEDULER = 0
        WORKER = 1

    class KVConnectorMetadata:
        """Stand-in for vLLM's ``KVConnectorMetadata`` (an empty ABC): what the scheduler side sends the workers
        each step."""

    class KVConnectorBase_V1:
        """Stand-in for vLLM's ``KVConnectorBase_V1``: the method names, arguments and defaults of
        ``vllm/distributed/kv_transfer/kv_connector/v1/base.py`` that the connector uses or overrides."""

        def __init__(self, vllm_config: Any, role: Any, kv_cache_config: Any = None) -> None:
            self._connector_metadata: Optional[KVConnectorMetadata] = None
            self._vllm_config = vllm_config
            transfer = getattr(vllm_config, "kv_transfer_config", None)
            if transfer is None:
                raise ValueError("kv_transfer_config must be set for KVConnectorBase_V1")
            self._kv_transfer_config = transfer
            self._kv_cache_config = kv_cache_config
            self._role = role

        @property
        def role(self) -> Any:
            return self._role

        # ---- worker side
        def bind_connector_metadata(self, connector_metadata: KVConnectorMetadata) -> None:
            self._connector_metadata = connector_metadata

        def clear_connector_metadata(self) -> None:
            self._connector_metadata = None

        def _get_connector_metadata(self) -> KVConnectorMetadata:
            assert self._connector_metadata is not None
            return self._connector_metadata

        def has_connector_metadata(self) -> bool:
            return self._connector_metadata is not None

        def register_kv_caches(self, kv_caches: dict[str, Any]) -> None:
            return None

        def start_load_kv(self, forward_context: Any, **kwargs: Any) -> None:
            raise NotImplementedError

        def wait_for_layer_load(self, layer_name: str) -> None:
            raise NotImplementedError

        def save_kv_layer(self, layer_name: str, kv_layer: Any, attn_metadata: Any, **kwargs: Any) -> None:
            raise NotImplementedError

        def wait_for_save(self) -> None:
            raise NotImplementedError

        def get_finished(self, finished_req_ids: set[str]) -> tuple[Optional[set[str]], Optional[set[str]]]:
            return None, None

        def get_block_ids_with_load_errors(self) -> set[int]:
            return set()

        def shutdown(self) -> None:
            return None

        # ---- scheduler side
        def get_num_new_matched_tokens(self, request: Any, num_computed_tokens: int) -> tuple[Optional[int], bool]:
            raise NotImplementedError

        def update_state_after_alloc(self, request: Any, blocks: Any, num_external_tokens: int) -> None:
            raise NotImplementedError

        def build_connector_meta(self, scheduler_output: Any) -> KVConnectorMetadata:
            raise NotImplementedError

        def update_connector_output(self, connector_output: Any) -> None:
            return None

        def request_finished(self, request: Any, block_ids: list[int]) -> tuple[bool, Optional[dict[str, Any]]]:
            return False, None

        def take_events(self) -> Iterable[Any]:
            return ()

        @classmethod
        def get_required_kvcache_layout(cls, vllm_config: Any) -> Optional[str]:
            return None


def base_takes_kv_cache_config() -> bool:
    """Whether the base class's constructor takes ``kv_cache_config`` (vLLM releases of late 2025 on; earlier ones
    take ``(vllm_config, role)`` only)."""
    try:
        return "kv_cache_config" in inspect.signature(KVConnectorBase_V1.__init__).parameters
    except (TypeError, ValueError):
        return False


def base_reports_load_errors() -> bool:
    """Whether this vLLM asks connectors for blocks that failed to load (``get_block_ids_with_load_errors``, vLLM PR
    #19330 of September 2025). Without it a failed load cannot be turned into recomputation, so loads stay off."""
    return hasattr(KVConnectorBase_V1, "get_block_ids_with_load_errors")


def role_name(role: Any) -> str:
    """``"SCHEDULER"`` or ``"WORKER"`` for vLLM's enum, the stand-in's, or their names as strings."""
    name = getattr(role, "name", role)
    text = str(name).upper()
    if text not in ("SCHEDULER", "WORKER"):
        raise ValueError(f"unknown KV connector role {role!r}")
    return text


__all__ = ["KVConnectorBase_V1", "KVConnectorMetadata", "KVConnectorRole", "VLLM_AVAILABLE",
           "base_reports_load_errors", "base_takes_kv_cache_config", "role_name"]
