// topk: the k largest (or smallest) elements along one dim and their positions; with
// k = the dim's size, a stable sort.
//
// Layout as reduce's: every kept index gets a partition and the selected dim runs along
// the free axis, in chunks of at most 16,384 elements (what VectorE's top-8
// instructions take). Per chunk:
//   keys      the loaded row as FP32, kept above -inf: largest first, max(x, -FLT_MAX);
//             smallest first, -x with NaN made -FLT_MAX (torch puts NaN last there).
//             Columns past the row (a chunk shorter than 8 or than k) are -inf.
//   rounds    max8 gives the next 8 largest keys; match_replace8 writes their positions
//             and replaces them by -inf, below every key, so the next max8 sees the rest.
//             Equal keys come out in position order: the sort is stable.
//   values    GpSimd's local_gather fetches the loaded values at those positions, so the
//             values are the row's own (NaN and -inf included), whatever the keys were.
// One chunk is the answer. A longer row keeps each chunk's k best (keys, values and
// positions from the row's start) as candidates, in chunk order; after the last chunk,
// the same rounds over the candidates' keys pick the row's k best, whose values and
// positions local_gather fetches from the candidates.
// Keys tie where the clamp merges values: -inf with -FLT_MAX (largest first), and +inf,
// FLT_MAX and NaN (smallest first); such ties also come out in position order.
// Top-8 rounds run on VectorE; keys, gathers and stores on GpSimd, so consecutive row
// tiles overlap.
#include <cmath>
#include <limits>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "eager_common.h"
#include "stages.h"

namespace neuronsim::kernels {
namespace {

using namespace detail;
using isa::AluOp;
using isa::Engine;

constexpr std::string_view kName = "topk";
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kLowest = std::numeric_limits<float>::lowest();
constexpr uint32_t kChunk = isa::kTop8MaxElems;

uint32_t round8(uint64_t n) {
  return ceil_div(n, 8) * 8;
}

void local_gather(KernelBuilder& kb, const AccessPattern& dst, const AccessPattern& src,
                  const AccessPattern& index, uint32_t count) {
  isa::Instruction in;
  in.opcode = isa::Opcode::local_gather;
  in.engine = Engine::POOL;
  in.operands = {{isa::Role::dst, dst}, {isa::Role::src, src}, {isa::Role::index, index}};
  in.ints[0] = 1;
  in.ints[1] = static_cast<int32_t>(count);
  kb.emit(std::move(in));
}

// `value` repeated along the free axis: a [P, 1] tile read with stride 0.
AccessPattern repeated(const AccessPattern& column, uint32_t free) {
  AccessPattern ap = column;
  ap.num_dims = 1;
  ap.dims[0] = {0, free};
  return ap;
}

class TopkKernel {
 public:
  TopkKernel(KernelBuilder& kb, const Declare& declare, const View& in, int64_t dim, int64_t k,
             bool largest, const View& values, const View& indices)
      : kb_(kb), largest_(largest) {
    const size_t d = check(in, dim, k, values, indices);
    n_ = in.sizes[d];
    k_ = static_cast<uint32_t>(k);
    k8_ = round8(k_);
    layout(in, d, values, indices);
    chunks_ = ceil_div(static_cast<uint64_t>(n_), kChunk);
    require(chunks_ == 1 || uint64_t{chunks_} * k8_ <= kChunk, kName,
            fmt::format("the top {} of {} elements: {} chunks of {} candidates exceed the {} "
                        "elements the top-8 instructions take",
                        k_, n_, chunks_, k8_, kChunk));
    in_ = declare(kb_, "in", in, false);
    values_ = declare(kb_, "values", values, true);
    indices_ = declare(kb_, "indices", indices, true);
    allocate();
  }

  void build() {
    if (!largest_) kb_.memset(Engine::POOL, lowest_, kLowest);
    pipeline(
        static_cast<uint32_t>(plan_.tiles.size()), nbuf_ - 1, [&](uint32_t i) { load(i); },
        [&](uint32_t i) { compute(i); });
  }

 private:
  size_t check(const View& in, int64_t dim, int64_t k, const View& values, const View& indices) {
    check_view(kName, "in", in);
    check_view(kName, "values", values);
    check_view(kName, "indices", indices);
    check_no_self_overlap(kName, "values", values);
    check_no_self_overlap(kName, "indices", indices);
    const auto rank = static_cast<int64_t>(in.sizes.size());
    require(dim >= -rank && dim < rank, kName,
            fmt::format("dim {} is out of range for a {}-D input", dim, rank));
    const auto d = static_cast<size_t>(dim < 0 ? dim + rank : dim);
    require(k >= 1 && k <= in.sizes[d], kName,
            fmt::format("k = {} is not in 1..{} (the size of dim {})", k, in.sizes[d], dim));
    std::vector<int64_t> want = in.sizes;
    want[d] = k;
    require(values.sizes == want && indices.sizes == want, kName,
            fmt::format("values and indices have sizes [{}] and [{}]; the top {} of [{}] are [{}]",
                        fmt::join(values.sizes, ", "), fmt::join(indices.sizes, ", "), k,
                        fmt::join(in.sizes, ", "), fmt::join(want, ", ")));
    require(indices.dtype == DType::int32, kName,
            fmt::format("indices are int32, not {}", isa::dtype_name(indices.dtype)));
    require(values.dtype == in.dtype, kName,
            fmt::format("values are {}, in is {}", isa::dtype_name(values.dtype),
                        isa::dtype_name(in.dtype)));
    require(in.dtype != DType::int32 && in.dtype != DType::uint32, kName,
            "32-bit integers are not exact in FP32 keys");
    return d;
  }

  // The index space [kept dims..., n]: kept dims in values' memory order, coalesced with
  // the other views, the largest of them last (on the partitions).
  void layout(const View& in, size_t d, const View& values, const View& indices) {
    const std::vector<View> kept =
        partition_layout({without_dim(values, d), without_dim(in, d), without_dim(indices, d)}, 0);
    sizes_ = kept[0].sizes;
    sizes_.push_back(n_);
    for (auto [strides, view, k] :
         {std::tuple{&values_strides_, &values, 0}, std::tuple{&in_strides_, &in, 1},
          std::tuple{&indices_strides_, &indices, 2}}) {
      *strides = kept[k].strides;
      strides->push_back(view->strides[d]);
    }
  }

  // Per buffer, the loaded chunk and its keys (FP32, at least k8 columns); per row block,
  // the candidates of a long row; the round outputs.
  void allocate() {
    const uint32_t len = static_cast<uint32_t>(std::min<int64_t>(n_, kChunk));
    width_ = std::max(round8(len), k8_);
    const uint64_t capacity = kb_.target().sbuf_partition_bytes;
    const uint64_t fixed = 3 * tile_bytes(DType::fp32, k8_) * 2 + 64 +
                           (chunks_ > 1 ? 2 * 3 * tile_bytes(DType::fp32, chunks_ * k8_) : 0);
    const uint64_t per_buf =
        2 * tile_bytes(DType::fp32, width_) + (largest_ ? 0 : tile_bytes(DType::uint8, width_));
    require(fixed + 2 * per_buf <= capacity || fixed + per_buf <= capacity, kName,
            fmt::format("a chunk of {} elements and {} candidates do not fit in SBUF", len,
                        chunks_ * k8_));
    nbuf_ = fixed + 2 * per_buf <= capacity ? 2 : 1;
    plan_ = plan_rows(kName, sizes_, len);
    for (uint32_t b = 0; b < nbuf_; ++b) {
      x_.push_back(sbuf(kb_, kName, DType::fp32, kPartitions, width_));
      keys_.push_back(sbuf(kb_, kName, DType::fp32, kPartitions, width_));
      if (!largest_) same_.push_back(sbuf(kb_, kName, DType::uint8, kPartitions, width_));
    }
    for (int b = 0; b < 2; ++b) {
      best_[b] = sbuf(kb_, kName, DType::fp32, kPartitions, k8_);
      where_[b] = sbuf(kb_, kName, DType::uint32, kPartitions, k8_);
      picked_[b] = sbuf(kb_, kName, DType::fp32, kPartitions, k8_);
      if (chunks_ > 1) {
        cand_keys_[b] = sbuf(kb_, kName, DType::fp32, kPartitions, chunks_ * k8_);
        cand_values_[b] = sbuf(kb_, kName, DType::fp32, kPartitions, chunks_ * k8_);
        cand_where_[b] = sbuf(kb_, kName, DType::fp32, kPartitions, chunks_ * k8_);
      }
    }
    if (!largest_) lowest_ = sbuf(kb_, kName, DType::fp32, kPartitions, 1);
  }

  const TilePlan::Tile& tile(uint32_t i) const { return plan_.tiles[i]; }
  uint32_t chunk_of(uint32_t i) const { return i % chunks_; }
  uint32_t block_of(uint32_t i) const { return i / chunks_; }

  void load(uint32_t i) {
    const TilePlan::Tile& t = tile(i);
    kb_.dma_copy(on_chip(x_[i % nbuf_], t.parts, t.len, DType::fp32),
                 hbm_tile(kName, in_, in_strides_, plan_, t), i % 2 ? Engine::ACT : Engine::SP);
  }

  // The keys of tile i's chunk (see the file comment), on GpSimd.
  void make_keys(uint32_t i, const AccessPattern& x, const AccessPattern& keys) {
    const TilePlan::Tile& t = tile(i);
    const AccessPattern xs = isa::cols(x, 0, t.len), ks = isa::cols(keys, 0, t.len);
    if (largest_) {
      kb_.tensor_scalar(Engine::POOL, ks, xs, AluOp::max, kLowest);
    } else {  // max(-x, -FLT_MAX), and a NaN (the one value not equal to itself) -FLT_MAX
      const AccessPattern same =
          isa::cols(on_chip(same_[i % nbuf_], t.parts, width_, DType::uint8), 0, t.len);
      kb_.tensor_scalar(Engine::POOL, ks, xs, AluOp::multiply, -1.0f, AluOp::max, kLowest);
      kb_.tensor_tensor(Engine::POOL, same, xs, xs, AluOp::is_equal);
      emit_select(kb_, Engine::POOL, ks, same, ks, repeated(isa::rows(lowest_, 0, t.parts), t.len));
    }
    if (t.len < width_) kb_.memset(Engine::POOL, isa::cols(keys, t.len, width_ - t.len), -kInf);
  }

  // k8 rounds of max8 and match_replace8 over `keys` into best and where.
  void rounds(const AccessPattern& keys, const AccessPattern& best, const AccessPattern& where) {
    for (uint32_t r = 0; r < k8_; r += 8) {
      const AccessPattern b = isa::cols(best, r, 8), w = isa::cols(where, r, 8);
      kb_.max8(b, keys);
      kb_.match_replace8(keys, keys, b, -kInf, &w);
    }
  }

  void compute(uint32_t i) {
    const TilePlan::Tile& t = tile(i);
    const uint32_t P = t.parts, c = chunk_of(i), blk = block_of(i) % 2;
    const AccessPattern x = on_chip(x_[i % nbuf_], P, width_, DType::fp32);
    const AccessPattern keys = on_chip(keys_[i % nbuf_], P, width_, DType::fp32);
    const AccessPattern best = on_chip(best_[blk], P, k8_, DType::fp32);
    const AccessPattern where = on_chip(where_[blk], P, k8_, DType::uint32);
    const AccessPattern picked = on_chip(picked_[blk], P, k8_, DType::fp32);
    make_keys(i, x, keys);
    rounds(keys, best, where);
    if (chunks_ == 1) {
      local_gather(kb_, picked, x, where, k8_);
      return store(i, picked, where);
    }
    // A candidate block: keys, values, and positions from the row's start.
    const uint32_t w = chunks_ * k8_;
    const AccessPattern ck = on_chip(cand_keys_[blk], P, w, DType::fp32);
    const AccessPattern cv = on_chip(cand_values_[blk], P, w, DType::fp32);
    const AccessPattern cw = on_chip(cand_where_[blk], P, w, DType::fp32);
    kb_.tensor_copy(Engine::POOL, isa::cols(ck, c * k8_, k8_), best);
    local_gather(kb_, isa::cols(cv, c * k8_, k8_), x, where, k8_);
    kb_.tensor_scalar(Engine::POOL, isa::cols(cw, c * k8_, k8_), where, AluOp::add,
                      static_cast<float>(uint64_t{c} * kChunk));
    if (c + 1 < chunks_) return;
    rounds(ck, best, where);
    local_gather(kb_, picked, cv, where, k8_);
    const AccessPattern position = on_chip(cand_keys_[blk], P, k8_, DType::fp32);
    local_gather(kb_, position, cw, where, k8_);
    store(i, picked, position);
  }

  // The first k values and positions of the row block of tile i, from GpSimd's queue.
  void store(uint32_t i, const AccessPattern& picked, const AccessPattern& position) {
    TilePlan::Tile row = tile(i);
    row.first = 0;
    row.len = k_;
    kb_.dma_copy(hbm_tile(kName, values_, values_strides_, plan_, row), isa::cols(picked, 0, k_),
                 Engine::POOL);
    kb_.dma_copy(hbm_tile(kName, indices_, indices_strides_, plan_, row),
                 isa::cols(position, 0, k_), Engine::POOL);
  }

  KernelBuilder& kb_;
  bool largest_;
  int64_t n_ = 1;
  uint32_t k_ = 1, k8_ = 8, width_ = 8, chunks_ = 1, nbuf_ = 1;
  std::vector<int64_t> sizes_, in_strides_, values_strides_, indices_strides_;
  AccessPattern in_, values_, indices_;
  TilePlan plan_;
  std::vector<AccessPattern> x_, keys_, same_;
  AccessPattern best_[2], where_[2], picked_[2], cand_keys_[2], cand_values_[2], cand_where_[2];
  AccessPattern lowest_;
};

}  // namespace

void detail::emit_topk(KernelBuilder& kb, const Declare& declare, const View& in, int64_t dim,
                       int64_t k, bool largest, const View& values, const View& indices) {
  TopkKernel(kb, declare, in, dim, k, largest, values, indices).build();
}

isa::Program topk(std::string_view target, const View& in, int64_t dim, int64_t k, bool largest,
                  const View& values, const View& indices) {
  KernelBuilder kb(target);
  detail::emit_topk(kb, declare_operand, in, dim, k, largest, values, indices);
  return kb.finish();
}

}  // namespace neuronsim::kernels
