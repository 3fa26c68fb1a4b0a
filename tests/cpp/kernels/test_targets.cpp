// Every kernel on every target: the Program validates (finish() and to_neff both
// validate), survives a NEFF round trip, and computes byte-for-byte what it
// computes on trn2 (the instruction semantics do not depend on the target; only
// the buffer counts may). And every kernel rejects unsupported arguments with
// std::invalid_argument naming the kernel.
#include <functional>
#include <limits>
#include <stdexcept>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "neuronsim/isa/program.h"
#include "neuronsim/kernels/eager.h"
#include "neuronsim/kernels/kernels.h"
#include "test_kernels_support.h"

namespace neuronsim::kernels {
namespace {

using isa::DType;

using ::testing::HasSubstr;

struct KernelCase {
  const char* name;
  std::function<isa::Program(std::string_view target)> build;
};

const std::vector<KernelCase>& kernel_cases() {
  static const std::vector<KernelCase> cases = {
      {"matmul",
       [](std::string_view t) { return matmul(t, 256, 384, 700, DType::bf16, DType::fp32); }},
      {"matmul_streamed",
       [](std::string_view t) {
         return detail::matmul(t, 130, 256, 600, DType::fp32, DType::fp32, 0);
       }},
      {"add",
       [](std::string_view t) {
         return elementwise(t, ElementwiseOp::add, 300, 700, DType::fp32);
       }},
      {"multiply",
       [](std::string_view t) {
         return elementwise(t, ElementwiseOp::multiply, 64, 64, DType::bf16);
       }},
      {"softmax", [](std::string_view t) { return softmax(t, 200, 600, DType::fp32); }},
      {"rmsnorm", [](std::string_view t) { return rmsnorm(t, 200, 600, 1e-6f, DType::bf16); }},
      {"layernorm", [](std::string_view t) { return layernorm(t, 200, 1100, 1e-5f, DType::fp32); }},
      {"transpose", [](std::string_view t) { return transpose(t, 300, 200, DType::fp32); }},
      {"log_softmax", [](std::string_view t) { return log_softmax(t, 200, 600, DType::bf16); }},
      {"pointwise",
       [](std::string_view t) {
         PointwiseExpr e;  // gelu(x.t()) * y + 1
         e.alu_imm(
             isa::AluOp::add,
             e.alu(isa::AluOp::multiply, e.activation(isa::ActFunc::gelu, e.load(0)), e.load(1)),
             1.0f);
         const View x{DType::bf16, {300, 200}, {1, 300}}, y{DType::fp32, {200}, {1}};
         return pointwise(t, e, std::vector<View>{x, y}, View{DType::bf16, {300, 200}, {200, 1}});
       }},
      {"fill",
       [](std::string_view t) {
         return fill(t, View{DType::fp32, {300, 70}, {100, 1}}, 2.5f);
       }},
      {"reduce",
       [](std::string_view t) {
         return reduce(t, ReduceOp::mean, View{DType::fp32, {300, 200}, {200, 1}}, 0,
                       View{DType::fp32, {200}, {1}});
       }},
      {"argmax",
       [](std::string_view t) {
         return reduce(t, ReduceOp::argmax, View{DType::bf16, {300, 200}, {200, 1}}, 1,
                       View{DType::int32, {300}, {1}});
       }},
      {"matmul_views",
       [](std::string_view t) {
         return matmul(t, View{DType::bf16, {2, 130, 256}, {256 * 130, 256, 1}},
                       View{DType::bf16, {2, 256, 600}, {0, 1, 256}},
                       View{DType::fp32, {2, 130, 600}, {600 * 130, 600, 1}});
       }},
  };
  return cases;
}

// Deterministic inputs for every input tensor of a program.
std::map<std::string, std::vector<uint8_t>> inputs_for(const isa::Program& p) {
  std::map<std::string, std::vector<uint8_t>> in;
  uint32_t seed = 100;
  for (const isa::TensorDecl& t : p.tensors)
    if (t.kind == isa::TensorKind::input)
      in[t.name] =
          test::encode(t.dtype, test::random_values(t.num_elems(), seed++, 0.5f, 2.0f, t.dtype));
  return in;
}

class TargetsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(TargetsTest, EveryKernelValidatesAndMatchesTrn2) {
  const std::string target = GetParam();
  for (const KernelCase& k : kernel_cases()) {
    SCOPED_TRACE(k.name);
    isa::Program p;
    ASSERT_NO_THROW(p = k.build(target));
    EXPECT_EQ(p.target, target);
    const isa::Program back =
        isa::from_neff(isa::to_neff(p, std::string(k.name) + ".neff"), k.name);
    EXPECT_EQ(back, p);
    const isa::Program reference = k.build("trn2");
    const auto inputs = inputs_for(p);
    EXPECT_EQ(test::run_raw(p, inputs), test::run_raw(reference, inputs));
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, TargetsTest, ::testing::Values("trn1", "trn3"));

// ---------------------------------------------------------------------------

void expect_rejects(const std::function<void()>& f, const std::string& kernel,
                    const std::string& what) {
  try {
    f();
    ADD_FAILURE() << kernel << ": no exception for " << what;
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr(kernel + ": ")) << what;
    EXPECT_THAT(e.what(), HasSubstr(what));
  } catch (const std::exception& e) {
    ADD_FAILURE() << kernel << ": wrong exception type for " << what << ": " << e.what();
  }
}

TEST(InvalidArguments, Matmul) {
  expect_rejects([] { matmul("trn2", 0, 128, 128); }, "matmul", "M must be at least 1");
  expect_rejects([] { matmul("trn2", 128, -5, 128); }, "matmul", "K must be at least 1");
  // Dims past 16 bits are tiled (an HBM access pattern counts its rows in 32 bits).
  EXPECT_NO_THROW(matmul("trn2", 128, 128, 70000));
  expect_rejects([] { matmul("trn2", 128, 128, int64_t{1} << 32); }, "matmul",
                 "N = 4294967296 exceeds");
  expect_rejects([] { matmul("trn2", 128, 128, 128, DType::int32); }, "matmul",
                 "dtype must be a float dtype");
  expect_rejects([] { matmul("trn2", 128, 128, 128, DType::bf16, DType::int8); }, "matmul",
                 "out_dtype must be a float dtype");
  // A [128, 60000] fp32 row block, double-buffered with its transpose, cannot fit.
  expect_rejects([] { matmul("trn2", 128, 60000, 128, DType::fp32); }, "matmul",
                 "bytes per SBUF partition");
}

TEST(InvalidArguments, Elementwise) {
  expect_rejects([] { elementwise("trn2", ElementwiseOp::add, 0, 4); }, "elementwise",
                 "rows must be at least 1");
  expect_rejects([] { elementwise("trn2", ElementwiseOp::add, 4, -1); }, "elementwise",
                 "cols must be at least 1");
  expect_rejects([] { elementwise("trn2", static_cast<ElementwiseOp>(7), 4, 4); }, "elementwise",
                 "unknown operation");
}

TEST(InvalidArguments, RowKernels) {
  expect_rejects([] { softmax("trn2", 128, 0); }, "softmax", "cols must be at least 1");
  expect_rejects([] { softmax("trn2", 128, 128, DType::int16); }, "softmax",
                 "dtype must be a float dtype");
  EXPECT_NO_THROW(softmax("trn2", 128, 60000));  // long rows: two passes over column blocks
  expect_rejects([] { log_softmax("trn2", 0, 128); }, "log_softmax", "rows must be at least 1");
  EXPECT_NO_THROW(rmsnorm("trn2", 70000, 8));
  expect_rejects([] { rmsnorm("trn2", int64_t{1} << 32, 8); }, "rmsnorm",
                 "rows = 4294967296 exceeds");
  expect_rejects([] { rmsnorm("trn2", 8, 8, -1.0f); }, "rmsnorm", "eps must be finite");
  expect_rejects([] { rmsnorm("trn2", 128, 40000); }, "rmsnorm", "bytes per SBUF partition");
  expect_rejects([] { layernorm("trn2", 8, 8, std::numeric_limits<float>::quiet_NaN()); },
                 "layernorm", "eps must be finite");
  expect_rejects([] { layernorm("trn2", 8, 8, 1e-5f, DType::uint8); }, "layernorm",
                 "dtype must be a float dtype");
  expect_rejects([] { layernorm("trn2", 128, 30000); }, "layernorm", "bytes per SBUF partition");
}

TEST(InvalidArguments, Transpose) {
  expect_rejects([] { transpose("trn2", 0, 8); }, "transpose", "rows must be at least 1");
  EXPECT_NO_THROW(transpose("trn2", 8, 100000));
  expect_rejects([] { transpose("trn2", 8, int64_t{1} << 32); }, "transpose",
                 "cols = 4294967296 exceeds");
  expect_rejects([] { transpose("trn2", 8, 8, DType::int32); }, "transpose",
                 "dtype must be a float dtype");
}

}  // namespace
}  // namespace neuronsim::kernels
