"""The CUDA Python protocols without a GPU: streams, the CUDA array interface, DLPack capsules, the primary
context, and a rig's tensors read as a GEMM's operands (with their refusals)."""

from __future__ import annotations

import gc
import itertools
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from driver_gemm.cuda import device as device_module
from driver_gemm.cuda import interop
from driver_gemm.cuda.interop import (KDL_CPU, KDL_CUDA, ArrayExport, array_view, device_pointer, exports_alive,
                                      read_capsule, stream_handle)
from driver_gemm.cuda.launch import PackedArguments
from driver_gemm.errors import ArgumentError
from driver_gemm.measure.rig_operands import matrix_values, raw_values, rig_operands
from driver_gemm.runners.on_tensors import _kernel_entry
from driver_gemm.specfile import spec_from_dict

ROOT = Path(__file__).resolve().parents[1]


# Addresses of stand-in arrays, each apart from the others (C may share no memory with A or B).
_ADDRESSES = itertools.count(0x7F0000000000, 0x1000000)


class CudaArray:
    """A stand-in for a CuPy array: only __cuda_array_interface__."""

    def __init__(self, shape, typestr="<f4", strides=None, address=None, **more):
        address = next(_ADDRESSES) if address is None else address
        self.__cuda_array_interface__ = {"version": 3, "shape": shape, "typestr": typestr,
                                         "data": (address, False), "strides": strides, **more}


class DlpackOnly:
    """A stand-in for an array with DLPack and nothing else."""

    def __init__(self, export):
        self._export = export

    def __dlpack__(self, stream=None):
        self.asked_stream = stream
        return self._export.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self._export.__dlpack_device__()


# --------------------------------------------------------------------------------------------------- streams

def test_any_stream_protocol_gives_its_handle():
    class CoreStream:
        def __cuda_stream__(self):
            return 0, 0xABC

    assert stream_handle(CoreStream()) == 0xABC
    assert stream_handle(SimpleNamespace(cuda_stream=0x123)) == 0x123      # a torch stream without the protocol
    assert stream_handle(SimpleNamespace(ptr=0x456)) == 0x456              # an older CuPy stream
    assert stream_handle(77) == 77 and stream_handle(None) is None


def test_a_stream_protocol_of_another_version_or_shape_is_refused():
    class Future:
        def __cuda_stream__(self):
            return 1, 5

    class Wrong:
        def __cuda_stream__(self):
            return 5

    with pytest.raises(ArgumentError, match="speaks version 1"):
        stream_handle(Future())
    with pytest.raises(ArgumentError, match=r"returns \(version, handle\)"):
        stream_handle(Wrong())
    with pytest.raises(ArgumentError, match="is no stream"):
        stream_handle("stream")


@pytest.mark.parametrize("handle", [1.5, "7", -1, 2**64])
def test_a_raw_stream_handle_is_a_whole_number_that_can_be_an_address(handle):
    # int() would take 1.5 as 1, the legacy default stream
    with pytest.raises(ArgumentError, match="is no stream|is no address"):
        stream_handle(handle)


# ------------------------------------------------------------------------------------- reading other arrays

def test_the_cuda_array_interface_is_read_with_strides_in_elements():
    view = array_view(CudaArray((3, 4), "<f2", strides=(16, 2)))
    assert (view.shape, view.dtype, view.strides) == ((3, 4), "float16", (8, 1))
    assert array_view(CudaArray((3, 4))).strides == (4, 1)        # no strides: C-contiguous
    assert array_view(CudaArray((2, 2), stream=1)).stream == 1


@pytest.mark.parametrize("interface, message", [
    ({"typestr": "<c8"}, "element type '<c8' is not supported"),
    ({"mask": object()}, "masked array"),
    ({"stream": 0}, "forbids"),
    ({"strides": (6, 3)}, "not whole float32 elements"),
])
def test_what_the_cuda_array_interface_cannot_say_is_refused(interface, message):
    fields = {"typestr": "<f4", **interface}
    with pytest.raises(ArgumentError, match=message):
        array_view(CudaArray((2, 2), **{k: v for k, v in fields.items() if k != "typestr"},
                             typestr=fields["typestr"]))


def _interface(**changes):
    fields = {"version": 3, "shape": (64, 32), "typestr": "<f4", "data": (0x7F0000000000, False), "strides": None}
    fields.update(changes)
    return SimpleNamespace(__cuda_array_interface__=fields)


@pytest.mark.parametrize("changes, message", [
    ({"shape": ("a", 32)}, r"\['shape'\] \('a', 32\) holds 'a', not a whole number"),
    ({"shape": None}, r"\['shape'\] is None: a tuple of whole numbers"),
    ({"shape": (64.7, 32)}, r"\['shape'\] \(64.7, 32\) holds 64.7, not a whole number"),
    ({"shape": (-1, 32)}, r"\['shape'\] \(-1, 32\) holds -1, below 0"),
    ({"strides": (128,)}, r"\['strides'\] \(128,\) has 1 entries, not 2"),
    ({"strides": (128, 4, 4)}, r"\['strides'\] \(128, 4, 4\) has 3 entries, not 2"),
    ({"strides": ("x", 4)}, r"\['strides'\] \('x', 4\) holds 'x'"),
    ({"data": None}, r"\['data'\] is None: the protocol gives \(address, read-only flag\)"),
    ({"data": (5,)}, r"\['data'\] is \(5,\)"),
    ({"data": ("0x10", False)}, r"\['data'\]\[0\] is '0x10': an address is a whole number"),
    ({"data": (0, False)}, r"\['data'\]\[0\] is 0 \(NULL\) for 2,048 elements"),
    ({"data": (-4096, False)}, r"\['data'\]\[0\] is -4096: an address is 0 to 2\*\*64 - 1"),
    ({"data": (2**70, False)}, r"\['data'\]\[0\] is 1180591620717411303424: an address is 0 to 2\*\*64 - 1"),
    ({"data": (0x7F0000000001, False)}, r"\['data'\]\[0\] is 0x7f0000000001, not a multiple of 4 bytes"),
    ({"stream": "x"}, r"\['stream'\] is 'x': a stream's handle"),
    ({"version": 99}, r"\['version'\] is 99: driver-gemm reads versions 1 to 3"),
])
def test_an_array_interface_that_cannot_describe_real_memory_is_refused_at_its_field(changes, message):
    with pytest.raises(ArgumentError, match=r"A: types.SimpleNamespace.__cuda_array_interface__" + message):
        rig_operands_of(_interface(**changes), CudaArray((32, 48)), CudaArray((64, 48)))
    with pytest.raises(ArgumentError, match=r"argument A: types.SimpleNamespace.__cuda_array_interface__"):
        device_pointer(_interface(**changes), "A")


def test_an_empty_array_may_be_at_null():
    assert array_view(_interface(shape=(0, 32), data=(0, False))).address == 0


def rig_operands_of(a, b, c):
    """What check_kernel reads of its operands, each named."""
    from driver_gemm.runners.on_tensors import _operand_view

    return rig_operands(*(_operand_view(name, obj, None) for name, obj in zip("ABC", (a, b, c))))


class _Device:
    """DLPack's device call answering what it is given."""

    def __init__(self, answer):
        self.answer = answer

    def __dlpack_device__(self):
        return self.answer

    def __dlpack__(self, stream=None):
        raise AssertionError("not asked for: the device is refused first")


class _Refusing:
    def __dlpack_device__(self):
        return KDL_CUDA, 0

    def __dlpack__(self, stream=None):
        raise BufferError("cannot export")


@pytest.mark.parametrize("operand, message", [
    (_Device(None), r"A: test_interop._Device.__dlpack_device__\(\) is None: a tuple of whole numbers"),
    (_Device((2, 0, 0)), r"__dlpack_device__\(\) \(2, 0, 0\) has 3 entries, not 2"),
    (_Refusing(), r"A: test_interop._Refusing.__dlpack__\(\) refused to export it: cannot export"),
    (SimpleNamespace(data_ptr=lambda: 0x1000, is_cuda=True, dtype="torch.float32", shape=(64, 32),
                     stride=lambda: None), r"A: types.SimpleNamespace.stride\(\) is None"),
    (SimpleNamespace(data_ptr=lambda: None, is_cuda=True, dtype="torch.float32", shape=(64, 32),
                     stride=lambda: (32, 1)), r"A: types.SimpleNamespace.data_ptr\(\) is None: an address"),
    (SimpleNamespace(data_ptr=lambda: 0x1000, is_cuda=True, dtype="torch.float32", shape="ab",
                     stride=lambda: (32, 1)), r"A: types.SimpleNamespace.shape is 'ab'"),
    (DlpackOnly(ArrayExport(0x1002, (64, 32), "float32")),
     r"DLPack data \+ byte_offset is 0x1002, not a multiple of 4"),
])
def test_dlpack_and_torch_style_operands_that_answer_nonsense_are_refused_with_the_operand_named(operand, message):
    with pytest.raises(ArgumentError, match=message):
        rig_operands_of(operand, CudaArray((32, 48)), CudaArray((64, 48)))


@pytest.mark.parametrize("c_at, message", [
    (0x7F0000000000, r"C \(bytes 0x7f0000000000 to 0x7f0000002fff\) overlaps A \(bytes 0x7f0000000000 to "
                     r"0x7f0000001fff\)"),
    (0x7F0000101000, "C .* overlaps B"),
])
def test_a_c_that_shares_memory_with_a_or_b_is_refused(c_at, message):
    # C is poisoned before the checked launch: memory it shares with A or B would be the rig's input overwritten.
    a = CudaArray((64, 32), address=0x7F0000000000)
    b = CudaArray((32, 48), address=0x7F0000100000)
    with pytest.raises(ArgumentError, match=message):
        rig_operands_of(a, b, CudaArray((64, 48), address=c_at))
    square = CudaArray((32, 32), address=0x7F0000000000)
    assert rig_operands_of(square, square, CudaArray((32, 32), address=0x7F0000200000))   # A and B are only read


def test_a_matrix_with_no_rows_or_columns_is_refused_as_the_operand_it_is():
    with pytest.raises(ArgumentError, match="A is 0 x 32: a GEMM's M, N and K are at least 1"):
        rig_operands_of(CudaArray((0, 32)), CudaArray((32, 48)), CudaArray((0, 48)))


def test_an_object_with_dlpack_only_is_read_through_its_capsule():
    export = ArrayExport(0x7F0000001000, (5, 7), "bfloat16", strides=(1, 5), device_id=3)
    holder = DlpackOnly(export)
    view = array_view(holder, stream=0x99)
    assert (view.shape, view.dtype, view.strides, view.device_id, view.address) == \
        ((5, 7), "bfloat16", (1, 5), 3, 0x7F0000001000)
    assert view.source == "__dlpack__" and holder.asked_stream == 0x99     # the producer orders work before ours
    del view
    gc.collect()


def test_host_memory_is_refused_wherever_a_device_array_is_wanted():
    host = np.zeros((2, 2), np.float32)
    with pytest.raises(ArgumentError, match="numpy.ndarray is on the host"):
        array_view(host)
    with pytest.raises(ArgumentError, match="on the host"):
        array_view(DlpackOnly(ArrayExport(host.ctypes.data, (2, 2), "float32", device_type=KDL_CPU, owner=host)))
    with pytest.raises(ArgumentError, match="is_cuda is False"):
        array_view(SimpleNamespace(data_ptr=lambda: 1, is_cuda=False))
    with pytest.raises(ArgumentError, match="argument A: numpy.ndarray is on the host"):
        device_pointer(host, "A")


def test_a_kernel_pointer_comes_from_any_protocol():
    torch_like = SimpleNamespace(data_ptr=lambda: 0x5000, is_cuda=True, shape=(2, 3), dtype="torch.float32",
                                 stride=lambda: (3, 1), device=SimpleNamespace(index=0))
    assert device_pointer(CudaArray((2, 2), address=0x1000)) == 0x1000
    assert device_pointer(torch_like) == 0x5000
    assert device_pointer(SimpleNamespace(address=0x2000)) == 0x2000
    assert device_pointer(DlpackOnly(ArrayExport(0x3000, (4,), "float32"))) == 0x3000
    packed = PackedArguments(["ptr", "int32"], [CudaArray((1,), address=0x1234_5678_9C), 7])
    assert int.from_bytes(packed.value_bytes(0), "little") == 0x1234_5678_9C
    with pytest.raises(ArgumentError, match="argument p: .*neither __cuda_array_interface__"):
        PackedArguments(["ptr"], [object()], ["p"])


# --------------------------------------------------------------------------------------------- offering ours

def test_an_export_offers_the_cuda_array_interface_version_3():
    class Stream:
        def __cuda_stream__(self):
            return 0, 0x77

    export = ArrayExport(0x7F0000000000, (3, 4), "float32", strides=(1, 3), stream=Stream())
    interface = export.__cuda_array_interface__
    assert interface["version"] == 3 and interface["typestr"] == "<f4"
    assert interface["shape"] == (3, 4) and interface["strides"] == (4, 12)      # bytes
    assert interface["data"] == (0x7F0000000000, False) and interface["stream"] == 0x77
    assert ArrayExport(1, (2,), "float16").__cuda_array_interface__["strides"] is None
    assert not hasattr(ArrayExport(1, (2,), "bfloat16"), "__cuda_array_interface__")   # DLPack names it


def test_the_capsule_holds_the_dlpack_fields():
    owner = object()
    export = ArrayExport(0x7F00_0000_2000, (6, 9), "float16", strides=(1, 6), device_id=2, owner=owner)
    before = exports_alive()
    capsule = export.__dlpack__(stream=-1)
    assert type(capsule).__name__ == "PyCapsule"
    tensor = read_capsule(capsule)
    assert (tensor.data, tensor.ndim, tensor.byte_offset) == (0x7F00_0000_2000, 2, 0)
    assert (tensor.device.device_type, tensor.device.device_id) == (KDL_CUDA, 2)
    assert (tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes) == (2, 16, 1)
    assert [tensor.shape[i] for i in range(2)] == [6, 9] and [tensor.strides[i] for i in range(2)] == [1, 6]
    assert exports_alive() == before + 1
    del tensor, capsule                   # never consumed: the capsule's destructor calls the deleter
    gc.collect()
    assert exports_alive() == before


def test_numpy_reads_a_host_export_through_dlpack_and_its_deleter_lets_go():
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    before = exports_alive()
    back = np.from_dlpack(ArrayExport(array.ctypes.data, (4, 3), "float32", strides=(1, 4), device_type=KDL_CPU,
                                      owner=array))
    assert np.array_equal(back, array.T)          # the same memory, read with the export's strides
    array[0, 0] = 42.0
    assert back[0, 0] == 42.0                     # no copy
    assert exports_alive() == before + 1
    del back
    gc.collect()
    assert exports_alive() == before


def test_a_copy_or_another_device_is_refused_as_a_buffer_error():
    export = ArrayExport(1, (2,), "float32")
    with pytest.raises(BufferError, match="without a copy"):
        export.__dlpack__(copy=True)
    with pytest.raises(BufferError, match="not"):
        export.__dlpack__(dl_device=(KDL_CPU, 0))


# ------------------------------------------------------------------------ the primary context, our handles

class FakeDriver:
    """The driver calls a Device makes, recorded."""

    class CUstream_flags:
        CU_STREAM_NON_BLOCKING = 1

    def __init__(self):
        self.calls = []
        self.next_pointer = 0x7000_0000

    def __getattr__(self, name):
        if not name.startswith("cu"):
            raise AttributeError(name)

        def call(*args):
            self.calls.append(name)
            if name == "cuDeviceGetCount":
                return 0, 1
            if name in ("cuDeviceGet", "cuCtxCreate", "cuDevicePrimaryCtxRetain", "cuStreamCreate"):
                return 0, {"cuDeviceGet": 0, "cuStreamCreate": 0x5555}.get(name, 0xC0C0)
            if name == "cuMemAlloc":
                self.next_pointer += 0x1000
                return 0, self.next_pointer
            return (0,)
        return call

    @staticmethod
    def CUcontext(value):
        return value

    @staticmethod
    def CUstream(value):
        return value


@pytest.fixture
def fake_driver(monkeypatch):
    driver = FakeDriver()
    monkeypatch.setattr(device_module, "driver_module", lambda: driver)
    monkeypatch.setattr(device_module, "read_properties", lambda ordinal: SimpleNamespace(name="GPU"))
    return driver


def test_a_device_works_in_the_primary_context_and_releases_only_its_hold(fake_driver):
    with device_module.Device(0) as device:
        assert device.context_kind == "primary" and not device.owns_context
    assert "cuDevicePrimaryCtxRetain" in fake_driver.calls and "cuDevicePrimaryCtxRelease" in fake_driver.calls
    assert "cuCtxCreate" not in fake_driver.calls and "cuCtxDestroy" not in fake_driver.calls


def test_an_own_context_is_made_and_destroyed_and_an_adopted_one_left_alone(fake_driver):
    with device_module.Device(0, own_context=True) as device:
        assert device.context_kind == "own"
    assert "cuCtxCreate" in fake_driver.calls and "cuCtxDestroy" in fake_driver.calls
    fake_driver.calls.clear()
    with device_module.Device(0, context=0x1234) as device:
        assert device.context_kind == "adopted"
    assert not {"cuCtxDestroy", "cuDevicePrimaryCtxRelease", "cuCtxCreate"} & set(fake_driver.calls)
    with pytest.raises(ValueError, match="give one of them"):
        device_module.Device(0, context=0x1234, own_context=True)


def test_the_worker_opens_a_context_of_its_own(monkeypatch):
    made = []
    monkeypatch.setattr(device_module, "Device", lambda ordinal, **kwargs: made.append(kwargs) or SimpleNamespace(
        make_current=lambda: None, close=lambda: None))
    from driver_gemm.runners import worker

    source = Path(worker.__file__).read_text()
    assert "OpeningDevice(device, own_context=True)" in source
    opening = device_module.OpeningDevice(0, own_context=True)
    opening.take()
    assert made == [{"own_context": True}]


def test_our_stream_speaks_the_protocol_and_a_foreign_one_is_used_not_destroyed(fake_driver):
    class CoreStream:
        def __cuda_stream__(self):
            return 0, 0xBEEF

    with device_module.Device(0) as device:
        ours = device.stream()
        assert ours.__cuda_stream__() == (0, 0x5555) and stream_handle(ours) == 0x5555
        theirs = device.stream(handle=CoreStream())
        assert theirs.address == 0xBEEF and not theirs.owned
    assert fake_driver.calls.count("cuStreamDestroy") == 1


def test_an_uploaded_buffer_is_offered_with_the_array_shape_and_type(fake_driver):
    with device_module.Device(0) as device:
        stream = device.stream()
        buffer = device.upload(np.ones((3, 5), np.float16), stream)
        interface = buffer.__cuda_array_interface__
        assert interface["shape"] == (3, 5) and interface["typestr"] == "<f2"
        assert interface["data"][0] == buffer.address and buffer.__dlpack_device__() == (KDL_CUDA, 0)
        view = buffer.view((5, 3), "float16", strides=(1, 5), stream=stream)
        assert view.__cuda_array_interface__["strides"] == (2, 10) and view.owner is buffer
        assert device.alloc(64).__cuda_array_interface__["shape"] == (64,)        # bytes
        with pytest.raises(ValueError, match="spans 16 elements"):
            device.alloc(60).view((4, 4), "float32")


# ----------------------------------------------------------------------------------- a rig's tensors as a GEMM

def test_sizes_orders_and_leading_dimensions_are_read_from_the_tensors():
    a = array_view(CudaArray((64, 32), "<f2"))                        # row-major, tight
    b = array_view(CudaArray((32, 48), "<f2", strides=(2, 64 * 2)))  # column-major, ld 64 (padded)
    c = array_view(CudaArray((64, 48), "<f4", strides=(56 * 4, 4)))  # row-major, ld 56
    operands = rig_operands(a, b, c)
    assert operands.shape == (64, 48, 32)
    assert operands.spec_fields() == {"types": {"a": "fp16", "b": "fp16", "c": "fp32"},
                                      "layouts": {"a": "row", "b": "col", "c": "row"},
                                      "ld": {"a": 32, "b": 64, "c": 56}}
    assert operands.c.span_elements == 63 * 56 + 48 and operands.c.padded and not operands.a.padded


@pytest.mark.parametrize("a, b, c, message", [
    (CudaArray((4, 4), "<f8"), CudaArray((4, 4)), CudaArray((4, 4)), "A holds float64"),
    (CudaArray((4, 4), strides=(8, 8)), CudaArray((4, 4)), CudaArray((4, 4)), r"strides \(2, 2\).*contiguous"),
    (CudaArray((4, 3)), CudaArray((4, 4)), CudaArray((4, 4)), r"A's columns \(K = 3\) must equal B's rows"),
    (CudaArray((4, 4)), CudaArray((4, 5)), CudaArray((4, 4)), "C is 4 x 4: it must be M x N = 4 x 5"),
    (CudaArray((2, 4, 4)), CudaArray((4, 4)), CudaArray((4, 4)), "A has 3 dimensions"),
    (CudaArray((4, 4)), CudaArray((4, 4)), SimpleNamespace(__cuda_array_interface__={
        "version": 3, "shape": (4, 4), "typestr": "<f4", "data": (0x1000, True)}), "C is read-only"),
])
def test_operands_a_kernel_cannot_take_are_refused_with_what_is_wrong(a, b, c, message):
    with pytest.raises(ArgumentError, match=message):
        rig_operands(array_view(a), array_view(b), array_view(c))


def test_a_tensor_on_the_host_or_on_another_gpu_is_refused():
    host = np.zeros((4, 4), np.float32)
    on_host = interop.ArrayView(host.ctypes.data, (4, 4), "float32", (4, 1), device_type=KDL_CPU)
    with pytest.raises(ArgumentError, match="A is in the host"):
        rig_operands(on_host, array_view(CudaArray((4, 4))), array_view(CudaArray((4, 4))))
    gpu = [interop.ArrayView(1, (4, 4), "float32", (4, 1), device_id=ordinal) for ordinal in (0, 1, 0)]
    with pytest.raises(ArgumentError, match="A on GPU 0, B on GPU 1"):
        rig_operands(*gpu)


def test_the_operands_make_a_typed_kernel_entry_the_spec_reader_takes():
    operands = rig_operands(array_view(CudaArray((64, 32), "<f2")),
                            array_view(CudaArray((32, 48), "<f2", strides=(2, 64 * 2))),
                            array_view(CudaArray((64, 48), "<f4")))
    entry = _kernel_entry("gemm<64>", ["ceil(N / 16)", "ceil(M / 16)"], [16, 16], None, None, operands,
                          {"types": {"accumulate": "fp32"}, "signature": ["A", "B", "C", "M", "N", "K", "ldb"]})
    entry["source"] = str(ROOT / "kernels" / "02_smem_tiles.cu")
    spec = spec_from_dict({"shapes": [[64, 48, 32]], "baseline": False, "kernels": [entry]})
    kernel = spec.kernels[0]
    assert kernel.name == "gemm" and kernel.is_typed
    assert dict(kernel.operands.orders) == {"a": "row", "b": "col", "c": "row"}
    assert kernel.operands.types.c.name == "fp32" and kernel.operands.types.accumulate.name == "fp32"
    with pytest.raises(ArgumentError, match="ld= is not taken: the tensors give it"):
        _kernel_entry("gemm", [1], [1], None, None, operands, {"ld": {"a": 40}})


def test_raw_bytes_read_back_decode_in_their_type_and_strides():
    values = np.array([1.5, -2.0, 0.25, 3.0])
    assert np.array_equal(raw_values(values.astype(np.float16).tobytes(), "float16"), values)
    bf16 = (values.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    assert np.array_equal(raw_values(bf16.tobytes(), "bfloat16"), values)
    flat = np.arange(10.0)
    assert np.array_equal(matrix_values(flat, 2, 3, (1, 4)), np.array([[0, 4, 8], [1, 5, 9]]))


# ------------------------------------------------------------------------------------------- check_kernel

def test_check_kernel_refuses_what_it_cannot_take_before_any_gpu_work():
    import driver_gemm as dg

    good = dict(grid=["ceil(N / 16)", "ceil(M / 16)"], block=[16, 16])
    kernel = ROOT / "kernels" / "02_smem_tiles.cu"
    with pytest.raises(ArgumentError, match="C is 4 x 4: it must be M x N = 4 x 8"):
        dg.check_kernel(kernel, "sgemm_smem_tiles<16>", CudaArray((4, 4)), CudaArray((4, 8)), CudaArray((4, 4)),
                        **good)
    with pytest.raises(ArgumentError, match="B: test_interop.DlpackOnly is on the host"):
        dg.check_kernel(kernel, "sgemm_smem_tiles<16>", CudaArray((4, 4)),
                        DlpackOnly(ArrayExport(1, (4, 4), "float32", device_type=KDL_CPU)), CudaArray((4, 4)), **good)
    with pytest.raises(ArgumentError, match="no kernel source file 'missing.cu'"):
        dg.check_kernel("missing.cu", "f", CudaArray((4, 4)), CudaArray((4, 4)), CudaArray((4, 4)), **good)
    with pytest.raises(ArgumentError, match="layouts= is not taken"):
        dg.check_kernel(kernel, "f", CudaArray((4, 4)), CudaArray((4, 4)), CudaArray((4, 4)),
                        layouts={"a": "col"}, **good)


def test_check_kernel_reads_a_spec_mistake_as_the_spec_reader_does():
    import driver_gemm as dg
    from driver_gemm.errors import SpecError

    with pytest.raises(SpecError, match="block"):
        dg.check_kernel(ROOT / "kernels" / "02_smem_tiles.cu", "sgemm_smem_tiles<16>", CudaArray((4, 4)),
                        CudaArray((4, 4)), CudaArray((4, 4)), grid=[1], block=[])


@pytest.mark.parametrize("changes, words", [
    ({"grid": [1, 1, 1, 1]}, "check_kernel: grid: grid has 1 to 3 dimensions (x, y, z), got 4"),
    ({"measure": {"mode": "bogus"}}, "check_kernel: measure.mode: must be one of events, graph, got 'bogus'"),
])
def test_check_kernel_places_a_mistake_at_its_own_argument_not_in_a_spec_file(changes, words):
    import driver_gemm as dg
    from driver_gemm.errors import SpecError

    arguments = {"grid": [1], "block": [16, 16], **changes}
    with pytest.raises(SpecError) as info:
        dg.check_kernel(ROOT / "kernels" / "02_smem_tiles.cu", "sgemm_smem_tiles<16>", CudaArray((4, 4)),
                        CudaArray((4, 4)), CudaArray((4, 4)), **arguments)
    assert str(info.value) == words


def test_without_a_gpu_a_well_formed_check_stops_at_the_driver(monkeypatch):
    import driver_gemm as dg
    from driver_gemm.errors import NoGpuError
    from driver_gemm.runners import on_tensors

    def no_gpu(ordinal):
        raise NoGpuError(f"no CUDA driver on this machine (asked for GPU {ordinal})")

    monkeypatch.setattr(on_tensors, "read_properties", no_gpu)
    a = CudaArray((8, 4), "<f2")
    b = CudaArray((4, 6), "<f2", strides=(2, 8))
    c = DlpackOnly(ArrayExport(0x1000, (8, 6), "float32", device_id=2))
    with pytest.raises(NoGpuError, match="asked for GPU 2"):          # the GPU the operands are on
        dg.check_kernel("__global__ void k(const void* A, const void* B, float* C, int M, int N, int K) {}\n",
                        "k", a, b, c, grid=[1], block=[1])
