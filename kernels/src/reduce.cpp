// reduce: sum / mean / max / min / argmax / argmin over one dim of a strided view.
//
// Every kept index gets a partition and the reduced dim runs along the free axis:
// the kept dims (ordered by out's strides and coalesced with out) put their
// largest dim on the partitions, 128 indices a tile, and loop over the others;
// the reduced dim, whatever its stride, is the free dim of the tile's DMA (see
// eager.h for why this beats a TensorE ones-vector in simulated time). Per tile:
//   sum/mean/max/min  tensor_reduce of each chunk of the reduced dim into one
//                     column of an FP32 partials tile; after the last chunk, one
//                     more tensor_reduce over the columns (or, for one chunk, the
//                     first one) writes out.dtype, or FP32 that mean divides by D;
//   argmax/argmin     m = max (min) of the row; eq = (x == m) as 1/0; eq * (j - D)
//                     is negative exactly at the matches, so its min is the first
//                     match minus D; + D gives j, written as int32. j - D comes
//                     from one iota, made once. A row longer than a tile (argmax
//                     over an LM's vocabulary) keeps each chunk's best value and
//                     first index (offset by the chunk's start) in two columns of
//                     partials; after the last chunk, the same steps over those
//                     columns pick the best value's first index.
// Tiles alternate between VectorE and GpSimd; loads alternate between SP's and
// ACT's queues (ACT computes nothing here); POOL stores what it computed, SP the rest.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "eager_common.h"
#include "stages.h"

namespace neuronsim::kernels {
namespace {

using namespace detail;
using isa::AluOp;
using isa::Engine;

constexpr std::string_view kName = "reduce";
constexpr uint32_t kMaxChunk = 8192;  // elements per partition of one chunk of the reduced dim

bool is_arg(ReduceOp op) {
  return op == ReduceOp::argmax || op == ReduceOp::argmin;
}

AluOp alu_of(ReduceOp op) {
  switch (op) {
    case ReduceOp::max:
    case ReduceOp::argmax:
      return AluOp::max;
    case ReduceOp::min:
    case ReduceOp::argmin:
      return AluOp::min;
    default:
      return AluOp::add;
  }
}

// The dim as an index into in's dims (negative counts from the end, as in torch).
size_t check_views(ReduceOp op, const View& in, int64_t dim, const View& out) {
  check_view(kName, "in", in);
  check_view(kName, "out", out);
  check_no_self_overlap(kName, "out", out);
  const auto rank = static_cast<int64_t>(in.sizes.size());
  require(dim >= -rank && dim < rank, kName,
          fmt::format("dim {} is out of range for a {}-D input", dim, rank));
  const auto d = static_cast<size_t>(dim < 0 ? dim + rank : dim);
  std::vector<int64_t> kept = without_dim(in, d).sizes, keepdim = in.sizes;
  keepdim[d] = 1;
  require(out.sizes == kept || out.sizes == keepdim, kName,
          fmt::format("out has sizes [{}]; reducing dim {} of [{}] gives [{}] or [{}]",
                      fmt::join(out.sizes, ", "), dim, fmt::join(in.sizes, ", "),
                      fmt::join(kept, ", "), fmt::join(keepdim, ", ")));
  if (is_arg(op))
    require(out.dtype == DType::int32, kName,
            fmt::format("argmax/argmin write int32 indices, not {}", isa::dtype_name(out.dtype)));
  if (op == ReduceOp::mean) check_float(kName, "out of mean", out.dtype);
  return d;
}

// An iota: dst[p, j] = offset + j.
void iota(KernelBuilder& kb, const AccessPattern& dst, int32_t offset) {
  const isa::Dim row{1, static_cast<uint32_t>(dst.free_elems())};
  emit_iota(kb, dst, {&row, 1}, offset);
}

class ReduceKernel {
 public:
  ReduceKernel(KernelBuilder& kb, const Declare& declare, ReduceOp op, const View& in, int64_t dim,
               const View& out, const PointwiseExpr* prologue, const RowEpilogue* epilogue)
      : kb_(kb), op_(op), prologue_(prologue), epilogue_(epilogue) {
    const size_t d = check_views(op, in, dim, out);
    require(!is_arg(op_) || (!prologue_ && !epilogue_), kName,
            "argmax/argmin take no prologue or epilogue");
    if (prologue_) prologue_temps_ = tile_expression_temps(kName, *prologue_, 1);
    std::vector<View> extra;  // the epilogue's output and inputs, walked like in
    if (epilogue_) {
      require(epilogue_->out.sizes == in.sizes, kName, "the epilogue's rows are not in's");
      extra.push_back(epilogue_->out);
      for (size_t k = 0; k < epilogue_->inputs.size(); ++k)
        extra.push_back(broadcast_to(kName, "an epilogue input", epilogue_->inputs[k], in.sizes));
      std::vector<bool> columns(epilogue_->inputs.size() + 2, false);
      columns[1] = true;  // load(1): the row's result
      column_ = tile_expression_columns(kName, *epilogue_->expr, columns);
      columns_in_ = columns;
    }
    reduced_ = in.sizes[d];
    layout(in, d, out, extra);
    in_ = declare(kb_, "in", in, false);
    out_ = declare(kb_, "out", out, true);
    if (epilogue_) {
      rows_out_ = declare(kb_, "rows", epilogue_->out, true);
      for (size_t k = 0; k < epilogue_->inputs.size(); ++k)
        rows_in_.push_back(declare(kb_, fmt::format("e{}", k + 2), epilogue_->inputs[k], false));
    }
    allocate();
  }

  void build() {
    if (is_arg(op_)) iota(kb_, iota_, -static_cast<int32_t>(reduced_));
    pipeline(
        static_cast<uint32_t>(plan_.tiles.size()), nbuf_ - 1, [&](uint32_t i) { load(i); },
        [&](uint32_t i) { compute(i); });
  }

 private:
  // The index space [kept dims..., reduced]: kept dims in out's memory order and
  // coalesced with out, the largest of them last (on the partitions).
  void layout(const View& in, size_t d, const View& out, const std::vector<View>& extra) {
    const View out_kept = out.sizes.size() == in.sizes.size() ? without_dim(out, d) : out;
    std::vector<View> views{without_dim(in, d), out_kept};
    for (const View& v : extra) views.push_back(without_dim(v, d));
    const std::vector<View> kept = partition_layout(views, 1);
    sizes_ = kept[0].sizes;
    sizes_.push_back(reduced_);
    in_strides_ = kept[0].strides;
    in_strides_.push_back(in.strides[d]);
    out_strides_ = kept[1].strides;
    out_strides_.push_back(0);
    for (size_t k = 0; k < extra.size(); ++k) {
      extra_strides_.push_back(kept[2 + k].strides);
      extra_strides_.back().push_back(extra[k].strides[d]);
    }
  }

  // Per element and partition, per buffer: the input chunk (FP32-sized) and, for
  // argmax/argmin, the candidates; those also share one iota. Three buffers when
  // they fit, else two.
  void allocate() {
    const uint64_t capacity = kb_.target().sbuf_partition_bytes - 4096;  // the [P, 1] tiles
    const size_t epilogue_steps = epilogue_ ? epilogue_->expr->steps().size() : 0;
    const uint64_t per_buf =
        (is_arg(op_) || prologue_ ? 8 : 4) + (epilogue_ ? 4 * (1 + epilogue_->inputs.size()) : 0);
    const uint64_t shared = (is_arg(op_) ? 4 : 0) + 4 * prologue_temps_ + 4 * epilogue_steps;
    auto chunk_for = [&](uint32_t nbuf) {
      return std::min<uint64_t>(kMaxChunk, capacity / (nbuf * per_buf + shared) / 16 * 16);
    };
    const auto need = static_cast<uint64_t>(reduced_);
    nbuf_ = chunk_for(3) >= std::min<uint64_t>(need, kMaxChunk) ? 3 : 2;
    const auto chunk = static_cast<uint32_t>(chunk_for(nbuf_));
    plan_ = plan_rows(kName, sizes_, chunk);
    chunks_ = ceil_div(need, plan_.tiles.front().len);
    require(!epilogue_ || chunks_ == 1, kName,
            fmt::format("an epilogue needs each row ({} elements) in one tile; {} holds {}", need,
                        kb_.target().name, plan_.tiles.front().len));
    require(chunks_ <= kMaxChunk, kName,
            fmt::format("the reduced dim of {} elements needs {} chunks, more than {}", need,
                        chunks_, kMaxChunk));
    const uint32_t len = plan_.tiles.front().len;
    for (size_t t = 0; t < prologue_temps_; ++t)
      temps_.push_back(sbuf(kb_, kName, DType::fp32, kPartitions, len));
    if (epilogue_) {
      for (size_t t = 0; t < epilogue_->expr->steps().size(); ++t) {
        row_temps_.push_back(sbuf(kb_, kName, DType::fp32, kPartitions, len));
        column_temps_.push_back(sbuf(kb_, kName, DType::fp32, kPartitions, 1));
      }
      for (uint32_t b = 0; b < nbuf_; ++b) {
        rows_tiles_.push_back(sbuf(kb_, kName, rows_out_.dtype, kPartitions, len));
        for (const AccessPattern& in : rows_in_)
          rows_in_tiles_.push_back(sbuf(kb_, kName, in.dtype, kPartitions, len));
      }
    }
    for (uint32_t b = 0; b < nbuf_; ++b) {
      x_.push_back(sbuf(kb_, kName, DType::fp32, kPartitions, len));
      if (prologue_) y_.push_back(sbuf(kb_, kName, DType::fp32, kPartitions, len));
      if (is_arg(op_)) cand_.push_back(sbuf(kb_, kName, DType::fp32, kPartitions, len));
    }
    if (is_arg(op_)) iota_ = sbuf(kb_, kName, DType::fp32, kPartitions, len);
    for (int b = 0; b < 2; ++b) {
      partials_[b] = sbuf(kb_, kName, DType::fp32, kPartitions, chunks_);
      result_[b] = sbuf(kb_, kName, DType::fp32, kPartitions, 1);
      if (is_arg(op_) && chunks_ > 1) {
        arg_index_[b] = sbuf(kb_, kName, DType::fp32, kPartitions, chunks_);
        arg_cand_[b] = sbuf(kb_, kName, DType::fp32, kPartitions, chunks_);
      }
    }
  }

  const TilePlan::Tile& tile(uint32_t i) const { return plan_.tiles[i]; }
  uint32_t chunk_of(uint32_t i) const { return i % chunks_; }
  uint32_t block_of(uint32_t i) const { return i / chunks_; }

  void load(uint32_t i) {
    const TilePlan::Tile& t = tile(i);
    kb_.dma_copy(on_chip(x_[i % nbuf_], t.parts, t.len, in_.dtype),
                 hbm_tile(kName, in_, in_strides_, plan_, t), i % 2 ? Engine::ACT : Engine::SP);
    for (size_t k = 0; k < rows_in_.size(); ++k)
      kb_.dma_copy(rows_in_tile(i, k),
                   hbm_tile(kName, rows_in_[k], extra_strides_[k + 1], plan_, t),
                   (i + k + 1) % 2 ? Engine::ACT : Engine::SP);
  }

  AccessPattern rows_in_tile(uint32_t i, size_t k) const {
    const TilePlan::Tile& t = tile(i);
    return on_chip(rows_in_tiles_[(i % nbuf_) * rows_in_.size() + k], t.parts, t.len,
                   rows_in_[k].dtype);
  }

  // The epilogue over the whole rows of tile i, with the row's result as load(1); the
  // rows it computes are stored to "rows".
  void apply_epilogue(uint32_t i, Engine engine, const AccessPattern& x,
                      const AccessPattern& result) {
    const TilePlan::Tile& t = tile(i);
    std::vector<AccessPattern> loads{x, result}, temps, columns;
    for (size_t k = 0; k < rows_in_.size(); ++k) loads.push_back(rows_in_tile(i, k));
    for (const AccessPattern& r : row_temps_)
      temps.push_back(on_chip(r, t.parts, t.len, DType::fp32));
    for (const AccessPattern& c : column_temps_)
      columns.push_back(on_chip(c, t.parts, 1, DType::fp32));
    const AccessPattern rows = on_chip(rows_tiles_[i % nbuf_], t.parts, t.len, rows_out_.dtype);
    emit_tile_expression(kb_, engine, *epilogue_->expr, loads, temps, rows, columns_in_, columns);
    kb_.dma_copy(hbm_tile(kName, rows_out_, extra_strides_[0], plan_, t), rows,
                 engine == Engine::POOL ? Engine::POOL : Engine::SP);
  }

  void compute(uint32_t i) {
    const Engine engine = i % 2 ? Engine::POOL : Engine::DVE;
    const TilePlan::Tile& t = tile(i);
    AccessPattern x = on_chip(x_[i % nbuf_], t.parts, t.len, in_.dtype);
    const AccessPattern raw = x;
    if (prologue_) {  // the reduced values are the prologue's of the loaded ones
      const AccessPattern y = on_chip(y_[i % nbuf_], t.parts, t.len, DType::fp32);
      std::vector<AccessPattern> temps;
      for (const AccessPattern& tmp : temps_)
        temps.push_back(on_chip(tmp, t.parts, t.len, DType::fp32));
      emit_tile_expression(kb_, engine, *prologue_, {&x, 1}, temps, y);
      x = y;
    }
    const AccessPattern partials =
        on_chip(partials_[block_of(i) % 2], t.parts, chunks_, DType::fp32);
    const AccessPattern result = on_chip(result_[block_of(i) % 2], t.parts, 1, out_.dtype);
    if (is_arg(op_) && chunks_ > 1) {
      const AccessPattern index =
          on_chip(arg_index_[block_of(i) % 2], t.parts, chunks_, DType::fp32);
      const AccessPattern cand = on_chip(cand_[i % nbuf_], t.parts, t.len, DType::fp32);
      arg_reduce(engine, x, cand, isa::cols(partials, chunk_of(i), 1),
                 isa::cols(index, chunk_of(i), 1),
                 static_cast<float>(reduced_ + int64_t{chunk_of(i)} * plan_.tiles.front().len));
      if (chunk_of(i) + 1 < chunks_) return;
      finish_arg(engine, partials, index,
                 on_chip(arg_cand_[block_of(i) % 2], t.parts, chunks_, DType::fp32), result);
    } else if (is_arg(op_)) {
      arg_reduce(engine, x, on_chip(cand_[i % nbuf_], t.parts, t.len, DType::fp32),
                 isa::cols(partials, 0, 1), result, static_cast<float>(reduced_));
    } else if (chunks_ == 1 && op_ != ReduceOp::mean) {
      kb_.tensor_reduce(engine, result, x, alu_of(op_), 0x1);
    } else {
      kb_.tensor_reduce(engine, isa::cols(partials, chunk_of(i), 1), x, alu_of(op_), 0x1);
      if (chunk_of(i) + 1 < chunks_) return;
      finish_row(engine, partials, result);
    }
    TilePlan::Tile row = t;
    row.first = 0;
    row.len = 1;
    kb_.dma_copy(hbm_tile(kName, out_, out_strides_, plan_, row), result,
                 engine == Engine::POOL ? Engine::POOL : Engine::SP);
    if (epilogue_) apply_epilogue(i, engine, raw, result);
  }

  // The chunk results of one row block into the result, divided by D for mean.
  void finish_row(Engine engine, const AccessPattern& partials, const AccessPattern& result) {
    if (op_ != ReduceOp::mean) return kb_.tensor_reduce(engine, result, partials, alu_of(op_), 0x1);
    AccessPattern sum = result;
    sum.dtype = DType::fp32;
    if (chunks_ > 1) kb_.tensor_reduce(engine, sum, partials, AluOp::add, 0x1);
    kb_.tensor_scalar(engine, result, chunks_ > 1 ? sum : partials, AluOp::divide,
                      static_cast<float>(reduced_));
  }

  // best = max (min) of x's row; index = the first column j where x == best, plus
  // `offset` - D (the iota holds j - D, negative everywhere, so the min of
  // eq * (j - D) is the first match minus D).
  void arg_reduce(Engine engine, const AccessPattern& x, const AccessPattern& cand,
                  const AccessPattern& best, const AccessPattern& index, float offset) {
    kb_.tensor_reduce(engine, best, x, alu_of(op_), 0x1);
    kb_.tensor_scalar(engine, cand, x, AluOp::is_equal, 0.0f, AluOp::bypass, 0.0f, &best);
    match_nans(engine, cand, x);
    kb_.tensor_tensor(engine, cand, cand,
                      isa::cols(isa::rows(iota_, 0, x.num_partitions), 0, x.dims[0].size),
                      AluOp::multiply);
    AccessPattern first = index;
    first.dtype = DType::fp32;
    kb_.tensor_reduce(engine, first, cand, AluOp::min, 0x1);
    kb_.tensor_scalar(engine, index, first, AluOp::add, offset);
  }

  // eq |= isnan(x), so that a NaN, which max and min propagate (torch's argmax and argmin
  // pick the first NaN), matches itself. x is dead after the match: it takes the NaN mask.
  void match_nans(Engine engine, const AccessPattern& eq, const AccessPattern& x) {
    if (!isa::is_float(x.dtype)) return;
    kb_.tensor_tensor(engine, x, x, x, AluOp::not_equal);
    kb_.tensor_tensor(engine, eq, eq, x, AluOp::max);
  }

  // The chunks' best values and first indices of a row into the row's first index of
  // its best value: the chunks whose best is the row's, the smallest of their indices
  // (index - D is negative, as above).
  void finish_arg(Engine engine, const AccessPattern& best, const AccessPattern& index,
                  const AccessPattern& cand, const AccessPattern& result) {
    AccessPattern row_best = result;
    row_best.dtype = DType::fp32;
    kb_.tensor_reduce(engine, row_best, best, alu_of(op_), 0x1);
    kb_.tensor_scalar(engine, cand, best, AluOp::is_equal, 0.0f, AluOp::bypass, 0.0f, &row_best);
    match_nans(engine, cand, best);
    kb_.tensor_scalar(engine, index, index, AluOp::subtract, static_cast<float>(reduced_));
    kb_.tensor_tensor(engine, cand, cand, index, AluOp::multiply);
    kb_.tensor_reduce(engine, row_best, cand, AluOp::min, 0x1);
    kb_.tensor_scalar(engine, result, row_best, AluOp::add, static_cast<float>(reduced_));
  }

  KernelBuilder& kb_;
  ReduceOp op_;
  const PointwiseExpr* prologue_;
  const RowEpilogue* epilogue_;
  size_t prologue_temps_ = 0;
  std::vector<AccessPattern> y_, temps_;
  std::vector<bool> column_, columns_in_;
  std::vector<std::vector<int64_t>> extra_strides_;  // the epilogue's rows, then its inputs
  AccessPattern rows_out_;
  std::vector<AccessPattern> rows_in_, rows_tiles_, rows_in_tiles_, row_temps_, column_temps_;
  int64_t reduced_ = 1;  // D, the reduced dim's size
  std::vector<int64_t> sizes_, in_strides_, out_strides_;
  AccessPattern in_, out_;
  TilePlan plan_;
  uint32_t nbuf_ = 2, chunks_ = 1;
  std::vector<AccessPattern> x_, cand_;
  AccessPattern iota_, partials_[2], result_[2], arg_index_[2], arg_cand_[2];
};

}  // namespace

void detail::emit_reduce(KernelBuilder& kb, const Declare& declare, ReduceOp op, const View& in,
                         int64_t dim, const View& out, const PointwiseExpr* prologue,
                         const RowEpilogue* epilogue) {
  ReduceKernel(kb, declare, op, in, dim, out, prologue, epilogue).build();
}

isa::Program reduce(std::string_view target, ReduceOp op, const View& in, int64_t dim,
                    const View& out) {
  KernelBuilder kb(target);
  detail::emit_reduce(kb, declare_operand, op, in, dim, out);
  return kb.finish();
}

}  // namespace neuronsim::kernels
