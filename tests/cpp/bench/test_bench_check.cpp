// The expected-results checker of `neuron-sim bench` (tools/bench/expected.h):
// parsing, relative and absolute margins, failures in both directions, missing
// and not-gated rows, the report, and --update keeping margins.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "expected.h"

namespace neuronsim::bench {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Status = RowOutcome::Status;

constexpr const char* kFile = R"(# Expected results
# margins: relative or abs:
benchmark,metric,value,margin
trn2/pe,total_ns,1000,0.01
trn2/pe,instructions,256,abs:0
# a comment between rows
trn2/dma,bytes_per_ns,23,abs:0.5

trn2/dma,total_ns,7052.1,1e-6
)";

// The message of the ExpectedFileError that parsing `text` throws ("" if none).
std::string parse_error(const std::string& text) {
  try {
    parse_expected(text, "x.csv");
  } catch (const ExpectedFileError& e) {
    return e.what();
  }
  return "";
}

const RowOutcome& outcome(const CheckReport& r, const std::string& bench,
                          const std::string& metric) {
  for (const RowOutcome& o : r.rows)
    if (o.expected.benchmark == bench && o.expected.metric == metric) return o;
  throw std::runtime_error("no outcome for " + bench + " " + metric);
}

std::vector<Measurement> full_run() {
  return {{"trn2/pe", "total_ns", 1000},
          {"trn2/pe", "instructions", 256},
          {"trn2/dma", "bytes_per_ns", 23},
          {"trn2/dma", "total_ns", 7052.1}};
}

// ---- parsing ----

TEST(ExpectedParse, ReadsHeaderCommentsAndRows) {
  const ExpectedFile f = parse_expected(kFile, "x.csv");
  ASSERT_EQ(f.rows.size(), 4u);
  EXPECT_EQ(f.preamble.size(), 2u);
  EXPECT_EQ(f.preamble[0], "# Expected results");
  EXPECT_EQ(f.rows[0].benchmark, "trn2/pe");
  EXPECT_EQ(f.rows[0].metric, "total_ns");
  EXPECT_EQ(f.rows[0].value, 1000.0);
  EXPECT_EQ(f.rows[0].margin.kind, Margin::Kind::relative);
  EXPECT_EQ(f.rows[0].margin.value, 0.01);
  EXPECT_EQ(f.rows[0].line, 4u);
  EXPECT_EQ(f.rows[1].margin.kind, Margin::Kind::absolute);
  EXPECT_EQ(f.rows[1].margin.value, 0.0);
  EXPECT_EQ(f.rows[2].margin_text, "abs:0.5");
  EXPECT_EQ(f.rows[2].line, 7u);
  EXPECT_EQ(f.rows[3].value, 7052.1);
  EXPECT_EQ(f.rows[3].margin.value, 1e-6);
  EXPECT_EQ(f.rows[3].line, 9u);
  EXPECT_NE(f.find("trn2/dma", "total_ns"), nullptr);
  EXPECT_EQ(f.find("trn2/dma", "nothing"), nullptr);
}

TEST(ExpectedParse, AcceptsCrlfSpacesAndAHeaderOnlyFile) {
  const ExpectedFile f =
      parse_expected("benchmark, metric ,value,margin\r\n a , b , 1.5 , abs: 2 \r\n", "x.csv");
  ASSERT_EQ(f.rows.size(), 1u);
  EXPECT_EQ(f.rows[0].benchmark, "a");
  EXPECT_EQ(f.rows[0].metric, "b");
  EXPECT_EQ(f.rows[0].value, 1.5);
  EXPECT_EQ(f.rows[0].margin.kind, Margin::Kind::absolute);
  EXPECT_EQ(f.rows[0].margin.value, 2.0);
  EXPECT_TRUE(
      parse_expected("# only a header\nbenchmark,metric,value,margin\n", "x.csv").rows.empty());
}

TEST(ExpectedParse, MissingOrWrongHeaderIsAnError) {
  EXPECT_EQ(parse_error(""), "x.csv: no header line 'benchmark,metric,value,margin'");
  EXPECT_EQ(parse_error("# just comments\n\n"),
            "x.csv: no header line 'benchmark,metric,value,margin'");
  EXPECT_EQ(parse_error("# c\nbenchmark,metric,value\n"),
            "x.csv:2: expected the header 'benchmark,metric,value,margin', found "
            "'benchmark,metric,value'");
  EXPECT_THAT(parse_error("a,b,1,0.01\n"), HasSubstr("x.csv:1: expected the header"));
}

TEST(ExpectedParse, BadRowsNameTheLine) {
  const std::string h = "benchmark,metric,value,margin\n";
  EXPECT_EQ(parse_error(h + "a,b,1\n"),
            "x.csv:2: expected 4 fields (benchmark,metric,value,margin), found 3: 'a,b,1'");
  EXPECT_THAT(parse_error(h + "a,b,1,0.1,extra\n"), HasSubstr("x.csv:2: expected 4 fields"));
  EXPECT_EQ(parse_error(h + "# c\na,b,ten,0.1\n"), "x.csv:3: value 'ten' is not a finite number");
  EXPECT_EQ(parse_error(h + "a,b,1x,0.1\n"), "x.csv:2: value '1x' is not a finite number");
  EXPECT_EQ(parse_error(h + "a,b,nan,0.1\n"), "x.csv:2: value 'nan' is not a finite number");
  EXPECT_EQ(parse_error(h + "a,b,inf,0.1\n"), "x.csv:2: value 'inf' is not a finite number");
  EXPECT_EQ(parse_error(h + "a,b,,0.1\n"), "x.csv:2: value '' is not a finite number");
  EXPECT_EQ(parse_error(h + ",b,1,0.1\n"), "x.csv:2: empty benchmark name");
  EXPECT_EQ(parse_error(h + "a,,1,0.1\n"), "x.csv:2: empty metric name");
  EXPECT_EQ(parse_error(h + "a,b,1,\n"), "x.csv:2: missing margin (write e.g. 0.001 or abs:0)");
  EXPECT_THAT(parse_error(h + "a,b,1,rel\n"), HasSubstr("x.csv:2: margin 'rel' is neither"));
  EXPECT_THAT(parse_error(h + "a,b,1,abs:\n"), HasSubstr("x.csv:2: margin 'abs:' is neither"));
  EXPECT_EQ(parse_error(h + "a,b,1,-0.1\n"), "x.csv:2: margin '-0.1' is negative");
  EXPECT_EQ(parse_error(h + "a,b,1,abs:-3\n"), "x.csv:2: margin 'abs:-3' is negative");
  EXPECT_EQ(parse_error(h + "a,b,1,0.1\n\na,b,2,0.1\n"),
            "x.csv:4: duplicate row a b (first on line 2)");
}

TEST(ExpectedParse, ReadsFilesAndNamesThemInErrors) {
  const std::filesystem::path dir = testing::TempDir();
  const std::filesystem::path path = dir / "bench_expected_test.csv";
  {
    std::ofstream out(path);
    out << "benchmark,metric,value,margin\na,b,1,0.5\nbroken\n";
  }
  try {
    read_expected(path);
    FAIL() << "no error";
  } catch (const ExpectedFileError& e) {
    EXPECT_EQ(std::string(e.what()),
              path.string() +
                  ":3: expected 4 fields (benchmark,metric,value,margin), found 1: "
                  "'broken'");
  }
  std::filesystem::remove(path);
  EXPECT_THROW(read_expected(dir / "does_not_exist.csv"), ExpectedFileError);
}

// ---- margins ----

TEST(Margin, ParsesRelativeAndAbsolute) {
  EXPECT_EQ(parse_margin("0.02").kind, Margin::Kind::relative);
  EXPECT_EQ(parse_margin("0.02").value, 0.02);
  EXPECT_EQ(parse_margin("abs:5").kind, Margin::Kind::absolute);
  EXPECT_EQ(parse_margin("abs:5").value, 5.0);
  EXPECT_EQ(parse_margin("abs:5").text(), "abs:5");
  EXPECT_EQ(parse_margin("1e-6").text(), "1e-06");
  EXPECT_EQ(parse_margin("0").text(), "0");
  EXPECT_THROW(parse_margin("5%"), std::invalid_argument);
  EXPECT_THROW(parse_margin("abs:x"), std::invalid_argument);
  EXPECT_THROW(parse_margin("-1"), std::invalid_argument);
}

TEST(Margin, RelativeScalesWithTheExpectedValueBoundaryIncluded) {
  const Margin m = parse_margin("0.5");  // exactly representable: boundaries are exact
  EXPECT_TRUE(m.admits(1000, 1000));
  EXPECT_TRUE(m.admits(1000, 1500));
  EXPECT_TRUE(m.admits(1000, 500));
  EXPECT_FALSE(m.admits(1000, 1500.001));
  EXPECT_FALSE(m.admits(1000, 499.999));
  EXPECT_TRUE(m.admits(-8, -4));
  EXPECT_FALSE(m.admits(-8, -3.9));
  // Relative to 0 nothing but 0 passes.
  EXPECT_TRUE(m.admits(0, 0));
  EXPECT_FALSE(m.admits(0, 1e-300));
  EXPECT_FALSE(m.admits(1000, std::numeric_limits<double>::quiet_NaN()));
}

TEST(Margin, AbsoluteIgnoresTheScale) {
  const Margin m = parse_margin("abs:5");
  EXPECT_TRUE(m.admits(0, 5));
  EXPECT_TRUE(m.admits(0, -5));
  EXPECT_FALSE(m.admits(0, 5.5));
  EXPECT_TRUE(m.admits(1e6, 1e6 + 5));
  EXPECT_FALSE(m.admits(1e6, 1e6 - 6));
  const Margin exact = parse_margin("abs:0");
  EXPECT_TRUE(exact.admits(131072, 131072));
  EXPECT_FALSE(exact.admits(131072, 131073));
}

// ---- checking ----

TEST(Check, AllWithinTheirMarginsPass) {
  const CheckReport r = check(parse_expected(kFile, "x.csv"), full_run());
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.passed, 4u);
  EXPECT_EQ(r.failed, 0u);
  EXPECT_TRUE(r.not_gated.empty());
  EXPECT_EQ(format_report(r), "4 passed, 0 failed\n");
}

TEST(Check, FailsInBothDirections) {
  const ExpectedFile f = parse_expected(kFile, "x.csv");
  for (const double v : {1011.0, 989.0}) {  // +1.1 % and -1.1 % against a 1 % margin
    std::vector<Measurement> run = full_run();
    run[0].value = v;
    const CheckReport r = check(f, run);
    EXPECT_FALSE(r.ok()) << v;
    EXPECT_EQ(r.failed, 1u);
    EXPECT_EQ(r.passed, 3u);
    EXPECT_EQ(outcome(r, "trn2/pe", "total_ns").status, Status::out_of_margin);
    EXPECT_EQ(outcome(r, "trn2/pe", "total_ns").actual, v);
  }
  // Faster is a failure as much as slower: an absolute margin too.
  std::vector<Measurement> run = full_run();
  run[2].value = 22.4;
  run[1].value = 257;
  const CheckReport r = check(f, run);
  EXPECT_EQ(r.failed, 2u);
  EXPECT_EQ(outcome(r, "trn2/dma", "bytes_per_ns").status, Status::out_of_margin);
  EXPECT_EQ(outcome(r, "trn2/pe", "instructions").status, Status::out_of_margin);
  // Just inside the margins.
  run = full_run();
  run[0].value = 1010;
  run[2].value = 23.5;
  EXPECT_TRUE(check(f, run).ok());
}

TEST(Check, ReportsExpectedActualAndRelativeDifference) {
  std::vector<Measurement> run = full_run();
  run[0].value = 1100;
  run[2].value = 20;
  const std::string text = format_report(check(parse_expected(kFile, "x.csv"), run));
  EXPECT_THAT(
      text,
      HasSubstr(
          "FAIL trn2/pe total_ns: expected 1000, actual 1100, difference 100 (+10%), margin 0.01 "
          "(line 4)\n"));
  EXPECT_THAT(
      text,
      HasSubstr(
          "FAIL trn2/dma bytes_per_ns: expected 23, actual 20, difference -3 (-13.04%), margin "
          "abs:0.5 (line 7)\n"));
  EXPECT_THAT(text, HasSubstr("\n2 passed, 2 failed\n"));
  EXPECT_THAT(text, Not(HasSubstr("instructions")));  // passing rows are not listed
}

TEST(Check, MissingRowsFail) {
  std::vector<Measurement> run = full_run();
  run.erase(run.begin() + 1);  // trn2/pe instructions
  const CheckReport r = check(parse_expected(kFile, "x.csv"), run);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.failed, 1u);
  EXPECT_EQ(outcome(r, "trn2/pe", "instructions").status, Status::missing);
  const std::string text = format_report(r);
  EXPECT_THAT(
      text, HasSubstr("FAIL trn2/pe instructions: expected 256, missing from this run (line 5)\n"));
  EXPECT_THAT(text, HasSubstr("3 passed, 1 failed\n"));
  // An empty run fails every row.
  EXPECT_EQ(check(parse_expected(kFile, "x.csv"), {}).failed, 4u);
}

TEST(Check, NewRowsAreNotGated) {
  std::vector<Measurement> run = full_run();
  run.push_back({"trn2/new", "total_ns", 42.5});
  const CheckReport r = check(parse_expected(kFile, "x.csv"), run);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.passed, 4u);
  ASSERT_EQ(r.not_gated.size(), 1u);
  EXPECT_EQ(r.not_gated[0].benchmark, "trn2/new");
  const std::string text = format_report(r);
  EXPECT_THAT(text, HasSubstr("not gated: trn2/new total_ns = 42.5 (not in the expected file)\n"));
  EXPECT_THAT(text, HasSubstr("1 not gated\n4 passed, 0 failed\n"));
}

TEST(Check, DuplicateMeasurementsAreAProgrammingError) {
  std::vector<Measurement> run = full_run();
  run.push_back(run[0]);
  EXPECT_THROW(check(parse_expected(kFile, "x.csv"), run), std::invalid_argument);
  EXPECT_THROW(results_csv(run), std::invalid_argument);
}

TEST(Check, RelativeDifference) {
  EXPECT_DOUBLE_EQ(relative_difference(1000, 1100), 0.1);
  EXPECT_DOUBLE_EQ(relative_difference(1000, 900), -0.1);
  EXPECT_DOUBLE_EQ(relative_difference(-10, -12), -0.2);
  EXPECT_EQ(relative_difference(0, 0), 0.0);
  EXPECT_EQ(relative_difference(0, 3), std::numeric_limits<double>::infinity());
  EXPECT_EQ(relative_difference(0, -3), -std::numeric_limits<double>::infinity());
}

// ---- writing ----

TEST(Write, ValuesRoundTripExactly) {
  for (const double v : {0.0, 1.0, 7052.1, 54626.6, 2.5e-5, 1.0 / 3.0, 157.21456, 25165824.0, 1e21})
    EXPECT_EQ(std::stod(format_value(v)), v) << format_value(v);
  EXPECT_EQ(format_value(131072), "131072");
  EXPECT_EQ(format_value(-0.0), "0");
}

TEST(Write, ResultsCsv) {
  EXPECT_EQ(results_csv({{"trn2/a", "total_ns", 12.5}, {"trn2/a", "bytes", 4096}}),
            "benchmark,metric,value\ntrn2/a,total_ns,12.5\ntrn2/a,bytes,4096\n");
  EXPECT_THROW(results_csv({{"a,b", "m", 1}}), std::invalid_argument);
  EXPECT_THROW(results_csv({{"a", "", 1}}), std::invalid_argument);
}

TEST(Update, KeepsMarginsAndPreambleAddsNewRowsDropsOldOnes) {
  const ExpectedFile old = parse_expected(kFile, "x.csv");
  std::vector<Measurement> run = full_run();
  run[0].value = 990;          // changed value, margin kept
  run.erase(run.begin() + 3);  // trn2/dma total_ns is gone
  run.push_back({"trn2/new", "total_ns", 42.5});
  UpdateSummary sum;
  const std::string text = updated_expected(old, run, parse_margin("0.01"), &sum);
  EXPECT_EQ(text,
            "# Expected results\n"
            "# margins: relative or abs:\n"
            "benchmark,metric,value,margin\n"
            "trn2/pe,total_ns,990,0.01\n"
            "trn2/pe,instructions,256,abs:0\n"
            "trn2/dma,bytes_per_ns,23,abs:0.5\n"
            "trn2/new,total_ns,42.5,0.01\n");
  EXPECT_EQ(sum.kept, 3u);
  EXPECT_EQ(sum.changed, 1u);
  ASSERT_EQ(sum.added.size(), 1u);
  EXPECT_EQ(sum.added[0].benchmark, "trn2/new");
  ASSERT_EQ(sum.removed.size(), 1u);
  EXPECT_EQ(sum.removed[0].metric, "total_ns");
  EXPECT_EQ(sum.removed[0].benchmark, "trn2/dma");
  // The result parses, and the run passes against it.
  const ExpectedFile again = parse_expected(text, "new.csv");
  EXPECT_TRUE(check(again, run).ok());
}

TEST(Update, KeepsMarginsVerbatim) {
  const ExpectedFile old =
      parse_expected("benchmark,metric,value,margin\na,b,1,1e-6\nc,d,2, abs:0.50\n", "x.csv");
  const std::string text =
      updated_expected(old, {{"a", "b", 1}, {"c", "d", 2}}, parse_margin("0.01"));
  EXPECT_THAT(text, HasSubstr("\nbenchmark,metric,value,margin\na,b,1,1e-6\nc,d,2,abs:0.50\n"));
}

TEST(Update, WithoutAFileWritesADefaultPreambleAndDefaultMargins) {
  UpdateSummary sum;
  const std::string text = updated_expected(std::nullopt, full_run(), parse_margin("abs:0"), &sum);
  const ExpectedFile f = parse_expected(text, "new.csv");
  EXPECT_FALSE(f.preamble.empty());
  EXPECT_THAT(text, HasSubstr("reason"));
  ASSERT_EQ(f.rows.size(), 4u);
  for (const ExpectedRow& r : f.rows) EXPECT_EQ(r.margin_text, "abs:0");
  EXPECT_EQ(sum.added.size(), 4u);
  EXPECT_EQ(sum.kept, 0u);
  EXPECT_TRUE(sum.removed.empty());
  EXPECT_TRUE(check(f, full_run()).ok());
}

}  // namespace
}  // namespace neuronsim::bench
