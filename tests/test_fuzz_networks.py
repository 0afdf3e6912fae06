"""User network files of the tune flow (`--network FILE`), fuzzed with Hypothesis from damaged real ones.

A tiny torch model (a conv, a ReLU, a dense layer) is exported once per module as a
torch.export program (.pt2) and as ONNX; the generators damage those bytes as a user's
copy gets damaged or mislabelled: cut at a random offset, flipped or inserted bytes, an
empty file, the other format's content (or the right content under another extension),
a .pt2 archive with a member removed or its bytes damaged or one field of its JSON
changed, an ONNX protobuf with one field changed anywhere, its nodes, weights or inputs
removed, huge, zero, negative or symbolic input dims. The property, for every example:

* `load_network` loads the file, and then the Relax module it made, compiled by TVM,
  computes on the example inputs what the file's own reference computes (the exported
  program in eager PyTorch, or ONNX Runtime), or
* it raises `NetworkFileError` naming the file. No other exception escapes.

Examples are derandomized (the same on every run); how many each property ran, and how
many of those loaded, is printed at the end of the module.
"""

from __future__ import annotations

import hashlib
import io
import json
import tempfile
import zipfile
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tcl.workloads.user_network import NetworkFileError, load_network

from conftest import print_past_capture
from test_fuzz_readers import byte_damage, json_edit
from tiny_net import TinyNet

pytestmark = pytest.mark.slow  # ~0.1-2 s an example (import, and a TVM build of what loads)

FUZZ = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

EXAMPLES: Counter[str] = Counter()  # examples run per property, and how many loaded


@pytest.fixture(scope="module", autouse=True)
def _print_example_counts(request):
    yield
    if EXAMPLES:
        print_past_capture(request, "hypothesis examples run: " + ", ".join(f"{k}={n}" for k, n in sorted(EXAMPLES.items())))


@pytest.fixture(scope="module")
def real_files(tmp_path_factory) -> dict[str, bytes]:
    """The bytes of the tiny model exported as .pt2 and as .onnx (fixed input 1x3x8x8)."""
    torch.manual_seed(0)
    model, x = TinyNet().eval(), (torch.randn(1, 3, 8, 8),)
    root = tmp_path_factory.mktemp("networks")
    torch.export.save(torch.export.export(model, x), str(root / "net.pt2"))
    torch.onnx.export(model, x, str(root / "net.onnx"), dynamo=False, input_names=["image"])
    return {suffix: (root / f"net{suffix}").read_bytes() for suffix in (".pt2", ".onnx")}


def test_the_undamaged_files_load_and_run_like_their_reference(real_files):
    """The property's first branch is reachable: both real files load and agree with their reference,
    and so do both as the generators rewrite them (so damage is tested, not the rewriting)."""
    import onnx

    for suffix, blob in real_files.items():
        assert _load_or_clear_error(blob, suffix) == "loaded", suffix
    assert _load_or_clear_error(_zip(_members(real_files[".pt2"])), ".pt2") == "loaded"
    assert _load_or_clear_error(onnx.load_from_string(real_files[".onnx"]).SerializeToString(), ".onnx") == "loaded"


# ================================================================ the property

_CHECKED: dict[str, str] = {}  # sha1 of (suffix, bytes) -> outcome: a file seen again is not rebuilt


def _load_or_clear_error(blob: bytes, suffix: str) -> str:
    """Load `blob` saved as `damaged<suffix>`; "loaded" (after checking it runs like its reference)
    or "refused" (NetworkFileError naming the file). Anything else fails the example."""
    key = hashlib.sha1(suffix.encode() + b"\0" + blob).hexdigest()
    if key in _CHECKED:
        return _CHECKED[key]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"damaged{suffix}"
        path.write_bytes(blob)
        try:
            net = load_network(str(path))
        except NetworkFileError as err:
            assert str(path) in str(err), str(err)
            _CHECKED[key] = "refused"
            return "refused"
        _runs_like_its_reference(net)
    _CHECKED[key] = "loaded"
    return "loaded"


def _runs_like_its_reference(net) -> None:
    """The loaded Relax module, built by TVM (no tuning), against the file's reference on its inputs."""
    import tvm
    from tvm import relax

    from tcl.tvm.e2e import first_tensor

    vm = relax.VirtualMachine(tvm.compile(net.relax_mod, target="llvm"), tvm.cpu(0))
    got = first_tensor(vm["main"](*[tvm.runtime.tensor(x.numpy(), tvm.cpu(0)) for x in net.inputs])).numpy()
    with torch.no_grad():
        want = first_tensor(net.reference(*net.inputs)).numpy()
    assert got.shape == want.shape, (got.shape, want.shape)
    # Damaged weights can be NaN or near float32's limit; there TVM and the reference may sum in
    # another order (inf vs a finite value) or treat NaN differently (relu), so compare the rest.
    ok = np.isfinite(want) & np.isfinite(got) & (np.abs(want) < 1e30)
    scale = float(np.abs(want[ok]).max()) if ok.any() else 1.0
    np.testing.assert_allclose(got[ok], want[ok], rtol=1e-4, atol=1e-5 * max(scale, 1.0))


def _check(name: str, blob: bytes, suffix: str) -> None:
    EXAMPLES[name] += 1
    EXAMPLES[f"{name}_loaded"] += _load_or_clear_error(blob, suffix) == "loaded"


# ================================================================ damage common to both formats

def raw_damage(blob: bytes) -> st.SearchStrategy[bytes]:
    """Cut at a random offset, flipped or inserted bytes (test_fuzz_readers.byte_damage), or empty."""
    return byte_damage(blob) | st.just(b"")


@FUZZ
@given(st.data())
def test_a_damaged_or_mislabelled_network_file_loads_or_is_one_clear_error(real_files, data):
    """Raw damage to either file, and any content under any extension (a .pt2 that holds ONNX, ...)."""
    content = data.draw(st.sampled_from(sorted(real_files)), label="content")
    suffix = data.draw(st.sampled_from([".pt2", ".onnx", ".pth", ".zip", ".txt", ""]), label="suffix")
    blob = data.draw(st.just(real_files[content]) | raw_damage(real_files[content]), label="blob")
    _check("raw", blob, suffix)


# ================================================================ .pt2: a zip archive

def _members(blob: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(blob)) as z:
        return {name: z.read(name) for name in z.namelist()}


def _zip(members: dict[str, bytes]) -> bytes:
    """An archive of `members` (stored, as torch writes it), with valid CRCs: damage reaches torch's
    parsers, not only the zip layer."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        for name, content in members.items():
            z.writestr(name, content)
    return buf.getvalue()


def _is_json(content: bytes) -> bool:
    try:
        json.loads(content)
    except ValueError:
        return False
    return True


@st.composite
def pt2_damage(draw, blob: bytes) -> bytes:
    """A member removed, its bytes damaged, or one field of a JSON member changed (graph, tensor
    metadata with their sizes, weight and example-input configs); then re-zipped."""
    members = _members(blob)
    names = sorted(members)
    how = draw(st.sampled_from(["remove", "damage", "json"]))
    if how == "remove":
        del members[draw(st.sampled_from(names))]
        return _zip(members)
    if how == "damage":
        name = draw(st.sampled_from(names))
        members[name] = draw(raw_damage(members[name]))
        return _zip(members)
    name = draw(st.sampled_from([n for n in names if _is_json(members[n])]))
    members[name] = draw(json_edit(members[name].decode())).encode()
    return _zip(members)


@FUZZ
@given(st.data())
def test_a_damaged_pt2_archive_loads_or_is_one_clear_error(real_files, data):
    _check("pt2_archive", data.draw(pt2_damage(real_files[".pt2"])), ".pt2")


# ================================================================ .onnx: a protobuf

HUGE_DIMS = [2 ** 31, 2 ** 40, 2 ** 62, 2 ** 63 - 1]


def _repeated(field) -> bool:
    flag = getattr(field, "is_repeated", None)  # newer protobuf; `label` is deprecated there
    return flag if isinstance(flag, bool) else field.label == field.LABEL_REPEATED


def _scalars(msg) -> list[tuple]:
    """(message, field, index or None) of every scalar value set anywhere in a protobuf message."""
    out = []
    for field, value in msg.ListFields():
        if field.message_type is not None:
            for item in (value if _repeated(field) else [value]):
                out += _scalars(item)
        elif _repeated(field):
            out += [(msg, field, i) for i in range(len(value))]
        else:
            out.append((msg, field, None))
    return out


_INT_RANGE = {"int32": (-2 ** 31, 2 ** 31 - 1), "int64": (-2 ** 63, 2 ** 63 - 1),
              "uint32": (0, 2 ** 32 - 1), "uint64": (0, 2 ** 64 - 1)}


def _new_value(draw, field, old, names: list[str]):
    """Another value of the field's own type: extreme or small ints, any float, another name or any
    text, damaged bytes, another enum value."""
    from google.protobuf.descriptor import FieldDescriptor as F

    if field.enum_type is not None:
        return draw(st.sampled_from([v.number for v in field.enum_type.values]))
    cpp = field.cpp_type
    if cpp == F.CPPTYPE_BOOL:
        return not old
    if cpp in (F.CPPTYPE_FLOAT, F.CPPTYPE_DOUBLE):
        return draw(st.floats(width=32 if cpp == F.CPPTYPE_FLOAT else 64))
    if cpp == F.CPPTYPE_STRING and field.type == F.TYPE_BYTES:
        return draw(raw_damage(old))
    if cpp == F.CPPTYPE_STRING:
        return draw(st.sampled_from(names) | st.text(max_size=12))
    kind = {F.CPPTYPE_INT32: "int32", F.CPPTYPE_INT64: "int64", F.CPPTYPE_UINT32: "uint32",
            F.CPPTYPE_UINT64: "uint64"}[cpp]
    lo, hi = _INT_RANGE[kind]
    return draw(st.sampled_from([v for v in (0, 1, -1, old - 1, old + 1, *HUGE_DIMS, lo, hi) if lo <= v <= hi])
                | st.integers(max(lo, -64), min(hi, 64)))


@st.composite
def onnx_damage(draw, blob: bytes) -> bytes:
    """One field of the model changed (anywhere), an input's dims made huge, zero, negative or
    symbolic, or a node, a weight, an input or an output removed."""
    import onnx

    model = onnx.load_from_string(blob)
    graph = model.graph
    weights = {init.name for init in graph.initializer}
    inputs = [i for i in graph.input if i.name not in weights]
    how = draw(st.sampled_from(["field", "field", "dims", "remove"]))
    if how == "field":
        names = sorted({n for node in graph.node for n in (*node.input, *node.output)} | {"", "x"})
        msg, field, index = draw(st.sampled_from(_scalars(model)))
        old = getattr(msg, field.name) if index is None else getattr(msg, field.name)[index]
        new = _new_value(draw, field, old, names)
        if index is None:
            setattr(msg, field.name, new)
        else:
            getattr(msg, field.name)[index] = new
    elif how == "dims":
        dims = draw(st.sampled_from(inputs)).type.tensor_type.shape.dim
        dim = dims[draw(st.integers(0, len(dims) - 1))]
        change = draw(st.sampled_from(["huge", "zero", "negative", "symbolic", "unknown", "drop", "add"]))
        if change == "huge":
            dim.dim_value = draw(st.sampled_from(HUGE_DIMS) | st.integers(10 ** 4, 10 ** 6))
        elif change in ("zero", "negative"):
            dim.dim_value = 0 if change == "zero" else draw(st.integers(-2 ** 31, -1))
        elif change == "symbolic":
            dim.dim_param = draw(st.sampled_from(["N", "batch", ""]))
        elif change == "unknown":
            dim.Clear()
        elif change == "drop":
            dims.remove(dim)
        else:
            dims.add().dim_value = draw(st.integers(1, 8))
    else:
        where = draw(st.sampled_from(["node", "initializer", "input", "output"]))
        items = getattr(graph, where)
        del items[draw(st.integers(0, len(items) - 1))]
    return model.SerializeToString()


@FUZZ
@given(st.data())
def test_a_damaged_onnx_model_loads_or_is_one_clear_error(real_files, data):
    _check("onnx_proto", data.draw(onnx_damage(real_files[".onnx"])), ".onnx")
