// grouped_matmul: out[rows of group g] = a[those rows] @ b[g], with the groups' row ends
// (offs) on the device, so that no host reads them and the program depends on the shapes
// alone (a mixture of experts' routed products, compiled or eager).
//
// The rows are cut into blocks of 128 rows of one group each, as a Trainium MoE kernel
// cuts them: group g's rows [start_g, end_g) make ceil(len_g / 128) blocks, and the blocks
// of all groups follow one another. Their number depends on the routing, but never exceeds
// floor((S + 127 m) / 128) with m = min(G, S) groups that can have rows, so the program
// runs that many: a block past the last real one repeats the last real one, and a
// partial block's spare rows repeat its last row. Both write the very values the real
// rows write, so no row is written wrongly and no dump row is needed.
//
// Where each block's rows and weights are is computed on chip, every partition holding
// the same values (the G groups along the free axis), before the products:
//   ends, starts, lengths, blocks per group and their running sum (VectorE's scan);
//   block b (up to the last real one) belongs to the group whose blocks [first_g, cum_g)
//   hold it: a one-hot over the groups, whose products with the groups' index, start,
//   first block and end give the block's;
//   row p of block b: min(start + (b - first) * 128 + p, end - 1), A's row and out's.
// Then each block is one M tile of the matmul kernel (matmul.cpp) whose A rows, B rows
// (the group's weights) and output rows move by indirect DMA. Rows past the last end
// stay zero: out is zeroed first. The one-hot costs G values per block on VectorE, a few
// microseconds for 128 groups; the weights' DMA dominates.
#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common.h"
#include "eager_common.h"
#include "neuronsim/kernels/eager.h"
#include "stages.h"

namespace neuronsim::kernels {
namespace {

using namespace detail;
using isa::AluOp;
using isa::Engine;

constexpr std::string_view kName = "grouped_matmul";
constexpr uint32_t kOneHotElems = 4096;  // per partition, for a chunk of blocks' one-hot
constexpr uint32_t kZeroCols = 2048;     // columns of the zero tile that clears out

// The four values a block takes from its group, in this order in the groups' table.
enum Field : uint32_t { kGroup, kStart, kFirst, kEnd, kFields };

// The product's operands as tables, checked.
struct Tables {
  int64_t S, K, N, G;
  bool b_of_rows;
  int64_t b_rows;  // rows of B's table: G * N (W's rows) or G * K
};

Tables check(const View& a, const View& b, const View& offs, const View& out) {
  for (const auto& [what, v] : {std::pair{"a", &a}, {"b", &b}, {"offs", &offs}, {"out", &out}})
    check_view(kName, what, *v);
  check_no_self_overlap(kName, "out", out);
  require(
      a.sizes.size() == 2 && b.sizes.size() == 3 && offs.sizes.size() == 1 && out.sizes.size() == 2,
      kName,
      fmt::format("a, b, offs and out must be 2-D, 3-D, 1-D and 2-D, not {}-D, {}-D, {}-D "
                  "and {}-D",
                  a.sizes.size(), b.sizes.size(), offs.sizes.size(), out.sizes.size()));
  Tables t{a.sizes[0], a.sizes[1], b.sizes[2], b.sizes[0], false, 0};
  require(b.sizes[1] == t.K && offs.sizes[0] == t.G && out.sizes[0] == t.S && out.sizes[1] == t.N,
          kName,
          fmt::format("a [{}] times b [{}] with offs [{}] is not out [{}]",
                      fmt::join(a.sizes, ", "), fmt::join(b.sizes, ", "),
                      fmt::join(offs.sizes, ", "), fmt::join(out.sizes, ", ")));
  require(a.dtype == b.dtype, kName, "a and b differ in dtype");
  check_float(kName, "a", a.dtype);
  check_float(kName, "out", out.dtype);
  require(offs.dtype == isa::DType::int32, kName, "offs must be int32");
  require(a.strides[1] == 1 || t.K == 1, kName, "a's rows must be contiguous");
  require(out.strides[1] == 1 || t.N == 1, kName, "out's rows must be contiguous");
  // B's rows are found by one index over all groups, so its groups must follow one
  // another at a row's stride: B [G * K, N] rows, or W's rows [G * N, K] where B = W^T.
  t.b_of_rows = t.N > 1 && b.strides[1] == 1 && b.strides[2] != 1;
  if (t.b_of_rows) {
    require(t.G == 1 || b.strides[0] == t.N * b.strides[2], kName,
            "b's groups are not one after another (B = W^T with W's rows at a fixed stride)");
    t.b_rows = t.G * t.N;
  } else {
    require(b.strides[2] == 1 || t.N == 1, kName,
            "b's rows (or W's, for B = W^T) must be "
            "contiguous");
    require(t.G == 1 || b.strides[0] == t.K * b.strides[1], kName,
            "b's groups are not one after another at its row stride");
    t.b_rows = t.G * t.K;
  }
  // Row numbers are computed in FP32: exact below 2^24.
  require(t.S < (1 << 24) && t.b_rows < (1 << 24), kName,
          fmt::format("{} rows of a and {} of b's table: the row numbers must stay below 2^24", t.S,
                      t.b_rows));
  require(t.G <= kOneHotElems / kFields, kName,
          fmt::format("{} groups: at most {}", t.G, kOneHotElems / kFields));
  return t;
}

// A table as an indirect copy's side: every row (rows on the partition axis), `cols`
// elements at `col_stride` from the view's first element.
AccessPattern table(AccessPattern ap, int64_t rows, int64_t row_stride, int64_t cols,
                    int64_t col_stride) {
  ap.num_partitions = u32(rows);
  ap.partition_stride = row_stride;
  ap.num_dims = 1;
  ap.dims[0] = {dim_stride(kName, col_stride), u32(cols)};
  return ap;
}

class GroupedMatmul {
 public:
  GroupedMatmul(KernelBuilder& kb, const Declare& declare, const View& a, const View& b,
                const View& offs, const View& out)
      : kb_(kb), t_(check(a, b, offs, out)) {
    const int64_t m = std::min(t_.G, t_.S);
    blocks_.count = u32((t_.S + 127 * m) / kPartitions);
    const AccessPattern pa = declare(kb_, "a", a, false), pb = declare(kb_, "b", b, false);
    offs_ = declare(kb_, "offs", offs, false);
    offs_stride_ = offs.strides[0];
    out_ = declare(kb_, "out", out, true);
    blocks_.a = table(pa, t_.S, a.strides[0], t_.K, 1);
    blocks_.out = table(out_, t_.S, out.strides[0], t_.N, 1);
    blocks_.b_of_rows = t_.b_of_rows;
    blocks_.b = t_.b_of_rows ? table(pb, t_.b_rows, b.strides[2], t_.K, b.strides[1])
                             : table(pb, t_.b_rows, b.strides[1], t_.N, b.strides[2]);
    rows_per_group_ = t_.b_of_rows ? t_.N : t_.K;
    blocks_.b_index_tiles = ceil_div(u32(rows_per_group_), kPartitions);
    out_dtype_ = out.dtype;
    dtype_ = a.dtype;
  }

  void build() {
    // What lives through the products: A's row indices, each block's group times B's rows
    // per group, B's row offsets within a group, and the scale.
    blocks_.a_index = tile(isa::DType::int32, blocks_.count);
    group_rows_ = tile(isa::DType::fp32, blocks_.count);
    b_offsets_ = tile(isa::DType::fp32, blocks_.b_index_tiles);
    blocks_.scale = tile(isa::DType::fp32, 1);
    // The work tiles and the product's, all taken before anything is emitted: a stage
    // short of SBUF is refused having emitted nothing (GraphProgram then tries it again
    // from the start of SBUF).
    const Work w = work();
    blocks_.b_index = [this](uint32_t block, const AccessPattern& dst) {
      // dst[p, t] = group * rows + t * 128 + p, on the idle GpSimd.
      const AccessPattern g = isa::cols(group_rows_, block, 1);
      kb_.tensor_scalar(Engine::POOL, dst, b_offsets_, AluOp::add, 0.0f, AluOp::bypass, 0.0f, &g);
    };
    emit_block_matmul(kb_, u32(t_.K), u32(t_.N), dtype_, out_dtype_, blocks_, [&] {
      zero_out(w);
      locate_blocks(w);
    });
  }

 private:
  AccessPattern tile(isa::DType dtype, uint32_t free) {
    return sbuf(kb_, kName, dtype, kPartitions, free);
  }

  struct Work {
    AccessPattern zero, offs, groups, len, rem, count, cum, last, block, fields, hot, lower, picked,
        row, end, p;
    uint32_t chunk;  // blocks per one-hot chunk
  };
  Work work() {
    const uint32_t G = u32(t_.G), NB = blocks_.count;
    Work w;
    w.chunk = std::max<uint32_t>(1, kOneHotElems / (kFields * G));
    w.zero = tile(out_dtype_, std::min<uint32_t>(u32(t_.N), kZeroCols));
    w.offs = tile(isa::DType::int32, G);
    w.groups = tile(isa::DType::fp32, kFields * G);
    for (AccessPattern* t : {&w.len, &w.rem, &w.count, &w.cum}) *t = tile(isa::DType::fp32, G);
    w.last = tile(isa::DType::fp32, 1);
    for (AccessPattern* t : {&w.block, &w.row, &w.end, &w.p}) *t = tile(isa::DType::fp32, NB);
    w.fields = tile(isa::DType::fp32, kFields * NB);
    w.hot = tile(isa::DType::fp32, w.chunk * G);
    w.lower = tile(isa::DType::fp32, w.chunk * G);
    w.picked = tile(isa::DType::fp32, w.chunk * kFields * G);
    return w;
  }

  // out = 0, so that rows past the last group's end are zero (the blocks write the rest).
  void zero_out(const Work& w) {
    const uint32_t cols = w.zero.dims[0].size;
    const AccessPattern& zero = w.zero;
    kb_.memset(Engine::POOL, zero, 0.0f);
    for (int64_t r0 = 0; r0 < t_.S; r0 += kPartitions) {
      const uint32_t rows = u32(std::min<int64_t>(kPartitions, t_.S - r0));
      for (uint32_t c0 = 0; c0 < t_.N; c0 += cols) {
        const uint32_t n = std::min<uint32_t>(cols, u32(t_.N) - c0);
        AccessPattern dst = blocks_.out;
        dst.offset +=
            static_cast<uint64_t>(r0 * dst.partition_stride + c0) * isa::dtype_size(dst.dtype);
        dst.num_partitions = rows;
        dst.dims[0].size = n;
        kb_.dma_copy(dst, isa::cols(isa::rows(zero, 0, rows), 0, n), Engine::POOL);
      }
    }
  }

  // The blocks' rows and groups (see the top of the file), on VectorE.
  void locate_blocks(const Work& w) {
    const uint32_t G = u32(t_.G), NB = blocks_.count;
    const Engine dve = Engine::DVE;
    // The groups' ends, clamped to [0, S], on every partition.
    const AccessPattern& offs = w.offs;
    AccessPattern src = offs_;
    src.num_partitions = kPartitions;
    src.partition_stride = 0;
    src.num_dims = 1;
    src.dims[0] = {dim_stride(kName, offs_stride_), G};
    kb_.dma_copy(offs, src, Engine::SP);
    // groups [128, kFields * G]: field f of group g at f * G + g.
    const AccessPattern& groups = w.groups;
    const auto field = [&](Field f) { return isa::cols(groups, f * G, G); };
    const AccessPattern ends = field(kEnd), starts = field(kStart), first = field(kFirst);
    kb_.tensor_scalar(dve, ends, offs, AluOp::max, 0.0f, AluOp::min, static_cast<float>(t_.S));
    kb_.memset(dve, isa::cols(starts, 0, 1), 0.0f);
    if (G > 1) kb_.tensor_copy(dve, isa::cols(starts, 1, G - 1), isa::cols(ends, 0, G - 1));
    const isa::Dim along_g{1, G};
    emit_iota(kb_, field(kGroup), {&along_g, 1}, 0);
    // Blocks per group: ceil(max(end - start, 0) / 128) = (t - t mod 128) / 128, t = len + 127.
    const AccessPattern &len = w.len, &rem = w.rem, &count = w.count, &cum = w.cum;
    kb_.tensor_tensor(dve, len, ends, starts, AluOp::subtract);
    kb_.tensor_scalar(dve, len, len, AluOp::max, 0.0f, AluOp::add, 127.0f);
    kb_.tensor_scalar(dve, rem, len, AluOp::mod, 128.0f);
    kb_.tensor_tensor(dve, count, len, rem, AluOp::subtract);
    kb_.tensor_scalar(dve, count, count, AluOp::multiply, 1.0f / 128.0f);
    // Their running sum (cum_g = s_{g-1} * 1 + count_g), and each group's first block.
    kb_.memset(dve, rem, 1.0f);
    scan(cum, rem, count);
    kb_.tensor_tensor(dve, first, cum, count, AluOp::subtract);
    // The scale: 1 when some group has rows, else 0 (every block then writes zeros).
    const AccessPattern total = isa::cols(cum, G - 1, 1);
    kb_.tensor_scalar(dve, blocks_.scale, total, AluOp::min, 1.0f);
    const AccessPattern& last = w.last;
    kb_.tensor_scalar(dve, last, total, AluOp::add, -1.0f);
    // b_eff = min(b, total - 1): blocks past the last real one repeat it.
    const AccessPattern& block = w.block;
    const isa::Dim along_b{1, NB};
    emit_iota(kb_, block, {&along_b, 1}, 0);
    kb_.tensor_scalar(dve, block, block, AluOp::min, 0.0f, AluOp::bypass, 0.0f, &last);
    // Each block's fields, by a one-hot over the groups, a chunk of blocks at a time.
    const AccessPattern &fields = w.fields, &hot = w.hot, &lower = w.lower, &picked = w.picked;
    const uint32_t chunk = w.chunk;
    for (uint32_t b0 = 0; b0 < NB; b0 += chunk) {
      const uint32_t n = std::min(chunk, NB - b0);
      const AccessPattern b_by_g = broadcast(isa::cols(block, b0, 1), {{1, n}, {0, G}});
      const auto per_group = [&](const AccessPattern& v) { return broadcast(v, {{0, n}, {1, G}}); };
      const AccessPattern h = broadcast(hot, {{static_cast<int32_t>(G), n}, {1, G}});
      const AccessPattern l = broadcast(lower, {{static_cast<int32_t>(G), n}, {1, G}});
      kb_.tensor_tensor(dve, l, b_by_g, per_group(first), AluOp::is_ge);
      kb_.tensor_tensor(dve, h, b_by_g, per_group(cum), AluOp::is_lt);
      kb_.tensor_tensor(dve, h, h, l, AluOp::multiply);
      const int32_t fg = static_cast<int32_t>(kFields * G);
      const AccessPattern p =
          broadcast(picked, {{fg, n}, {static_cast<int32_t>(G), kFields}, {1, G}});
      kb_.tensor_tensor(
          dve, p, broadcast(hot, {{static_cast<int32_t>(G), n}, {0, kFields}, {1, G}}),
          broadcast(groups, {{0, n}, {static_cast<int32_t>(G), kFields}, {1, G}}), AluOp::multiply);
      kb_.tensor_reduce(dve, isa::cols(fields, b0 * kFields, n * kFields), p, AluOp::add, 0x4);
    }
    const auto of_block = [&](Field f) {
      return broadcast(isa::cols(fields, f, 1), {{static_cast<int32_t>(kFields), NB}});
    };
    // Row p of block b: min(start + (b - first) * 128 + p, end - 1), within [0, S).
    const AccessPattern &row = w.row, &end = w.end;
    kb_.tensor_tensor(dve, row, block, of_block(kFirst), AluOp::subtract);
    kb_.tensor_scalar(dve, row, row, AluOp::multiply, 128.0f);
    kb_.tensor_tensor(dve, row, row, of_block(kStart), AluOp::add);
    const AccessPattern& p = w.p;
    const isa::Dim same{0, NB};
    emit_iota(kb_, p, {&same, 1}, 0, 1);  // the partition's index
    kb_.tensor_tensor(dve, row, row, p, AluOp::add);
    kb_.tensor_scalar(dve, end, of_block(kEnd), AluOp::add, -1.0f);
    kb_.tensor_tensor(dve, row, row, end, AluOp::min);
    kb_.tensor_scalar(dve, blocks_.a_index, row, AluOp::max, 0.0f, AluOp::min,
                      static_cast<float>(t_.S - 1));
    // Each block's group times B's rows per group, and the rows within a group per tile.
    kb_.tensor_scalar(dve, group_rows_, of_block(kGroup), AluOp::multiply,
                      static_cast<float>(rows_per_group_));
    const isa::Dim along_t{kPartitions, blocks_.b_index_tiles};
    emit_iota(kb_, b_offsets_, {&along_t, 1}, 0, 1);
  }

  // dst[p, j] = s_j = s_{j-1} * ones_j + x_j from s = 0 (a running sum along the free axis).
  void scan(const AccessPattern& dst, const AccessPattern& ones, const AccessPattern& x) {
    isa::Instruction in;
    in.opcode = isa::Opcode::tensor_tensor_scan;
    in.engine = Engine::DVE;
    in.operands = {{isa::Role::dst, dst}, {isa::Role::in0, ones}, {isa::Role::in1, x}};
    in.alu0 = AluOp::multiply;
    in.alu1 = AluOp::add;
    kb_.emit(std::move(in));
  }

  // `ap` from its first element, walked by `dims` (strides in elements; 0 repeats).
  static AccessPattern broadcast(AccessPattern ap, std::initializer_list<isa::Dim> dims) {
    ap.num_dims = static_cast<uint8_t>(dims.size());
    std::copy(dims.begin(), dims.end(), ap.dims.begin());
    return ap;
  }

  KernelBuilder& kb_;
  Tables t_;
  MatmulBlocks blocks_;
  AccessPattern offs_, out_, group_rows_, b_offsets_;
  int64_t offs_stride_ = 1, rows_per_group_ = 0;
  isa::DType dtype_ = isa::DType::bf16, out_dtype_ = isa::DType::bf16;
};

}  // namespace

namespace detail {

void emit_grouped_matmul(KernelBuilder& kb, const Declare& declare, const View& a, const View& b,
                         const View& offs, const View& out) {
  GroupedMatmul(kb, declare, a, b, offs, out).build();
}

}  // namespace detail

isa::Program grouped_matmul(std::string_view target, const View& a, const View& b, const View& offs,
                            const View& out) {
  KernelBuilder kb(target);
  detail::emit_grouped_matmul(kb, declare_operand, a, b, offs, out);
  return kb.finish();
}

}  // namespace neuronsim::kernels
