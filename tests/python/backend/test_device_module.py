"""torch.neuron, the device module: devices, properties, random numbers, memory,
streams and events, and how the environment chooses the devices."""

from __future__ import annotations

import gc
import importlib.util
import struct

import pytest
import torch

import neuronsim

MIB = 2**20


# ---- the modules ----------------------------------------------------------------


def test_import_torch_neuronx_registers_the_device():
    import torch_neuronx

    assert importlib.util.find_spec("torch_neuronx") is not None
    assert torch_neuronx.__version__ == neuronsim.__version__
    assert torch_neuronx.fallback_counts is neuronsim.fallback_counts
    assert torch._C._get_privateuse1_backend_name() == "neuron"
    assert torch.device("neuron").type == "neuron"


DEVICE_MODULE_API = [
    "is_available",
    "device_count",
    "current_device",
    "set_device",
    "device",
    "synchronize",
    "manual_seed",
    "manual_seed_all",
    "seed",
    "initial_seed",
    "get_rng_state",
    "get_rng_state_all",
    "set_rng_state",
    "set_rng_state_all",
    "memory_allocated",
    "max_memory_allocated",
    "memory_reserved",
    "reset_peak_memory_stats",
    "empty_cache",
    "memory_stats",
    "mem_get_info",
    "get_device_properties",
    "get_device_name",
    "is_bf16_supported",
    "Stream",
    "Event",
    "current_stream",
    "stream",
]


@pytest.mark.parametrize("name", DEVICE_MODULE_API)
def test_device_module_has(name):
    assert hasattr(torch, "neuron")
    assert callable(getattr(torch.neuron, name)), name


def test_accelerator_is_neuron():
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator().type == "neuron"
    assert torch.accelerator.device_count() == torch.neuron.device_count()


def test_is_available_and_count_in_process():
    assert torch.neuron.is_available() is True
    assert torch.neuron.device_count() >= 2


# ---- the environment chooses the devices (each in a fresh process) ---------------

DESCRIBE = """
import json, torch, neuronsim
n = torch.neuron
out = {"count": n.device_count(), "available": n.is_available(),
       "accel_count": torch.accelerator.device_count()}
if n.is_available():
    props = [n.get_device_properties(i) for i in range(n.device_count())]
    out["cores"] = [p.physical_core for p in props]
    out["per_device"] = [p.physical_cores_per_device for p in props]
    out["names"] = [p.name for p in props]
    out["total_memory"] = props[0].total_memory
    out["instance"] = neuronsim.instance()
    last = n.device_count() - 1
    out["last_device"] = str(torch.ones(2).to(f"neuron:{last}").device)
    try:
        torch.empty(1, device=f"neuron:{last + 1}")
        out["past_count"] = None
    except RuntimeError as e:
        out["past_count"] = str(e)
else:
    try:
        torch.ones(2).to("neuron")
        out["error"] = None
    except Exception as e:
        out["error"] = f"{type(e).__name__}: {e}"
print(json.dumps(out))
"""


AUTOLOAD = """
import json, sys, torch
out = {"neuron": hasattr(torch, "neuron"), "neuronsim_loaded": "neuronsim" in sys.modules}
if out["neuron"]:
    out["count"] = torch.neuron.device_count()
    out["device"] = str(torch.ones(2).to("neuron").device)
print(json.dumps(out))
"""


ENVIRONMENTS = {
    "default": {},
    "visible 2-3": {"NEURON_RT_VISIBLE_CORES": "2-3"},
    "lnc 2": {"NEURON_RT_VIRTUAL_CORE_SIZE": "2"},
    "logical nc 2": {"NEURON_LOGICAL_NC_CONFIG": "2"},
    "trn1.2xlarge": {"NEURONSIM_INSTANCE": "trn1.2xlarge"},
}
INVALID_ENVIRONMENTS = [
    ("NEURON_RT_VISIBLE_CORES", "bogus"),
    ("NEURON_RT_VISIBLE_CORES", "8"),  # trn2.3xlarge has cores 0-7
    ("NEURON_RT_VIRTUAL_CORE_SIZE", "3"),  # not a divisor of 8
    ("NEURON_LOGICAL_NC_CONFIG", "4"),  # 1 or 2
    ("NEURONSIM_INSTANCE", "trn9.nothing"),
]


@pytest.fixture(scope="module")
def described(spawn_python):
    """DESCRIBE's answer in each environment, all subprocesses started at once."""
    spawned = {name: spawn_python(DESCRIBE, env) for name, env in ENVIRONMENTS.items()}
    for variable, value in INVALID_ENVIRONMENTS:
        spawned[(variable, value)] = spawn_python(DESCRIBE, {variable: value})
    spawned["autoload"] = spawn_python(AUTOLOAD)
    spawned["no autoload"] = spawn_python(AUTOLOAD, {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    yield spawned
    for s in spawned.values():
        s.kill()


def test_default_instance_is_trn2_3xlarge_with_8_cores(described):
    got = described["default"].json()
    assert got["instance"] == "trn2.3xlarge"
    assert got["count"] == 8
    assert got["accel_count"] == 8
    assert got["available"] is True
    assert got["cores"] == list(range(8))
    assert got["per_device"] == [1] * 8
    assert got["total_memory"] == 24 * 2**30  # a core's HBM stack: 96 GiB in 4
    assert got["last_device"] == "neuron:7"
    assert "neuron:8" in got["past_count"] and "8" in got["past_count"]


def test_visible_cores_range(described):
    got = described["visible 2-3"].json()
    assert got["count"] == 2
    assert got["available"] is True
    assert got["cores"] == [2, 3]
    assert got["last_device"] == "neuron:1"
    assert "neuron:2" in got["past_count"]


@pytest.mark.parametrize("name", ["lnc 2", "logical nc 2"])
def test_virtual_core_size_two(described, name):
    got = described[name].json()
    assert got["count"] == 4
    assert got["per_device"] == [2] * 4
    assert got["cores"] == [0, 2, 4, 6]


def test_instance_trn1_2xlarge(described):
    got = described["trn1.2xlarge"].json()
    assert got["instance"] == "trn1.2xlarge"
    assert got["count"] == 2
    assert got["total_memory"] == 16 * 2**30  # a core's HBM stack: 32 GiB in 2
    assert all("trn1" in name for name in got["names"])


@pytest.mark.parametrize(("variable", "value"), INVALID_ENVIRONMENTS)
def test_invalid_environment_means_no_device_and_a_clear_error(described, variable, value):
    got = described[(variable, value)].json()
    assert got["count"] == 0
    assert got["available"] is False
    assert got["accel_count"] == 0
    assert got["error"] is not None, "making a tensor on an invalid machine succeeded"
    assert got["error"].startswith("RuntimeError"), got["error"]
    assert variable in got["error"], got["error"]
    assert value in got["error"], got["error"]


# ---- autoload ---------------------------------------------------------------------


def test_bare_import_torch_autoloads_neuron(described):
    got = described["autoload"].json()
    assert got["neuron"] is True
    assert got["neuronsim_loaded"] is True
    assert got["count"] == 8
    assert got["device"] == "neuron:0"


def test_autoload_can_be_turned_off(described):
    got = described["no autoload"].json()
    assert got["neuron"] is False
    assert got["neuronsim_loaded"] is False


# ---- current device ---------------------------------------------------------------


def test_current_device_and_set_device():
    assert torch.neuron.current_device() == 0
    torch.neuron.set_device(1)
    assert torch.neuron.current_device() == 1
    assert torch.accelerator.current_device_index() == 1
    assert torch.empty(2, device="neuron").device == torch.device("neuron:1")
    assert torch.ones(2).to("neuron").device == torch.device("neuron:1")
    torch.neuron.set_device("neuron:0")
    assert torch.neuron.current_device() == 0
    torch.neuron.set_device(torch.device("neuron", 1))
    assert torch.neuron.current_device() == 1


def test_device_context_manager():
    assert torch.neuron.current_device() == 0
    with torch.neuron.device(1):
        assert torch.neuron.current_device() == 1
        t = torch.empty(3, device="neuron")
        assert t.device == torch.device("neuron:1")
        with torch.neuron.device("neuron:0"):
            assert torch.neuron.current_device() == 0
        assert torch.neuron.current_device() == 1
    assert torch.neuron.current_device() == 0
    assert torch.empty(3, device="neuron").device == torch.device("neuron:0")


def test_device_context_manager_restores_after_an_error():
    with pytest.raises(ZeroDivisionError), torch.neuron.device(1):
        raise ZeroDivisionError
    assert torch.neuron.current_device() == 0


# ---- properties -------------------------------------------------------------------


def test_device_properties():
    props = torch.neuron.get_device_properties(0)
    assert isinstance(props.name, str) and props.name
    assert isinstance(props.total_memory, int)
    assert props.total_memory > 0
    assert props.total_memory == torch.neuron.mem_get_info(0)[1]
    assert torch.neuron.get_device_properties(1).physical_core == 1
    assert torch.neuron.get_device_properties("neuron:1").physical_core == 1
    assert torch.neuron.get_device_name(0) == props.name
    assert torch.neuron.get_device_name() == props.name
    assert isinstance(repr(props), str)
    # trn2: two physical cores per 24 GiB stack; TensorE's BF16 peak of 128 x 128 MACs at
    # 2.4 GHz; 16 DMA engines of 23 B/ns; 2.9 TB/s over 4 stacks.
    assert props.physical_cores_per_hbm_stack == 2
    assert props.peak_bf16_flops == pytest.approx(2 * 128 * 128 * 2.4e9, rel=0.01)
    assert props.dma_bytes_per_s == pytest.approx(16 * 23e9)
    assert props.hbm_bytes_per_s == pytest.approx(2.9e12 / 4)


def test_device_properties_follow_the_chip_configuration(spawn_python):
    # trn1: TensorE at 2.8 GHz, and a core's DMA engines together at the rate fitted on the
    # matmul tutorial (103.5 B/ns, below the engines' 16 x 17): the rates a roofline takes.
    props = spawn_python(
        "import json, torch, neuronsim\n"
        "p = torch.neuron.get_device_properties(0)\n"
        "print(json.dumps([p.generation, p.peak_bf16_flops, p.dma_bytes_per_s]))",
        {"NEURONSIM_INSTANCE": "trn1.32xlarge"},
    ).json()
    assert props[0] == "trn1"
    assert props[1] == pytest.approx(2 * 128 * 128 * 2.8e9)
    assert props[2] == pytest.approx(103.5e9)


def test_the_programs_buffers_count_in_the_hbm_stack():
    # A compiled graph's program keeps its scratch in the core's HBM while it stays loaded:
    # mem_get_info's free bytes leave it out, as the allocator's limit does.
    from neuronsim import _C

    before = _C.program_hbm_bytes(0)
    f = torch.compile(lambda x: (x.exp() * 2).softmax(-1).sum(0), backend="neuron")
    x = torch.randn(257, 509, device="neuron")  # a shape no other test compiles
    f(x)
    held = _C.program_hbm_bytes(0)
    assert held > before  # the intermediates of the program, 1 MiB here
    # neuron:0 and neuron:1 (physical cores 0 and 1) share the stack.
    free, total = torch.neuron.mem_get_info(0)
    neighbour = torch.neuron.memory_reserved(1) + _C.program_hbm_bytes(1)
    assert free == total - torch.neuron.memory_reserved(0) - held - neighbour


def test_is_bf16_supported():
    assert torch.neuron.is_bf16_supported() is True


def test_synchronize():
    x = torch.ones(4, 4).to("neuron")
    y = x @ x
    torch.neuron.synchronize()
    torch.neuron.synchronize(0)
    torch.neuron.synchronize("neuron:1")
    torch.accelerator.synchronize()
    assert torch.equal(y.cpu(), torch.full((4, 4), 4.0))


# ---- random numbers ---------------------------------------------------------------


def _seed_and_offset(state: torch.Tensor) -> tuple[int, int]:
    return struct.unpack("<qq", bytes(state[-16:].tolist()))


def test_manual_seed_and_initial_seed():
    torch.neuron.manual_seed(1234)
    assert torch.neuron.initial_seed() == 1234
    torch.neuron.manual_seed_all(99)
    assert torch.neuron.initial_seed() == 99
    with torch.neuron.device(1):
        assert torch.neuron.initial_seed() == 99


def test_seed_picks_a_new_seed():
    torch.neuron.manual_seed(5)
    torch.neuron.seed()
    first = torch.neuron.initial_seed()
    torch.neuron.seed()
    second = torch.neuron.initial_seed()
    assert isinstance(first, int)
    assert first != second  # two 64-bit random seeds


def test_rng_state_is_16_bytes_of_seed_and_offset():
    torch.neuron.manual_seed(4321)
    state = torch.neuron.get_rng_state()
    assert isinstance(state, torch.Tensor)
    assert state.dtype == torch.uint8
    assert state.device.type == "cpu"
    assert state.numel() == 16
    assert _seed_and_offset(state) == (4321, 0)
    torch.randn(10, device="neuron")
    seed, offset = _seed_and_offset(torch.neuron.get_rng_state())
    assert seed == 4321
    assert offset > 0


def test_set_rng_state_round_trip():
    torch.neuron.manual_seed(7)
    torch.randn(3, device="neuron")  # move off offset 0
    state = torch.neuron.get_rng_state()
    a = torch.randn(4, 5, device="neuron").cpu()
    b = torch.randn(4, 5, device="neuron").cpu()
    assert not torch.equal(a, b)
    torch.neuron.set_rng_state(state)
    assert torch.equal(torch.randn(4, 5, device="neuron").cpu(), a)
    assert torch.equal(torch.randn(4, 5, device="neuron").cpu(), b)


def test_rng_state_all_round_trip():
    torch.neuron.manual_seed_all(11)
    states = torch.neuron.get_rng_state_all()
    assert len(states) == torch.neuron.device_count()
    draws = torch.randn(6, device="neuron:1").cpu()
    torch.neuron.set_rng_state_all(states)
    assert torch.equal(torch.randn(6, device="neuron:1").cpu(), draws)


def test_torch_manual_seed_also_seeds_neuron():
    torch.manual_seed(2024)
    assert torch.neuron.initial_seed() == 2024
    a = torch.randn(8, device="neuron").cpu()
    torch.manual_seed(2024)
    b = torch.randn(8, device="neuron").cpu()
    assert torch.equal(a, b)


def test_devices_have_their_own_generators():
    torch.neuron.manual_seed_all(3)
    torch.randn(100, device="neuron:0")
    _, offset0 = _seed_and_offset(torch.neuron.get_rng_state(0))
    _, offset1 = _seed_and_offset(torch.neuron.get_rng_state(1))
    assert offset0 > 0
    assert offset1 == 0


# ---- memory -----------------------------------------------------------------------


@pytest.fixture
def quiet_collector():
    """Tensors held by reference cycles of earlier tests (an exception's frames) are freed
    by Python's collector at a moment of its choosing: freed first, and the collector kept
    still while a test compares byte counts."""
    gc.collect()
    gc.disable()
    yield
    gc.enable()


def test_memory_accounting_follows_a_tensor(quiet_collector):
    n = torch.neuron
    torch.neuron.synchronize()
    n.empty_cache()
    base_allocated = n.memory_allocated()
    base_reserved = n.memory_reserved()
    free_before, total = n.mem_get_info()
    n.reset_peak_memory_stats()
    assert n.max_memory_allocated() == base_allocated

    x = torch.empty(8 * MIB, dtype=torch.uint8, device="neuron")
    nbytes = x.numel() * x.element_size()
    assert n.memory_allocated() >= base_allocated + nbytes
    assert n.memory_allocated(0) == n.memory_allocated()
    assert n.memory_reserved() >= base_reserved + nbytes
    assert n.max_memory_allocated() >= base_allocated + nbytes
    free_with, total_with = n.mem_get_info()
    assert total_with == total
    assert free_with <= free_before - nbytes
    stats = n.memory_stats()
    assert stats["allocated_bytes.all.current"] == n.memory_allocated()
    assert stats["reserved_bytes.all.current"] == n.memory_reserved()

    del x
    assert n.memory_allocated() == base_allocated
    assert n.max_memory_allocated() >= base_allocated + nbytes  # the peak stays
    assert n.memory_reserved() >= base_reserved + nbytes  # cached, still reserved
    n.reset_peak_memory_stats()
    assert n.max_memory_allocated() == base_allocated
    n.empty_cache()
    assert n.memory_reserved() == base_reserved
    assert n.mem_get_info() == (free_before, total)


def test_memory_is_per_device():
    n = torch.neuron
    before0, before1 = n.memory_allocated(0), n.memory_allocated(1)
    y = torch.empty(MIB, dtype=torch.uint8, device="neuron:1")
    assert n.memory_allocated(1) >= before1 + MIB
    assert n.memory_allocated(0) == before0
    assert n.memory_allocated("neuron:1") == n.memory_allocated(1)
    del y
    assert n.memory_allocated(1) == before1


def test_cached_block_is_reused():
    n = torch.neuron
    x = torch.empty(2 * MIB, dtype=torch.uint8, device="neuron")
    del x
    reserved = n.memory_reserved()
    x = torch.empty(2 * MIB, dtype=torch.uint8, device="neuron")
    assert n.memory_reserved() == reserved
    del x


# ---- streams and events -----------------------------------------------------------


def test_streams():
    s = torch.neuron.Stream(priority=-1)
    assert isinstance(s, torch.Stream)
    assert s.device == torch.device("neuron:0")
    assert s.query() is True
    s.synchronize()
    default = torch.neuron.current_stream()
    assert isinstance(default, torch.Stream)
    assert default.device == torch.device("neuron:0")
    assert default != s
    with torch.neuron.stream(s):
        assert torch.neuron.current_stream() == s
        x = torch.ones(2, 2).to("neuron")
        y = x @ x
    assert torch.neuron.current_stream() == default
    s.wait_stream(default)
    assert torch.equal(y.cpu(), torch.full((2, 2), 2.0))
    with torch.neuron.stream(None):
        assert torch.neuron.current_stream() == default
    assert torch.neuron.default_stream() == default
    assert torch.neuron.default_stream(1).device == torch.device("neuron:1")
    with torch.neuron.stream(s):
        assert torch.neuron.default_stream() == default


def test_stream_of_another_device():
    s1 = torch.neuron.Stream(device=1)
    assert s1.device == torch.device("neuron:1")
    assert torch.neuron.current_device() == 0
    with torch.neuron.stream(s1):
        assert torch.neuron.current_stream(1) == s1
    assert torch.neuron.current_stream(1) != s1
    # Leaving the block gives back the current device of before it, as torch.cuda.stream does.
    assert torch.neuron.current_device() == 0


def test_event_elapsed_time():
    start = torch.neuron.Event(enable_timing=True)
    end = torch.neuron.Event(enable_timing=True)
    assert isinstance(start, torch.Event)
    start.record()
    x = torch.ones(16, 16).to("neuron")
    y = x @ x
    end.record()
    end.synchronize()
    assert end.query() is True
    elapsed = start.elapsed_time(end)
    assert isinstance(elapsed, float)
    assert elapsed >= 0.0
    assert torch.equal(y.cpu(), torch.full((16, 16), 16.0))


def test_event_on_a_stream():
    s = torch.neuron.Stream()
    e = torch.neuron.Event()
    e.record(s)
    torch.neuron.current_stream().wait_event(e)
    e.synchronize()
    assert e.query() is True


@pytest.mark.parametrize("module", ["neuronsim", "torch_neuronx"])
def test_importing_the_package_before_torch_registers_the_device(run_json, module):
    # The package imports torch, whose autoload imports the package again mid-import.
    got = run_json(
        f"""
        import json, {module}, torch
        x = torch.ones(2, device="neuron") + 1
        print(json.dumps({{"device": str(x.device), "sum": x.sum().item()}}))
        """
    )
    assert got == {"device": "neuron:0", "sum": 4.0}
