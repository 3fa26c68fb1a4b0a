// Device guard, streams, events, generators and hooks (see guard.h).
#include "guard.h"

#include <atomic>
#include <cstring>
#include <deque>
#include <mutex>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/ops/empty.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/GeneratorImpl.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include "allocator.h"
#include "backend.h"
#include "neuronsim/sim/random.h"

namespace neuronsim::pytorch {

namespace {

constexpr auto kNeuron = c10::DeviceType::PrivateUse1;
thread_local c10::DeviceIndex t_device = 0;

// ---- generator --------------------------------------------------------------

class NeuronGenerator final : public c10::GeneratorImpl {
 public:
  explicit NeuronGenerator(c10::DeviceIndex index)
      : c10::GeneratorImpl(c10::Device(kNeuron, index),
                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)) {}

  void set_current_seed(uint64_t seed) override {
    seed_ = seed;
    offset_ = 0;
  }
  void set_offset(uint64_t offset) override { offset_ = offset; }
  uint64_t get_offset() const override { return offset_; }
  uint64_t current_seed() const override { return seed_; }
  uint64_t seed() override {
    set_current_seed(c10::detail::getNonDeterministicRandom());
    return seed_;
  }
  // 16 bytes: int64 seed, int64 offset (the tail of CUDA's Philox state).
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    at::Tensor state = at::empty({16}, at::TensorOptions().dtype(at::kByte));
    auto* p = state.data_ptr<uint8_t>();
    const int64_t s = static_cast<int64_t>(seed_), o = static_cast<int64_t>(offset_);
    std::memcpy(p, &s, 8);
    std::memcpy(p + 8, &o, 8);
    return state.getIntrusivePtr();
  }
  void set_state(const c10::TensorImpl& state) override {
    TORCH_CHECK(state.dtype() == at::kByte && state.numel() >= 16,
                "neuron: a generator state is a uint8 tensor of at least 16 bytes ending in the "
                "int64 seed and offset; got ",
                state.numel(), " elements of ", state.dtype());
    const auto* p = static_cast<const uint8_t*>(state.data()) + state.numel() - 16;
    int64_t s = 0, o = 0;
    std::memcpy(&s, p, 8);
    std::memcpy(&o, p + 8, 8);
    seed_ = static_cast<uint64_t>(s);
    offset_ = static_cast<uint64_t>(o);
  }
  static c10::DeviceType device_type() { return kNeuron; }

 private:
  NeuronGenerator* clone_impl() const override {
    auto* g = new NeuronGenerator(device().index());
    g->seed_ = seed_;
    g->offset_ = offset_;
    return g;
  }
  uint64_t seed_ = c10::default_rng_seed_val;
  uint64_t offset_ = 0;
};

std::once_flag g_generators_once;
std::deque<at::Generator> g_generators;  // one per device, never moved

// ---- events ------------------------------------------------------------------

struct Event {
  uint64_t time_ps = 0;
  c10::DeviceIndex device = 0;
};

// ---- guard -------------------------------------------------------------------

std::atomic<int64_t> g_next_stream{1};
thread_local std::vector<c10::StreamId> t_streams;  // current stream per device

class NeuronGuard final : public c10::impl::DeviceGuardImplInterface {
 public:
  c10::DeviceType type() const override { return kNeuron; }
  c10::Device exchangeDevice(c10::Device d) const override {
    const c10::Device old = getDevice();
    if (d.index() != old.index()) setDevice(d);
    return old;
  }
  c10::Device getDevice() const override { return {kNeuron, current_device()}; }
  void setDevice(c10::Device d) const override { set_current_device(d.index()); }
  void uncheckedSetDevice(c10::Device d) const noexcept override { t_device = d.index(); }
  c10::DeviceIndex deviceCount() const noexcept override {
    return static_cast<c10::DeviceIndex>(Backend::device_count_noexcept());
  }

  c10::Stream getStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::UNSAFE, d, current_stream_id(d.index()));
  }
  c10::Stream getDefaultStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool /*high_priority*/) const override {
    return getNewStream(d, 0);
  }
  c10::Stream getNewStream(c10::Device d, int /*priority*/) const override {
    return c10::Stream(c10::Stream::UNSAFE, d, g_next_stream++);
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    const c10::Stream old = getStream(s.device());
    current_stream_id(s.device_index()) = s.id();
    return old;
  }
  bool queryStream(const c10::Stream& /*s*/) const override { return true; }
  void synchronizeStream(const c10::Stream& /*s*/) const override {
    Backend::get().device().synchronize();
  }
  void synchronizeDevice(c10::DeviceIndex /*index*/) const override {
    Backend::get().device().synchronize();
  }

  void record(void** event, const c10::Stream& stream, c10::DeviceIndex index,
              c10::EventFlag /*flag*/) const override {
    TORCH_CHECK(index == -1 || index == stream.device_index(), "neuron: an event of neuron:", index,
                " cannot be recorded on a stream of neuron:", stream.device_index());
    if (*event == nullptr) *event = new Event();
    auto* e = static_cast<Event*>(*event);
    e->device = stream.device_index();
    e->time_ps = Backend::get().now_ps();
  }
  void block(void* /*event*/, const c10::Stream& /*stream*/) const override {}
  bool queryEvent(void* /*event*/) const override { return true; }
  void synchronizeEvent(void* /*event*/) const override {}
  void destroyEvent(void* event, c10::DeviceIndex /*index*/) const noexcept override {
    delete static_cast<Event*>(event);
  }
  double elapsedTime(void* start, void* end, c10::DeviceIndex /*index*/) const override {
    TORCH_CHECK(start != nullptr && end != nullptr,
                "neuron: both events must be recorded before elapsed_time()");
    const auto* a = static_cast<Event*>(start);
    const auto* b = static_cast<Event*>(end);
    return (static_cast<double>(b->time_ps) - static_cast<double>(a->time_ps)) / 1e9;
  }

 private:
  static c10::StreamId& current_stream_id(c10::DeviceIndex index) {
    if (t_streams.size() <= static_cast<size_t>(index)) t_streams.resize(index + 1, 0);
    return t_streams[index];
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, NeuronGuard);

// ---- hooks -------------------------------------------------------------------

struct NeuronHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return Backend::device_count_noexcept() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex /*index*/) const override { return true; }
  void init() const override { Backend::get(); }
  c10::DeviceIndex deviceCount() const override {
    return static_cast<c10::DeviceIndex>(Backend::device_count_noexcept());
  }
  void setCurrentDevice(c10::DeviceIndex index) const override { set_current_device(index); }
  c10::DeviceIndex getCurrentDevice() const override { return current_device(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex index) const override {
    const c10::DeviceIndex old = current_device();
    set_current_device(index);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex index) const override {
    return exchangeDevice(index);
  }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex index) const override {
    return default_generator(index);
  }
  at::Generator getNewGenerator(c10::DeviceIndex index) const override {
    if (index < 0) index = current_device();
    Backend::get().check_index(index);
    return at::make_generator<NeuronGenerator>(index);
  }
  at::Device getDeviceFromPtr(void* data) const override {
    const Block* b = find_block(data);
    TORCH_CHECK(b != nullptr, "neuron: ", data, " is not the address of a neuron tensor");
    return {kNeuron, b->device};
  }
  bool isPinnedPtr(const void* /*data*/) const override { return false; }
  at::Allocator* getPinnedMemoryAllocator() const override { return c10::GetCPUAllocator(); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t size) const override {
    c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
    TORCH_CHECK(impl->resizable(), "neuron: the storage is not resizable");
    DeviceScope scope(storage.device().index());
    at::DataPtr fresh = hbm_allocator().allocate(size);
    if (impl->data() != nullptr)
      std::memcpy(fresh.get(), impl->data(), std::min(size, impl->nbytes()));
    impl->set_data_ptr_noswap(std::move(fresh));
    impl->set_nbytes(size);
  }
};

const bool g_hooks_registered = [] {
  at::RegisterPrivateUse1HooksInterface(new NeuronHooks());
  return true;
}();

}  // namespace

c10::DeviceIndex current_device() {
  return t_device;
}

void set_current_device(c10::DeviceIndex index) {
  Backend::get().check_index(index);
  t_device = index;
}

const at::Generator& default_generator(c10::DeviceIndex index) {
  Backend& b = Backend::get();
  if (index < 0) index = current_device();
  b.check_index(index);
  std::call_once(g_generators_once, [&] {
    for (int i = 0; i < b.device_count(); ++i)
      g_generators.push_back(at::make_generator<NeuronGenerator>(static_cast<c10::DeviceIndex>(i)));
  });
  return g_generators[static_cast<size_t>(index)];
}

bool is_neuron_generator(const at::Generator& g) {
  return g.defined() && g.device().type() == kNeuron;
}

uint64_t next_random_key(at::Generator neuron, uint64_t numel) {
  std::lock_guard lock(neuron.mutex());
  c10::GeneratorImpl* impl = neuron.unsafeGetGeneratorImpl();
  const uint64_t seed = impl->current_seed(), offset = impl->get_offset();
  impl->set_offset(offset + (numel + 3) / 4 * 4);  // Philox draws four values per step
  // splitmix64 of (seed, offset): nearby offsets give unrelated streams.
  uint64_t state = seed ^ offset;
  return sim::splitmix64(state);
}

at::Generator cpu_generator_for(at::Generator neuron, uint64_t numel) {
  return at::make_generator<at::CPUGeneratorImpl>(next_random_key(std::move(neuron), numel));
}

}  // namespace neuronsim::pytorch
