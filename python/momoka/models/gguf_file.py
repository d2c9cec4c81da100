"""A lean reader of GGUF files (llama.cpp's model format, versions 2 and 3): the header parsed once,
metadata decoded on first use, tensors as memory-mapped bytes.

The ``gguf`` package's ``GGUFReader`` decodes every metadata value when it opens a file; a model's
vocabulary and merges are arrays of some 50,000 strings each, so opening SmolLM2-135M's 100 MB file
took about 2.4 s on the 2-core machine, longer than the native decoder then needs for a 1,000-token
prompt. :class:`GGUFFile` walks those arrays only to find where they end (their values are decoded
when :meth:`GGUFFile.get` asks for them) and maps the tensor data without reading it, so opening the
same file takes tens of milliseconds. Its values are ``GGUFReader``'s ``field.contents()`` (the tests
check every field and tensor of the shipped model and of files written by ``gguf.GGUFWriter`` against
the package's reader).

Layout (little-endian): ``b"GGUF"``, version (u32), tensor count (u64), metadata count (u64); each
metadata entry a key (u64 length + UTF-8), a value type (u32) and the value (strings as key; arrays as
element type u32, count u64, elements); each tensor a name, its number of dimensions (u32), the
dimensions (u64 each, innermost first), its GGML type (u32) and its data offset (u64) from the data
section, which starts at the next multiple of ``general.alignment`` (32 when absent) after the header.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import ModelError
from . import gguf_quant as gq

__all__ = ["GGUFFile", "TensorInfo"]

MAGIC = b"GGUF"
VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32

# Metadata value types: struct format of the scalar ones.
_STRING, _ARRAY = 8, 9
_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_NUMPY = {0: "<u1", 1: "<i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "<u1", 10: "<u8", 11: "<i8",
          12: "<f8"}
_U32, _U64 = struct.Struct("<I"), struct.Struct("<Q")


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of a GGUF file: ``shape`` innermost dimension first (the file's order), ``tensor_type`` its
    GGML type id, ``data_offset`` and ``n_bytes`` its bytes in the file."""

    name: str
    tensor_type: int
    shape: tuple[int, ...]
    data_offset: int
    n_bytes: int


def _tensor_bytes(qtype: int, shape: tuple[int, ...], name: str) -> int:
    """Bytes of a tensor: :func:`~momoka.models.gguf_quant.row_bytes` per row for the types momoka runs, the
    ``gguf`` package's block table for the others (so that a file of another type still opens, and is refused
    by name when its tensor is read)."""
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    k = shape[0] if shape else 1
    if qtype in gq.SUPPORTED:
        block = gq.block_values(qtype)
        if k % block:
            raise ModelError(f"tensor {name!r} has rows of {k} values, not whole blocks of {block}")
        return n // k * gq.row_bytes(qtype, k) if k else 0
    try:
        from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType  # start-up: gguf (types momoka does not run)

        block, block_bytes = GGML_QUANT_SIZES[GGMLQuantizationType(qtype)]
    except (ImportError, ValueError, KeyError):
        raise ModelError(f"tensor {name!r} has an unknown GGML type {qtype}") from None
    if n % block:
        raise ModelError(f"tensor {name!r} of {n} values is not whole blocks of {block}")
    return n // block * block_bytes


class _Cursor:
    """Reads little-endian values from a buffer, raising ModelError past its end."""

    def __init__(self, buf, name: str):
        self.buf, self.pos, self.name, self.size = buf, 0, name, len(buf)

    def need(self, n: int) -> int:
        if n < 0 or self.pos + n > self.size:
            raise ModelError(f"{self.name} is truncated or corrupted: its header needs {n} bytes at byte {self.pos} "
                             f"but the file has {self.size}")
        p = self.pos
        self.pos += n
        return p

    def u32(self) -> int:
        return _U32.unpack_from(self.buf, self.need(4))[0]

    def u64(self) -> int:
        return _U64.unpack_from(self.buf, self.need(8))[0]

    def string(self) -> str:
        n = self.u64()
        p = self.need(n)
        try:
            return bytes(self.buf[p:p + n]).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ModelError(f"{self.name} is corrupted: a string at byte {p} is not UTF-8 ({exc})") from None

    def skip_value(self, vtype: int) -> None:
        if vtype in _SCALAR:
            self.need(struct.calcsize(_SCALAR[vtype]))
        elif vtype == _STRING:
            self.need(self.u64())
        elif vtype == _ARRAY:
            etype, count = self.u32(), self.u64()
            if etype in _SCALAR:
                self.need(count * struct.calcsize(_SCALAR[etype]))
            elif etype == _STRING:
                if count > (self.size - self.pos) // 8:
                    self.need(count * 8)  # raises: not even the lengths fit
                buf, pos, size = self.buf, self.pos, self.size
                unpack = _U64.unpack_from
                for _ in range(count):  # the strings' lengths are all that says where the array ends
                    if pos + 8 > size:
                        pos = size + 1  # truncated inside the array
                        break
                    pos += 8 + unpack(buf, pos)[0]
                self.need(pos - self.pos)  # raises when the array runs past the end
            else:
                for _ in range(count):
                    self.skip_value(etype)
        else:
            raise ModelError(f"{self.name} is corrupted: unknown metadata value type {vtype} at byte {self.pos}")

    def value(self, vtype: int):
        if vtype in _SCALAR:
            fmt = _SCALAR[vtype]
            v = struct.unpack_from(fmt, self.buf, self.need(struct.calcsize(fmt)))[0]
            return bool(v) if vtype == 7 else v
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY:
            etype, count = self.u32(), self.u64()
            if etype in _NUMPY:
                width = struct.calcsize(_SCALAR[etype])
                p = self.need(count * width)
                arr = np.frombuffer(self.buf, dtype=_NUMPY[etype], count=count, offset=p)
                return [bool(x) for x in arr.tolist()] if etype == 7 else arr.tolist()
            return [self.value(etype) for _ in range(count)]
        raise ModelError(f"{self.name} is corrupted: unknown metadata value type {vtype} at byte {self.pos}")


class GGUFFile:
    """The header of a GGUF file, its metadata (decoded on first :meth:`get`) and its tensors (memory-mapped).

    Raises ModelError for a file that is missing, not GGUF, of an unsupported version or byte order,
    or truncated or corrupted (in its header or before a tensor's last byte).
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        if not self.path.is_file():
            raise ModelError(f"GGUF file not found: {self.path}")
        name = self.path.name
        size = self.path.stat().st_size
        if size < 24:
            raise ModelError(f"{name} is not a readable GGUF file (corrupted or truncated): {size} bytes")
        self._map = np.memmap(self.path, dtype=np.uint8, mode="r").view(np.ndarray)  # plain views: no memmap overhead
        buf = memoryview(self._map)
        cur = _Cursor(buf, name)
        if bytes(buf[:4]) != MAGIC:
            raise ModelError(f"{name} is not a readable GGUF file (corrupted or truncated): it does not start "
                             f"with {MAGIC!r}")
        cur.need(4)
        self.version = cur.u32()
        if self.version not in VERSIONS:
            swapped = int.from_bytes(self.version.to_bytes(4, "little"), "big")
            why = ("a big-endian file (not supported)" if swapped in VERSIONS
                   else f"version {self.version} (supported: {', '.join(map(str, VERSIONS))})")
            raise ModelError(f"{name} is not a readable GGUF file: {why}")
        n_tensors, n_kv = cur.u64(), cur.u64()
        if n_tensors > size or n_kv > size:
            raise ModelError(f"{name} is not a readable GGUF file (corrupted or truncated): it claims "
                             f"{n_tensors} tensors and {n_kv} metadata entries in {size} bytes")
        self._fields: dict[str, tuple[int, int]] = {}  # key -> (value type, offset of the value)
        for _ in range(n_kv):
            key = cur.string()
            vtype = cur.u32()
            self._fields[key] = (vtype, cur.pos)
            cur.skip_value(vtype)
        self._meta: dict[str, object] = {}
        infos = []
        for _ in range(n_tensors):
            tname = cur.string()
            n_dims = cur.u32()
            if n_dims > 8:
                raise ModelError(f"{name} is corrupted: tensor {tname!r} claims {n_dims} dimensions")
            shape = tuple(cur.u64() for _ in range(n_dims))
            infos.append((tname, cur.u32(), shape, cur.u64()))
        align = self.get("general.alignment", DEFAULT_ALIGNMENT)
        if not isinstance(align, int) or align <= 0 or align & (align - 1):
            raise ModelError(f"{name} is corrupted: general.alignment {align!r} is not a power of two")
        data_start = -(-cur.pos // align) * align
        self.tensors: dict[str, TensorInfo] = {}
        for tname, qtype, shape, offset in infos:
            try:
                n_bytes = _tensor_bytes(int(qtype), shape, tname)
            except ModelError as exc:
                raise ModelError(f"{name} is corrupted: {exc}") from None
            info = TensorInfo(tname, int(qtype), shape, data_start + offset, n_bytes)
            end = info.data_offset + info.n_bytes
            if end > size:
                raise ModelError(f"{name} is truncated: tensor {tname!r} ends at byte {end} but the file has "
                                 f"{size} bytes")
            self.tensors[tname] = info

    def keys(self) -> list[str]:
        """The metadata keys, in file order."""
        return list(self._fields)

    def get(self, key: str, default=None):
        """The metadata value of ``key`` (Python numbers, ``str``, ``bool`` or lists of them; decoded once), or
        ``default`` when the file has no such key."""
        if key in self._meta:
            return self._meta[key]
        entry = self._fields.get(key)
        if entry is None:
            return default
        vtype, pos = entry
        cur = _Cursor(memoryview(self._map), self.path.name)
        cur.pos = pos
        value = cur.value(vtype)
        self._meta[key] = value
        return value

    def array_length(self, key: str) -> int | None:
        """The number of elements of an array value without decoding it (None when ``key`` is not an array)."""
        entry = self._fields.get(key)
        if entry is None or entry[0] != _ARRAY:
            return None
        return _U64.unpack_from(self._map, entry[1] + 4)[0]

    def data(self, name: str) -> np.ndarray:
        """The bytes of tensor ``name`` (a read-only view of the mapped file)."""
        t = self.tensors[name]
        return self._map[t.data_offset:t.data_offset + t.n_bytes]
