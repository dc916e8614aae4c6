"""`flow.save` / `flow.load`: exact round trips, atomic writes, clear errors on bad files, no pickle."""

from __future__ import annotations

import ast
import json
import math
import os
import pathlib
import pickle
import struct
import sys

import ml_dtypes
import numpy as np
import pytest
import safetensors.numpy

import flow
from flow.core import dtypes as _dtypes
from flow import _checkpoint_file as sf
from flow import serialization as ser
from flow.serialization import CheckpointError, load, save


def _values(dt: _dtypes.dtype, shape: tuple[int, ...], rng) -> np.ndarray:
    """Random values of a flow dtype, with NaN/inf/-0.0 for floats so bitwise checks bite."""
    if dt.name == "bool":
        return np.asarray(rng.random(shape) < 0.5)
    if dt.kind == 1:
        info = np.iinfo(dt.np_dtype)
        return np.asarray(
            rng.integers(info.min, info.max, size=shape, dtype=dt.np_dtype, endpoint=True)
        )
    arr = np.asarray(rng.standard_normal(shape)).astype(dt.np_dtype)
    flat = arr.reshape(-1)
    for i, v in enumerate([np.nan, np.inf, -np.inf, -0.0][: flat.size]):
        flat[i] = v
    return arr


def assert_same(got, want) -> None:
    """Same type, dtype, shape and bytes (NaN payloads and -0.0 included)."""
    assert type(got) is type(want)
    a = got.numpy() if isinstance(got, flow.Tensor) else np.asarray(got)
    b = want.numpy() if isinstance(want, flow.Tensor) else np.asarray(want)
    assert (a.dtype, a.shape) == (b.dtype, b.shape), f"{a.dtype}{a.shape} != {b.dtype}{b.shape}"
    assert a.tobytes() == np.ascontiguousarray(b).tobytes()


def assert_tree_same(got, want, path="") -> None:
    assert type(got) is type(want), f"at {path!r}: {type(got)} != {type(want)}"
    if isinstance(want, dict):
        assert list(got) == list(want), f"at {path!r}"
        for k in want:
            assert_tree_same(got[k], want[k], f"{path}.{k}")
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want), f"at {path!r}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_tree_same(g, w, f"{path}.{i}")
    elif isinstance(want, (flow.Tensor, np.ndarray, np.generic)):
        assert_same(got, want)
    elif isinstance(want, float) and math.isnan(want):
        assert math.isnan(got)
    else:
        assert got == want and repr(got) == repr(want), f"at {path!r}: {got!r} != {want!r}"


# ------------------------------------------------------------------------ round trips


# Both formats: a .safetensors path is one file, any other new path a directory.
FORMATS = pytest.mark.parametrize("name", ["ckpt.safetensors", "ckpt"], ids=["file", "dir"])


@FORMATS
@pytest.mark.parametrize("dt", _dtypes.ALL_DTYPES, ids=lambda d: d.name)
def test_round_trip_every_dtype(dt, name, tmp_path, rng):
    base = flow.from_numpy(_values(dt, (3, 4), rng))
    state = {
        "matrix": base,
        "scalar": flow.from_numpy(_values(dt, (), rng)),
        "empty": flow.from_numpy(_values(dt, (0, 3), rng)),
        "transposed": flow.transpose(base, 0, 1),  # a non-contiguous view
        "strided": flow.from_numpy(_values(dt, (6, 5), rng)[::2, ::-2]),
    }
    assert not state["transposed"].numpy().flags.c_contiguous
    save(state, tmp_path / name)
    got = load(tmp_path / name)
    assert_tree_same(got, state)
    assert got["scalar"].shape == () and got["empty"].shape == (0, 3)
    assert got["transposed"].dtype is dt


def test_bfloat16_keeps_every_bit_pattern(tmp_path):
    bits = np.arange(1 << 16, dtype=np.uint16)
    t = flow.from_numpy(bits.view(ml_dtypes.bfloat16))
    save({"w": t}, str(tmp_path / "bf16.safetensors"))
    got = load(str(tmp_path / "bf16.safetensors"))["w"]
    assert got.dtype is flow.bfloat16
    np.testing.assert_array_equal(got.numpy().view(np.uint16), bits)


@FORMATS
def test_round_trip_training_checkpoint(name, tmp_path, rng):
    w = flow.from_numpy(rng.standard_normal((4, 3)).astype(np.float32))
    state = {
        "model": {
            "layers.0.weight": w,
            "layers.0.bias": flow.zeros(3),
            "head": [flow.ones(2, dtype=flow.int64), flow.tensor([True, False])],
        },
        "optimizer": {
            "state": {0: {"step": 7, "exp_avg": flow.zeros(4, 3)}, 1: {"step": 7}},
            "param_groups": [
                {"params": [0, 1], "lr": 0.1, "betas": (0.9, 0.999), "amsgrad": False}
            ],
        },
        "epoch": 3,
        "lr": 0.1,
        "best": float("inf"),
        "loss": float("nan"),
        "neg_zero": -0.0,
        "big": 2**80,
        "name": "run-ü-\u2603",
        "note": None,
        "empty": {"list": [], "tuple": (), "dict": {}},
        "nested_tuple": (1, (2.5, "x"), [None, (True,)]),
        "array": np.arange(6, dtype=np.uint8).reshape(2, 3),
        "np_scalar": np.float32(2.5),
        "np_int": np.int64(-4),
    }
    path = tmp_path / name
    save(state, path)
    assert_tree_same(load(path), state)
    assert_tree_same(load(path, map_location="cpu"), state)


def test_big_endian_array_round_trips_by_value(tmp_path):
    arr = np.arange(6, dtype=">f4").reshape(2, 3)[:, ::2]
    save({"a": arr}, tmp_path / "be")
    got = load(tmp_path / "be")["a"]
    assert got.dtype == np.dtype("<f4")
    np.testing.assert_array_equal(got, arr)


def test_tied_tensors_stay_tied(tmp_path):
    w = flow.ones(2, 2)
    save({"encoder": w, "decoder": w, "copy": flow.ones(2, 2)}, tmp_path / "tied.safetensors")
    got = load(tmp_path / "tied.safetensors")
    assert got["encoder"] is got["decoder"] and got["copy"] is not got["encoder"]
    assert len(safetensors.numpy.load_file(tmp_path / "tied.safetensors")) == 2


def test_top_level_tensor_and_scalar(tmp_path):
    save(flow.arange(5), tmp_path / "t")
    assert_same(load(tmp_path / "t"), flow.arange(5))
    save(1.5, tmp_path / "s")
    assert load(tmp_path / "s") == 1.5


def test_tensor_names_are_key_paths(tmp_path):
    """Other safetensors readers see the model's parameter names."""
    save(
        {"model": {"fc": [{"weight": flow.ones(1)}]}, "model.fc.0.weight": flow.zeros(1)},
        tmp_path / "n.safetensors",
    )
    names = set(safetensors.numpy.load_file(tmp_path / "n.safetensors"))
    assert names == {"model.fc.0.weight", "model.fc.0.weight#1"}


def test_loaded_tensors_are_writable_and_independent(tmp_path):
    save({"w": flow.zeros(3)}, tmp_path / "w")
    a, b = load(tmp_path / "w")["w"], load(tmp_path / "w")["w"]
    a.numpy()[0] = 5.0
    assert b.numpy()[0] == 0.0
    assert load(tmp_path / "w")["w"].numpy()[0] == 0.0


def test_plain_safetensors_file_loads_as_flat_dict(tmp_path, rng):
    arrays = {
        "embed.weight": rng.standard_normal((5, 2)).astype(np.float32),
        "mask": np.array([True, False]),
        "bf": np.arange(3).astype(ml_dtypes.bfloat16),
    }
    safetensors.numpy.save_file(arrays, tmp_path / "foreign.safetensors", metadata={"format": "np"})
    got = load(tmp_path / "foreign.safetensors")
    assert set(got) == set(arrays)
    for name, arr in arrays.items():
        assert_same(got[name], flow.from_numpy(arr))


def test_plain_file_with_dtype_flow_lacks(tmp_path):
    safetensors.numpy.save_file({"q": np.zeros(3, np.uint8)}, tmp_path / "u8")
    with pytest.raises(CheckpointError, match=r"'q' has dtype uint8.*supported: bool"):
        load(tmp_path / "u8")


@pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")
def test_file_mode_follows_umask(tmp_path):
    mask = os.umask(0o022)
    os.umask(mask)
    save({"x": 1}, tmp_path / "m.safetensors")
    assert os.stat(tmp_path / "m.safetensors").st_mode & 0o777 == 0o666 & ~mask


@pytest.mark.skipif(os.name != "posix", reason="symlinks")
def test_save_through_symlink_replaces_the_target(tmp_path):
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real" / "ckpt", tmp_path / "link")
    save({"x": 1}, tmp_path / "link")
    assert os.path.islink(tmp_path / "link")
    assert load(tmp_path / "real" / "ckpt") == {"x": 1}


# ------------------------------------------------------------------------ atomic writes


def _save_previous(path):
    save({"version": 1, "w": flow.ones(4)}, path)
    return path.read_bytes()


def _assert_only(path, previous):
    assert path.read_bytes() == previous
    assert os.listdir(path.parent) == [path.name], "a temporary file was left behind"


def test_failed_write_keeps_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.safetensors"
    previous = _save_previous(path)
    real_fdopen = os.fdopen

    class HalfWriter:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def write(self, data):
            self.f.write(data[: len(data) // 2])
            self.f.flush()
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fdopen", lambda *a, **k: HalfWriter(real_fdopen(*a, **k)))
    with pytest.raises(OSError, match="No space left"):
        save({"version": 2, "w": flow.zeros(1000)}, path)
    monkeypatch.undo()
    _assert_only(path, previous)
    assert load(path)["version"] == 1


@pytest.mark.parametrize("fails", ["fsync", "replace"])
def test_failed_sync_or_rename_keeps_previous_checkpoint(tmp_path, monkeypatch, fails):
    path = tmp_path / "ckpt.safetensors"
    previous = _save_previous(path)

    def boom(*args):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, fails, boom)
    with pytest.raises(OSError, match="Input/output error"):
        save({"version": 2}, path)
    monkeypatch.undo()
    _assert_only(path, previous)


def test_interrupt_keeps_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.safetensors"
    previous = _save_previous(path)

    def interrupt(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupt)
    with pytest.raises(KeyboardInterrupt):
        save({"version": 2}, path)
    monkeypatch.undo()
    _assert_only(path, previous)


def test_unsaveable_object_touches_nothing(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    previous = _save_previous(path)
    with pytest.raises(TypeError):
        save({"version": 2, "bad": object()}, path)
    _assert_only(path, previous)


# ------------------------------------------------------------------------ save errors


@pytest.mark.parametrize(
    ("obj", "match"),
    [
        (
            {"model": {"layers": [{"weight": object()}]}},
            r"cannot save object at 'model\.layers\.0\.weight'",
        ),
        ({"opt": {"fn": print}}, r"builtin_function_or_method at 'opt\.fn'"),
        ({"s": {1, 2}}, r"cannot save set at 's'"),
        ({"b": b"bytes"}, r"cannot save bytes at 'b'"),
        ({"c": 1 + 2j}, r"cannot save complex at 'c'"),
        ({"a": [np.zeros(2, np.complex64)]}, r"'a\.0' has unsupported dtype complex64"),
        ({"o": np.array([None])}, r"'o' has unsupported dtype object"),
        ({"m": {(1, 2): flow.ones(1)}}, r"key \(1, 2\) of type tuple at 'm'"),
        ({"m": {True: 1}}, r"key True of type bool at 'm'"),
        (object(), r"at the top level"),
        ({"p": pathlib.Path("x")}, r"cannot save pathlib\.[\w.]*Path at 'p'"),
    ],
)
def test_unsupported_objects_name_the_key_path(tmp_path, obj, match):
    with pytest.raises(TypeError, match=match):
        save(obj, tmp_path / "x")
    assert os.listdir(tmp_path) == []


def test_circular_reference(tmp_path):
    loop: list = [1]
    loop.append({"back": loop})
    with pytest.raises(TypeError, match=r"circular reference at '1\.back'"):
        save(loop, tmp_path / "x")


def test_save_path_errors(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="does not hold a checkpoint; refusing to replace"):
        save({}, tmp_path)
    assert os.listdir(tmp_path) == ["notes.txt"]
    (tmp_path / "d.safetensors").mkdir()
    with pytest.raises(IsADirectoryError, match="is a directory"):
        save({}, tmp_path / "d.safetensors")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        save({}, tmp_path / "missing" / "ckpt")
    with pytest.raises(TypeError, match="str or os.PathLike"):
        save({}, 3)


# ------------------------------------------------------------------------ load errors


def _header(path) -> tuple[dict, bytes]:
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8 : 8 + n]), raw[8 + n :]


def _write_header(path, header: dict, body: bytes) -> None:
    """Write an edited checkpoint, re-signed (its checksum recomputed) so that the edit
    reaches the checks behind the checksum."""
    meta = header.get("__metadata__", {})
    if sf._DIGEST_KEY in meta:
        meta[sf._DIGEST_KEY] = sf._NO_DIGEST
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    raw = struct.pack("<Q", len(text)) + text + body
    path.write_bytes(raw)
    if sf._DIGEST_KEY in meta:
        digest = sf._file_digest(str(path), sf._NO_DIGEST).encode()
        path.write_bytes(raw.replace(f'"{sf._NO_DIGEST}"'.encode(), b'"' + digest + b'"'))


def _edit_tree(path, edit) -> None:
    header, body = _header(path)
    tree = json.loads(header["__metadata__"]["flow.tree"])
    header["__metadata__"]["flow.tree"] = json.dumps(edit(tree))
    _write_header(path, header, body)


@pytest.fixture
def ckpt(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    save({"w": flow.ones(4, 4), "b": flow.zeros(4), "epoch": 3}, path)
    return path


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.ckpt"):
        load(tmp_path / "nope.ckpt")


def test_load_directory_that_is_no_checkpoint(tmp_path):
    with pytest.raises(CheckpointError, match="not a checkpoint directory"):
        load(tmp_path)


@pytest.mark.parametrize("keep", [0, 4, 8, 20, -1, -17])
def test_truncated_file(ckpt, keep):
    raw = ckpt.read_bytes()
    ckpt.write_bytes(raw[:keep])
    with pytest.raises(CheckpointError, match=rf"{ckpt.name}: not a valid safetensors checkpoint"):
        load(ckpt)


@pytest.mark.parametrize("offset", [0, 7, 8, 9, 30, 60])
def test_flipped_header_byte(ckpt, offset):
    raw = bytearray(ckpt.read_bytes())
    raw[offset] ^= 0xFF
    ckpt.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match=ckpt.name):
        load(ckpt)


@pytest.mark.parametrize("offset", [-1, -40, -64])
def test_flipped_data_byte(ckpt, offset):
    raw = bytearray(ckpt.read_bytes())
    raw[offset] ^= 0x01
    ckpt.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match=rf"{ckpt.name}: corrupted checkpoint: its "
                       r"contents \(structure, scalars or tensor data\) do not match the "
                       "checksum recorded when it was saved"):  # fmt: skip
        load(ckpt)


def test_header_claims_larger_tensor(ckpt):
    header, body = _header(ckpt)
    header["w"]["shape"] = [4, 400]
    start = header["w"]["data_offsets"][0]
    header["w"]["data_offsets"] = [start, start + 4 * 4 * 400]
    _write_header(ckpt, header, body)
    with pytest.raises(CheckpointError, match="not a valid safetensors checkpoint"):
        load(ckpt)


def test_header_shape_disagrees_with_offsets(ckpt):
    header, body = _header(ckpt)
    header["w"]["shape"] = [4, 5]
    _write_header(ckpt, header, body)
    with pytest.raises(CheckpointError, match="not a valid safetensors checkpoint"):
        load(ckpt)


def test_tree_references_unknown_tensor(ckpt):
    def edit(tree):
        tree["dict"][0][1]["tensor"] = "ghost"
        return tree

    _edit_tree(ckpt, edit)
    with pytest.raises(
        CheckpointError,
        match=r"at 'w': reference to tensor 'ghost', which the checkpoint does not hold",
    ):
        load(ckpt)


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("dtype", "float64", r"stored as float32\[4, 4\] but the tree expects float64\[4, 4\]"),
        ("shape", [16], r"stored as float32\[4, 4\] but the tree expects float32\[16\]"),
        ("dtype", "uint8", r"unsupported dtype 'uint8' for a tensor"),
        ("dtype", ["float32"], r"unsupported dtype \['float32'\] for a tensor"),
        ("shape", "4x4", r"but the tree expects float32'4x4'"),
    ],
)
def test_tree_disagrees_with_tensor(ckpt, field, value, match):
    def edit(tree):
        tree["dict"][0][1][field] = value
        return tree

    _edit_tree(ckpt, edit)
    with pytest.raises(CheckpointError, match=match):
        load(ckpt)


@pytest.mark.parametrize(
    ("tree", "match"),
    [
        ("{not json", "bad structure JSON"),
        (
            '{"dict": [["w", {"tensor": "w", "dtype": "float32", "shape": [4, 4]}]]}',
            "not referenced.*'b'",
        ),
        ('{"set": [1]}', "unexpected node"),
        ('{"dict": [["k"]]}', "bad dict entry"),
        ('{"dict": [["k", 1], ["k", 2]]}', "duplicate dict key 'k'"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply|bad structure JSON"),
    ],
    ids=["bad-json", "unreferenced-tensor", "unknown-node", "bad-entry", "duplicate-key", "deep"],
)
def test_malformed_tree(ckpt, tree, match):
    header, body = _header(ckpt)
    header["__metadata__"]["flow.tree"] = tree
    _write_header(ckpt, header, body)
    with pytest.raises(CheckpointError, match=match):
        load(ckpt)


def test_newer_format_version(ckpt):
    header, body = _header(ckpt)
    header["__metadata__"]["flow.format_version"] = "99"
    _write_header(ckpt, header, body)
    with pytest.raises(CheckpointError, match="format version '99' is not supported"):
        load(ckpt)


def test_map_location(ckpt):
    assert load(ckpt, map_location="cpu")["epoch"] == 3
    with pytest.raises(ValueError, match="map_location='cuda'"):
        load(ckpt, map_location="cuda")


# ------------------------------------------------------------------------ no pickle


@pytest.mark.parametrize("module", ["serialization", "_checkpoint_tree", "_checkpoint_file",
                                    "_checkpoint_dir", "_checkpoint_model"])
def test_module_never_uses_pickle(module):
    source = open(pathlib.Path(ser.__file__).with_name(f"{module}.py"), encoding="utf-8").read()
    tree = ast.parse(source)
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    } | {
        node.module.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module
    }
    assert not imported & {"pickle", "cPickle", "dill", "marshal", "shelve", "joblib", "torch"}
    assert "allow_pickle" not in source and "np.load(" not in source


def test_round_trip_without_pickle(tmp_path, monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("pickle was used")

    for name in ("dump", "dumps", "load", "loads", "Pickler", "Unpickler"):
        monkeypatch.setattr(pickle, name, forbidden)
    state = {"w": flow.ones(2), "arr": np.zeros(2), "meta": ("x", 1)}
    save(state, tmp_path / "p")
    assert_tree_same(load(tmp_path / "p"), state)


def test_file_is_plain_safetensors(tmp_path):
    save({"w": flow.ones(2), "n": 1}, tmp_path / "p.safetensors")
    header, _ = _header(tmp_path / "p.safetensors")
    assert set(header) == {"__metadata__", "w"}
    assert header["w"]["dtype"] == "F32"
    assert set(header["__metadata__"]) == {"flow.format_version", "flow.tree", "flow.sha256"}


class _Exploit:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


def test_pickle_payload_is_rejected_without_running(tmp_path):
    marker = tmp_path / "pwned"
    (tmp_path / "evil.pt").write_bytes(pickle.dumps({"w": _Exploit(str(marker))}))
    with pytest.raises(CheckpointError, match="not a valid safetensors checkpoint"):
        load(tmp_path / "evil.pt")
    assert not marker.exists()


def test_public_api():
    assert "flow.serialization" in sys.modules
    assert ser.__all__ == ["CheckpointError", "DisallowedClassError", "load", "save"]
    assert issubclass(CheckpointError, ValueError)


# ------------------------------------------------------------- checksum, temps, memory


_EDITS = [(b'"lr",0.125', b'"lr",0.135'), (b'"step",1200', b'"step",1300'),
          (b'"name","run-a"', b'"name","run-b"')]


@pytest.mark.parametrize("old, new", _EDITS)
def test_checksum_covers_structure_and_scalars(tmp_path, old, new):
    path = tmp_path / "ckpt.safetensors"
    save({"lr": 0.125, "step": 1200, "name": "run-a", "w": flow.ones(2)}, path)
    raw = path.read_bytes()
    assert raw.count(old.replace(b'"', b'\\"')) == 1  # the tree is a JSON string in the header
    path.write_bytes(raw.replace(old.replace(b'"', b'\\"'), new.replace(b'"', b'\\"')))
    with pytest.raises(CheckpointError, match=rf"{path.name}: corrupted checkpoint: its contents "
                                              r"\(structure, scalars or tensor data\) do not "
                                              "match the checksum"):  # fmt: skip
        load(path)


def _v1_file(path, obj) -> None:
    """A checkpoint as format version 1 wrote it (checksum over tensor data only)."""
    encoder = ser._Encoder()
    tree = encoder.encode(obj, "")
    meta = {sf._VERSION_KEY: "1", sf._TREE_KEY: json.dumps(tree, separators=(",", ":")),
            sf._DIGEST_KEY: sf._digest_v1(encoder.arrays)}  # fmt: skip
    path.write_bytes(safetensors.numpy.save(encoder.arrays, metadata=meta))


def test_version_1_checkpoints_still_load(tmp_path, rng):
    path = tmp_path / "v1"
    want = {"w": flow.tensor(rng.standard_normal((3, 2)).astype(np.float32)), "step": 7,
            "h": (np.arange(3, dtype=np.int16), 0.5)}  # fmt: skip
    _v1_file(path, want)
    assert_tree_same(load(path), want)
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 1
    path.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match="tensor data does not match the checksum"):
        load(path)


def test_streamed_file_is_what_safetensors_writes(tmp_path, rng):
    arrays = {"a": rng.standard_normal((5, 3)).astype(ml_dtypes.bfloat16),
              "b": np.arange(7, dtype=np.int64), "c": np.zeros((0, 2), np.float16),
              "d": np.array(True)}  # fmt: skip
    path = tmp_path / "s.safetensors"
    save(dict(arrays), path)
    got = safetensors.numpy.load_file(str(path))
    assert sorted(got) == sorted(f"{k}" for k in arrays)
    for k, v in arrays.items():
        assert_same(got[k], v)


_KILLED_WRITER = """
import os, sys, time
import numpy as np
import flow
real_fsync = os.fsync
def stuck(fd):
    print("writing", flush=True)
    time.sleep(600)
os.fsync = stuck
flow.save({"w": np.ones((512, 1024), np.float32)}, sys.argv[1])
"""


def test_a_killed_save_leaves_a_temp_that_the_next_save_removes(tmp_path):
    import signal
    import subprocess

    path = tmp_path / "ckpt.safetensors"
    save({"step": 1}, path)
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_WRITER, str(path)],
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stdout.readline() == "writing\n"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(60)
    temps = [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]
    assert len(temps) == 1 and f".{proc.pid}." in temps[0], temps
    assert (tmp_path / temps[0]).stat().st_size >= 512 * 1024 * 4
    assert load(path) == {"step": 1}  # the kill left the previous checkpoint intact
    keep = [f".ckpt.safetensors.{os.getpid()}.0a0b0c0d.tmp",  # a writer that is still running
            f".ckpt.safetensors.1.{proc.pid}.0a0b0c0d.tmp",  # a dead writer of another file
            ".ckpt.safetensors.0123456789abcdef.tmp"]  # of older flow (no pid), recent  # fmt: skip
    old = tmp_path / ".ckpt.safetensors.fedcba9876543210.tmp"  # of older flow, 2 hours old
    for name in [*keep, old.name]:
        (tmp_path / name).write_bytes(b"partial")
    os.utime(old, (old.stat().st_atime - 7200, old.stat().st_mtime - 7200))
    save({"step": 2}, path)
    assert sorted(os.listdir(tmp_path)) == sorted(["ckpt.safetensors", *keep])
    assert load(path) == {"step": 2}


_PEAK = """
import sys, tracemalloc
import numpy as np
import flow
state = {f"w{i}": flow.tensor(np.full((512, 2048), i, np.float32)) for i in range(4)}
state["opt"] = {"step": 3, "m": [np.ones((512, 1024), np.float64)]}
size = sum(t.numpy().nbytes for t in list(state.values())[:4]) + 8 * 512 * 1024
tracemalloc.start()
base = tracemalloc.get_traced_memory()[0]
flow.save(state, sys.argv[1])
saved = tracemalloc.get_traced_memory()[1] - base
tracemalloc.reset_peak()
base = tracemalloc.get_traced_memory()[0]
back = flow.load(sys.argv[1])
loaded = tracemalloc.get_traced_memory()[1] - base
assert float(back["w3"].numpy()[5, 7]) == 3.0 and back["opt"]["step"] == 3
print(size, saved, loaded)
"""


def test_save_streams_and_load_reads_once(tmp_path):
    """A save holds no second copy of the state (it streams); a load holds one copy."""
    import subprocess

    out = subprocess.run([sys.executable, "-c", _PEAK, str(tmp_path / "big")],
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    size, saved, loaded = map(int, out.stdout.split())
    assert saved < 0.3 * size, (size, saved)  # extra memory beyond the state itself
    assert loaded < 1.3 * size, (size, loaded)
