// Linear algebra on the device, made of its products, sums and pointwise ops: triangular
// solves, the Cholesky factor, and the singular value decomposition of float32 matrices.
//
// The SVD (torch.linalg.svd, svdvals, matrix_rank, pinv, the spectral and nuclear norms) is
// one-sided Jacobi (Hestenes): the columns of A are rotated in pairs until every two are
// orthogonal; then the columns' norms are the singular values, the columns over their norms
// the left vectors, and the product of the rotations the right ones. Each round rotates n/2
// disjoint pairs at once (adjacent columns, every pair's rotation computed from three column
// sums) and moves the columns by the round-robin tournament's permutation, so that in n - 1
// rounds every pair meets once: a sweep. The sweeps stop when no pair is farther from
// orthogonal than sqrt(m) float epsilons of its norms (the host reads that measure once a
// sweep; timing-only mode, which has no values, takes kTimingSweeps). Everything is made of
// device ops: products and sums on the engines, the permutation a gather.
//
// Signs: a singular pair (u, v) is as good as (-u, -v), and no LAPACK driver fixes one; the
// device's are its own, as CUDA's are.
#include <cmath>
#include <limits>
#include <optional>
#include <tuple>

#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "aten/kernel_call.h"
#include "aten/timing_only.h"

namespace neuronsim::pytorch {
namespace {

constexpr int kMaxSweeps = 40;
constexpr int kTimingSweeps = 8;  // what small float32 matrices take here (a measured typical)

// The round-robin step as a gather of columns: pairs sit at (2j, 2j+1); player 0 stays and the
// others move one place round the circle, which brings every pair together once in n - 1 rounds.
at::Tensor round_robin_step(int64_t n, const c10::Device& device) {
  const auto arrangement = [n](int64_t r) {
    std::vector<int64_t> circle{0};
    for (int64_t i = 0; i < n - 1; ++i) circle.push_back(1 + (i + r) % (n - 1));
    std::vector<int64_t> a;
    for (int64_t j = 0; j < n / 2; ++j) {
      a.push_back(circle[static_cast<size_t>(j)]);
      a.push_back(circle[static_cast<size_t>(n - 1 - j)]);
    }
    return a;
  };
  const std::vector<int64_t> now = arrangement(0), next = arrangement(1);
  std::vector<int64_t> where(static_cast<size_t>(n)), step;
  for (int64_t p = 0; p < n; ++p) where[static_cast<size_t>(now[static_cast<size_t>(p)])] = p;
  for (int64_t player : next) step.push_back(where[static_cast<size_t>(player)]);
  return at::tensor(step, at::kLong).to(device);
}

// The columns of x (..., r, n) rotated pair by pair, (p, q) to (c p - s q, s p + c q), and
// moved on one round.
at::Tensor rotated(const at::Tensor& x, const at::Tensor& c, const at::Tensor& s,
                   const at::Tensor& step) {
  const at::Tensor pairs = x.unflatten(-1, {x.size(-1) / 2, 2});
  const at::Tensor p = pairs.select(-1, 0), q = pairs.select(-1, 1);
  return at::stack({c * p - s * q, s * p + c * q}, -1).flatten(-2).index_select(-1, step);
}

// The columns of a (..., m, n), with a zero column added to an odd count (it never rotates),
// rotated in pairs until they are orthogonal: w = a v, v (..., n', n') made only when asked.
// None when the host saw the sweeps not settle.
std::optional<std::pair<at::Tensor, at::Tensor>> orthogonal_columns(const at::Tensor& a,
                                                                    bool with_v) {
  const int64_t m = a.size(-2), n = a.size(-1) + a.size(-1) % 2;
  at::Tensor w = n == a.size(-1) ? a.contiguous() : at::constant_pad_nd(a, {0, 1}), v;
  if (with_v) {
    std::vector<int64_t> sizes(w.sizes().begin(), w.sizes().end());
    sizes[sizes.size() - 2] = n;
    v = at::eye(n, a.options()).expand(sizes).contiguous();
  }
  if (n < 2) return std::pair{w, v};
  const at::Tensor step = round_robin_step(n, w.device());
  const double tolerance =
      std::sqrt(static_cast<double>(m)) * std::numeric_limits<float>::epsilon();
  const bool reads = host_can_check();
  for (int sweep = 0; sweep < (reads ? kMaxSweeps : kTimingSweeps); ++sweep) {
    at::Tensor worst;
    for (int64_t round = 0; round < n - 1; ++round) {
      const at::Tensor pairs = w.unflatten(-1, {n / 2, 2});
      const at::Tensor p = pairs.select(-1, 0), q = pairs.select(-1, 1);
      const at::Tensor alpha = (p * p).sum(-2), beta = (q * q).sum(-2), gamma = (p * q).sum(-2);
      // How far from orthogonal each pair is (0 for a zero column, which never rotates).
      const at::Tensor norms = alpha.sqrt() * beta.sqrt();  // alpha * beta could overflow
      const at::Tensor off = at::where(norms > 0, gamma.abs() / norms, 0.0);
      const at::Tensor far = off.amax(-1);
      worst = worst.defined() ? at::maximum(worst, far) : far;
      // tan of the angle that zeroes gamma: t^2 + 2 zeta t - 1 = 0, the smaller root.
      const at::Tensor zeta = (beta - alpha) / (2 * gamma);
      const at::Tensor sign = at::where(zeta >= 0, 1.0, -1.0);
      const at::Tensor t =
          at::where(off > tolerance, sign / (zeta.abs() + (1 + zeta * zeta).sqrt()), 0.0);
      const at::Tensor c = (1 + t * t).rsqrt().unsqueeze(-2), s = c * t.unsqueeze(-2);
      w = rotated(w, c, s, step);
      if (with_v) v = rotated(v, c, s, step);
    }
    if (!reads) continue;
    const float largest = worst.max().item<float>();
    if (largest <= tolerance) return std::pair{w, v};
    if (!std::isfinite(largest)) return std::nullopt;
  }
  if (reads) return std::nullopt;
  return std::pair{w, v};
}

// Columns of x gathered by index (..., cols) per matrix.
at::Tensor columns(const at::Tensor& x, const at::Tensor& index) {
  std::vector<int64_t> sizes(x.sizes().begin(), x.sizes().end());
  sizes.back() = index.size(-1);
  return x.gather(-1, index.unsqueeze(-2).expand(sizes));
}

// An orthonormal basis of what the columns of u (..., m, c) do not span, as the first columns
// of (..., m, m): the projector onto that space orthogonalised by the same sweeps, its
// columns sorted by norm (ones first, zeros after) and normalised.
at::Tensor complement(const at::Tensor& u) {
  const int64_t m = u.size(-2);
  const auto sweeps = orthogonal_columns(at::eye(m, u.options()) - at::matmul(u, u.mT()), false);
  if (!sweeps) return {};
  const at::Tensor& w = sweeps->first;
  const at::Tensor norms = at::linalg_vector_norm(w, 2, {-2}, false, std::nullopt);
  const at::Tensor order = std::get<1>(norms.sort(-1, /*descending=*/true));
  const at::Tensor sorted = columns(w, order.narrow(-1, 0, m));
  const at::Tensor sorted_norms = norms.gather(-1, order.narrow(-1, 0, m));
  return sorted / at::where(sorted_norms > 0.5, sorted_norms, 1.0).unsqueeze(-2);
}

// U, S, Vh of a tall or square float32 batch a (..., m, n), m >= n; U has `u_cols` columns.
// None when the sweeps did not converge (values that are not finite).
std::optional<std::tuple<at::Tensor, at::Tensor, at::Tensor>> tall_svd(const at::Tensor& a,
                                                                       bool compute_uv,
                                                                       int64_t u_cols) {
  const int64_t m = a.size(-2), n = a.size(-1), even = n + n % 2;
  // Each matrix over its largest magnitude, so that no sum of squares overflows or underflows
  // in FP32; the singular values are scaled back.
  const at::Tensor peak = a.abs().amax({-2, -1}, /*keepdim=*/true);  // NaN where one is
  if (host_can_check() && !std::isfinite(peak.max().item<float>())) return std::nullopt;
  const at::Tensor scale = at::where(peak > 0, peak, 1.0);
  const auto sweeps = orthogonal_columns(a / scale, compute_uv);
  if (!sweeps) return std::nullopt;
  const auto& [w, v] = *sweeps;
  at::Tensor sigma = at::linalg_vector_norm(w, 2, {-2}, false, std::nullopt);
  at::Tensor key = sigma;  // an added zero column sorts last
  if (even != n)
    key = at::cat({sigma.narrow(-1, 0, n), at::full_like(sigma.narrow(-1, n, 1), -1.0)}, -1);
  const at::Tensor order = std::get<1>(key.sort(-1, /*descending=*/true)).narrow(-1, 0, n);
  const at::Tensor s = sigma.gather(-1, order);
  if (!compute_uv) return std::tuple{at::Tensor(), s * scale.squeeze(-1), at::Tensor()};
  const at::Tensor vh = columns(v, order).narrow(-2, 0, n).mT();  // (..., n, n)
  // Left vectors: the columns over their norms, and where a norm is zero (a rank-deficient A,
  // or the columns a full U adds) an orthonormal completion.
  at::Tensor u = columns(w, order) / at::where(s > 0, s, 1.0).unsqueeze(-2);
  u = at::where(s.unsqueeze(-2) > 0, u, 0.0);
  const at::Tensor rank = (s > 0).sum(-1, /*keepdim=*/true);  // (..., 1)
  const bool complete = u_cols > n || (host_can_check() && rank.min().item<int64_t>() < n);
  if (u_cols > n) u = at::constant_pad_nd(u, {0, u_cols - n});
  if (complete) {
    const at::Tensor basis = complement(u);
    if (!basis.defined()) return std::nullopt;
    const at::Tensor place = at::arange(u_cols, rank.options());
    const at::Tensor from = (place - rank).clamp(0, m - 1);
    u = at::where((place < rank).unsqueeze(-2), u, columns(basis, from));
  }
  return std::tuple{u, s * scale.squeeze(-1), vh};
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> svd_out(const at::Tensor& a, bool full_matrices,
                                                          bool compute_uv,
                                                          std::optional<c10::string_view> driver,
                                                          at::Tensor& u, at::Tensor& s,
                                                          at::Tensor& vh) {
  if (a.device().is_privateuseone() && a.scalar_type() == at::kFloat && a.dim() >= 2 &&
      !driver.has_value() && !a.is_conj() && s.scalar_type() == at::kFloat &&
      (!compute_uv || (u.scalar_type() == at::kFloat && vh.scalar_type() == at::kFloat))) {
    const int64_t m = a.size(-2), n = a.size(-1), k = std::min(m, n);
    const bool wide = m < n;
    const at::Tensor tall = wide ? a.mT() : a;
    // Of tall = U S Vh: U has u_cols columns; a wide A's factors are its transpose's, swapped.
    const int64_t u_cols = full_matrices ? std::max(m, n) : k;
    at::Tensor tu, ts, tvh;
    std::vector<int64_t> batch(a.sizes().begin(), a.sizes().end() - 2);
    if (a.numel() == 0) {
      std::vector<int64_t> ssize = batch;
      ssize.push_back(k);
      ts = at::zeros(ssize, a.options());
      const auto identity = [&](int64_t rows, int64_t cols) {
        std::vector<int64_t> sizes = batch;
        sizes.push_back(rows);
        sizes.push_back(cols);
        return at::eye(rows, cols, a.options()).expand(sizes).contiguous();
      };
      tu = identity(tall.size(-2), u_cols);
      tvh = identity(k, tall.size(-1));
      if (full_matrices) tvh = identity(tall.size(-1), tall.size(-1));
    } else {
      const auto factors = tall_svd(tall, compute_uv, u_cols);
      if (!factors)  // NaN or infinity: the CPU's error (or result)
        return Fallback<ATEN_OP2(_linalg_svd, U)>::call(a, full_matrices, compute_uv, driver, u, s,
                                                        vh);
      std::tie(tu, ts, tvh) = *factors;
      if (compute_uv && !full_matrices) tvh = tvh.narrow(-2, 0, k);
    }
    at::native::resize_output(s, ts.sizes());
    s.copy_(ts);
    if (!compute_uv) {
      at::native::resize_output(u, {0});
      at::native::resize_output(vh, {0});
      return {u, s, vh};
    }
    const at::Tensor ru = wide ? tvh.mT() : tu, rvh = wide ? tu.mT() : tvh;
    at::native::resize_output(u, ru.sizes());
    at::native::resize_output(vh, rvh.sizes());
    u.copy_(ru);
    vh.copy_(rvh);
    return {u, s, vh};
  }
  return Fallback<ATEN_OP2(_linalg_svd, U)>::call(a, full_matrices, compute_uv, driver, u, s, vh);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> svd(const at::Tensor& a, bool full_matrices,
                                                   bool compute_uv,
                                                   std::optional<c10::string_view> driver) {
  at::Tensor u = at::empty({0}, a.options()), vh = at::empty({0}, a.options()),
             s = at::empty({0}, a.options().dtype(c10::toRealValueType(a.scalar_type())));
  svd_out(a, full_matrices, compute_uv, driver, u, s, vh);
  return {u, s, vh};
}

// X with A X = B (or X A = B) for a triangular A, in 2 log2(n) products on TensorE instead
// of n dependent steps: with D = diag(A) and N = -D^-1 (A's strict triangle),
// A^-1 = (I - N)^-1 D^-1 and, N being nilpotent, (I - N)^-1 = (I + N)(I + N^2)(I + N^4)...
// (Gated DeltaNet's chunked recurrence solves such systems every chunk.)
at::Tensor& solve_triangular_out(const at::Tensor& a, const at::Tensor& b, bool upper, bool left,
                                 bool unitriangular, at::Tensor& out) {
  if (a.device().is_privateuseone() && b.device() == a.device() && out.device() == a.device() &&
      is_engine_float(a.scalar_type()) && a.scalar_type() == b.scalar_type() && a.dim() >= 2 &&
      b.dim() >= 2 && a.size(-1) == a.size(-2)) {
    const at::Tensor m = left ? a : a.transpose(-2, -1).contiguous();
    const at::Tensor rhs = left ? b : b.transpose(-2, -1);
    const bool lower = left ? !upper : upper;
    const int64_t n = m.size(-1);
    const at::Tensor strict = lower ? m.tril(-1) : m.triu(1);
    at::Tensor x = rhs, nil = -strict;
    if (!unitriangular) {
      const at::Tensor inverse_diagonal = m.diagonal(0, -2, -1).reciprocal().unsqueeze(-1);
      x = rhs * inverse_diagonal;
      nil = nil * inverse_diagonal;
    }
    for (int64_t k = 1; k < n; k *= 2) {
      x = x + at::matmul(nil, x);
      if (2 * k < n) nil = at::matmul(nil, nil);
    }
    const at::Tensor result = left ? x : x.transpose(-2, -1);
    at::native::resize_output(out, result.sizes());
    out.copy_(result);
    return out;
  }
  return Fallback<ATEN_OP2(linalg_solve_triangular, out)>::call(a, b, upper, left, unitriangular,
                                                                out);
}

at::Tensor solve_triangular(const at::Tensor& a, const at::Tensor& b, bool upper, bool left,
                            bool unitriangular) {
  at::Tensor out = at::empty({0}, b.options());
  return solve_triangular_out(a, b, upper, left, unitriangular, out);
}

// The lower Cholesky factor of float32 matrices (..., n, n), column by column: column j is
// A's below the diagonal less the product of the rows already made with row j, divided by
// the square root of its first entry, the pivot. Only A's lower triangle is read, as
// LAPACK's potrf reads it. Each column is one matrix-vector product on TensorE and a few
// pointwise kernels, as wide as the batch. Returns L and the pivots (..., n).
std::pair<at::Tensor, at::Tensor> cholesky_lower(const at::Tensor& a) {
  const int64_t n = a.size(-1);
  const at::Tensor l = at::zeros(a.sizes(), a.options());
  const at::Tensor pivots = at::empty(a.sizes().slice(0, a.dim() - 1), a.options());
  for (int64_t j = 0; j < n; ++j) {
    at::Tensor column = a.select(-1, j).narrow(-1, j, n - j);
    if (j > 0) {
      const at::Tensor made = l.narrow(-2, j, n - j).narrow(-1, 0, j);
      const at::Tensor row = l.select(-2, j).narrow(-1, 0, j).unsqueeze(-1);
      column = column - at::matmul(made, row).squeeze(-1);
    }
    const at::Tensor pivot = column.narrow(-1, 0, 1);
    pivots.narrow(-1, j, 1).copy_(pivot);
    l.select(-1, j).narrow(-1, j, n - j).copy_(column / pivot.sqrt());
  }
  return {l, pivots};
}

// LAPACK's info: the order of the first leading minor that is not positive-definite (the
// first pivot not above zero, NaN included), 0 where every one is.
at::Tensor cholesky_info(const at::Tensor& pivots) {
  const int64_t n = pivots.size(-1);
  const at::Tensor order = at::arange(1, n + 1, pivots.options().dtype(at::kInt));
  const at::Tensor first = at::where(pivots.gt(0).logical_not(), order, n + 1).amin(-1);
  return at::where(first.eq(n + 1), 0, first).to(at::kInt);
}

std::tuple<at::Tensor&, at::Tensor&> cholesky_ex_out(const at::Tensor& a, bool upper,
                                                     bool check_errors, at::Tensor& l,
                                                     at::Tensor& info) {
  if (a.device().is_privateuseone() && l.device() == a.device() && info.device() == a.device() &&
      a.scalar_type() == at::kFloat && l.scalar_type() == at::kFloat &&
      info.scalar_type() == at::kInt && a.dim() >= 2 && a.size(-1) == a.size(-2) && !a.is_conj()) {
    at::native::resize_output(l, a.sizes());
    at::native::resize_output(info, a.sizes().slice(0, a.dim() - 2));
    if (a.numel() == 0) {
      info.zero_();
      return {l, info};
    }
    auto [lower, pivots] = cholesky_lower(upper ? a.mT() : a);  // U = L(A^T)^T
    const at::Tensor status = cholesky_info(pivots);
    // Past a failing column, what LAPACK leaves in L depends on its blocking: a matrix that
    // is not positive-definite takes the CPU's result, counted (the host reads the status).
    if (!host_can_check() || status.max().item<int32_t>() == 0) {
      l.copy_(upper ? lower.mT() : lower);
      info.copy_(status);
      return {l, info};
    }
  }
  return Fallback<ATEN_OP2(linalg_cholesky_ex, L)>::call(a, upper, check_errors, l, info);
}

std::tuple<at::Tensor, at::Tensor> cholesky_ex(const at::Tensor& a, bool upper, bool check_errors) {
  at::Tensor l = at::empty({0}, a.options()), info = at::empty({0}, a.options().dtype(at::kInt));
  cholesky_ex_out(a, upper, check_errors, l, info);
  return {l, info};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("linalg_solve_triangular.out", solve_triangular_out);
  m.impl("linalg_solve_triangular", solve_triangular);
  m.impl("linalg_cholesky_ex.L", cholesky_ex_out);
  m.impl("linalg_cholesky_ex", cholesky_ex);
  m.impl("_linalg_svd.U", svd_out);
  m.impl("_linalg_svd", svd);
}

}  // namespace neuronsim::pytorch
