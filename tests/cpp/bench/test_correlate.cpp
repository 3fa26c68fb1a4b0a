// The correlation tool's pieces (tools/bench/correlate.h): the case file and its errors, the
// statistics (error, MAPE, Pearson's r raw and log), the table and the plot page.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "correlate.h"
#include "shell.h"

namespace neuronsim::bench {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr const char* kHeader = "group,case,kind,spec,metric,per,measured,unit,source\n";

class Correlate : public ::testing::Test {
 protected:
  void SetUp() override {
    file_ = fs::temp_directory_path() /
            ("neuronsim_correlate_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".csv");
  }
  void TearDown() override { fs::remove(file_); }
  std::string error_of(const std::string& text) {
    std::ofstream(file_) << text;
    try {
      read_cases(file_);
    } catch (const CorrelationError& e) {
      return e.what();
    }
    return "no error";
  }
  fs::path file_;
};

TEST_F(Correlate, ReadsCasesWithUnitsDefaultsAndASourceWithCommas) {
  std::ofstream(file_) << "# comment\n"
                       << kHeader
                       << "dma,a,asm,x.s,dma_busy_time_ns,,1416,ns,doc.rst: 1,416 ns, trn2\n"
                       << "link,b,cc,allr -r 2 -b 8 -e 8,,4,1.5,us,doc\n";
  const auto cases = read_cases(file_);
  ASSERT_EQ(cases.size(), 2u);
  EXPECT_EQ(cases[0].metric, "dma_busy_time_ns");
  EXPECT_EQ(cases[0].per, 1);
  EXPECT_EQ(cases[0].measured_ns, 1416);
  EXPECT_EQ(cases[0].source, "doc.rst: 1,416 ns, trn2");
  EXPECT_EQ(cases[0].line, 3u);
  EXPECT_EQ(cases[1].metric, "time_us");  // a cc case's default
  EXPECT_EQ(cases[1].per, 4);
  EXPECT_EQ(cases[1].measured_ns, 1500);
}

TEST_F(Correlate, AMalformedCaseFileNamesTheLineAndTheField) {
  EXPECT_THAT(error_of("group,case\n"), HasSubstr(":1: expected the header"));
  EXPECT_THAT(error_of(std::string(kHeader) + "g,c,sim,x,,,1,ns,s\n"),
              HasSubstr(":2: kind 'sim': expected asm, neff, cc or nki"));
  EXPECT_THAT(error_of(std::string(kHeader) + "g,c,asm,x,,,1,s,src\n"),
              HasSubstr(":2: unit 's': expected ns, us or ms"));
  EXPECT_THAT(error_of(std::string(kHeader) + "g,c,asm,x,,,-3,ns,src\n"),
              HasSubstr(":2: measured '-3' is not a positive number"));
  EXPECT_THAT(error_of(std::string(kHeader) + "g,c,asm,x,,,3,ns,\n"),
              HasSubstr(":2: group, case, spec and source must not be empty"));
  EXPECT_THAT(error_of(std::string(kHeader) + "g,c,asm\n"), HasSubstr(":2: expected 9 fields"));
  EXPECT_THAT(error_of(kHeader), HasSubstr("no cases"));
  EXPECT_THAT(error_of(std::string(kHeader) + "all,c,asm,x,,,1,ns,s\n"),
              HasSubstr(":2: group 'all' is the total of every case"));
}

TEST(CorrelateStats, ErrorMapeAndPearsonRawAndLog) {
  EXPECT_NEAR(*pearson({1, 2, 3}, {2, 4, 6}), 1.0, 1e-12);
  EXPECT_NEAR(*pearson({1, 2, 3}, {3, 2, 1}), -1.0, 1e-12);
  EXPECT_FALSE(pearson({1, 1, 1}, {1, 2, 3}).has_value());
  const auto c = [](const char* group, double measured) {
    CorrelationCase k;
    k.group = group;
    k.name = "x";
    k.measured_ns = measured;
    return k;
  };
  // Group a: every case 2x too slow (error +100 %), perfectly correlated; b: one case, -50 %.
  const std::vector<CaseResult> results{
      {c("a", 10), 20}, {c("a", 100), 200}, {c("a", 1000), 2000}, {c("b", 100), 50}};
  EXPECT_DOUBLE_EQ(results[3].error(), -0.5);
  const auto stats = group_stats(results);
  ASSERT_EQ(stats.size(), 3u);
  EXPECT_EQ(stats[0].group, "a");
  EXPECT_DOUBLE_EQ(stats[0].mape_percent, 100);
  EXPECT_NEAR(*stats[0].r, 1.0, 1e-12);
  EXPECT_NEAR(*stats[0].r_log, 1.0, 1e-12);
  EXPECT_FALSE(stats[1].r.has_value());  // one case: no correlation
  EXPECT_EQ(stats[2].group, "all");
  EXPECT_EQ(stats[2].n, 4u);
  EXPECT_DOUBLE_EQ(stats[2].mape_percent, 87.5);
  const std::string table = format_correlation(results, stats);
  EXPECT_THAT(table, HasSubstr("a/x"));
  EXPECT_THAT(table, HasSubstr("+100.0%"));
  EXPECT_THAT(table, HasSubstr("-50.0%"));
  const std::string html = correlation_plot_html(results, stats, "/* chart.js */");
  EXPECT_THAT(html, HasSubstr("/* chart.js */"));
  EXPECT_THAT(html, HasSubstr("type: \"logarithmic\""));
  // Text from the case file is escaped, not markup.
  std::vector<CaseResult> marked{{c("<b>g</b>", 10), 20}};
  marked[0].c.source = "doc & <script>x</script>";
  const std::string page = correlation_plot_html(marked, group_stats(marked), "");
  EXPECT_THAT(page, HasSubstr("doc &amp; &lt;script&gt;x&lt;/script&gt;"));
  EXPECT_THAT(page, ::testing::Not(HasSubstr("<b>g</b></td>")));
  EXPECT_THAT(html, HasSubstr("{\"label\":\"x\",\"x\":10.0,\"y\":20.0}"));
}

// The scratch folder of correlate and of the suite runner goes however its scope ends: a failed
// case or benchmark throws, and its output is already in the error.
TEST(ScratchDir, IsRemovedWhenItsScopeEndsByAnException) {
  fs::path kept;
  try {
    const ScratchDir scratch("neuronsim-scratch-test");
    kept = scratch.path();
    EXPECT_THAT(kept.filename().string(),
                ::testing::StartsWith("neuronsim-scratch-test-" + std::to_string(::getpid())));
    fs::create_directories(kept / "case" / "0");
    std::ofstream(kept / "case" / "0" / "log.txt") << "output";
    throw CorrelationError("a case failed");
  } catch (const CorrelationError&) {
  }
  ASSERT_FALSE(kept.empty());
  EXPECT_FALSE(fs::exists(kept));
}

}  // namespace
}  // namespace neuronsim::bench
