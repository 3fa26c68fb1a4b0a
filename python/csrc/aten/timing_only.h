// Timing-only mode (NEURONSIM_MODE=timing-only): kernels run on the device clock without
// arithmetic, so a real training step is projected in seconds, and device tensors hold no
// values. Whatever needs their values on the host (a copy to the CPU, Tensor.item(), an op
// whose output shape depends on them) fails, naming itself and the mode; checks of values
// that only guard against bad inputs (indices in range) are skipped, though the host still
// waits for them (host_can_check).
#pragma once

#include <string>

#include <c10/util/Exception.h>

#include "runtime/backend.h"

namespace neuronsim::pytorch {

inline bool values_unspecified() {
  return Backend::get().env().mode == sim::Mode::timing_only;
}

// Whether the host can read a check's result (an index's range) from the device: not in
// timing-only mode, where the check passes; the host still waits for the device's work there,
// as the read does in the other modes, so that both take the same simulated time.
inline bool host_can_check() {
  if (!values_unspecified()) return true;
  Backend::get().host_reads();
  return false;
}

// Throws c10::Error: `what` needs device values, which timing-only mode does not compute.
inline void refuse_host_read(const std::string& what) {
  TORCH_CHECK(false, what,
              " needs the values of neuron tensors, which timing-only mode "
              "(NEURONSIM_MODE=timing-only) does not compute: its kernels run on the device "
              "clock without arithmetic. Read values in the default mode (functional and "
              "timing) or in functional-only mode.");
}

}  // namespace neuronsim::pytorch
