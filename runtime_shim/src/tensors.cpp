// Tensors: host bytes that device tensors share with their chip's simulated HBM
// (docs/runtime-compat.md, "Device memory").
#include <cstdlib>
#include <cstring>

#include "runtime.h"

namespace neuronsim::rt {

Storage::~Storage() {
  if (chip >= 0)
    if (auto d = device.lock()) d->free(static_cast<uint32_t>(chip), hbm_addr);
  if (owned) std::free(data);
}

std::optional<uint64_t> map_host(const char* fn, sim::Device& device, uint32_t chip, uint8_t* host,
                                 uint64_t size, const char* what) {
  try {
    return device.allocate(chip, size, host);
  } catch (const std::exception& e) {
    log(kError, fn, "cannot map '{}' into the HBM of chip {}: {}", what, chip, e.what());
  }
  return std::nullopt;
}

NRT_STATUS check_range(const char* fn, const nrt_tensor* t, uint64_t offset, uint64_t size) {
  if (!t->storage) {
    log(kError, fn, "tensor '{}' has no storage (allocate_empty without attach_buffer)", t->name);
    return NRT_INVALID;
  }
  if (offset > t->size || size > t->size - offset) {
    log(kError, fn, "access of {} bytes at offset {} is outside tensor '{}' of {} bytes", size,
        offset, t->name, t->size);
    return NRT_INVALID;
  }
  return NRT_SUCCESS;
}

namespace {

// Creates a tensor with fresh zeroed storage, mapped into the chip's HBM when `chip` >= 0
// (rt().mu held; the device's allocator lock is the only other one taken).
NRT_STATUS make_tensor(const char* fn, nrt_tensor_placement_t placement, int vnc, int chip,
                       size_t size, const char* name, nrt_tensor_t** out) {
  const std::shared_ptr<Session>& session = rt().session;
  sim::Device& device = *session->device;
  auto no_room = [&] {
    log(kError, fn, "out of device memory: tensor '{}' of {} bytes does not fit the HBM of chip {}",
        name_or(name), size, chip);
    return NRT_RESOURCE;
  };
  if (chip >= 0) {  // before any host allocation
    const sim::Device::MemoryUse use = device.memory(static_cast<uint32_t>(chip));
    if (size > use.capacity - use.used) return no_room();
  }
  auto storage = std::make_shared<Storage>();
  storage->data = static_cast<uint8_t*>(std::calloc(size, 1));
  if (storage->data == nullptr) {
    log(kError, fn, "out of host memory for tensor '{}' of {} bytes", name_or(name), size);
    return NRT_RESOURCE;
  }
  storage->size = size;
  if (chip >= 0) {
    const auto addr =
        map_host(fn, device, static_cast<uint32_t>(chip), storage->data, size, name_or(name));
    if (!addr) return no_room();
    storage->chip = chip;
    storage->hbm_addr = *addr;
    storage->device = session->device;
  }
  auto* t = new nrt_tensor;
  t->name = name_or(name);
  t->storage = std::move(storage);
  t->size = size;
  t->placement = placement;
  t->vnc = vnc;
  rt().tensors.insert(t);
  *out = t;
  return NRT_SUCCESS;
}

}  // namespace
}  // namespace neuronsim::rt

using namespace neuronsim::rt;

extern "C" {

NRT_STATUS nrt_tensor_allocate(nrt_tensor_placement_t placement, int vnc, size_t size,
                               const char* name, nrt_tensor_t** tensor) {
  NRT_GATE();
  if (tensor == nullptr) {
    log(kError, __func__, "tensor is NULL");
    return NRT_INVALID;
  }
  if (size == 0) {
    log(kError, __func__, "tensor '{}': size 0", name_or(name));
    return NRT_INVALID;
  }
  std::lock_guard<std::mutex> lock(rt().mu);
  const Config& c = rt().session->config;
  switch (placement) {
    case NRT_TENSOR_PLACEMENT_DEVICE:
      if (vnc < 0 || static_cast<size_t>(vnc) >= c.visible.size()) {
        log(kError, __func__, "tensor '{}': core {} is not one of the {} visible cores",
            name_or(name), vnc, c.visible.size());
        return NRT_INVALID;
      }
      return make_tensor(__func__, placement, vnc,
                         static_cast<int>(c.chip_of(static_cast<uint32_t>(vnc))), size, name,
                         tensor);
    case NRT_TENSOR_PLACEMENT_HOST:
    case NRT_TENSOR_PLACEMENT_VIRTUAL:
      return make_tensor(__func__, placement, vnc, -1, size, name, tensor);
  }
  log(kError, __func__, "tensor '{}': unknown placement {}", name_or(name),
      static_cast<int>(placement));
  return NRT_INVALID;
}

void nrt_tensor_free(nrt_tensor_t** tensor) {
  if (rt().state.load() == kChild || tensor == nullptr || *tensor == nullptr) return;
  std::lock_guard<std::mutex> lock(rt().mu);
  if (!live(*tensor)) {
    log(kError, __func__, "not a live tensor (already freed?)");
    return;
  }
  rt().tensors.erase(*tensor);
  delete *tensor;  // the storage goes with its last user (slices share it)
  *tensor = nullptr;
}

NRT_STATUS nrt_tensor_read(const nrt_tensor_t* tensor, void* buf, size_t offset, size_t size) {
  NRT_GATE();
  std::lock_guard<std::mutex> lock(rt().mu);
  if (!live(tensor) || buf == nullptr) {
    log(kError, __func__, "{} is NULL or not a live tensor", buf == nullptr ? "buf" : "tensor");
    return NRT_INVALID;
  }
  if (NRT_STATUS s = check_range(__func__, tensor, offset, size)) return s;
  std::memcpy(buf, tensor->bytes() + offset, size);
  return NRT_SUCCESS;
}

NRT_STATUS nrt_tensor_write(nrt_tensor_t* tensor, const void* buf, size_t offset, size_t size) {
  NRT_GATE();
  std::lock_guard<std::mutex> lock(rt().mu);
  if (!live(tensor) || buf == nullptr) {
    log(kError, __func__, "{} is NULL or not a live tensor", buf == nullptr ? "buf" : "tensor");
    return NRT_INVALID;
  }
  if (NRT_STATUS s = check_range(__func__, tensor, offset, size)) return s;
  std::memcpy(tensor->bytes() + offset, buf, size);
  return NRT_SUCCESS;
}

static NRT_STATUS batch(const char* fn, const nrt_tensor_batch_t* batches, uint64_t num_batches,
                        bool write) {
  NRT_STATUS g = gate(fn);
  if (g != NRT_SUCCESS) return g;
  if (batches == nullptr && num_batches > 0) return NRT_INVALID;
  std::lock_guard<std::mutex> lock(rt().mu);
  for (uint64_t b = 0; b < num_batches; ++b) {
    const nrt_tensor_batch_t& tb = batches[b];
    if (!live(tb.tensor) || (tb.ops == nullptr && tb.num_ops > 0)) {
      log(kError, fn, "batch {}: not a live tensor, or ops is NULL", b);
      return NRT_INVALID;
    }
    for (uint32_t i = 0; i < tb.num_ops; ++i) {
      const nrt_tensor_batch_op_t& op = tb.ops[i];
      if (op.buffer == nullptr) return NRT_INVALID;
      if (NRT_STATUS s = check_range(fn, tb.tensor, op.offset, op.size)) return s;
      if (write)
        std::memcpy(tb.tensor->bytes() + op.offset, op.buffer, op.size);
      else
        std::memcpy(op.buffer, tb.tensor->bytes() + op.offset, op.size);
    }
  }
  return NRT_SUCCESS;
}

#ifdef NEURONSIM_NRT_BATCH_OPS_2_34
NRT_STATUS nrt_tensor_read_batch(const nrt_tensor_batch_t* batches, uint64_t num_batches) {
  return batch(__func__, batches, num_batches, false);
}
NRT_STATUS nrt_tensor_write_batch(const nrt_tensor_batch_t* batches, uint64_t num_batches) {
  return batch(__func__, batches, num_batches, true);
}
#else
NRT_STATUS nrt_tensor_read_batch(const nrt_tensor_batch_t* batches, uint64_t num_batches, bool) {
  return batch(__func__, batches, num_batches, false);
}
NRT_STATUS nrt_tensor_write_batch(const nrt_tensor_batch_t* batches, uint64_t num_batches, bool) {
  return batch(__func__, batches, num_batches, true);
}
#endif

NRT_STATUS nrt_tensor_copy(const nrt_tensor_t* src, size_t src_offset, nrt_tensor_t* dst,
                           size_t dst_offset, size_t size) {
  NRT_GATE();
  std::lock_guard<std::mutex> lock(rt().mu);
  if (!live(src) || !live(dst)) {
    log(kError, __func__, "src or dst is NULL or not a live tensor");
    return NRT_INVALID;
  }
  if (NRT_STATUS s = check_range(__func__, src, src_offset, size)) return s;
  if (NRT_STATUS s = check_range(__func__, dst, dst_offset, size)) return s;
  if (src->storage->chip >= 0 && dst->storage->chip >= 0 &&
      src->storage->chip != dst->storage->chip) {
    log(kError, __func__, "device tensors '{}' (chip {}) and '{}' (chip {}) are in different HBMs",
        src->name, src->storage->chip, dst->name, dst->storage->chip);
    return NRT_INVALID;
  }
  std::memmove(dst->bytes() + dst_offset, src->bytes() + src_offset, size);
  return NRT_SUCCESS;
}

size_t nrt_tensor_get_size(const nrt_tensor_t* tensor) {
  if (tensor == nullptr) return 0;
  std::lock_guard<std::mutex> lock(rt().mu);
  return live(tensor) ? tensor->size : 0;
}

NRT_STATUS nrt_tensor_memset(nrt_tensor_t* tensor, uint64_t offset, int value, size_t size) {
  NRT_GATE();
  std::lock_guard<std::mutex> lock(rt().mu);
  if (!live(tensor)) {
    log(kError, __func__, "tensor is NULL or not a live tensor");
    return NRT_INVALID;
  }
  if (NRT_STATUS s = check_range(__func__, tensor, offset, size)) return s;
  std::memset(tensor->bytes() + offset, value, size);
  return NRT_SUCCESS;
}

NRT_STATUS nrt_tensor_allocate_empty(const char* name, nrt_tensor_t** tensor) {
  NRT_GATE();
  if (tensor == nullptr) return NRT_INVALID;
  std::lock_guard<std::mutex> lock(rt().mu);
  auto* t = new nrt_tensor;
  t->name = name_or(name);
  t->placement = NRT_TENSOR_PLACEMENT_VIRTUAL;
  rt().tensors.insert(t);
  *tensor = t;
  return NRT_SUCCESS;
}

NRT_STATUS nrt_tensor_attach_buffer(nrt_tensor_t* tensor, void* buffer, size_t size) {
  NRT_GATE();
  std::lock_guard<std::mutex> lock(rt().mu);
  if (!live(tensor) || buffer == nullptr || size == 0) {
    log(kError, __func__, "tensor is not live, buffer is NULL or size is 0");
    return NRT_INVALID;
  }
  auto storage = std::make_shared<Storage>();
  storage->data = static_cast<uint8_t*>(buffer);
  storage->size = size;
  storage->owned = false;  // caller-owned, never freed by the runtime
  tensor->storage = std::move(storage);
  tensor->offset = 0;
  tensor->size = size;
  tensor->placement = NRT_TENSOR_PLACEMENT_VIRTUAL;
  return NRT_SUCCESS;
}

NRT_STATUS nrt_tensor_allocate_slice(const nrt_tensor_t* source, size_t offset, size_t size,
                                     const char* name, nrt_tensor_t** slice) {
  NRT_GATE();
  std::lock_guard<std::mutex> lock(rt().mu);
  if (!live(source) || slice == nullptr || size == 0) {
    log(kError, __func__, "source is not a live tensor, tensor_slice is NULL, or size is 0");
    return NRT_INVALID;
  }
  if (NRT_STATUS s = check_range(__func__, source, offset, size)) return s;
  auto* t = new nrt_tensor;
  t->name = name_or(name);
  t->storage = source->storage;
  t->offset = source->offset + offset;
  t->size = size;
  t->placement = source->placement;
  t->vnc = source->vnc;
  rt().tensors.insert(t);
  *slice = t;
  return NRT_SUCCESS;
}

void* nrt_tensor_get_va(const nrt_tensor_t* tensor) {
  if (rt().state.load() != kInit) return nullptr;
  std::lock_guard<std::mutex> lock(rt().mu);
  if (!live(tensor) || !tensor->storage) return nullptr;
  return tensor->bytes();
}

NRT_STATUS nrt_tensor_get_device_allocation_info(const nrt_tensor_t* tensor,
                                                 nrt_tensor_device_allocation_info_t* info) {
  NRT_GATE();
  std::lock_guard<std::mutex> lock(rt().mu);
  if (!live(tensor) || info == nullptr || !tensor->storage || tensor->storage->chip < 0) {
    log(kError, __func__, "not a live device tensor, or alloc_info is NULL");
    return NRT_INVALID;
  }
  info->physical_address = tensor->storage->hbm_addr + tensor->offset;
  info->size = tensor->storage->size;
  info->hbm_index = 0;
  return NRT_SUCCESS;
}

NRT_STATUS nrt_tensor_get_lnc_index(const nrt_tensor_t* tensor, int* lnc_idx) {
  NRT_GATE();
  std::lock_guard<std::mutex> lock(rt().mu);
  if (!live(tensor) || lnc_idx == nullptr) return NRT_INVALID;
  *lnc_idx = tensor->placement == NRT_TENSOR_PLACEMENT_DEVICE ? tensor->vnc : -1;
  return NRT_SUCCESS;
}

NRT_STATUS nrt_memcpy_to_device(void* dest, const void* src, size_t size) {
  if (size > 0 && (dest == nullptr || src == nullptr)) return NRT_INVALID;
  if (size > 0) std::memmove(dest, src, size);
  return NRT_SUCCESS;
}

}  // extern "C"
