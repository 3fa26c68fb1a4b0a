// libnrt.so.1: every function declared in the headers is exported with the symbol version
// of the AWS library (NRT_3.0.0 for nrta_*, NRT_2.0.0 for the rest), and nothing internal is.
#include <dlfcn.h>

#include <regex>
#include <set>
#include <sstream>

#include "nrt_test_util.h"

namespace {

// Function names declared in runtime_shim/include/nrt/*.h (comments stripped).
std::set<std::string> declared_functions() {
  std::set<std::string> names;
  const auto dir = std::filesystem::path(NEURONSIM_SOURCE_DIR) / "runtime_shim" / "include" / "nrt";
  const std::regex comments(R"(/\*[\s\S]*?\*/|//[^\n]*)");
  const std::regex decl(R"((?:^|[\s*])((?:nrt|nrta|nec)_[a-z0-9_]+)\s*\()");
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const auto bytes = nrt_test::read_file(e.path());
    const std::string text =
        std::regex_replace(std::string(bytes.begin(), bytes.end()), comments, " ");
    for (std::sregex_iterator it(text.begin(), text.end(), decl), end; it != end; ++it)
      names.insert((*it)[1]);
  }
  return names;
}

TEST(NrtSymbols, EveryDeclaredFunctionIsExportedWithItsVersion) {
  void* lib = dlopen("libnrt.so.1", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(lib, nullptr) << "the test links libnrt.so.1";
  const auto names = declared_functions();
  EXPECT_GT(names.size(), 150u);
  for (const std::string& n : names) {
    const char* version = n.rfind("nrta_", 0) == 0 ? "NRT_3.0.0" : "NRT_2.0.0";
    EXPECT_NE(dlvsym(lib, n.c_str(), version), nullptr) << n << "@" << version;
  }
  EXPECT_EQ(dlsym(lib, "_ZN9neuronsim3sim12SparseMemory4readEmPvm"), nullptr)
      << "internal symbols leak";
  dlclose(lib);
}

}  // namespace
