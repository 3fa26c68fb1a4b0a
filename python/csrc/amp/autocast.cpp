// torch.autocast("neuron"): mixed precision as on the other accelerators. The ops PyTorch
// lists for lower precision (matmuls, linear, convolutions, attention: TensorE's work) run
// in the autocast dtype (bfloat16 by default), the ones it lists for FP32 (norms, losses,
// exp/log/pow) run in FP32, and every other op, including other libraries' (FSDP's copy-in
// ops), passes through untouched. PyTorch's own lists, so the policy is the one users know.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

#define NEURON_LOWER_PRECISION(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define NEURON_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  AT_FORALL_LOWER_PRECISION_FP(NEURON_LOWER_PRECISION)
  AT_FORALL_FP32(NEURON_FP32)
}
