"""vLLM KV connector of HiCache: vLLM's external KV cache on the HiCache daemon (``./hicache serve``).

Load it through vLLM's ``kv_connector_module_path`` (``docs/vllm.md``)::

    vllm serve MODEL --kv-transfer-config '{"kv_connector": "HiCacheConnector",
        "kv_connector_module_path": "hicache.vllm", "kv_role": "kv_both", "kv_load_failure_policy": "recompute",
        "kv_connector_extra_config": {"host": "127.0.0.1", "port": 7370}}'

Importing this package needs neither vLLM nor torch: without vLLM the connector derives from a stand-in with the
methods of vLLM's ``KVConnectorBase_V1`` (``VLLM_AVAILABLE`` says which); torch is imported only by a worker whose KV
caches are on a GPU.
"""

from ._compat import VLLM_AVAILABLE, KVConnectorBase_V1, KVConnectorMetadata, KVConnectorRole
from .config import ConnectorSettings, EngineIdentity, page_key
from .connector import HiCacheConnector
from .layout import KVLayout
from .scheduler import BlockTransfer, HiCacheConnectorMetadata

__all__ = ["HiCacheConnector", "HiCacheConnectorMetadata", "BlockTransfer", "ConnectorSettings", "EngineIdentity",
           "KVLayout", "page_key", "KVConnectorBase_V1", "KVConnectorMetadata", "KVConnectorRole", "VLLM_AVAILABLE"]
