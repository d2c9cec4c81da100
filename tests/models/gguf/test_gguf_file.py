"""The lean GGUF reader (momoka.models.gguf_file) against the gguf package's GGUFReader, the reference:
every metadata value (value and Python type) and every tensor (type, shape, offset, bytes) of the shipped
SmolLM2 file and of files written by gguf.GGUFWriter with every value type, then damaged files."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from momoka.errors import ModelError
from momoka.models.gguf_file import GGUFFile


def _same(a, b) -> bool:
    """Equal values of equal Python types, lists element by element."""
    if isinstance(a, list) or isinstance(b, list):
        return isinstance(a, list) and isinstance(b, list) and len(a) == len(b) and all(map(_same, a, b))
    if type(a) is not type(b):
        return False
    return a == b or (isinstance(a, float) and np.isnan(a) and np.isnan(b))


def _check_against_reader(path) -> GGUFFile:
    import gguf

    ref = gguf.GGUFReader(str(path), "r")
    got = GGUFFile(path)
    keys = [k for k in ref.fields if not k.startswith("GGUF.")]  # the reader's own header pseudo-fields
    assert got.keys() == keys
    for k in keys:
        if k == "t.nested":  # the reader flattens an array of arrays; checked by hand below
            continue
        want = ref.fields[k].contents()
        assert _same(got.get(k), want), k
        if isinstance(want, list):
            assert got.array_length(k) == len(want)
        else:
            assert got.array_length(k) is None
    assert list(got.tensors) == [t.name for t in ref.tensors]
    for t in ref.tensors:
        info = got.tensors[t.name]
        assert info.tensor_type == int(t.tensor_type)
        assert info.shape == tuple(int(s) for s in t.shape)
        assert (info.data_offset, info.n_bytes) == (int(t.data_offset), int(t.n_bytes))
        np.testing.assert_array_equal(got.data(t.name), np.asarray(t.data).view(np.uint8).reshape(-1))
    assert got.get("no.such.key", "default") == "default"
    return got


def test_shipped_model_reads_as_the_gguf_package_reads_it(smollm_gguf):
    got = _check_against_reader(smollm_gguf)
    assert got.array_length("tokenizer.ggml.tokens") == 49152
    assert got.get("general.architecture") == "llama"


def _write_all_types(path, alignment: int | None = None):
    import gguf

    w = gguf.GGUFWriter(str(path), "llama")
    if alignment is not None:
        w.add_custom_alignment(alignment)
    T = gguf.GGUFValueType
    w.add_uint8("t.u8", 200)
    w.add_int8("t.i8", -100)
    w.add_uint16("t.u16", 60000)
    w.add_int16("t.i16", -30000)
    w.add_uint32("t.u32", 4_000_000_000)
    w.add_int32("t.i32", -2_000_000_000)
    w.add_float32("t.f32", 0.15625)
    w.add_uint64("t.u64", 2**63 + 5)
    w.add_int64("t.i64", -(2**62))
    w.add_float64("t.f64", 1e-300)
    w.add_bool("t.true", True)
    w.add_bool("t.false", False)
    w.add_string("t.str", "naïve — 文字 \u0000 end")
    w.add_string("t.empty", "")
    w.add_array("t.strings", ["", "a", "Ġthe", "日本語", "x" * 1000])
    w.add_array("t.ints", [1, -2, 3])
    w.add_array("t.floats", [0.5, -1.25])
    w.add_array("t.bools", [True, False, True])
    w.add_array("t.empty_list", [])
    w.add_key_value("t.u16s", [1, 2, 65535], T.ARRAY, sub_type=T.UINT16)
    w.add_key_value("t.nested", [[1, 2], [3]], T.ARRAY, sub_type=T.ARRAY)
    rng = np.random.default_rng(0)
    w.add_tensor("a.f32", rng.standard_normal((3, 64)).astype(np.float32))
    w.add_tensor("b.f16", rng.standard_normal((2, 32)).astype(np.float16))
    w.add_tensor("c.q8", gguf.quants.quantize(rng.standard_normal((4, 64)).astype(np.float32),
                                              gguf.GGMLQuantizationType.Q8_0),
                 raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.add_tensor("d.q4k", rng.integers(0, 256, size=(2, 144), dtype=np.uint8),  # a type momoka does not run
                 raw_dtype=gguf.GGMLQuantizationType.Q4_K)
    w.add_tensor("e.vec", np.arange(7, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.mark.parametrize("alignment", [None, 64])
def test_every_value_type_and_tensor_type_reads_as_the_gguf_package_reads_it(tmp_path, alignment):
    got = _check_against_reader(_write_all_types(tmp_path / "all.gguf", alignment))
    # hand-checked values, not only the reference's
    assert got.get("t.u64") == 2**63 + 5 and got.get("t.i8") == -100 and got.get("t.true") is True
    assert got.get("t.strings") == ["", "a", "Ġthe", "日本語", "x" * 1000]
    assert got.get("t.nested") == [[1, 2], [3]] and got.array_length("t.nested") == 2
    assert got.tensors["d.q4k"].n_bytes == 2 * 144 and got.tensors["d.q4k"].shape == (256, 2)
    assert got.tensors["c.q8"].n_bytes == 4 * 2 * 34
    assert got.tensors["a.f32"].data_offset % (alignment or 32) == 0


def test_damaged_files_raise_model_errors(tmp_path):
    data = _write_all_types(tmp_path / "all.gguf").read_bytes()
    p = tmp_path / "bad.gguf"

    def opens(b: bytes):
        p.write_bytes(b)
        return GGUFFile(p)

    with pytest.raises(ModelError, match="not found"):
        GGUFFile(tmp_path / "missing.gguf")
    with pytest.raises(ModelError, match="not a readable GGUF"):
        opens(b"this is not a model" * 10)
    with pytest.raises(ModelError, match="not a readable GGUF"):
        opens(b"GGUF")
    with pytest.raises(ModelError, match="version 1"):
        opens(data[:4] + struct.pack("<I", 1) + data[8:])
    with pytest.raises(ModelError, match="big-endian"):
        opens(data[:4] + struct.pack(">I", 3) + data[8:])
    with pytest.raises(ModelError, match="claims"):  # a tensor count no file could hold
        opens(data[:8] + struct.pack("<Q", 2**60) + data[16:])
    # cut at every point of the header: always a ModelError, never another exception
    header_end = min(t.data_offset for t in GGUFFile(tmp_path / "all.gguf").tensors.values())
    for cut in range(0, header_end, 7):
        with pytest.raises(ModelError):
            opens(data[:cut])
    # the data section cut short: the last tensor named
    last = GGUFFile(tmp_path / "all.gguf").tensors["e.vec"]
    with pytest.raises(ModelError, match="truncated: tensor 'e.vec'"):
        opens(data[:last.data_offset + last.n_bytes - 1])
    assert opens(data[:last.data_offset + last.n_bytes]).tensors["e.vec"].n_bytes == 28  # only the padding cut
    # a string length running past the end of the file (the first key's length)
    with pytest.raises(ModelError, match="truncated or corrupted"):
        opens(data[:24] + struct.pack("<Q", 2**40) + data[32:])
    # an unknown metadata value type (the first entry's type, after its 8-byte length and key)
    key_len = struct.unpack_from("<Q", data, 24)[0]
    at = 32 + key_len
    with pytest.raises(ModelError, match="unknown metadata value type 99"):
        opens(data[:at] + struct.pack("<I", 99) + data[at + 4:])
