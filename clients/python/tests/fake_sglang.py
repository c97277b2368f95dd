"""A stand-in for SGLang's host KV pools (``MHATokenToKVPoolHost``, ``MLATokenToKVPoolHost``), standard library only.

The host buffer is one ``ctypes`` array shaped as SGLang shapes it (N slots, P = N / page pages, L layers,
H heads, D head dim; MLA: no leading 2, H = 1, D = kv_lora_rank + qk_rope_head_dim):

====================  ========================  ========================
layout                MHA                       MLA
====================  ========================  ========================
layer_first           [2, L, N, H, D]           [L, N, 1, d]
page_first            [2, N, L, H, D]           [N, L, 1, d]
page_first_direct     [2, P, L, page, H, D]     [P, L, page, 1, d]
====================  ========================  ========================

``get_page_buffer_meta``, ``get_data_page``, ``get_dummy_flat_data_page`` and ``set_from_flat_data_page`` follow
SGLang's ``memory_pool_host.py``: the meta's pointer arithmetic is SGLang's own formulas (not derived from the
shapes above, so a mismatch between the two shows), and flat pages are the row-major flattening of the same
slices SGLang takes (``kv_buffer[:, :, i:i+page]`` for layer_first, ``kv_buffer[:, i:i+page]`` for page_first,
``kv_buffer[:, i // page]`` for page_first_direct). Tensors are imitated by :class:`FakeTensor` (``data_ptr``,
``numel``, ``element_size``, ``tolist``), so the backend takes the same code path as with torch.
"""

from __future__ import annotations

import ctypes
import random
import types

CPU = types.SimpleNamespace(type="cpu")


class FakeDtype:
    """What the backend reads of a torch dtype: ``str()`` and ``itemsize``."""

    def __init__(self, name: str, itemsize: int):
        self.name = name
        self.itemsize = itemsize

    def __str__(self) -> str:
        return f"torch.{self.name}"

    __repr__ = __str__


BFLOAT16 = FakeDtype("bfloat16", 2)
FLOAT16 = FakeDtype("float16", 2)
UINT8 = FakeDtype("uint8", 1)
FLOAT8_E4M3FN = FakeDtype("float8_e4m3fn", 1)


class FakeIndices:
    """A 1-D int64 CPU tensor, as far as the backend and the pool use one."""

    def __init__(self, values):
        self._values = [int(v) for v in values]

    def tolist(self) -> list:
        return list(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __getitem__(self, item):
        if isinstance(item, slice):
            return FakeIndices(self._values[item])
        return self._values[item]

    def __iter__(self):
        return iter(self._values)


class FakeTensor:
    """A flat, contiguous CPU tensor of ``nbytes`` bytes (owned ctypes memory)."""

    def __init__(self, nbytes: int, itemsize: int = 1, data: bytes = b""):
        self._itemsize = itemsize
        self._memory = (ctypes.c_char * nbytes)()
        self.device = CPU
        if data:
            ctypes.memmove(self._memory, data, len(data))

    def data_ptr(self) -> int:
        return ctypes.addressof(self._memory)

    def numel(self) -> int:
        return len(self._memory) // self._itemsize

    def element_size(self) -> int:
        return self._itemsize

    def is_contiguous(self) -> bool:
        return True

    def tobytes(self) -> bytes:
        return bytes(self._memory.raw)


class FakeDevicePool:
    def __init__(self, dtype: FakeDtype):
        self.dtype = dtype


class _FakeHostPool:
    """Common part of the MHA (parts = 2: K, V) and MLA (parts = 1) pools."""

    LAYOUTS = ("layer_first", "page_first", "page_first_direct")

    def __init__(self, parts: int, layout: str, layer_num: int, head_num: int, head_dim: int, size: int,
                 page_size: int, dtype: FakeDtype, layer_first_meta: bool, store_dtype: FakeDtype = None):
        if layout not in self.LAYOUTS and layout != "page_head":
            raise ValueError(layout)
        assert size % page_size == 0
        self.parts = parts
        self.layout = layout
        self.layer_num = layer_num
        self.head_num = head_num
        self.head_dim = head_dim
        self.size = size
        self.page_size = page_size
        self.page_num = size // page_size
        self.device_pool = FakeDevicePool(dtype)
        self.dtype = store_dtype or dtype  # SGLang: the host pool's dtype is the device pool's store_dtype
        self.layer_first_meta = layer_first_meta
        self.row_bytes = head_num * head_dim * self.dtype.itemsize
        self.kv_buffer = (ctypes.c_char * (parts * layer_num * size * self.row_bytes))()
        self.base = ctypes.addressof(self.kv_buffer)

    # ---------------------------------------------------------------- the shape (independent of SGLang's formulas)

    def row_offset(self, part: int, layer: int, slot: int) -> int:
        """Byte offset of one row (token ``slot``, ``layer``, ``part``) in the host buffer, from its shape."""
        L, N, ps = self.layer_num, self.size, self.page_size
        if self.layout == "layer_first":
            row = (part * L + layer) * N + slot
        elif self.layout == "page_first":
            row = (part * N + slot) * L + layer
        else:  # page_first_direct
            row = ((part * self.page_num + slot // ps) * L + layer) * ps + slot % ps
        return row * self.row_bytes

    def row(self, part: int, layer: int, slot: int) -> bytes:
        offset = self.row_offset(part, layer, slot)
        return self.kv_buffer[offset:offset + self.row_bytes]

    def set_row(self, part: int, layer: int, slot: int, data: bytes) -> None:
        offset = self.row_offset(part, layer, slot)
        self.kv_buffer[offset:offset + self.row_bytes] = data

    def page_rows(self, first: int) -> dict:
        """Every row of the page at slot ``first``: (part, layer, token) -> bytes."""
        return {(p, l, t): self.row(p, l, first + t) for p in range(self.parts) for l in range(self.layer_num)
                for t in range(self.page_size)}

    def fill_page(self, first: int, rng: random.Random) -> None:
        for p in range(self.parts):
            for l in range(self.layer_num):
                for t in range(self.page_size):
                    self.set_row(p, l, first + t, rng.randbytes(self.row_bytes))

    def snapshot(self) -> bytes:
        return self.kv_buffer.raw

    # ------------------------------------------------------------------------------------------- SGLang's API

    @property
    def page_bytes(self) -> int:
        return self.get_size_per_token() * self.page_size

    def get_size_per_token(self) -> int:
        return self.parts * self.layer_num * self.head_num * self.head_dim * self.dtype.itemsize

    def get_ksize_per_token(self) -> int:
        return self.layer_num * self.head_num * self.head_dim * self.dtype.itemsize

    def get_page_buffer_meta(self, indices):
        """SGLang's formulas: ``(ptr_list, element_size_list)``."""
        assert len(indices) % self.page_size == 0
        indices = indices.tolist()
        item = self.dtype.itemsize
        L, N, H, D, ps = self.layer_num, self.size, self.head_num, self.head_dim, self.page_size
        ptr_list = []
        if self.layout == "layer_first":
            if not self.layer_first_meta:
                raise ValueError(f"Unsupported layout: {self.layout}")
            v_offset = L * N * H * D * item
            for index in range(0, len(indices), ps):
                for layer_id in range(L):
                    k_ptr = self.base + indices[index] * H * D * item + layer_id * N * H * D * item
                    ptr_list.append(k_ptr)
                    if self.parts == 2:
                        ptr_list.append(k_ptr + v_offset)
            element_size = item * ps * H * D
        elif self.layout in ("page_first", "page_first_direct"):
            v_offset = L * N * H * D * item
            for index in range(0, len(indices), ps):
                k_ptr = self.base + indices[index] * L * H * D * item
                ptr_list.append(k_ptr)
                if self.parts == 2:
                    ptr_list.append(k_ptr + v_offset)
            element_size = L * item * ps * H * D
        else:
            raise ValueError(f"Unsupported layout: {self.layout}")
        return ptr_list, [element_size] * len(ptr_list)

    def _flat_order(self):
        """(part, layer, token) in the row-major order of SGLang's flat page for this layout."""
        P, L, T = range(self.parts), range(self.layer_num), range(self.page_size)
        if self.layout == "page_first":  # kv_buffer[:, i:i+page] -> [2, page, L, H, D]
            return [(p, l, t) for p in P for t in T for l in L]
        # layer_first: kv_buffer[:, :, i:i+page] -> [2, L, page, H, D]; page_first_direct: [2, 1, L, page, H, D]
        return [(p, l, t) for p in P for l in L for t in T]

    def get_data_page(self, index, flat: bool = True) -> FakeTensor:
        index = int(index)
        data = b"".join(self.row(p, l, index + t) for p, l, t in self._flat_order())
        return FakeTensor(len(data), self.dtype.itemsize, data)

    def get_dummy_flat_data_page(self) -> FakeTensor:
        return FakeTensor(self.page_bytes, self.dtype.itemsize)

    def set_from_flat_data_page(self, index, data_page) -> None:
        index = int(index)
        data = data_page.tobytes() if hasattr(data_page, "tobytes") else bytes(data_page)
        assert len(data) == self.page_bytes, (len(data), self.page_bytes)
        for i, (p, l, t) in enumerate(self._flat_order()):
            self.set_row(p, l, index + t, data[i * self.row_bytes:(i + 1) * self.row_bytes])


class FakeMHATokenToKVPoolHost(_FakeHostPool):
    def __init__(self, layout: str, layer_num: int = 3, head_num: int = 2, head_dim: int = 8, size: int = 64,
                 page_size: int = 4, dtype: FakeDtype = BFLOAT16, layer_first_meta: bool = True,
                 store_dtype: FakeDtype = None):
        super().__init__(2, layout, layer_num, head_num, head_dim, size, page_size, dtype, layer_first_meta,
                         store_dtype)


class FakeMLATokenToKVPoolHost(_FakeHostPool):
    def __init__(self, layout: str, layer_num: int = 3, kv_lora_rank: int = 12, qk_rope_head_dim: int = 4,
                 size: int = 64, page_size: int = 4, dtype: FakeDtype = BFLOAT16, layer_first_meta: bool = False,
                 store_dtype: FakeDtype = None):
        self.kv_lora_rank = kv_lora_rank
        self.qk_rope_head_dim = qk_rope_head_dim
        super().__init__(1, layout, layer_num, 1, kv_lora_rank + qk_rope_head_dim, size, page_size, dtype,
                         layer_first_meta, store_dtype)


def storage_config(tp_rank: int = 0, tp_size: int = 1, is_mla_model: bool = False, model_name: str = "test/model",
                   extra_config: dict = None, is_page_first_layout: bool = False, pp_rank: int = 0, pp_size: int = 1,
                   attn_cp_rank: int = 0, attn_cp_size: int = 1):
    """An object with the fields of SGLang's ``HiCacheStorageConfig``."""
    return types.SimpleNamespace(tp_rank=tp_rank, tp_size=tp_size, is_mla_model=is_mla_model, model_name=model_name,
                                 extra_config=extra_config, is_page_first_layout=is_page_first_layout,
                                 pp_rank=pp_rank, pp_size=pp_size, attn_cp_rank=attn_cp_rank,
                                 attn_cp_size=attn_cp_size, enable_storage_metrics=False, dp_rank=0, dp_size=1,
                                 tp_lcm_size=None, should_split_heads=False)
