// The functional plane. Every instruction follows one shape: read each operand
// into a packed buffer in walk order (partition-major, then dims outermost
// first), compute on the buffers, then write the destination back. Reading
// everything before writing anything is what makes in-place operations work.
#include "neuronsim/sim/functional.h"

#include <cblas.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "neuronsim/isa/alu.h"
#include "neuronsim/isa/assembler.h"

namespace neuronsim::sim {
namespace {

using isa::AccessPattern;
using isa::AluOp;
using isa::DType;
using isa::Engine;
using isa::Instruction;
using isa::MemSpace;
using isa::Opcode;
using isa::Role;
using Kind = ExecError::Kind;

// Large blocks of the functional plane's buffers, kept per thread once freed. Every
// instruction allocates buffers for its operands, and without this a block above malloc's
// mmap threshold (or one a worker thread's arena trims) goes back to the system at every
// free, so each execution paid page faults on fresh memory: 4-5x the cost of its copies.
class BlockCache {
 public:
  static constexpr size_t kMinBytes = size_t{32} << 10;  // smaller blocks: malloc's bins

  // A block of at least `bytes` (>= kMinBytes); `bytes` becomes its size class.
  static void* take(size_t& bytes) {
    const size_t k = size_class(bytes);
    bytes = size_t{1} << k;
    if (!gone) {
      std::vector<void*>& kept = cache().free[k];
      if (!kept.empty()) {
        void* p = kept.back();
        kept.pop_back();
        return p;
      }
    }
    void* p = std::malloc(bytes);
    if (!p) throw std::bad_alloc();
    return p;
  }
  static void give(void* p, size_t bytes) {
    if (gone) return std::free(p);
    std::vector<void*>& kept = cache().free[size_class(bytes)];
    if (kept.size() >= kKeep) return std::free(p);
    kept.push_back(p);
  }

 private:
  static constexpr size_t kKeep = 8;  // per size class and thread
  struct Cache {
    std::array<std::vector<void*>, 64> free;
    ~Cache() {
      gone = true;  // buffers destroyed later in thread exit free their blocks directly
      for (auto& kept : free)
        for (void* p : kept) std::free(p);
    }
  };
  static size_t size_class(size_t bytes) { return std::bit_width(bytes - 1); }
  static Cache& cache() {
    thread_local Cache c;
    return c;
  }
  static inline thread_local bool gone = false;
};

// A heap array that skips zero-initialisation: every buffer here is overwritten in full.
template <typename T>
class Buffer {
 public:
  explicit Buffer(size_t n = 0) : size_(n), bytes_(n * sizeof(T)) {
    if (n == 0) return;
    data_ = static_cast<T*>(bytes_ >= BlockCache::kMinBytes ? BlockCache::take(bytes_)
                                                            : std::malloc(bytes_));
    if (!data_) throw std::bad_alloc();
  }
  Buffer(Buffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(o.size_), bytes_(o.bytes_) {}
  Buffer& operator=(Buffer&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() {
    if (data_ && bytes_ >= BlockCache::kMinBytes)
      BlockCache::give(data_, bytes_);
    else
      std::free(data_);
  }
  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }

 private:
  T* data_ = nullptr;
  size_t size_;
  size_t bytes_;  // of the block
};

using Bytes = Buffer<uint8_t>;
using Floats = Buffer<float>;

// ---------------------------------------------------------------------------
// Execution context and errors

struct Ctx {
  const Instruction& inst;
  CoreState& st;
  const isa::Program* program;  // for tensor names in messages; may be null
  bool nan_check;               // fail_on_nan applies to this instruction's writes

  [[noreturn]] void fail(Kind kind, const std::string& what) const {
    throw ExecError(kind, fmt::format("{}: {}", isa::format_instruction(inst, program), what));
  }
  const AccessPattern& get(Role r) const {
    const AccessPattern* ap = inst.operand(r);
    if (!ap) fail(Kind::unsupported, fmt::format("operand {} is missing", isa::role_name(r)));
    return *ap;
  }
};

size_t esize(const AccessPattern& ap) {
  return isa::dtype_size(ap.dtype);
}
size_t free_size(const AccessPattern& ap) {
  return static_cast<size_t>(ap.free_elems());
}
size_t total_size(const AccessPattern& ap) {
  return static_cast<size_t>(ap.total_elems());
}

// ---------------------------------------------------------------------------
// Walking access patterns

// Walks index tuples of up to kMaxDims dims (outermost first) in walk order and
// keeps value = sum(weight_k * i_k) up to date.
struct Odometer {
  int n = 0;
  std::array<uint32_t, isa::kMaxDims> size{};
  std::array<uint32_t, isa::kMaxDims> idx{};
  std::array<int64_t, isa::kMaxDims> weight{};
  int64_t value = 0;

  void next() {
    for (int k = n - 1; k >= 0; --k) {
      value += weight[k];
      if (++idx[k] < size[k]) return;
      value -= weight[k] * size[k];
      idx[k] = 0;
    }
  }
};

// One innermost run of a pattern: `count` elements `stride` bytes apart, the
// first at byte `start` of its partition (on chip) or of its tensor (HBM; the
// row offset included).
struct Run {
  uint32_t part;
  int64_t start;
  int64_t stride;
  uint32_t count;
};

// Calls fn(run) for every run of `ap`, in walk order.
template <typename Fn>
void for_each_run(const AccessPattern& ap, Fn&& fn) {
  const int64_t es = static_cast<int64_t>(esize(ap));
  const int nd = std::max<int>(ap.num_dims, 1);
  const isa::Dim inner = ap.num_dims ? ap.dims[nd - 1] : isa::Dim{};
  Odometer outer;
  outer.n = nd - 1;
  uint64_t outer_count = 1;
  for (int k = 0; k < outer.n; ++k) {
    outer.size[k] = ap.dims[k].size;
    outer.weight[k] = int64_t{ap.dims[k].stride} * es;
    outer_count *= ap.dims[k].size;
  }
  for (uint32_t p = 0; p < ap.num_partitions; ++p) {
    const int64_t row = ap.space == MemSpace::HBM ? int64_t{p} * ap.partition_stride * es : 0;
    const int64_t base = static_cast<int64_t>(ap.offset) + row;
    outer.value = 0;
    for (uint64_t o = 0; o < outer_count; ++o, outer.next())
      fn(Run{p, base + outer.value, int64_t{inner.stride} * es, inner.size});
  }
}

// Bytes [lo, hi) a run touches.
std::pair<int64_t, int64_t> run_bytes(const Run& r, int64_t es) {
  const int64_t span = r.stride * (int64_t{r.count} - 1);
  return {r.start + std::min<int64_t>(0, span), r.start + std::max<int64_t>(0, span) + es};
}

// The first element of an on-chip run; faults rather than touching memory outside the space.
uint8_t* on_chip(const Ctx& c, const AccessPattern& ap, const Run& r) {
  OnChipMemory& m = ap.space == MemSpace::PSUM ? c.st.psum : c.st.sbuf;
  const uint32_t part = ap.partition_of(r.part);  // a broadcast's rows all read one partition
  const auto [lo, hi] = run_bytes(r, static_cast<int64_t>(esize(ap)));
  if (part >= m.partitions() || lo < 0 || hi > int64_t{m.partition_bytes()})
    c.fail(Kind::out_of_bounds,
           fmt::format("bytes {}..{} of {} partition {} are outside the space ({} "
                       "partitions of {} bytes)",
                       lo, hi, isa::mem_space_name(ap.space), part, m.partitions(),
                       m.partition_bytes()));
  return m.at(part, static_cast<uint64_t>(r.start));
}

// The HBM address of a run's first element; faults when the run leaves its tensor.
uint64_t hbm_address(const Ctx& c, const AccessPattern& ap, const Run& r) {
  const auto it = c.st.tensors.find(ap.tensor);
  if (it == c.st.tensors.end())
    c.fail(Kind::out_of_bounds, fmt::format("HBM tensor id {} is not bound", ap.tensor));
  const auto [lo, hi] = run_bytes(r, static_cast<int64_t>(esize(ap)));
  if (lo < 0 || hi > static_cast<int64_t>(it->second.size))
    c.fail(Kind::out_of_bounds,
           fmt::format("bytes {}..{} of HBM tensor id {} are outside its {} bytes", lo, hi,
                       ap.tensor, it->second.size));
  return it->second.address + static_cast<uint64_t>(r.start);
}

void check_memory(const Ctx& c, const AccessPattern& ap) {
  if (ap.space == MemSpace::Pattern)
    c.fail(Kind::unsupported, "an index pattern is not memory and cannot be read or written");
}

template <size_t S>
void gather_elems(const uint8_t* src, int64_t stride, uint32_t n, uint8_t* dst) {
  for (uint32_t i = 0; i < n; ++i) std::memcpy(dst + size_t{i} * S, src + i * stride, S);
}

template <size_t S>
void scatter_elems(const uint8_t* src, uint8_t* dst, int64_t stride, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) std::memcpy(dst + i * stride, src + size_t{i} * S, S);
}

void gather_strided(const uint8_t* src, int64_t stride, uint32_t n, size_t es, uint8_t* dst) {
  switch (es) {
    case 1:
      return gather_elems<1>(src, stride, n, dst);
    case 2:
      return gather_elems<2>(src, stride, n, dst);
    default:
      return gather_elems<4>(src, stride, n, dst);
  }
}

void scatter_strided(const uint8_t* src, uint8_t* dst, int64_t stride, uint32_t n, size_t es) {
  switch (es) {
    case 1:
      return scatter_elems<1>(src, dst, stride, n);
    case 2:
      return scatter_elems<2>(src, dst, stride, n);
    default:
      return scatter_elems<4>(src, dst, stride, n);
  }
}

// Copies one run's elements out of memory into packed bytes.
void read_run(const Ctx& c, const AccessPattern& ap, const Run& r, uint8_t* out) {
  const size_t es = esize(ap);
  const bool packed = r.stride == static_cast<int64_t>(es);
  if (ap.space != MemSpace::HBM) {
    const uint8_t* p = on_chip(c, ap, r);
    if (packed)
      std::memcpy(out, p, r.count * es);
    else
      gather_strided(p, r.stride, r.count, es, out);
    return;
  }
  const uint64_t addr = hbm_address(c, ap, r);
  if (packed) return c.st.hbm.read(addr, out, r.count * es);
  // A strided run whose span is small (a transposed tile's column): one read of the
  // bytes it spans, then a gather, instead of one (locked) memory read per element.
  const auto [lo, hi] = run_bytes(r, static_cast<int64_t>(es));
  const auto span = static_cast<uint64_t>(hi - lo);
  if (span <= std::max<uint64_t>(64 * 1024, 8 * uint64_t{r.count} * es)) {
    thread_local Bytes spanned;
    if (spanned.size() < span) spanned = Bytes(std::max<size_t>(span, 2 * spanned.size()));
    const uint64_t before = static_cast<uint64_t>(r.start - lo);
    c.st.hbm.read(addr - before, spanned.data(), span);
    return gather_strided(spanned.data() + before, r.stride, r.count, es, out);
  }
  for (uint32_t i = 0; i < r.count; ++i)
    c.st.hbm.read(addr + static_cast<uint64_t>(i * r.stride), out + i * es, es);
}

// Copies packed bytes into one run's elements.
void write_run(const Ctx& c, const AccessPattern& ap, const Run& r, const uint8_t* in) {
  const size_t es = esize(ap);
  const bool packed = r.stride == static_cast<int64_t>(es);
  if (ap.space != MemSpace::HBM) {
    uint8_t* p = on_chip(c, ap, r);
    if (packed)
      std::memcpy(p, in, r.count * es);
    else
      scatter_strided(in, p, r.stride, r.count, es);
    return;
  }
  const uint64_t addr = hbm_address(c, ap, r);
  if (packed) {
    if (c.st.undo) c.st.undo->save(c.st.hbm, addr, r.count * es);
    return c.st.hbm.write(addr, in, r.count * es);
  }
  for (uint32_t i = 0; i < r.count; ++i) {
    const uint64_t a = addr + static_cast<uint64_t>(i * r.stride);
    if (c.st.undo) c.st.undo->save(c.st.hbm, a, es);
    c.st.hbm.write(a, in + i * es, es);
  }
}

size_t inner_run_bytes(const AccessPattern& ap) {
  return (ap.num_dims ? ap.dims[ap.num_dims - 1].size : 1) * esize(ap);
}

// ---------------------------------------------------------------------------
// Typed reads and writes of whole operands

Bytes read_bytes(const Ctx& c, const AccessPattern& ap) {
  check_memory(c, ap);
  Bytes out(total_size(ap) * esize(ap));
  size_t pos = 0;
  for_each_run(ap, [&](const Run& r) {
    read_run(c, ap, r, out.data() + pos);
    pos += r.count * esize(ap);
  });
  return out;
}

Floats read_floats(const Ctx& c, const AccessPattern& ap) {
  check_memory(c, ap);
  Floats out(total_size(ap));
  Bytes tmp(inner_run_bytes(ap));
  const size_t es = esize(ap);
  size_t pos = 0;
  for_each_run(ap, [&](const Run& r) {
    // Contiguous on-chip runs convert straight from memory (the common case).
    const uint8_t* src = tmp.data();
    if (ap.space != MemSpace::HBM && r.stride == static_cast<int64_t>(es))
      src = on_chip(c, ap, r);
    else
      read_run(c, ap, r, tmp.data());
    isa::convert_to_float(ap.dtype, src, out.data() + pos, r.count, c.st.fp8);
    pos += r.count;
  });
  return out;
}

// Per-partition scalars [P, 1]: the operand's values, or `fallback` for every partition.
Floats read_scalars(const Ctx& c, Role role, size_t partitions, float fallback) {
  if (const AccessPattern* ap = c.inst.operand(role)) return read_floats(c, *ap);
  Floats out(partitions);
  std::fill(out.data(), out.data() + partitions, fallback);
  return out;
}

template <typename T>
int64_t load_int(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return static_cast<int64_t>(v);
}

// Index operands read exactly (no trip through FP32, which loses integers above 2^24).
std::vector<int64_t> read_indices(const Ctx& c, const AccessPattern& ap) {
  const Bytes b = read_bytes(c, ap);
  const size_t n = total_size(ap), es = esize(ap);
  std::vector<int64_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* p = b.data() + i * es;
    switch (ap.dtype) {
      case DType::int8:
        out[i] = load_int<int8_t>(p);
        break;
      case DType::uint8:
        out[i] = load_int<uint8_t>(p);
        break;
      case DType::int16:
        out[i] = load_int<int16_t>(p);
        break;
      case DType::uint16:
        out[i] = load_int<uint16_t>(p);
        break;
      case DType::int32:
        out[i] = load_int<int32_t>(p);
        break;
      case DType::uint32:
        out[i] = load_int<uint32_t>(p);
        break;
      default: {
        const double v = isa::load_as_float(ap.dtype, p, c.st.fp8);
        // NaN or huge float "indices" become an index that is out of range.
        out[i] = std::isfinite(v) && std::fabs(v) < 1e18 ? static_cast<int64_t>(v) : -1;
      }
    }
  }
  return out;
}

// Faults when bytes about to be written to `ap` hold a NaN (at selected elements only, if given).
void check_nan(const Ctx& c, const AccessPattern& ap, const uint8_t* bytes,
               const uint8_t* selected = nullptr) {
  if (!c.nan_check || !isa::is_float(ap.dtype)) return;
  const size_t n = total_size(ap);
  Floats v(n);
  isa::convert_to_float(ap.dtype, bytes, v.data(), n, c.st.fp8);
  for (size_t i = 0; i < n; ++i)
    if (std::isnan(v[i]) && (!selected || selected[i]))
      c.fail(Kind::nan,
             fmt::format("NaN written to {} {} {}, element {}", isa::mem_space_name(ap.space),
                         ap.space == MemSpace::HBM ? "row" : "partition",
                         i / free_size(ap) + (ap.space == MemSpace::HBM ? 0 : ap.start_partition),
                         i % free_size(ap)));
}

void write_bytes_unchecked(const Ctx& c, const AccessPattern& ap, const uint8_t* in) {
  check_memory(c, ap);
  size_t pos = 0;
  for_each_run(ap, [&](const Run& r) {
    write_run(c, ap, r, in + pos);
    pos += r.count * esize(ap);
  });
}

void write_bytes(const Ctx& c, const AccessPattern& ap, const uint8_t* in,
                 const uint8_t* selected = nullptr) {
  check_nan(c, ap, in, selected);
  write_bytes_unchecked(c, ap, in);
}

Bytes to_dtype(const Ctx& c, DType t, const float* v, size_t n) {
  Bytes out(n * isa::dtype_size(t));
  isa::convert_from_float(t, v, out.data(), n, c.st.fp8);
  return out;
}

// Writes FP32 values to `ap`, rounding to its dtype.
void write_floats(const Ctx& c, const AccessPattern& ap, const float* v) {
  check_memory(c, ap);
  if (c.nan_check) {
    const Bytes b = to_dtype(c, ap.dtype, v, total_size(ap));
    return write_bytes(c, ap, b.data());
  }
  Bytes tmp(inner_run_bytes(ap));
  const size_t es = esize(ap);
  size_t pos = 0;
  for_each_run(ap, [&](const Run& r) {
    if (ap.space != MemSpace::HBM && r.stride == static_cast<int64_t>(es)) {
      isa::convert_from_float(ap.dtype, v + pos, on_chip(c, ap, r), r.count, c.st.fp8);
    } else {
      isa::convert_from_float(ap.dtype, v + pos, tmp.data(), r.count, c.st.fp8);
      write_run(c, ap, r, tmp.data());
    }
    pos += r.count;
  });
}

// `ap`'s elements as bytes of dtype `t`: a bit-exact copy when the dtypes match,
// else converted through FP32.
Bytes read_as(const Ctx& c, const AccessPattern& ap, DType t) {
  if (ap.dtype == t) return read_bytes(c, ap);
  const Floats v = read_floats(c, ap);
  return to_dtype(c, t, v.data(), v.size());
}

// ---------------------------------------------------------------------------
// ALU

using isa::nan_max;
using isa::nan_min;
using isa::py_mod;
using isa::to_int32;
using isa::truth;

inline float alu(AluOp op, float a, float b) {
  return isa::apply_alu_op(op, a, b);
}

// out[i] = a[i*sa] op b[i*sb]; strides of 0 broadcast a scalar. The op is a
// template constant so the switch folds away and the loop can vectorise.
template <AluOp Op>
void alu_loop(const float* a, size_t sa, const float* b, size_t sb, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = alu(Op, a[i * sa], b[i * sb]);
}

using AluLoop = void (*)(const float*, size_t, const float*, size_t, float*, size_t);

template <size_t... I>
constexpr std::array<AluLoop, sizeof...(I)> make_alu_loops(std::index_sequence<I...>) {
  return {&alu_loop<static_cast<AluOp>(I)>...};
}

constexpr auto kAluLoops = make_alu_loops(std::make_index_sequence<isa::kNumAluOps>{});

void alu_n(const Ctx& c, AluOp op, const float* a, size_t sa, const float* b, size_t sb, float* out,
           size_t n) {
  const auto i = static_cast<size_t>(op);
  if (i >= kAluLoops.size()) c.fail(Kind::unsupported, fmt::format("unknown ALU operation {}", i));
  kAluLoops[i](a, sa, b, sb, out, n);
}

// acc op x[0] op x[1] ... in order; a template per op, like alu_loop.
template <AluOp Op>
float reduce_loop(float acc, const float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) acc = alu(Op, acc, x[i]);
  return acc;
}

using ReduceLoop = float (*)(float, const float*, size_t);

template <size_t... I>
constexpr std::array<ReduceLoop, sizeof...(I)> make_reduce_loops(std::index_sequence<I...>) {
  return {&reduce_loop<static_cast<AluOp>(I)>...};
}

constexpr auto kReduceLoops = make_reduce_loops(std::make_index_sequence<isa::kNumAluOps>{});

float reduce_n(const Ctx& c, AluOp op, float acc, const float* x, size_t n) {
  const auto i = static_cast<size_t>(op);
  if (i >= kReduceLoops.size())
    c.fail(Kind::unsupported, fmt::format("unknown ALU operation {}", i));
  return kReduceLoops[i](acc, x, n);
}

float reduce_identity(AluOp op) {
  switch (op) {
    case AluOp::multiply:
      return 1.0f;
    case AluOp::max:
      return -std::numeric_limits<float>::infinity();
    case AluOp::min:
      return std::numeric_limits<float>::infinity();
    default:
      return 0.0f;
  }
}

// ---------------------------------------------------------------------------
// TensorE

// dst[f, p] = src[p, f] on elements of dst's dtype.
void transpose_into(const Ctx& c, const AccessPattern& dst, const AccessPattern& src) {
  const Bytes in = read_as(c, src, dst.dtype);
  const size_t P = src.num_partitions, F = free_size(src), es = esize(dst);
  if (total_size(dst) != P * F) c.fail(Kind::unsupported, "dst does not hold the transposed src");
  Bytes out(P * F * es);
  for (size_t p = 0; p < P; ++p)
    for (size_t f = 0; f < F; ++f)
      std::memcpy(out.data() + (f * P + p) * es, in.data() + (p * F + f) * es, es);
  write_bytes(c, dst, out.data());
}

// Transpose mode (NKI's is_transpose): the data is the stationary tile and the moving tile
// the identity the PE array multiplies it by; the data passes through bit exact. Any other
// moving tile would make the product differ from the pass-through, so it is refused.
void matmul_transpose_mode(const Ctx& c, const AccessPattern& dst) {
  const AccessPattern& mv = c.get(Role::moving);
  const size_t K = mv.num_partitions, N = free_size(mv);
  const Floats identity = read_floats(c, mv);
  for (size_t k = 0; k < K; ++k)
    for (size_t n = 0; n < N; ++n)
      if (identity[k * N + n] != (k == n ? 1.0f : 0.0f))
        c.fail(Kind::unsupported,
               fmt::format("transpose mode passes stationary through, so moving must be the "
                           "identity; moving[{}, {}] is {}",
                           k, n, identity[k * N + n]));
  transpose_into(c, dst, c.get(Role::stationary));
}

// The one-zero hints promise the hardware an operand of zeros and ones, which it multiplies
// faster; an operand that breaks the promise would not give the product, so it is refused.
void check_one_zero(const Ctx& c, isa::Flag flag, Role role, const Floats& values) {
  if (!c.inst.has_flag(flag)) return;
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i] != 0.0f && values[i] != 1.0f)
      c.fail(Kind::unsupported,
             fmt::format("{}_onezero says {} holds only 0 and 1, but element {} is {}",
                         isa::role_name(role), isa::role_name(role), i, values[i]));
}

void matmul(const Ctx& c) {
  const AccessPattern& dst = c.get(Role::dst);
  if (c.inst.has_flag(isa::kTransposeMode)) return matmul_transpose_mode(c, dst);
  const AccessPattern& mv = c.get(Role::moving);
  const AccessPattern& st = c.get(Role::stationary);
  // double_row: each partition holds two contraction rows ([K, 2, M] is [2K, M] row-major).
  const isa::MatmulDims dims = isa::matmul_dims(c.inst);
  const int K = static_cast<int>(dims.k), M = static_cast<int>(dims.m),
            N = static_cast<int>(dims.n);
  const Floats a = read_floats(c, st);
  const Floats b = read_floats(c, mv);
  check_one_zero(c, isa::kStationaryOneZero, Role::stationary, a);
  check_one_zero(c, isa::kMovingOneZero, Role::moving, b);
  const bool acc = c.inst.has_flag(isa::kAccumulate);
  Floats out = acc ? read_floats(c, dst) : Floats(total_size(dst));
  if (!acc) std::fill(out.data(), out.data() + out.size(), 0.0f);
  if (out.size() != size_t(M) * size_t(N) || mv.num_partitions != st.num_partitions)
    c.fail(Kind::unsupported, "operand shapes do not form a matrix product");
  // One BLAS thread for our own calls: a fixed summation order keeps values identical from
  // run to run. The host program's setting (PyTorch's, say) is restored afterwards.
  const int host_threads = openblas_get_num_threads();
  if (host_threads != 1) openblas_set_num_threads(1);
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, M, N, K, 1.0f, a.data(), M, b.data(), N,
              acc ? 1.0f : 0.0f, out.data(), N);
  if (host_threads != 1) openblas_set_num_threads(host_threads);
  write_floats(c, dst, out.data());
}

// ---------------------------------------------------------------------------
// Elementwise

void activation(const Ctx& c) {
  const AccessPattern& src = c.get(Role::src);
  const size_t P = src.num_partitions, F = free_size(src);
  Floats y = read_floats(c, src);
  const Floats scale = read_scalars(c, Role::scale, P, c.inst.imm0);
  const Floats bias = read_scalars(c, Role::bias, P, 0.0f);
  for (size_t p = 0; p < P; ++p)
    for (size_t j = p * F; j < (p + 1) * F; ++j)
      y[j] = isa::apply_act_func(c.inst.func, y[j] * scale[p] + bias[p]);
  if (const AccessPattern* rd = c.inst.operand(Role::reduce_dst)) {
    Floats r(P);
    for (size_t p = 0; p < P; ++p)
      r[p] = reduce_n(c, c.inst.alu0, reduce_identity(c.inst.alu0), &y[p * F], F);
    write_floats(c, *rd, r.data());
  }
  write_floats(c, c.get(Role::dst), y.data());
}

// ---- direct paths: operands read and written in place, with no packing buffers ----
// The library's kernels mostly move [P, F] tiles whose F elements lie contiguously in each
// partition; for those, copying every operand into a packed buffer and back cost more than
// the arithmetic.

// An on-chip [P, F] operand with unit stride: partition p's elements are F in a row.
bool flat_on_chip(const AccessPattern& ap) {
  return (ap.space == MemSpace::SBUF || ap.space == MemSpace::PSUM) && ap.num_dims == 1 &&
         ap.dims[0].stride == 1;
}

// Partition p of a flat on-chip operand, bounds checked as every access is.
template <typename T = uint8_t>
T* flat_row(const Ctx& c, const AccessPattern& ap, uint32_t p) {
  return reinterpret_cast<T*>(on_chip(
      c, ap,
      Run{p, static_cast<int64_t>(ap.offset), static_cast<int64_t>(esize(ap)), ap.dims[0].size}));
}

// Two flat on-chip operands are the very same elements, or share no byte.
bool same_or_apart(const AccessPattern& a, const AccessPattern& b) {
  if (a.space != b.space) return true;
  if (a.offset == b.offset && a.start_partition == b.start_partition && a.dtype == b.dtype)
    return true;
  const uint64_t a_end = a.offset + a.dims[0].size * esize(a),
                 b_end = b.offset + b.dims[0].size * esize(b);
  return a_end <= b.offset || b_end <= a.offset ||
         a.start_partition + a.num_partitions <= b.start_partition ||
         b.start_partition + b.num_partitions <= a.start_partition;
}

// tensor_tensor on FP32 flat tiles, element by element in memory; false when not that case.
bool tensor_tensor_direct(const Ctx& c) {
  const AccessPattern &a = c.get(Role::in0), &b = c.get(Role::in1), &d = c.get(Role::dst);
  for (const AccessPattern* ap : {&a, &b, &d})
    if (!flat_on_chip(*ap) || ap->dtype != DType::fp32 || ap->num_partitions != d.num_partitions ||
        ap->dims[0].size != d.dims[0].size)
      return false;
  if (c.nan_check || !same_or_apart(a, d) || !same_or_apart(b, d)) return false;
  for (uint32_t p = 0; p < d.num_partitions; ++p)  // a fault leaves memory untouched
    for (const AccessPattern* ap : {&a, &b, &d}) flat_row(c, *ap, p);
  for (uint32_t p = 0; p < d.num_partitions; ++p)
    alu_n(c, c.inst.alu0, flat_row<float>(c, a, p), 1, flat_row<float>(c, b, p), 1,
          flat_row<float>(c, d, p), d.dims[0].size);
  return true;
}

// A dma_copy of one dtype between HBM and a flat on-chip tile, each HBM run straight into
// or out of the tile; false when not that case. Every run is bounds checked before any
// byte moves, so a fault writes nothing, as on the packed path.
bool dma_direct(const Ctx& c, const AccessPattern& dst, const AccessPattern& src) {
  const bool to_chip = src.space == MemSpace::HBM && flat_on_chip(dst);
  const bool from_chip = dst.space == MemSpace::HBM && flat_on_chip(src);
  if (src.dtype != dst.dtype || (!to_chip && !from_chip)) return false;
  const AccessPattern& tile = to_chip ? dst : src;
  const AccessPattern& hbm = to_chip ? src : dst;
  const uint32_t row = tile.dims[0].size;
  const uint32_t run = hbm.num_dims ? hbm.dims[hbm.num_dims - 1].size : 1;
  if (total_size(hbm) != total_size(tile) || row % run != 0) return false;  // no run straddles
  for_each_run(hbm, [&](const Run& r) { hbm_address(c, hbm, r); });
  for (uint32_t p = 0; p < tile.num_partitions; ++p) flat_row(c, tile, p);
  const size_t es = esize(tile);
  size_t pos = 0;
  for_each_run(hbm, [&](const Run& r) {
    uint8_t* at = flat_row(c, tile, static_cast<uint32_t>(pos / row)) + pos % row * es;
    if (to_chip)
      read_run(c, hbm, r, at);
    else
      write_run(c, hbm, r, at);
    pos += r.count;
  });
  return true;
}

void tensor_tensor(const Ctx& c) {
  if (tensor_tensor_direct(c)) return;
  Floats a = read_floats(c, c.get(Role::in0));
  const Floats b = read_floats(c, c.get(Role::in1));
  alu_n(c, c.inst.alu0, a.data(), 1, b.data(), 1, a.data(), std::min(a.size(), b.size()));
  write_floats(c, c.get(Role::dst), a.data());
}

// row[j] = reverse ? s op row[j] : row[j] op s, in place.
void scalar_op(const Ctx& c, AluOp op, bool reverse, float s, float* row, size_t n) {
  if (reverse)
    alu_n(c, op, &s, 0, row, 1, row, n);
  else
    alu_n(c, op, row, 1, &s, 0, row, n);
}

// VectorE's accumulator after an instruction whose FP32 results (before dst's rounding) are
// y[P, F] on the partitions of `like`: reset, load and fold as its reduce_cmd says, then
// write the accumulator to reduce_dst when there is one.
void accumulate(const Ctx& c, const AccessPattern& like, const Floats& y) {
  using isa::ReduceCmd;
  const auto cmd = static_cast<ReduceCmd>(c.inst.ints[3]);
  if (cmd == ReduceCmd::idle) return;
  const size_t P = like.num_partitions, F = y.size() / std::max<size_t>(1, P);
  const AluOp op = c.inst.alu2;
  std::vector<float>& acc = c.st.accumulator;
  if (like.start_partition + P > acc.size())
    c.fail(Kind::out_of_bounds, "partitions beyond the accumulator's");
  float* lane = acc.data() + like.start_partition;
  if (cmd == ReduceCmd::reset || cmd == ReduceCmd::reset_reduce)
    std::fill(lane, lane + P, reduce_identity(op));
  if (cmd == ReduceCmd::load_reduce) {
    const Floats init = read_floats(c, c.get(Role::initial));
    std::copy(init.data(), init.data() + P, lane);
  }
  if (cmd != ReduceCmd::reset)
    for (size_t p = 0; p < P; ++p) lane[p] = reduce_n(c, op, lane[p], y.data() + p * F, F);
  if (const AccessPattern* rd = c.inst.operand(Role::reduce_dst)) write_floats(c, *rd, lane);
}

void tensor_scalar(const Ctx& c) {
  const AccessPattern& src = c.get(Role::src);
  const size_t P = src.num_partitions, F = free_size(src);
  Floats x = read_floats(c, src);
  const Floats s0 = read_scalars(c, Role::operand0, P, c.inst.imm0);
  const Floats s1 = read_scalars(c, Role::operand1, P, c.inst.imm1);
  for (size_t p = 0; p < P; ++p) {
    scalar_op(c, c.inst.alu0, c.inst.has_flag(isa::kReverse0), s0[p], x.data() + p * F, F);
    if (c.inst.alu1 != AluOp::bypass)
      scalar_op(c, c.inst.alu1, c.inst.has_flag(isa::kReverse1), s1[p], x.data() + p * F, F);
  }
  accumulate(c, src, x);
  write_floats(c, c.get(Role::dst), x.data());
}

void scalar_tensor_tensor(const Ctx& c) {
  const AccessPattern& data = c.get(Role::in0);
  const size_t P = data.num_partitions, F = free_size(data);
  Floats x = read_floats(c, data);
  const Floats other = read_floats(c, c.get(Role::in1));
  const Floats s0 = read_scalars(c, Role::operand0, P, c.inst.imm0);
  for (size_t p = 0; p < P; ++p)
    scalar_op(c, c.inst.alu0, c.inst.has_flag(isa::kReverse0), s0[p], x.data() + p * F, F);
  if (c.inst.has_flag(isa::kReverse1))
    alu_n(c, c.inst.alu1, other.data(), 1, x.data(), 1, x.data(), x.size());
  else
    alu_n(c, c.inst.alu1, x.data(), 1, other.data(), 1, x.data(), x.size());
  accumulate(c, data, x);
  write_floats(c, c.get(Role::dst), x.data());
}

// `index <cmp> bound` in FP32, as the engine compares (range_select).
bool compare(const Ctx& c, AluOp op, float index, float bound) {
  switch (op) {
    case AluOp::is_equal:
      return index == bound;
    case AluOp::is_gt:
      return index > bound;
    case AluOp::is_ge:
      return index >= bound;
    case AluOp::is_lt:
      return index < bound;
    case AluOp::is_le:
      return index <= bound;
    default:
      c.fail(Kind::unsupported, fmt::format("{} is not a comparison", isa::alu_op_name(op)));
  }
}

void range_select(const Ctx& c) {
  const AccessPattern& on_true = c.get(Role::on_true);
  const size_t P = on_true.num_partitions, F = free_size(on_true);
  Floats x = read_floats(c, on_true);
  const Floats lo = read_floats(c, c.get(Role::operand0));
  const Floats hi = read_floats(c, c.get(Role::operand1));
  for (size_t p = 0; p < P; ++p)
    for (size_t j = 0; j < F; ++j) {
      const float index = static_cast<float>(c.inst.ints[0] + static_cast<int64_t>(j));
      if (!(compare(c, c.inst.alu0, index, lo[p]) && compare(c, c.inst.alu1, index, hi[p])))
        x[p * F + j] = c.inst.imm0;
    }
  accumulate(c, on_true, x);
  write_floats(c, c.get(Role::dst), x.data());
}

void tensor_reduce(const Ctx& c) {
  const AccessPattern& src = c.get(Role::src);
  const size_t P = src.num_partitions, F = free_size(src);
  const Floats x = read_floats(c, src);
  const AluOp op = c.inst.alu0;
  // dst element of a src element: sum(weight_k * i_k) over the kept dims. The
  // odometer walks the outer dims; the innermost dim is one contiguous run, either
  // reduced into one element or combined elementwise with a contiguous dst run.
  const int nd = src.num_dims;
  if (nd < 1 || nd > isa::kMaxDims) c.fail(Kind::unsupported, "src needs 1 to 4 free dims");
  Odometer outer;
  outer.n = nd - 1;
  int64_t kept = 1;
  for (int k = nd - 1; k >= 0; --k) {
    const bool reduced = (c.inst.axes >> k) & 1u;
    if (k < nd - 1) {
      outer.size[k] = src.dims[k].size;
      outer.weight[k] = reduced ? 0 : kept;
    }
    if (!reduced) kept *= src.dims[k].size;
  }
  const size_t K = static_cast<size_t>(kept), inner = src.dims[nd - 1].size;
  const bool inner_reduced = c.inst.axes & (1u << (nd - 1));
  Floats out(P * K);
  std::fill(out.data(), out.data() + out.size(), reduce_identity(op));
  for (size_t p = 0; p < P; ++p) {
    outer.value = 0;
    outer.idx.fill(0);
    for (size_t j = 0; j < F; j += inner, outer.next()) {
      float* o = out.data() + p * K + static_cast<size_t>(outer.value);
      const float* in = x.data() + p * F + j;
      if (inner_reduced)
        *o = reduce_n(c, op, *o, in, inner);
      else
        alu_n(c, op, o, 1, in, 1, o, inner);
    }
  }
  if (c.inst.has_flag(isa::kNegate))
    for (size_t i = 0; i < out.size(); ++i) out[i] = -out[i];
  write_floats(c, c.get(Role::dst), out.data());
}

void tensor_copy(const Ctx& c) {
  const Floats v = read_floats(c, c.get(Role::src));
  write_floats(c, c.get(Role::dst), v.data());
}

void memset_op(const Ctx& c) {
  const AccessPattern& dst = c.get(Role::dst);
  Floats v(total_size(dst));
  std::fill(v.data(), v.data() + v.size(), c.inst.imm0);
  write_floats(c, dst, v.data());
}

void select(const Ctx& c) {
  const AccessPattern& on_true = c.get(Role::on_true);
  const size_t P = on_true.num_partitions, F = free_size(on_true);
  const Floats pred = read_floats(c, c.get(Role::predicate));
  Floats t = read_floats(c, on_true);
  // on_false: dst's shape, one value per partition, or the immediate.
  const AccessPattern* fp = c.inst.operand(Role::on_false);
  const bool per_partition = !fp || (fp->free_elems() == 1 && F != 1);
  const Floats f =
      per_partition ? read_scalars(c, Role::on_false, P, c.inst.imm0) : read_floats(c, *fp);
  const bool on_zero = c.inst.has_flag(isa::kReversePred);
  for (size_t i = 0; i < t.size(); ++i)
    if ((pred[i] == 0.0f) != on_zero) t[i] = per_partition ? f[i / std::max<size_t>(1, F)] : f[i];
  accumulate(c, on_true, t);
  write_floats(c, c.get(Role::dst), t.data());
}

// Only selected elements change; the others keep their exact bytes.
void copy_predicated(const Ctx& c) {
  const AccessPattern& dst = c.get(Role::dst);
  Bytes out = read_bytes(c, dst);
  const Bytes src = read_as(c, c.get(Role::src), dst.dtype);
  const Floats pred = read_floats(c, c.get(Role::predicate));
  const bool on_zero = c.inst.has_flag(isa::kReversePred);
  const size_t n = total_size(dst), es = esize(dst);
  Bytes selected(n);
  for (size_t i = 0; i < n; ++i) {
    selected[i] = (pred[i] != 0.0f) != on_zero;
    if (selected[i]) std::memcpy(out.data() + i * es, src.data() + i * es, es);
  }
  write_bytes(c, dst, out.data(), selected.data());
}

// ---------------------------------------------------------------------------
// Statistics and scans

struct Moments {
  double count = 0, mean = 0, m2 = 0;
};

// Two passes in double: the mean first, then squared deviations from it.
Moments moments(const float* x, size_t n) {
  Moments m;
  if (n == 0) return m;
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += x[i];
  m.count = static_cast<double>(n);
  m.mean = sum / m.count;
  for (size_t i = 0; i < n; ++i) m.m2 += (x[i] - m.mean) * (x[i] - m.mean);
  return m;
}

void bn_stats(const Ctx& c) {
  const AccessPattern& src = c.get(Role::src);
  const size_t P = src.num_partitions, F = free_size(src);
  const Floats x = read_floats(c, src);
  const size_t first = (F + 1) / 2;
  Floats out(P * 6);
  for (size_t p = 0; p < P; ++p) {
    const Moments a = moments(x.data() + p * F, first);
    const Moments b = moments(x.data() + p * F + first, F - first);
    const double rec[6] = {a.count, a.mean, a.m2, b.count, b.mean, b.m2};
    for (int k = 0; k < 6; ++k) out[p * 6 + k] = static_cast<float>(rec[k]);
  }
  write_floats(c, c.get(Role::dst), out.data());
}

// Chan et al.'s pairwise combination of two groups' moments.
Moments combine(const Moments& a, const Moments& b) {
  if (b.count <= 0) return a;
  if (a.count <= 0) return b;
  Moments m;
  m.count = a.count + b.count;
  const double delta = b.mean - a.mean;
  m.mean = a.mean + delta * b.count / m.count;
  m.m2 = a.m2 + b.m2 + delta * delta * a.count * b.count / m.count;
  return m;
}

void bn_aggr(const Ctx& c) {
  const AccessPattern& src = c.get(Role::src);
  const size_t P = src.num_partitions, F = free_size(src);
  const Floats x = read_floats(c, src);
  Floats out(P * 2);
  for (size_t p = 0; p < P; ++p) {
    Moments m;
    for (size_t g = 0; g + 3 <= F; g += 3)
      m = combine(m, {x[p * F + g], x[p * F + g + 1], x[p * F + g + 2]});
    out[p * 2] = m.count > 0 ? static_cast<float>(m.mean) : 0.0f;
    out[p * 2 + 1] = m.count > 0 ? static_cast<float>(m.m2 / m.count) : 0.0f;
  }
  write_floats(c, c.get(Role::dst), out.data());
}

void tensor_tensor_scan(const Ctx& c) {
  const AccessPattern& in0 = c.get(Role::in0);
  const size_t P = in0.num_partitions, F = free_size(in0);
  Floats a = read_floats(c, in0);
  const Floats b = read_floats(c, c.get(Role::in1));
  const Floats init = read_scalars(c, Role::initial, P, c.inst.imm0);
  // NKI's order: each element is op0's first operand and the state its second.
  const bool reverse0 = c.inst.has_flag(isa::kReverse0), reverse1 = c.inst.has_flag(isa::kReverse1);
  for (size_t p = 0; p < P; ++p) {
    float s = init[p];
    for (size_t j = p * F; j < (p + 1) * F; ++j) {
      const float x = reverse0 ? alu(c.inst.alu0, s, a[j]) : alu(c.inst.alu0, a[j], s);
      a[j] = s = reverse1 ? alu(c.inst.alu1, b[j], x) : alu(c.inst.alu1, x, b[j]);
    }
  }
  write_floats(c, c.get(Role::dst), a.data());
}

// ---------------------------------------------------------------------------
// GpSimd index patterns and cross-partition operations

// v[p, j] = offset + channel_multiplier * p + sum(step_k * i_k) over the pattern's walk.
std::vector<int64_t> pattern_values(const Ctx& c, size_t partitions) {
  const AccessPattern& pat = c.get(Role::pattern);
  Odometer odo;
  odo.n = pat.num_dims;
  for (int k = 0; k < pat.num_dims; ++k) {
    odo.size[k] = pat.dims[k].size;
    odo.weight[k] = pat.dims[k].stride;
  }
  const size_t F = free_size(pat);
  std::vector<int64_t> v(partitions * F);
  for (size_t p = 0; p < partitions; ++p) {
    odo.value = 0;
    odo.idx.fill(0);
    const int64_t base =
        int64_t{c.inst.ints[0]} + int64_t{c.inst.ints[1]} * static_cast<int64_t>(p);
    for (size_t j = 0; j < F; ++j, odo.next()) v[p * F + j] = base + odo.value;
  }
  return v;
}

template <typename T>
void store_saturated(int64_t v, uint8_t* dst) {
  const T t = static_cast<T>(
      std::clamp<int64_t>(v, std::numeric_limits<T>::min(), std::numeric_limits<T>::max()));
  std::memcpy(dst, &t, sizeof t);
}

// Integers go to integer dtypes directly (FP32 would round values above 2^24).
void store_int64(const Ctx& c, DType t, int64_t v, uint8_t* dst) {
  switch (t) {
    case DType::int8:
      return store_saturated<int8_t>(v, dst);
    case DType::uint8:
      return store_saturated<uint8_t>(v, dst);
    case DType::int16:
      return store_saturated<int16_t>(v, dst);
    case DType::uint16:
      return store_saturated<uint16_t>(v, dst);
    case DType::int32:
      return store_saturated<int32_t>(v, dst);
    case DType::uint32:
      return store_saturated<uint32_t>(v, dst);
    case DType::boolean:
      *dst = v != 0;
      return;
    default:
      isa::store_from_float(t, static_cast<float>(v), dst, c.st.fp8);
  }
}

// ---- random numbers ----

Xorwow& lane_generator(const Ctx& c, uint32_t lane) {
  const size_t engine = c.inst.engine == Engine::POOL ? 1 : 0;
  if (c.inst.engine != Engine::POOL && c.inst.engine != Engine::DVE)
    c.fail(Kind::unsupported, "only VectorE and GpSimd have random number generators");
  std::vector<Xorwow>& lanes = c.st.rng[engine];
  if (lane >= lanes.size()) c.fail(Kind::out_of_bounds, fmt::format("no lane {}", lane));
  return lanes[lane];
}

void rng(const Ctx& c) {
  const AccessPattern& dst = c.get(Role::dst);
  const size_t n = free_size(dst), size = esize(dst);
  Bytes out(total_size(dst) * size);
  for (uint32_t p = 0; p < dst.num_partitions; ++p) {
    Xorwow& g = lane_generator(c, dst.start_partition + p);
    for (size_t i = 0; i < n; ++i) {
      const uint32_t bits = g.next();  // the least significant bytes (little-endian)
      std::memcpy(out.data() + (p * n + i) * size, &bits, size);
    }
  }
  write_bytes(c, dst, out.data());
}

void rand_set_state(const Ctx& c) {
  const AccessPattern& src = c.get(Role::src);
  const Bytes words = read_bytes(c, src);
  for (uint32_t p = 0; p < src.num_partitions; ++p)
    std::memcpy(lane_generator(c, src.start_partition + p).words.data(),
                words.data() + p * sizeof(Xorwow::words), sizeof(Xorwow::words));
}

void iota(const Ctx& c) {
  const AccessPattern& dst = c.get(Role::dst);
  const std::vector<int64_t> v = pattern_values(c, dst.num_partitions);
  if (v.size() != total_size(dst))
    c.fail(Kind::unsupported, "pattern size differs from dst's free size");
  Bytes out(v.size() * esize(dst));
  for (size_t i = 0; i < v.size(); ++i)
    store_int64(c, dst.dtype, v[i], out.data() + i * esize(dst));
  write_bytes(c, dst, out.data());
}

bool compare_with_zero(const Ctx& c, AluOp op, int64_t v) {
  switch (op) {
    case AluOp::is_equal:
      return v == 0;
    case AluOp::not_equal:
      return v != 0;
    case AluOp::is_gt:
      return v > 0;
    case AluOp::is_ge:
      return v >= 0;
    case AluOp::is_lt:
      return v < 0;
    case AluOp::is_le:
      return v <= 0;
    default:
      c.fail(Kind::unsupported, fmt::format("cmp={} is not a comparison", isa::alu_op_name(op)));
  }
}

void affine_select(const Ctx& c) {
  const AccessPattern& dst = c.get(Role::dst);
  Floats out = read_floats(c, c.get(Role::on_true));
  const std::vector<int64_t> v = pattern_values(c, dst.num_partitions);
  if (v.size() != out.size())
    c.fail(Kind::unsupported, "pattern size differs from dst's free size");
  for (size_t i = 0; i < v.size(); ++i)
    if (!compare_with_zero(c, c.inst.alu0, v[i])) out[i] = c.inst.imm0;
  write_floats(c, dst, out.data());
}

void partition_reduce(const Ctx& c) {
  const AccessPattern& src = c.get(Role::src);
  const size_t P = src.num_partitions, F = free_size(src);
  const Floats x = read_floats(c, src);
  Floats out(F);
  std::fill(out.data(), out.data() + F, reduce_identity(c.inst.alu0));
  for (size_t p = 0; p < P; ++p)
    alu_n(c, c.inst.alu0, out.data(), 1, x.data() + p * F, 1, out.data(), F);
  write_floats(c, c.get(Role::dst), out.data());
}

void partition_shuffle(const Ctx& c) {
  const AccessPattern& dst = c.get(Role::dst);
  const AccessPattern& src = c.get(Role::src);
  const Bytes in = read_as(c, src, dst.dtype);
  const size_t row = free_size(src) * esize(dst);
  Bytes out(total_size(dst) * esize(dst));
  for (size_t i = 0; i < dst.num_partitions; ++i) {
    if (i >= c.inst.mask.size() || c.inst.mask[i] >= src.num_partitions)
      c.fail(Kind::out_of_bounds,
             fmt::format("dst partition {} has no src partition in the mask", i));
    std::memcpy(out.data() + i * row, in.data() + c.inst.mask[i] * row, row);
  }
  write_bytes(c, dst, out.data());
}

void local_gather(const Ctx& c) {
  const AccessPattern& dst = c.get(Role::dst);
  const AccessPattern& src = c.get(Role::src);
  const AccessPattern& index = c.get(Role::index);
  const int64_t E = c.inst.ints[0], n = c.inst.ints[1];
  const size_t P = dst.num_partitions, Fs = free_size(src), Fi = free_size(index), es = esize(dst);
  if (E <= 0 || n <= 0 || static_cast<uint64_t>(E * n) != dst.free_elems() ||
      Fi < static_cast<size_t>(n) || src.num_partitions != P || index.num_partitions != P)
    c.fail(Kind::unsupported, "operand shapes do not match elems_per_index and num_indices");
  const Bytes in = read_as(c, src, dst.dtype);
  const std::vector<int64_t> idx = read_indices(c, index);
  const size_t group = static_cast<size_t>(E) * es;
  Bytes out(total_size(dst) * es);
  for (size_t p = 0; p < P; ++p)
    for (size_t j = 0; j < static_cast<size_t>(n); ++j) {
      const int64_t v = idx[p * Fi + j];
      if (v < 0 || (v + 1) * E > static_cast<int64_t>(Fs))
        c.fail(Kind::out_of_bounds,
               fmt::format("index[{}, {}] = {} selects elements {}..{} of src, which has {}", p, j,
                           v, v * E, (v + 1) * E, Fs));
      std::memcpy(out.data() + (p * static_cast<size_t>(n) + j) * group,
                  in.data() + (p * Fs + static_cast<size_t>(v) * static_cast<size_t>(E)) * es,
                  group);
    }
  write_bytes(c, dst, out.data());
}

// ---------------------------------------------------------------------------
// VectorE's top-8 family

// NaN ranks above every number, as torch.topk and torch.sort order it.
bool ranks_above(float a, float b) {
  return std::isnan(a) ? !std::isnan(b) : a > b;
}
bool same_value(float a, float b) {
  return a == b || (std::isnan(a) && std::isnan(b));
}

void max8(const Ctx& c) {
  const AccessPattern& src = c.get(Role::src);
  const size_t P = src.num_partitions, F = free_size(src);
  const Floats x = read_floats(c, src);
  Floats out(P * 8);
  for (size_t p = 0; p < P; ++p)
    std::partial_sort_copy(x.data() + p * F, x.data() + (p + 1) * F, out.data() + p * 8,
                           out.data() + (p + 1) * 8, ranks_above);
  write_floats(c, c.get(Role::dst), out.data());
}

// The positions of vals in src, per partition: find_index8 gives each value's first match;
// match_replace8 (`replace`) the first match not replaced by an earlier value, which it
// replaces by imm, so that equal values name successive elements.
void find_vals(const Ctx& c, bool replace) {
  const AccessPattern& src = c.get(Role::src);
  const size_t P = src.num_partitions, F = free_size(src);
  Floats x = read_floats(c, src);
  const Floats vals = read_floats(c, c.get(Role::vals));
  std::vector<uint8_t> replaced(replace ? F : 0);
  Floats index(P * 8);
  for (size_t p = 0; p < P; ++p) {
    float* row = x.data() + p * F;
    std::fill(replaced.begin(), replaced.end(), 0);
    for (size_t j = 0; j < 8; ++j) {
      const float v = vals[p * 8 + j];
      size_t i = 0;
      while (i < F && (!same_value(row[i], v) || (replace && replaced[i]))) ++i;
      if (i == F)
        c.fail(Kind::out_of_bounds,
               fmt::format("vals[{}, {}] = {} is not in partition {} of src", p, j, v, p));
      index[p * 8 + j] = static_cast<float>(i);
      if (replace) replaced[i] = 1;
    }
    if (replace)
      for (size_t i = 0; i < F; ++i)
        if (replaced[i]) row[i] = c.inst.imm0;
  }
  if (!replace) return write_floats(c, c.get(Role::dst), index.data());
  write_floats(c, c.get(Role::dst), x.data());
  if (const AccessPattern* at = c.inst.operand(Role::dst_index)) write_floats(c, *at, index.data());
}

// ---------------------------------------------------------------------------
// DMA

// Row `r` of `ap` as a one-row pattern.
AccessPattern row_of(const AccessPattern& ap, int64_t r) {
  AccessPattern out = ap;
  out.num_partitions = 1;
  out.partition_broadcast = false;
  if (ap.space == MemSpace::HBM)
    out.offset = static_cast<uint64_t>(static_cast<int64_t>(ap.offset) +
                                       r * ap.partition_stride * static_cast<int64_t>(esize(ap)));
  else
    out.start_partition = static_cast<uint16_t>(ap.partition_of(static_cast<uint32_t>(r)));
  return out;
}

// dst += v (dst's elements in its walk order), added in FP32 and rounded once to dst's
// dtype: the DMA's read-add-write.
void add_floats(const Ctx& c, const AccessPattern& dst, const float* v) {
  Floats sum = read_floats(c, dst);
  for (size_t i = 0; i < sum.size(); ++i) sum[i] += v[i];
  write_floats(c, dst, sum.data());
}

// The row index idx[r] names in `rows`, checked.
void check_row(const Ctx& c, const std::vector<int64_t>& idx, size_t r, const AccessPattern& rows,
               const char* side) {
  if (idx[r] < 0 || idx[r] >= rows.num_partitions)
    c.fail(Kind::out_of_bounds,
           fmt::format("index {} = {} is not a row of {} (0..{}{})", r, idx[r], side,
                       rows.num_partitions - 1,
                       rows.space == MemSpace::HBM ? fmt::format(", tensor id {}", rows.tensor)
                                                   : std::string()));
}

// dst row idx[r] <- the r-th dst-row-sized piece of src's walk, in index order (a
// repeated index keeps the last row written to it; with add, it sums them in order).
void dma_scatter(const Ctx& c, const AccessPattern& dst, const AccessPattern& src,
                 const std::vector<int64_t>& idx) {
  if (c.inst.has_flag(isa::kAddToDst)) {
    const size_t row = free_size(dst);
    const Floats in = read_floats(c, src);
    if (idx.size() * row != in.size())
      c.fail(Kind::unsupported, "src does not hold one dst row per index");
    for (size_t r = 0; r < idx.size(); ++r) check_row(c, idx, r, dst, "dst");
    for (size_t r = 0; r < idx.size(); ++r) add_floats(c, row_of(dst, idx[r]), in.data() + r * row);
    return;
  }
  const size_t row = free_size(dst) * esize(dst);
  const Bytes in = read_as(c, src, dst.dtype);
  if (idx.size() * row != in.size())
    c.fail(Kind::unsupported, "src does not hold one dst row per index");
  for (size_t r = 0; r < idx.size(); ++r) {
    check_row(c, idx, r, dst, "dst");
    write_bytes(c, row_of(dst, idx[r]), in.data() + r * row);
  }
}

void dma_copy(const Ctx& c) {
  const AccessPattern& dst = c.get(Role::dst);
  const AccessPattern& src = c.get(Role::src);
  const AccessPattern* index = c.inst.operand(Role::index);
  if (!index && c.inst.has_flag(isa::kDmaTranspose)) {
    // src [R rows, F] read row by row, then written to dst in its walk order column by column.
    const Bytes b = read_as(c, src, dst.dtype);
    const size_t R = src.num_partitions, F = free_size(src), es = esize(dst);
    if (b.size() != total_size(dst) * es) c.fail(Kind::unsupported, "dst and src sizes differ");
    Bytes t(b.size());
    for (size_t r = 0; r < R; ++r)
      for (size_t f = 0; f < F; ++f)
        std::memcpy(t.data() + (f * R + r) * es, b.data() + (r * F + f) * es, es);
    return write_bytes(c, dst, t.data());
  }
  const bool add = c.inst.has_flag(isa::kAddToDst);
  if (!index && add) {
    const Floats v = read_floats(c, src);
    if (v.size() != total_size(dst)) c.fail(Kind::unsupported, "dst and src sizes differ");
    return add_floats(c, dst, v.data());
  }
  if (!index) {
    if (dma_direct(c, dst, src)) return;
    const Bytes b = read_as(c, src, dst.dtype);
    if (b.size() != total_size(dst) * esize(dst))
      c.fail(Kind::unsupported, "dst and src sizes differ");
    return write_bytes(c, dst, b.data());
  }
  const std::vector<int64_t> idx = read_indices(c, *index);
  if (c.inst.has_flag(isa::kScatter)) return dma_scatter(c, dst, src, idx);
  if (add) {
    const size_t row = free_size(src);
    if (idx.size() * row != total_size(dst))
      c.fail(Kind::unsupported, "dst does not hold one src row per index");
    Floats v(total_size(dst));
    for (size_t r = 0; r < idx.size(); ++r) {
      check_row(c, idx, r, src, "src");
      const Floats f = read_floats(c, row_of(src, idx[r]));
      std::copy(f.data(), f.data() + f.size(), v.data() + r * row);
    }
    return add_floats(c, dst, v.data());
  }
  const size_t row = free_size(src) * esize(dst);
  if (idx.size() * row != total_size(dst) * esize(dst))
    c.fail(Kind::unsupported, "dst does not hold one src row per index");
  Bytes out(idx.size() * row);
  for (size_t r = 0; r < idx.size(); ++r) {
    check_row(c, idx, r, src, "src");
    const Bytes b = read_as(c, row_of(src, idx[r]), dst.dtype);
    std::memcpy(out.data() + r * row, b.data(), row);
  }
  write_bytes(c, dst, out.data());
}

void dispatch(const Ctx& c) {
  switch (c.inst.opcode) {
    case Opcode::matmul:
      return matmul(c);
    case Opcode::transpose:
      return transpose_into(c, c.get(Role::dst), c.get(Role::src));
    case Opcode::activation:
      return activation(c);
    case Opcode::tensor_tensor:
      return tensor_tensor(c);
    case Opcode::tensor_scalar:
      return tensor_scalar(c);
    case Opcode::tensor_reduce:
      return tensor_reduce(c);
    case Opcode::tensor_copy:
      return tensor_copy(c);
    case Opcode::memset:
      return memset_op(c);
    case Opcode::select:
      return select(c);
    case Opcode::copy_predicated:
      return copy_predicated(c);
    case Opcode::bn_stats:
      return bn_stats(c);
    case Opcode::bn_aggr:
      return bn_aggr(c);
    case Opcode::tensor_tensor_scan:
      return tensor_tensor_scan(c);
    case Opcode::iota:
      return iota(c);
    case Opcode::affine_select:
      return affine_select(c);
    case Opcode::partition_reduce:
      return partition_reduce(c);
    case Opcode::partition_shuffle:
      return partition_shuffle(c);
    case Opcode::local_gather:
      return local_gather(c);
    case Opcode::dma_copy:
      return dma_copy(c);
    case Opcode::rng:
      return rng(c);
    case Opcode::rand_set_state:
      return rand_set_state(c);
    case Opcode::max8:
      return max8(c);
    case Opcode::find_index8:
      return find_vals(c, false);
    case Opcode::match_replace8:
      return find_vals(c, true);
    case Opcode::scalar_tensor_tensor:
      return scalar_tensor_tensor(c);
    case Opcode::range_select:
      return range_select(c);
    case Opcode::sem_wait:
    case Opcode::sem_signal:
    case Opcode::sem_set:
      return;
    default:
      break;
  }
  if (isa::is_collective(c.inst.opcode))
    c.fail(Kind::unsupported,
           "a collective needs the other ranks of its job: it runs only inside Simulator::run, on "
           "a core bound to a communicator");
  c.fail(Kind::unsupported, fmt::format("unknown opcode {}", static_cast<int>(c.inst.opcode)));
}

uint64_t align_up(uint64_t v, uint64_t a) {
  return (v + a - 1) / a * a;
}

}  // namespace

CoreState::CoreState(const isa::Target& target, SparseMemory& hbm_memory)
    : sbuf(target.num_partitions, target.sbuf_partition_bytes),
      psum(target.num_partitions, target.psum_partition_bytes),
      hbm(hbm_memory),
      accumulator(target.num_partitions, 0.0f) {
  for (size_t e = 0; e < rng.size(); ++e)
    for (uint64_t p = 0; p < target.num_partitions; ++p) {
      uint64_t stream = (uint64_t{e} << 32) | p;
      rng[e].push_back(Xorwow::seeded(stream));
    }
}

uint64_t bind_tensors(const isa::Program& program, CoreState& state, uint64_t base) {
  uint64_t end = base;
  for (const isa::TensorDecl& t : program.tensors) {
    const uint64_t address = align_up(end, 64);
    const uint64_t size = t.size_bytes();
    if (address > state.hbm.capacity() || size > state.hbm.capacity() - address)
      throw std::out_of_range(
          fmt::format("tensor '{}' ({} bytes at {:#x}) does not fit the {:#x}-byte HBM", t.name,
                      size, address, state.hbm.capacity()));
    state.tensors[t.var_id] = TensorBinding{address, size};
    if (t.kind == isa::TensorKind::constant && !t.data.empty())
      state.hbm.write(address, t.data.data(), std::min<uint64_t>(size, t.data.size()));
    end = address + size;
  }
  return end;
}

void execute(const isa::Instruction& inst, CoreState& state, const isa::Program* program) {
  // DMA moves bytes that already exist; only compute instructions create NaNs.
  const bool nan_check = state.fail_on_nan && inst.opcode != Opcode::dma_copy;
  dispatch(Ctx{inst, state, program, nan_check});
}

std::vector<uint8_t> read_operand(const isa::Instruction& inst, isa::Role role, CoreState& state,
                                  const isa::Program* program) {
  const Ctx c{inst, state, program, false};
  const Bytes b = read_bytes(c, c.get(role));
  return std::vector<uint8_t>(b.data(), b.data() + b.size());
}

void write_operand(const isa::Instruction& inst, isa::Role role, CoreState& state,
                   std::span<const uint8_t> bytes, const isa::Program* program) {
  const Ctx c{inst, state, program, state.fail_on_nan};
  const AccessPattern& ap = c.get(role);
  check_memory(c, ap);
  if (bytes.size() != total_size(ap) * esize(ap))
    c.fail(Kind::unsupported,
           fmt::format("operand {} holds {} bytes, but {} bytes were produced for it",
                       isa::role_name(role), total_size(ap) * esize(ap), bytes.size()));
  write_bytes(c, ap, bytes.data());
}

}  // namespace neuronsim::sim
