// attention (flash-style) against a double-precision host reference: plain, causal,
// grouped-query, masked, strided and 3-D views, head dims past 128, queries longer and
// shorter than the keys, and keys that stream through SBUF instead of staying resident.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "test_eager_support.h"

namespace neuronsim::kernels {
namespace {

using isa::DType;

struct Case {
  DType dtype = DType::fp32;
  int64_t B = 1, Hq = 1, Hkv = 1, Tq = 1, Tk = 1, D = 16, Dv = 16;
  bool causal = false;
  bool bias = false;        // a [B, 1, Tq, Tk] FP32 mask of 0 / -inf-ish entries
  bool masked_row = false;  // with bias: row 2 of batch 0 is -inf throughout
  bool transposed = false;  // q, k, v and out as [B, T, H, D].transpose(1, 2)
  bool three_d = false;     // [H, T, D] views (B must be 1)
  float amplitude = 2.0f;   // q and k uniform in [-amplitude, amplitude)
  std::string target = "trn2";
};

View heads_view(const Case& c, int64_t H, int64_t T, int64_t D) {
  if (c.three_d) return test::contiguous(c.dtype, {H, T, D});
  if (!c.transposed) return test::contiguous(c.dtype, {c.B, H, T, D});
  return test::swapped(test::contiguous(c.dtype, {c.B, T, H, D}), 1, 2);
}

// Element (b, h, t, d) of a 3-D or 4-D heads view.
int64_t at(const View& v, int64_t b, int64_t h, int64_t t, int64_t d) {
  if (v.sizes.size() == 3) return h * v.strides[0] + t * v.strides[1] + d * v.strides[2];
  return b * v.strides[0] + h * v.strides[1] + t * v.strides[2] + d * v.strides[3];
}

void check(const Case& c) {
  const View q = heads_view(c, c.Hq, c.Tq, c.D), k = heads_view(c, c.Hkv, c.Tk, c.D);
  const View v = heads_view(c, c.Hkv, c.Tk, c.Dv), out = heads_view(c, c.Hq, c.Tq, c.Dv);
  const View lse = c.three_d ? test::contiguous(DType::fp32, {c.Hq, c.Tq})
                             : test::contiguous(DType::fp32, {c.B, c.Hq, c.Tq});
  const View bias = test::contiguous(DType::fp32, {c.B, 1, c.Tq, c.Tk});
  AttentionOperands ops{q, k, v, out, lse, c.bias ? &bias : nullptr};
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.D));
  const isa::Program p = attention(c.target, ops, scale, c.causal);

  const std::vector<float> qs = test::storage(q, 1, -c.amplitude, c.amplitude);
  const std::vector<float> ks = test::storage(k, 2, -c.amplitude, c.amplitude);
  const std::vector<float> vs = test::storage(v, 3, -1.0f, 1.0f);
  std::vector<float> mask(static_cast<size_t>(c.B * c.Tq * c.Tk));
  std::mt19937 gen(4);
  for (float& m : mask) m = gen() % 4 == 0 ? -1e9f : 0.0f;
  for (int64_t b = 0; b < c.B; ++b)  // every row keeps key 0, but the third one
    for (int64_t i = 0; i < c.Tq; ++i) mask[static_cast<size_t>((b * c.Tq + i) * c.Tk)] = 0.0f;
  if (c.masked_row)  // row 2 masked out entirely: torch's math path gives it 0
    for (int64_t j = 0; j < c.Tk; ++j)
      mask[static_cast<size_t>(2 * c.Tk + j)] = -std::numeric_limits<float>::infinity();

  std::map<std::string, std::vector<float>> inputs{{"q", qs}, {"k", ks}, {"v", vs}};
  if (c.bias) inputs["bias"] = mask;
  const auto got = test::run(p, inputs);

  const size_t n_out = static_cast<size_t>(out.extent_elems());
  std::vector<double> want(n_out, 0.0), want_lse(static_cast<size_t>(c.B * c.Hq * c.Tq));
  std::vector<bool> written(n_out, false);
  const int64_t group = c.Hq / c.Hkv;
  std::vector<double> s(static_cast<size_t>(c.Tk));
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.Hq; ++h)
      for (int64_t i = 0; i < c.Tq; ++i) {
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < c.Tk; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < c.D; ++d)
            dot += double{qs[at(q, b, h, i, d)]} * ks[at(k, b, h / group, j, d)];
          double x = dot * scale;
          if (c.bias) x += mask[static_cast<size_t>((b * c.Tq + i) * c.Tk + j)];
          if (c.causal && j > i) x = -std::numeric_limits<double>::infinity();
          s[j] = x;
          mx = std::max(mx, x);
        }
        double sum = 0;
        for (double& x : s) sum += x = std::isinf(mx) ? 0.0 : std::exp(x - mx);
        want_lse[static_cast<size_t>((b * c.Hq + h) * c.Tq + i)] =
            std::isinf(mx) ? mx : mx + std::log(sum);
        for (int64_t d = 0; d < c.Dv; ++d) {
          double o = 0;
          for (int64_t j = 0; j < c.Tk; ++j) o += s[j] * vs[at(v, b, h / group, j, d)];
          want[at(out, b, h, i, d)] = sum == 0 ? 0.0 : o / sum;
          written[at(out, b, h, i, d)] = true;
        }
      }
  std::vector<float> got_out = got.at("out");
  for (size_t i = 0; i < n_out; ++i)
    if (!written[i]) got_out[i] = 0.0f;  // bytes between a strided view's elements
  const double tol = c.dtype == DType::fp32 ? 2e-4 : 2e-2;
  test::expect_close(got_out, want, static_cast<size_t>(c.Dv), [&](size_t) { return tol; });
  std::vector<float> got_lse = got.at("lse");
  for (size_t i = 0; i < got_lse.size(); ++i)
    if (std::isinf(want_lse[i])) {  // a row masked out entirely
      EXPECT_EQ(got_lse[i], -std::numeric_limits<float>::infinity()) << "lse " << i;
      got_lse[i] = 0.0f;
      want_lse[i] = 0.0;
    }
  test::expect_close(got_lse, want_lse, static_cast<size_t>(c.Tq),
                     [&](size_t) { return c.dtype == DType::fp32 ? 1e-4 : 2e-2; });
}

TEST(Attention, OneHeadFp32) {
  check({.Tq = 40, .Tk = 40});
  check({.Tq = 40, .Tk = 40, .causal = true});
}

TEST(Attention, CausalBf16OverSeveralKeyBlocksAndQueryTiles) {
  check({.dtype = DType::bf16, .Tq = 1300, .Tk = 1300, .D = 64, .Dv = 64, .causal = true});
}

TEST(Attention, LargeScoresInBf16KeepTheirPrecision) {
  // Scores of hundreds: the scale applies in FP32 inside the exponential, not to a bf16 q.
  check({.dtype = DType::bf16,
         .B = 2,
         .Hq = 2,
         .Hkv = 2,
         .Tq = 3,
         .Tk = 6,
         .D = 8,
         .Dv = 8,
         .causal = true,
         .amplitude = 9.0f});
  check({.dtype = DType::bf16,
         .Tq = 50,
         .Tk = 60,
         .D = 64,
         .Dv = 16,
         .bias = true,
         .amplitude = 9.0f});
}

TEST(Attention, GroupedQueryHeadsTransposedViewsAndBatches) {
  check({.dtype = DType::bf16,
         .B = 2,
         .Hq = 6,
         .Hkv = 2,
         .Tq = 200,
         .Tk = 200,
         .D = 32,
         .Dv = 32,
         .causal = true,
         .transposed = true});
}

TEST(Attention, MoreKeysThanQueriesWithAMask) {
  check({.B = 2, .Hq = 2, .Hkv = 1, .Tq = 70, .Tk = 700, .D = 24, .Dv = 40, .bias = true});
}

TEST(Attention, ARowMaskedOutEntirelyGivesZeros) {
  check({.Hq = 2, .Tq = 20, .Tk = 1100, .D = 16, .Dv = 8, .bias = true, .masked_row = true});
}

TEST(Attention, MoreQueriesThanKeysCausal) {
  check({.dtype = DType::bf16, .Tq = 300, .Tk = 130, .D = 16, .Dv = 16, .causal = true});
}

TEST(Attention, HeadDimsPast128AndThreeDViews) {
  check({.dtype = DType::bf16,
         .Hq = 2,
         .Hkv = 2,
         .Tq = 130,
         .Tk = 260,
         .D = 256,
         .Dv = 192,
         .causal = true,
         .three_d = true});
}

TEST(Attention, KeysStreamWhenTheyDoNotFitInSbuf) {
  // Head dims of 256 take 8 KiB of SBUF per partition per 1024 keys: 40,000 keys stream,
  // and 16 query heads on one KV head make two groups, each reading the keys anew.
  check({.dtype = DType::bf16, .Hq = 16, .Hkv = 1, .Tq = 1, .Tk = 40000, .D = 256, .Dv = 256});
}

TEST(Attention, OtherTargets) {
  check({.dtype = DType::bf16, .Hq = 2, .Tq = 150, .Tk = 150, .causal = true, .target = "trn1"});
  check({.dtype = DType::bf16, .Hq = 2, .Tq = 150, .Tk = 150, .causal = true, .target = "trn3"});
}

TEST(Attention, RefusesWhatItDoesNotCompute) {
  const View q = test::contiguous(DType::bf16, {1, 3, 8, 16});
  const View kv = test::contiguous(DType::bf16, {1, 2, 8, 16});
  const View lse = test::contiguous(DType::fp32, {1, 3, 8});
  test::expect_invalid(
      [&] {
        attention("trn2", {q, kv, kv, q, lse}, 1.0f, false);
      },
      {"attention", "3 query heads", "2 KV heads"});
  const View wide = test::contiguous(DType::bf16, {1, 1, 8, 512});
  const View lse1 = test::contiguous(DType::fp32, {1, 1, 8});
  test::expect_invalid(
      [&] {
        attention("trn2", {wide, wide, wide, wide, lse1}, 1.0f, false);
      },
      {"attention", "head dims 512"});
  const View strided = test::swapped(test::contiguous(DType::bf16, {1, 1, 16, 8}), 2, 3);
  test::expect_invalid(
      [&] {
        attention("trn2", {strided, strided, strided, strided, lse1}, 1.0f, false);
      },
      {"attention", "head dim must be contiguous"});
}

}  // namespace
}  // namespace neuronsim::kernels

namespace neuronsim::kernels {
namespace {

// attention_backward against the gradients of a double-precision reference, with the
// forward's out and lse computed by the reference (out rounded to the dtype).
void check_backward(const Case& c) {
  const View q = heads_view(c, c.Hq, c.Tq, c.D), k = heads_view(c, c.Hkv, c.Tk, c.D);
  const View v = heads_view(c, c.Hkv, c.Tk, c.Dv), out = heads_view(c, c.Hq, c.Tq, c.Dv);
  const View lse = test::contiguous(DType::fp32, {c.B, c.Hq, c.Tq});
  const View bias = test::contiguous(DType::fp32, {c.B, 1, c.Tq, c.Tk});
  AttentionGradOperands ops{q, k, v, out, out, lse, q, k, v, c.bias ? &bias : nullptr};
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.D));
  const isa::Program p = attention_backward(c.target, ops, scale, c.causal);

  const std::vector<float> qs = test::storage(q, 1, -c.amplitude, c.amplitude);
  const std::vector<float> ks = test::storage(k, 2, -c.amplitude, c.amplitude);
  const std::vector<float> vs = test::storage(v, 3, -1.0f, 1.0f);
  const std::vector<float> dos = test::storage(out, 5, -1.0f, 1.0f);
  std::vector<float> mask(static_cast<size_t>(c.B * c.Tq * c.Tk));
  std::mt19937 gen(4);
  for (float& m : mask) m = gen() % 4 == 0 ? -30.0f : static_cast<float>(gen() % 100) / 50.0f;
  std::vector<float> os(static_cast<size_t>(out.extent_elems())), ls(lse.extent_elems());
  std::vector<double> dq(qs.size()), dk(ks.size()), dv(vs.size());
  const int64_t group = c.Hq / c.Hkv;
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.Hq; ++h) {
      const int64_t hk = h / group;
      for (int64_t i = 0; i < c.Tq; ++i) {
        std::vector<double> pr(static_cast<size_t>(c.Tk));
        double mx = -1e300;
        for (int64_t j = 0; j < c.Tk; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < c.D; ++d)
            dot += double{qs[at(q, b, h, i, d)]} * ks[at(k, b, hk, j, d)];
          double x = dot * scale;
          if (c.bias) x += mask[static_cast<size_t>((b * c.Tq + i) * c.Tk + j)];
          if (c.causal && j > i) x = -1e300;
          pr[j] = x;
          mx = std::max(mx, x);
        }
        double sum = 0;
        for (double& x : pr) sum += x = std::exp(x - mx);
        for (double& x : pr) x /= sum;
        ls[static_cast<size_t>((b * c.Hq + h) * c.Tq + i)] = static_cast<float>(mx + std::log(sum));
        double delta = 0;
        for (int64_t d = 0; d < c.Dv; ++d) {
          double o = 0;
          for (int64_t j = 0; j < c.Tk; ++j) o += pr[j] * vs[at(v, b, hk, j, d)];
          os[at(out, b, h, i, d)] = test::round_to(c.dtype, static_cast<float>(o));
          delta += o * dos[at(out, b, h, i, d)];
        }
        for (int64_t j = 0; j < c.Tk; ++j) {
          double dp = 0;
          for (int64_t d = 0; d < c.Dv; ++d) {
            dp += double{dos[at(out, b, h, i, d)]} * vs[at(v, b, hk, j, d)];
            dv[at(v, b, hk, j, d)] += pr[j] * dos[at(out, b, h, i, d)];
          }
          const double ds = pr[j] * (dp - delta) * scale;
          for (int64_t d = 0; d < c.D; ++d) {
            dq[at(q, b, h, i, d)] += ds * ks[at(k, b, hk, j, d)];
            dk[at(k, b, hk, j, d)] += ds * qs[at(q, b, h, i, d)];
          }
        }
      }
    }
  std::map<std::string, std::vector<float>> inputs{{"q", qs},   {"k", ks},     {"v", vs},
                                                   {"out", os}, {"dout", dos}, {"lse", ls}};
  if (c.bias) inputs["bias"] = mask;
  const auto got = test::run(p, inputs);
  const double tol = c.dtype == DType::fp32 ? 2e-4 : 3e-2;
  for (const auto& [name, want, view] :
       {std::tuple{"dq", &dq, &q}, {"dk", &dk, &k}, {"dv", &dv, &v}}) {
    SCOPED_TRACE(name);
    double largest = 0;
    for (double w : *want) largest = std::max(largest, std::fabs(w));
    test::expect_close(got.at(name), *want, static_cast<size_t>(view->sizes.back()),
                       [&](size_t) { return tol * std::max(1.0, largest); });
  }
}

TEST(AttentionBackward, OneHeadFp32) {
  check_backward({.Tq = 40, .Tk = 40});
  check_backward({.Tq = 40, .Tk = 40, .causal = true});
}

TEST(AttentionBackward, CausalGroupedQueryBf16OverSeveralKeyBlocks) {
  check_backward({.dtype = DType::bf16,
                  .B = 2,
                  .Hq = 4,
                  .Hkv = 2,
                  .Tq = 700,
                  .Tk = 700,
                  .D = 32,
                  .Dv = 16,
                  .causal = true,
                  .transposed = true});
}

TEST(AttentionBackward, MaskAndMoreKeysThanQueries) {
  check_backward({.Hq = 2, .Hkv = 1, .Tq = 70, .Tk = 300, .D = 24, .Dv = 40, .bias = true});
}

TEST(AttentionBackward, KeysNoQuerySeesGetZeros) {
  check_backward({.Tq = 100, .Tk = 600, .D = 16, .Dv = 16, .causal = true});
}

TEST(AttentionBackward, RefusesHeadDimsPast128) {
  const View q = test::contiguous(DType::bf16, {1, 1, 8, 256});
  const View lse = test::contiguous(DType::fp32, {1, 1, 8});
  test::expect_invalid(
      [&] {
        attention_backward("trn2", {q, q, q, q, q, lse, q, q, q}, 1.0f, false);
      },
      {"attention_backward", "head dims"});
}

}  // namespace
}  // namespace neuronsim::kernels
