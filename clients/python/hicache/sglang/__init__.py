"""SGLang storage backend of HiCache: SGLang's HiCache L3 tier on the HiCache daemon.

Load it with SGLang's ``dynamic`` backend (``docs/sglang.md``)::

    --hicache-storage-backend dynamic
    --hicache-storage-backend-extra-config '{"backend_name": "hicache", "module_path": "hicache.sglang",
        "class_name": "HiCacheDaemonStorage", "interface_v1": 1, "host": "127.0.0.1", "port": 7370}'

Importing this package does not need SGLang: without it the backend derives from a stand-in with the methods of
SGLang's ``HiCacheStorage`` (``SGLANG_AVAILABLE`` says which).
"""

from ._compat import SGLANG_AVAILABLE, HiCacheStorage, HiCacheStorageConfig, HiCacheStorageExtraInfo
from .config import BackendSettings, build_namespace
from .storage import HiCacheDaemonStorage

__all__ = ["HiCacheDaemonStorage", "BackendSettings", "build_namespace", "HiCacheStorage", "HiCacheStorageConfig",
           "HiCacheStorageExtraInfo", "SGLANG_AVAILABLE"]
