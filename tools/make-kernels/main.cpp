// neuronsim-make-kernels: writes the example kernel NEFFs (built by
// neuronsim::kernels with KernelBuilder) into a directory, for the examples and
// for trying the simulator on real tiled kernels.
#include <cstdio>
#include <exception>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "neuronsim/isa/neff.h"
#include "neuronsim/isa/program.h"
#include "neuronsim/kernels/kernels.h"

namespace {

namespace kernels = neuronsim::kernels;
using neuronsim::isa::DType;

struct Example {
  std::string file;
  std::string description;
  std::function<neuronsim::isa::Program(const std::string& target)> build;
};

// Sizes: multi-tile in every tiled dim, a few hundred KiB per tensor at most.
std::vector<Example> examples() {
  return {
      {"matmul_bf16.neff", "c[256,512] fp32 = a[256,256] @ b[256,512], bf16 inputs",
       [](const std::string& t) {
         return kernels::matmul(t, 256, 256, 512, DType::bf16, DType::fp32);
       }},
      {"add_fp32.neff", "out = x + y, [256,256] fp32",
       [](const std::string& t) {
         return kernels::elementwise(t, kernels::ElementwiseOp::add, 256, 256);
       }},
      {"softmax_fp32.neff", "row softmax of x[256,256] fp32",
       [](const std::string& t) { return kernels::softmax(t, 256, 256, DType::fp32); }},
      {"rmsnorm_bf16.neff", "rmsnorm of x[256,512] bf16, gamma[512], eps 1e-6",
       [](const std::string& t) { return kernels::rmsnorm(t, 256, 512, 1e-6f, DType::bf16); }},
      {"layernorm_fp32.neff", "layernorm of x[128,768] fp32, gamma/beta[768], eps 1e-5",
       [](const std::string& t) { return kernels::layernorm(t, 128, 768, 1e-5f, DType::fp32); }},
      {"transpose_fp32.neff", "out[384,256] = x[256,384]^T, fp32",
       [](const std::string& t) { return kernels::transpose(t, 256, 384, DType::fp32); }},
  };
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "neuronsim-make-kernels: write the example kernel NEFFs built with neuronsim::kernels."};
  app.set_version_flag("--version", "neuronsim-make-kernels " NEURONSIM_VERSION);
  std::string out_dir;
  std::string target = "trn2";
  bool quiet = false;
  app.add_option("--out-dir", out_dir, "directory to write the NEFFs into (created if missing)")
      ->required();
  app.add_option("--target", target, "target generation: trn1, trn2 or trn3")
      ->capture_default_str();
  app.add_flag("-q,--quiet", quiet, "print nothing on success");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    std::filesystem::create_directories(out_dir);
    for (const Example& ex : examples()) {
      const neuronsim::isa::Program program = ex.build(target);
      const std::filesystem::path path = std::filesystem::path(out_dir) / ex.file;
      neuronsim::isa::neff::write_neff_file(neuronsim::isa::to_neff(program, ex.file), path);
      if (!quiet)
        fmt::print("{}: {} ({} instructions)\n", path.string(), ex.description,
                   program.num_instructions());
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "neuronsim-make-kernels: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
