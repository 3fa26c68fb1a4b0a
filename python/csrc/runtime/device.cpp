// Device selection (see device.h).
#include "runtime/device.h"

#include "runtime/backend.h"

namespace neuronsim::pytorch {

namespace {

thread_local c10::DeviceIndex t_device = 0;

}  // namespace

c10::DeviceIndex current_device() {
  return t_device;
}

void set_current_device(c10::DeviceIndex index) {
  Backend::get().check_index(index);
  t_device = index;
}

void set_current_device_unchecked(c10::DeviceIndex index) noexcept {
  t_device = index;
}

}  // namespace neuronsim::pytorch
