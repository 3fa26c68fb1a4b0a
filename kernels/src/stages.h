// The kernels as stages: each emits its instructions into a caller's KernelBuilder,
// with its operands' HBM tensors obtained through `declare` (eager_common.h). The
// public functions of eager.h and kernels.h are one stage in a builder of their own;
// a graph program (graph.cpp) is many stages in one builder.
#pragma once

#include <span>
#include <string_view>

#include "eager_common.h"

namespace neuronsim::kernels::detail {

void emit_pointwise(KernelBuilder& kb, const Declare& declare, const PointwiseExpr& expr,
                    std::span<const View> inputs, std::span<const View> outs);
void emit_matmul(KernelBuilder& kb, const Declare& declare, const View& a, const View& b,
                 const View& out);
void emit_reduce(KernelBuilder& kb, const Declare& declare, ReduceOp op, const View& in,
                 int64_t dim, const View& out);
// x and out: [rows, cols] patterns (rows on partitions, unit column stride).
void emit_row_softmax(KernelBuilder& kb, std::string_view kernel, const AccessPattern& x,
                      const AccessPattern& out, bool log);

}  // namespace neuronsim::kernels::detail
