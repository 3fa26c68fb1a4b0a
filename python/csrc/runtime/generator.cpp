// The generators of "neuron" devices (see generator.h).
#include "runtime/generator.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/empty.h>
#include <c10/core/GeneratorImpl.h>
#include <c10/util/Exception.h>

#include "neuronsim/sim/random.h"
#include "runtime/backend.h"
#include "runtime/device.h"

namespace neuronsim::pytorch {

namespace {

constexpr auto kNeuron = c10::DeviceType::PrivateUse1;

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

}  // namespace

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

at::Generator new_generator(c10::DeviceIndex index) {
  if (index < 0) index = current_device();
  Backend::get().check_index(index);
  return at::make_generator<NeuronGenerator>(index);
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

RngSource parse_rng_source(const std::string& name, const char* where) {
  if (name == "device") return RngSource::device;
  if (name == "cpu") return RngSource::cpu;
  TORCH_CHECK(false, where, ": '", name,
              "' is not a random-number source; use 'device' (the device's own generators) or "
              "'cpu' (the CPU generator's numbers, as TorchNeuron draws them)");
}

namespace {
std::atomic<int> g_rng_source{-1};  // -1: not read from the environment yet
}  // namespace

RngSource rng_source() {
  int source = g_rng_source.load();
  if (source < 0) {
    const char* env = std::getenv("NEURONSIM_RNG");
    source =
        static_cast<int>(env && *env ? parse_rng_source(env, "NEURONSIM_RNG") : RngSource::device);
    int unset = -1;
    if (!g_rng_source.compare_exchange_strong(unset, source)) source = unset;
  }
  return static_cast<RngSource>(source);
}

void set_rng_source(RngSource source) {
  g_rng_source = static_cast<int>(source);
}

}  // namespace neuronsim::pytorch
