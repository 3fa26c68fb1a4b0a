// The device guard of "neuron": PyTorch's DeviceGuardImplInterface over the runtime's
// device selection, streams and events (device.h, streams.h).
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include "runtime/backend.h"
#include "runtime/device.h"
#include "runtime/streams.h"

namespace neuronsim::pytorch {

namespace {

constexpr auto kNeuron = c10::DeviceType::PrivateUse1;

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
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    set_current_device_unchecked(d.index());
  }
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
    return c10::Stream(c10::Stream::UNSAFE, d, new_stream_id());
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    const c10::Stream old = getStream(s.device());
    set_current_stream_id(s.device_index(), s.id());
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
    record_event(event, stream.device_index());
  }
  void block(void* /*event*/, const c10::Stream& /*stream*/) const override {}
  bool queryEvent(void* /*event*/) const override { return true; }
  void synchronizeEvent(void* /*event*/) const override {}
  void destroyEvent(void* event, c10::DeviceIndex /*index*/) const noexcept override {
    destroy_event(event);
  }
  double elapsedTime(void* start, void* end, c10::DeviceIndex /*index*/) const override {
    return elapsed_ms(start, end);
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, NeuronGuard);

}  // namespace

}  // namespace neuronsim::pytorch
