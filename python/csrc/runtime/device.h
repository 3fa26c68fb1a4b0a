// Device selection: the current "neuron" device of each thread, which the allocator
// places new memory on and the guard exchanges.
#pragma once

#include <c10/core/Device.h>

namespace neuronsim::pytorch {

c10::DeviceIndex current_device();
void set_current_device(c10::DeviceIndex index);  // checks the index
// For DeviceGuardImplInterface::uncheckedSetDevice, which must not throw.
void set_current_device_unchecked(c10::DeviceIndex index) noexcept;

// Makes a device current for a scope (the allocator places memory on the current device).
class DeviceScope {
 public:
  explicit DeviceScope(c10::DeviceIndex index) : previous_(current_device()) {
    set_current_device(index);
  }
  ~DeviceScope() { set_current_device(previous_); }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  c10::DeviceIndex previous_;
};

}  // namespace neuronsim::pytorch
