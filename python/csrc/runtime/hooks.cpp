// The PrivateUse1 hooks of "neuron": what ATen asks of the backend beyond the guard
// (availability, generators, the device of a pointer, resizing storage).
#include <algorithm>
#include <cstring>

#include <ATen/Context.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

#include "runtime/allocator.h"
#include "runtime/backend.h"
#include "runtime/device.h"
#include "runtime/generator.h"

namespace neuronsim::pytorch {

namespace {

constexpr auto kNeuron = c10::DeviceType::PrivateUse1;

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
    return new_generator(index);
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

}  // namespace neuronsim::pytorch
