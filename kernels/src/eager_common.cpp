#include "eager_common.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace neuronsim::kernels {

int64_t View::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

int64_t View::extent_elems() const {
  if (numel() == 0) return 0;
  int64_t last = 0;
  for (size_t d = 0; d < sizes.size(); ++d) last += strides[d] * (sizes[d] - 1);
  return last + 1;
}

std::vector<View> coalesce(std::span<const View> views) {
  if (views.empty()) return {};
  const std::vector<int64_t>& sizes = views[0].sizes;
  for (const View& v : views)
    if (v.sizes != sizes || v.strides.size() != sizes.size())
      throw std::invalid_argument(fmt::format("coalesce: views of sizes [{}] and [{}]",
                                              fmt::join(sizes, ", "), fmt::join(v.sizes, ", ")));
  std::vector<View> out(views.begin(), views.end());
  for (View& v : out) v.sizes.clear(), v.strides.clear();
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1) continue;
    // Dim d continues the outer dim kept last when, in every view, one step of
    // that outer dim is a whole walk of dim d.
    bool merge = !out[0].sizes.empty();
    for (size_t i = 0; merge && i < views.size(); ++i)
      merge = out[i].strides.back() == views[i].strides[d] * sizes[d];
    for (size_t i = 0; i < views.size(); ++i) {
      if (merge) {
        out[i].sizes.back() *= sizes[d];
        out[i].strides.back() = views[i].strides[d];
      } else {
        out[i].sizes.push_back(sizes[d]);
        out[i].strides.push_back(views[i].strides[d]);
      }
    }
  }
  if (out[0].sizes.empty())
    for (View& v : out) v.sizes = {1}, v.strides = {1};
  return out;
}

namespace detail {

void check_view(std::string_view kernel, const char* what, const View& v) {
  require(v.sizes.size() == v.strides.size(), kernel,
          fmt::format("{} has {} sizes but {} strides", what, v.sizes.size(), v.strides.size()));
  int64_t numel = 1;
  double reach = 0;  // in double: sizes and strides below 2^32 may overflow int64 products
  for (size_t d = 0; d < v.sizes.size(); ++d) {
    require(v.sizes[d] >= 0 && v.strides[d] >= 0, kernel,
            fmt::format("{} dim {}: size {} and stride {} must not be negative", what, d,
                        v.sizes[d], v.strides[d]));
    require(v.sizes[d] < (int64_t{1} << 32) && v.strides[d] < (int64_t{1} << 32), kernel,
            fmt::format("{} dim {}: size {} or stride {} is 2^32 or more", what, d, v.sizes[d],
                        v.strides[d]));
    numel = std::min<int64_t>(numel * v.sizes[d], int64_t{1} << 31);
    reach += static_cast<double>(v.strides[d]) * static_cast<double>(v.sizes[d] - 1);
  }
  require(numel > 0, kernel, fmt::format("{} is empty (numel 0): nothing to compute", what));
  require(
      reach + 1 < 0x1p32, kernel,
      fmt::format("{} reaches {} elements; one HBM tensor holds fewer than 2^32", what, reach + 1));
}

void check_no_self_overlap(std::string_view kernel, const char* what, const View& v) {
  std::vector<size_t> dims;
  for (size_t d = 0; d < v.sizes.size(); ++d)
    if (v.sizes[d] > 1) dims.push_back(d);
  std::stable_sort(dims.begin(), dims.end(),
                   [&](size_t a, size_t b) { return v.strides[a] < v.strides[b]; });
  // Innermost first: each dim must step past everything the dims inside it reach.
  int64_t reach = 0;
  for (size_t d : dims) {
    require(v.strides[d] > reach, kernel,
            fmt::format("{} overlaps itself (dim {}: stride {}, size {}); write to a fresh tensor",
                        what, d, v.strides[d], v.sizes[d]));
    reach += v.strides[d] * (v.sizes[d] - 1);
  }
}

View broadcast_to(std::string_view kernel, const char* what, const View& v,
                  std::span<const int64_t> sizes) {
  const size_t rank = sizes.size(), own = v.sizes.size();
  require(own <= rank, kernel,
          fmt::format("{} has {} dims, more than the output's {}", what, own, rank));
  View out{v.dtype, {sizes.begin(), sizes.end()}, std::vector<int64_t>(rank, 0)};
  for (size_t i = rank - own; i < rank; ++i) {
    const size_t j = i - (rank - own);
    require(v.sizes[j] == sizes[i] || v.sizes[j] == 1, kernel,
            fmt::format("{} of sizes [{}] does not broadcast to [{}]", what,
                        fmt::join(v.sizes, ", "), fmt::join(sizes, ", ")));
    if (v.sizes[j] == sizes[i]) out.strides[i] = v.strides[j];
  }
  return out;
}

std::vector<View> order_dims(std::vector<View> views, size_t key) {
  const std::vector<int64_t>& k = views[key].strides;
  std::vector<size_t> perm(k.size());
  std::iota(perm.begin(), perm.end(), size_t{0});
  std::stable_sort(perm.begin(), perm.end(), [&](size_t a, size_t b) { return k[a] > k[b]; });
  for (View& v : views) {
    View p = v;
    for (size_t d = 0; d < perm.size(); ++d) {
      p.sizes[d] = v.sizes[perm[d]];
      p.strides[d] = v.strides[perm[d]];
    }
    v = std::move(p);
  }
  return views;
}

void emit_iota(KernelBuilder& kb, const AccessPattern& dst, std::span<const isa::Dim> dims,
               int32_t offset, int32_t partition_step) {
  isa::Instruction in;
  in.opcode = isa::Opcode::iota;
  in.engine = isa::Engine::POOL;
  AccessPattern pattern;
  pattern.space = isa::MemSpace::Pattern;
  pattern.dtype = DType::int32;
  pattern.num_dims = static_cast<uint8_t>(dims.size());
  std::copy(dims.begin(), dims.end(), pattern.dims.begin());
  in.operands = {{isa::Role::dst, dst}, {isa::Role::pattern, pattern}};
  in.ints[0] = offset;
  in.ints[1] = partition_step;
  kb.emit(std::move(in));
}

void emit_memset(KernelBuilder& kb, isa::Engine engine, const AccessPattern& dst, float value) {
  if (!std::isnan(value)) return kb.memset(engine, dst, value);
  // inf * 0 is NaN with the host's default sign (negative on x86); abs_max with 0 gives
  // |NaN|, the positive NaN that float("nan") is, on every host.
  kb.memset(engine, dst, std::numeric_limits<float>::infinity());
  kb.tensor_scalar(engine, dst, dst, isa::AluOp::multiply, 0.0f, isa::AluOp::abs_max, 0.0f);
}

void emit_select(KernelBuilder& kb, isa::Engine engine, const AccessPattern& dst,
                 const AccessPattern& predicate, const AccessPattern& on_true,
                 const AccessPattern& on_false) {
  isa::Instruction in;
  in.opcode = isa::Opcode::select;
  in.engine = engine;
  in.operands = {{isa::Role::dst, dst},
                 {isa::Role::predicate, predicate},
                 {isa::Role::on_true, on_true},
                 {isa::Role::on_false, on_false}};
  kb.emit(std::move(in));
}

View without_dim(const View& v, size_t dim) {
  View out = v;
  out.sizes.erase(out.sizes.begin() + static_cast<std::ptrdiff_t>(dim));
  out.strides.erase(out.strides.begin() + static_cast<std::ptrdiff_t>(dim));
  return out;
}

std::vector<View> partition_layout(std::vector<View> views, size_t key) {
  std::vector<View> kept = coalesce(order_dims(std::move(views), key));
  const std::vector<int64_t>& sizes = kept[0].sizes;
  const auto big = std::max_element(sizes.begin(), sizes.end()) - sizes.begin();
  for (View& v : kept) {
    std::rotate(v.sizes.begin() + big, v.sizes.begin() + big + 1, v.sizes.end());
    std::rotate(v.strides.begin() + big, v.strides.begin() + big + 1, v.strides.end());
  }
  return kept;
}

AccessPattern declare_input(KernelBuilder& kb, const std::string& name, const View& v) {
  return kb.input(name, v.dtype, {1, v.extent_elems()});
}

AccessPattern declare_output(KernelBuilder& kb, const std::string& name, const View& v) {
  return kb.output(name, v.dtype, {1, v.extent_elems()});
}

AccessPattern declare_operand(KernelBuilder& kb, const std::string& name, const View& v,
                              bool output) {
  return output ? declare_output(kb, name, v) : declare_input(kb, name, v);
}

int32_t dim_stride(std::string_view kernel, int64_t stride) {
  require(stride <= std::numeric_limits<int32_t>::max(), kernel,
          fmt::format("stride {} does not fit an access pattern's 32-bit dim stride", stride));
  return static_cast<int32_t>(stride);
}

uint32_t TilePlan::max_free() const {
  uint32_t most = 0;
  for (const Tile& t : tiles) most = std::max(most, free_elems(t));
  return most;
}

namespace {

// Calls f(outer) for every index of the dims before `part`, the last one fastest.
template <class F>
void for_each_outer(const std::vector<int64_t>& sizes, size_t part, F&& f) {
  std::vector<int64_t> outer(part, 0);
  for (;;) {
    f(outer);
    size_t d = part;
    while (d > 0 && ++outer[d - 1] == sizes[d - 1]) outer[--d] = 0;
    if (d == 0) return;
  }
}

void plan_runs(TilePlan& plan, uint32_t max_free) {
  const int64_t n = plan.sizes[plan.part];
  // Indices per partition: enough to fill 128 partitions, within max_free.
  const auto len = static_cast<uint32_t>(
      std::min<uint64_t>(max_free / plan.inner, std::max<int64_t>(1, n / kPartitions)));
  for_each_outer(plan.sizes, plan.part, [&](const std::vector<int64_t>& outer) {
    int64_t at = 0;
    for (; n - at >= int64_t{kPartitions} * len; at += int64_t{kPartitions} * len)
      plan.tiles.push_back({outer, at, kPartitions, 0, len});
    if (const int64_t parts = (n - at) / len; parts > 0) {
      plan.tiles.push_back({outer, at, static_cast<uint32_t>(parts), 0, len});
      at += parts * len;
    }
    if (n > at) plan.tiles.push_back({outer, at, 1, 0, static_cast<uint32_t>(n - at)});
  });
}

void plan_blocks(TilePlan& plan, uint32_t max_free) {
  const int64_t rows = plan.sizes[plan.part], n = plan.sizes[plan.cut];
  const auto len = static_cast<uint32_t>(std::min<uint64_t>(max_free / plan.inner, n));
  for_each_outer(plan.sizes, plan.part, [&](const std::vector<int64_t>& outer) {
    for (int64_t r = 0; r < rows; r += kPartitions)
      for (int64_t c = 0; c < n; c += len)
        plan.tiles.push_back({outer, r, tile_len(rows, kPartitions, u32(r / kPartitions)), c,
                              static_cast<uint32_t>(std::min<int64_t>(len, n - c))});
  });
}

void check_dims_left(std::string_view kernel, const std::vector<int64_t>& sizes) {
  require(sizes.size() <= kMaxWalkDims, kernel,
          fmt::format("the views keep {} dims after coalescing, [{}]; one DMA access pattern "
                      "walks rows and 4 free dims",
                      sizes.size(), fmt::join(sizes, ", ")));
}

}  // namespace

TilePlan plan_rows(std::string_view kernel, std::vector<int64_t> sizes, uint32_t max_free) {
  check_dims_left(kernel, sizes);
  TilePlan plan;
  plan.sizes = std::move(sizes);
  plan.cut = plan.sizes.size() - 1;
  plan.part = plan.cut - 1;
  plan_blocks(plan, max_free);
  return plan;
}

TilePlan plan_tiles(std::string_view kernel, std::vector<int64_t> sizes, uint32_t max_free) {
  if (sizes.empty()) sizes = {1};
  const size_t n = sizes.size();
  check_dims_left(kernel, sizes);
  TilePlan plan;
  plan.sizes = sizes;
  // The outermost dim that leaves few enough elements inside it: long rows, few tiles.
  for (plan.cut = n >= 4 ? n - 4 : 0;; ++plan.cut) {
    plan.inner = 1;
    for (size_t d = plan.cut + 1; d < n; ++d) plan.inner *= static_cast<uint64_t>(sizes[d]);
    if (plan.inner <= max_free) break;
  }
  // Runs fill partitions with 1/128 of the cut dim; blocks take a dim outside it for
  // the partitions and give each partition up to max_free. The tile that moves faster
  // wins: the larger, as the DMA engines serve it. Each engine serves 8 partitions
  // (docs/cost-model.md §4.1), so 16 partitions of long rows keep 2 of 16 engines busy
  // and lose to 128 partitions of shorter ones; a row's descriptor costs what 215 bytes
  // do (9.37 ns at 23 B/ns on trn2, §4.2), which short rows pay the most.
  const auto speed = [](uint64_t parts, uint64_t free) {
    const double engines = static_cast<double>(std::min<uint64_t>(16, (parts + 7) / 8));
    const double row_bytes = static_cast<double>(std::min<uint64_t>(free * 4, 65536));
    return static_cast<double>(parts * free) * engines * row_bytes / (row_bytes + 215.0);
  };
  const uint64_t cut_elems = static_cast<uint64_t>(sizes[plan.cut]) * plan.inner;
  const uint64_t run_free =
      std::min<uint64_t>(max_free, std::max<uint64_t>(plan.inner, cut_elems / kPartitions));
  const double runs = speed(std::min<uint64_t>(kPartitions, cut_elems / run_free), run_free);
  const double blocks =
      plan.cut == 0
          ? 0.0
          : speed(std::min<uint64_t>(kPartitions, static_cast<uint64_t>(sizes[plan.cut - 1])),
                  std::min<uint64_t>(max_free, cut_elems));
  plan.part = blocks > runs ? plan.cut - 1 : plan.cut;
  if (plan.part == plan.cut)
    plan_runs(plan, max_free);
  else
    plan_blocks(plan, max_free);
  return plan;
}

AccessPattern hbm_tile(std::string_view kernel, const AccessPattern& tensor,
                       std::span<const int64_t> strides, const TilePlan& plan,
                       const TilePlan::Tile& t) {
  AccessPattern ap;
  ap.space = isa::MemSpace::HBM;
  ap.dtype = tensor.dtype;
  ap.tensor = tensor.tensor;
  int64_t first = t.start * strides[plan.part] + t.first * strides[plan.cut];
  for (size_t d = 0; d < plan.part; ++d) first += t.outer[d] * strides[d];
  ap.offset = tensor.offset + static_cast<uint64_t>(first) * isa::dtype_size(tensor.dtype);
  ap.num_partitions = u16(t.parts);
  ap.partition_stride = (plan.part == plan.cut ? int64_t{t.len} : 1) * strides[plan.part];
  ap.num_dims = static_cast<uint8_t>(plan.sizes.size() - plan.cut);
  ap.dims[0] = {dim_stride(kernel, strides[plan.cut]), t.len};
  for (size_t d = plan.cut + 1; d < plan.sizes.size(); ++d)
    ap.dims[d - plan.cut] = {dim_stride(kernel, strides[d]), u32(plan.sizes[d])};
  return ap;
}

}  // namespace detail

size_t walk_dims(std::vector<View> views) {
  return coalesce(detail::order_dims(std::move(views), 0))[0].sizes.size();
}

}  // namespace neuronsim::kernels
