// Tensor sets: named tensors that nrt_execute binds to a model's inputs and outputs. A set
// does not own its tensors (spec §5.4).
#include "runtime.h"

using namespace neuronsim::rt;

extern "C" {

NRT_STATUS nrt_allocate_tensor_set(nrt_tensor_set_t** result) {
  NRT_GATE();
  if (result == nullptr) return NRT_INVALID;
  std::lock_guard<std::mutex> lock(rt().mu);
  auto* s = new TensorSet;
  rt().sets.insert(s);
  *result = s;
  return NRT_SUCCESS;
}

void nrt_destroy_tensor_set(nrt_tensor_set_t** tensor_set) {
  if (rt().state.load() == kChild || tensor_set == nullptr || *tensor_set == nullptr) return;
  std::lock_guard<std::mutex> lock(rt().mu);
  TensorSet* s = as_set(*tensor_set);
  if (s == nullptr) {
    log(kError, __func__, "not a live tensor set (already destroyed?)");
    return;
  }
  rt().sets.erase(s);
  delete s;  // member tensors are not freed
  *tensor_set = nullptr;
}

NRT_STATUS nrt_add_tensor_to_tensor_set(nrt_tensor_set_t* tensor_set, const char* name,
                                        nrt_tensor_t* tensor) {
  NRT_GATE();
  std::lock_guard<std::mutex> lock(rt().mu);
  TensorSet* s = as_set(tensor_set);
  if (s == nullptr || name == nullptr || !live(tensor)) {
    log(kError, __func__, "tensor_set, tensor_name or tensor is NULL or not live");
    return NRT_INVALID;
  }
  s->tensors[name] = tensor;
  return NRT_SUCCESS;
}

NRT_STATUS nrt_get_tensor_from_tensor_set(nrt_tensor_set_t* tensor_set, const char* name,
                                          nrt_tensor_t** tensor) {
  NRT_GATE();
  std::lock_guard<std::mutex> lock(rt().mu);
  TensorSet* s = as_set(tensor_set);
  if (s == nullptr || name == nullptr || tensor == nullptr) {
    log(kError, __func__, "tensor_set, tensor_name or tensor is NULL or not live");
    return NRT_INVALID;
  }
  auto it = s->tensors.find(name);
  if (it == s->tensors.end()) {
    log(kDebug, __func__, "no tensor named '{}' in the set", name);
    return NRT_FAILURE;
  }
  *tensor = it->second;
  return NRT_SUCCESS;
}

}  // extern "C"
