// cumsum and cumprod: running sums (products) along one dim of a strided view, on VectorE's
// scan.
//
// The layout is reduce's (reduce.cpp): every index of the other dims gets a
// partition, 128 a tile, and the scanned dim runs along the free axis whatever its
// stride. Each chunk of the scanned dim is one tensor_tensor_scan
// (s = s + x_j, dst_j = s) in FP32 whose initial state is the last running sum of
// the chunk before it, so a dim longer than one tile scans on without a second pass. A product
// scans with multiply from 1 (the instruction's initial value without a carry).
// Only VectorE scans, so the tiles do not alternate engines; loads alternate between
// SP's and ACT's queues and SP stores (the DMA casts FP32 to out's dtype).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "eager_common.h"

namespace neuronsim::kernels {
namespace {

using namespace detail;
using isa::AluOp;
using isa::Engine;

constexpr uint32_t kMaxChunk = 4096;  // elements per partition of one chunk of the scanned dim

class ScanKernel {
 public:
  ScanKernel(KernelBuilder& kb, const Declare& declare, const View& in, int64_t dim,
             const View& out, AluOp op)
      : kb_(kb), op_(op), name_(op == AluOp::multiply ? "cumprod" : "cumsum") {
    require(op == AluOp::add || op == AluOp::multiply, name_, "scans add or multiply");
    check_view(name_, "in", in);
    check_view(name_, "out", out);
    check_no_self_overlap(name_, "out", out);
    require(out.sizes == in.sizes, name_,
            fmt::format("out has sizes [{}], not in's [{}]", fmt::join(out.sizes, ", "),
                        fmt::join(in.sizes, ", ")));
    const auto rank = static_cast<int64_t>(in.sizes.size());
    require(rank > 0 && dim >= -rank && dim < rank, name_,
            fmt::format("dim {} is out of range for a {}-D input", dim, rank));
    const auto d = static_cast<size_t>(dim < 0 ? dim + rank : dim);
    layout(in, out, d);
    in_ = declare(kb_, "in", in, false);
    out_ = declare(kb_, "out", out, true);
    allocate();
  }

  void build() {
    pipeline(
        static_cast<uint32_t>(plan_.tiles.size()), nbuf_ - 1, [&](uint32_t i) { load(i); },
        [&](uint32_t i) { compute(i); });
  }

 private:
  // The index space [other dims..., scanned]: the other dims in out's memory order,
  // coalesced, the largest of them last (on the partitions).
  void layout(const View& in, const View& out, size_t d) {
    const std::vector<View> kept = partition_layout({without_dim(in, d), without_dim(out, d)}, 1);
    scanned_ = in.sizes[d];
    sizes_ = kept[0].sizes;
    sizes_.push_back(scanned_);
    in_strides_ = kept[0].strides;
    in_strides_.push_back(in.strides[d]);
    out_strides_ = kept[1].strides;
    out_strides_.push_back(out.strides[d]);
  }

  // Per buffer and element: the input chunk and its running sums, both FP32-sized.
  void allocate() {
    const uint64_t capacity = kb_.target().sbuf_partition_bytes;
    nbuf_ = 3;
    const auto chunk =
        static_cast<uint32_t>(std::min<uint64_t>(kMaxChunk, capacity / (nbuf_ * 8) / 16 * 16));
    plan_ = plan_rows(name_, sizes_, chunk);
    chunks_ = ceil_div(static_cast<uint64_t>(scanned_), plan_.tiles.front().len);
    const uint32_t len = plan_.tiles.front().len;
    for (uint32_t b = 0; b < nbuf_; ++b) {
      x_.push_back(sbuf(kb_, name_, DType::fp32, kPartitions, len));
      sums_.push_back(sbuf(kb_, name_, DType::fp32, kPartitions, len));
    }
  }

  const TilePlan::Tile& tile(uint32_t i) const { return plan_.tiles[i]; }

  void load(uint32_t i) {
    const TilePlan::Tile& t = tile(i);
    kb_.dma_copy(on_chip(x_[i % nbuf_], t.parts, t.len, in_.dtype),
                 hbm_tile(name_, in_, in_strides_, plan_, t), i % 2 ? Engine::ACT : Engine::SP);
  }

  void compute(uint32_t i) {
    const TilePlan::Tile& t = tile(i);
    const AccessPattern sums = on_chip(sums_[i % nbuf_], t.parts, t.len, DType::fp32);
    isa::Instruction in;
    in.opcode = isa::Opcode::tensor_tensor_scan;
    in.engine = Engine::DVE;
    const AccessPattern x = on_chip(x_[i % nbuf_], t.parts, t.len, in_.dtype);
    in.operands = {{isa::Role::dst, sums}, {isa::Role::in0, x}, {isa::Role::in1, x}};
    in.alu0 = op_;  // s = (s op x_j) bypass x_j
    in.alu1 = AluOp::bypass;
    if (i % chunks_ == 0 && op_ == AluOp::multiply) in.imm0 = 1.0f;  // a product starts at 1
    if (i % chunks_ > 0) {  // carry on from the last sum of the chunk before
      const TilePlan::Tile& prev = tile(i - 1);
      in.operands.push_back(
          {isa::Role::initial,
           isa::cols(on_chip(sums_[(i - 1) % nbuf_], prev.parts, prev.len, DType::fp32),
                     prev.len - 1, 1)});
    }
    kb_.emit(std::move(in));
    kb_.dma_copy(hbm_tile(name_, out_, out_strides_, plan_, t), sums, Engine::SP);
  }

  KernelBuilder& kb_;
  AluOp op_;
  std::string_view name_;
  int64_t scanned_ = 1;
  std::vector<int64_t> sizes_, in_strides_, out_strides_;
  AccessPattern in_, out_;
  TilePlan plan_;
  uint32_t nbuf_ = 3, chunks_ = 1;
  std::vector<AccessPattern> x_, sums_;
};

}  // namespace

namespace detail {

void emit_cumsum(KernelBuilder& kb, const Declare& declare, const View& in, int64_t dim,
                 const View& out) {
  ScanKernel(kb, declare, in, dim, out, AluOp::add).build();
}

}  // namespace detail

isa::Program cumsum(std::string_view target, const View& in, int64_t dim, const View& out) {
  KernelBuilder kb(target);
  detail::emit_cumsum(kb, declare_operand, in, dim, out);
  return kb.finish();
}

isa::Program cumprod(std::string_view target, const View& in, int64_t dim, const View& out) {
  KernelBuilder kb(target);
  ScanKernel(kb, declare_operand, in, dim, out, isa::AluOp::multiply).build();
  return kb.finish();
}

}  // namespace neuronsim::kernels
