// Helpers shared by the libnrt.so.1 tests (tests/cpp/runtime/test_nrt_*.cpp).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "nrt/nrt.h"
#include "nrt/nrt_experimental.h"
#include "nrt/nrt_profile.h"
#include "nrt/nrt_status.h"
#include "nrt/nrt_version.h"

namespace nrt_test {

inline std::vector<uint8_t> read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

// An example NEFF written by the build (build/examples/<name>).
inline std::filesystem::path example(const std::string& name) {
  return std::filesystem::path(NEURONSIM_BUILD_DIR) / "examples" / name;
}

inline std::filesystem::path fixtures() {
  const char* env = std::getenv("NEURONSIM_FIXTURES");
  return env != nullptr && *env != '\0' ? std::filesystem::path(env)
                                        : std::filesystem::path(NEURONSIM_FIXTURES_DEFAULT);
}

// Sets environment variables for the life of the object and restores them after.
class ScopedEnv {
 public:
  ScopedEnv(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (auto [k, v] : vars) {
      const char* old = std::getenv(k);
      saved_.push_back({k, old != nullptr ? std::optional<std::string>(old) : std::nullopt});
      if (v != nullptr)
        setenv(k, v, 1);
      else
        unsetenv(k);
    }
  }
  ~ScopedEnv() {
    for (auto& [k, v] : saved_) {
      if (v)
        setenv(k.c_str(), v->c_str(), 1);
      else
        unsetenv(k.c_str());
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// Initialises the runtime for one test and closes it after.
class NrtTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("NEURON_RT_LOG_LEVEL", "QUIET", 0);
    ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  }
  void TearDown() override { nrt_close(); }
};

// A loaded model with one device tensor per input/output, in sets.
struct Loaded {
  nrt_model_t* model = nullptr;
  nrt_tensor_info_array_t* info = nullptr;
  nrt_tensor_set_t* in = nullptr;
  nrt_tensor_set_t* out = nullptr;
  std::map<std::string, nrt_tensor_t*> tensors;

  NRT_STATUS load(const std::string& neff, int vnc = -1,
                  nrt_tensor_placement_t placement = NRT_TENSOR_PLACEMENT_DEVICE) {
    const auto bytes = read_file(example(neff));
    if (bytes.empty()) return NRT_FAILURE;
    NRT_STATUS s = nrt_load(bytes.data(), bytes.size(), vnc, -1, &model);
    if (s != NRT_SUCCESS) return s;
    if ((s = nrt_get_model_tensor_info(model, &info)) != NRT_SUCCESS) return s;
    nrt_allocate_tensor_set(&in);
    nrt_allocate_tensor_set(&out);
    for (uint64_t i = 0; i < info->tensor_count; ++i) {
      const nrt_tensor_info_t& e = info->tensor_array[i];
      nrt_tensor_t* t = nullptr;
      if ((s = nrt_tensor_allocate(
               placement, placement == NRT_TENSOR_PLACEMENT_DEVICE ? (vnc < 0 ? 0 : vnc) : -1,
               e.size, e.name, &t)) != NRT_SUCCESS)
        return s;
      tensors[e.name] = t;
      nrt_add_tensor_to_tensor_set(e.usage == NRT_TENSOR_USAGE_INPUT ? in : out, e.name, t);
    }
    return NRT_SUCCESS;
  }
  template <typename T>
  void write(const std::string& name, const std::vector<T>& v) {
    ASSERT_EQ(nrt_tensor_write(tensors.at(name), v.data(), 0, v.size() * sizeof(T)), NRT_SUCCESS);
  }
  template <typename T>
  std::vector<T> read(const std::string& name) {
    std::vector<T> v(nrt_tensor_get_size(tensors.at(name)) / sizeof(T));
    EXPECT_EQ(nrt_tensor_read(tensors.at(name), v.data(), 0, v.size() * sizeof(T)), NRT_SUCCESS);
    return v;
  }
  NRT_STATUS execute() { return nrt_execute(model, in, out); }
  ~Loaded() {
    if (model != nullptr) nrt_unload(model);
    for (auto& [n, t] : tensors) nrt_tensor_free(&t);
    nrt_destroy_tensor_set(&in);
    nrt_destroy_tensor_set(&out);
    nrt_free_model_tensor_info(info);
  }
};

// Assembles `source` with neuron-sim ($NEURON_SIM) into a NEFF; empty when the tool is not
// available.
inline std::vector<uint8_t> assemble(const std::string& name, const std::string& source) {
  const char* tool = std::getenv("NEURON_SIM");
  if (tool == nullptr || !std::filesystem::exists(tool)) return {};
  const auto dir =
      std::filesystem::temp_directory_path() / ("nrt_asm_" + name + "_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const auto s = dir / (name + ".s"), neff = dir / (name + ".neff");
  std::ofstream(s) << source;
  const std::string cmd =
      std::string("'") + tool + "' asm '" + s.string() + "' -o '" + neff.string() + "' >/dev/null";
  std::vector<uint8_t> bytes;
  if (std::system(cmd.c_str()) == 0) bytes = read_file(neff);
  std::filesystem::remove_all(dir);
  return bytes;
}

// What the tests read back from a Chrome trace the runtime wrote.
struct KernelSlice {
  uint32_t core = 0;
  std::string name;
  uint64_t start_ps = 0, end_ps = 0;
};
struct TraceFile {
  bool valid = false;                 // a JSON trace with traceEvents
  std::vector<KernelSlice> kernels;   // the execution slices of the "kernels" rows, by start time
  std::vector<KernelSlice> launches;  // the runtime's launch slices inside them, likewise
  size_t instructions = 0;            // instruction slices
};

inline TraceFile read_trace(const std::filesystem::path& path) {
  TraceFile out;
  std::ifstream f(path);
  if (!f) return out;
  const nlohmann::json j = nlohmann::json::parse(f, nullptr, false);
  if (j.is_discarded() || !j.contains("traceEvents")) return out;
  out.valid = true;
  std::set<std::pair<int, int>> kernel_rows;
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["args"]["name"] == "kernels")
      kernel_rows.insert({e["pid"].get<int>(), e["tid"].get<int>()});
  auto ps = [](const nlohmann::json& us) {
    return static_cast<uint64_t>(std::llround(us.get<double>() * 1e6));
  };
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "X") continue;
    if (e["cat"] == "Instruction") ++out.instructions;
    if (!kernel_rows.count({e["pid"].get<int>(), e["tid"].get<int>()})) continue;
    const uint64_t start = ps(e["ts"]);
    (e["cat"] == "Launch" ? out.launches : out.kernels)
        .push_back({static_cast<uint32_t>(e["pid"].get<int>() - 1), e["name"], start,
                    start + ps(e["dur"])});
  }
  for (auto* slices : {&out.kernels, &out.launches})
    std::stable_sort(
        slices->begin(), slices->end(),
        [](const KernelSlice& a, const KernelSlice& b) { return a.start_ps < b.start_ps; });
  return out;
}

inline std::vector<float> iota(size_t n, float scale, float start = 0) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + scale * static_cast<float>(i % 1000);
  return v;
}

// An indirect dma_copy whose row index comes from the input `idx`: rows 0-7 of `x` exist.
constexpr const char* kGather = R"(.target trn2
.tensor x float32 [8,4] input
.tensor idx int32 [4,1] input
.tensor y float32 [4,4] output
sp dma_copy dst=sbuf.i32[0:4]+0[[1,1]] src=hbm.i32(idx)+0[[1,4],[1,1]] queue=0 signal=S[0]+=1
sp dma_copy dst=sbuf.fp32[0:4]+64[[1,4]] src=hbm.fp32(x)+0[[4,8],[1,4]] index=sbuf.i32[0:4]+0[[1,1]] queue=1 wait=S[0]>=1 signal=S[1]+=1
sp dma_copy dst=hbm.fp32(y)+0[[4,4],[1,4]] src=sbuf.fp32[0:4]+64[[1,4]] queue=2 wait=S[1]>=1
)";

// Loads the kGather NEFF on core 0 with device tensors x, idx (inputs) and y (output).
inline void load_gather(const std::vector<uint8_t>& neff, nrt_model_t** model,
                        std::map<std::string, nrt_tensor_t*>& t, nrt_tensor_set_t** in,
                        nrt_tensor_set_t** out) {
  ASSERT_EQ(nrt_load(neff.data(), neff.size(), 0, 1, model), NRT_SUCCESS);
  nrt_allocate_tensor_set(in);
  nrt_allocate_tensor_set(out);
  for (auto [name, bytes] :
       {std::pair{"x", 8 * 4 * 4}, std::pair{"idx", 4 * 4}, std::pair{"y", 4 * 4 * 4}}) {
    ASSERT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, bytes, name, &t[name]),
              NRT_SUCCESS);
    nrt_add_tensor_to_tensor_set(std::string(name) == "y" ? *out : *in, name, t[name]);
  }
}

}  // namespace nrt_test
