// The dashboard's pieces (tools/bench/{imports,gate,suite,report}.h): figures imported from
// other tools' files, the gate against the history naming the commit that last changed a
// figure, the suite runner, and the HTML report marking exactly the planted regression.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gate.h"
#include "history.h"
#include "imports.h"
#include "report.h"
#include "suite.h"

namespace neuronsim::bench {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

class Dashboard : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("neuronsim_dashboard_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    db_ = (dir_ / "history.db").string();
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path write(const std::string& name, const std::string& text) {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
  static std::string slurp(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), {}};
  }
  // Runs c1..c5 of two benchmarks; the matmul's total_ns is 100, 100, 120 (c3), 120 and
  // `last` in c5; every other figure never moves.
  void plant(double last) {
    const double matmul[] = {100, 100, 120, 120, last};
    for (int i = 0; i < 5; ++i) {
      const RunInfo info{"c" + std::to_string(i + 1) + "0000000000000",
                         "2026-12-0" + std::to_string(i + 1) + "T00:00:00Z", "ci", "test"};
      record_run(db_, info,
                 {{"trn2/matmul", "total_ns", matmul[i]},
                  {"trn2/matmul", "instructions", 42},
                  {"trn2/dma", "achieved_bytes_per_ns", 17.5},
                  {"trn2/dma", "total_ns", 900}},
                 i == 4
                     ? std::vector<Artifact>{{"trn2/matmul", "trace.json", "{\"traceEvents\":[]}"}}
                     : std::vector<Artifact>{});
    }
  }
  fs::path dir_;
  std::string db_;
};

TEST_F(Dashboard, ImportsTheMetricsOfRunAndCcBenchAndTheCsvOfBench) {
  const auto run =
      read_figures(write("run.json",
                         R"({"metrics": [{"name": "total_time_ns", "unit": "ns", "value": 1500.5},
                            {"name": "dma_bytes", "unit": "bytes", "value": 4096}],
                "details": {"instance": "trn2.3xlarge"}})"),
                   "trn2/neff/matmul");
  ASSERT_EQ(run.size(), 2u);
  EXPECT_EQ(run[0].benchmark, "trn2/neff/matmul");
  EXPECT_EQ(run[0].metric, "total_time_ns");
  EXPECT_EQ(run[0].value, 1500.5);
  EXPECT_EQ(run[1].unit, "bytes");

  const auto cc = read_figures(write(
      "cc.json",
      R"({"metrics": [{"name": "cc_bench/all_reduce/1024B/busbw", "unit": "GiB/s", "value": 0.3}]})"));
  ASSERT_EQ(cc.size(), 1u);
  EXPECT_EQ(cc[0].benchmark, "cc_bench/all_reduce/1024B");
  EXPECT_EQ(cc[0].metric, "busbw");
  EXPECT_EQ(cc[0].unit, "GiB/s");

  const auto csv = read_figures(write("r.csv", "benchmark,metric,value\nb/x,total_ns,12.25\n"));
  ASSERT_EQ(csv.size(), 1u);
  EXPECT_EQ(csv[0].benchmark, "b/x");
  EXPECT_EQ(csv[0].value, 12.25);
  const auto expected =
      read_figures(write("e.csv", "# comment\nbenchmark,metric,value,margin\nb,m,3,abs:0\n"));
  ASSERT_EQ(expected.size(), 1u);
  EXPECT_EQ(expected[0].value, 3);
}

TEST_F(Dashboard, AnImportThatCannotBeReadSaysWhichFileAndEntry) {
  const auto message = [](const fs::path& p, const std::string& benchmark = {}) {
    try {
      read_figures(p, benchmark);
    } catch (const ImportError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(message(write("a.json", R"({"metrics": [{"name": "total_ns", "value": 1}]})")),
              HasSubstr("a.json: metrics[0] (total_ns): the name says no benchmark"));
  EXPECT_THAT(message(write("b.json", R"({"metrics": [{"name": "x/y", "value": "fast"}]})")),
              HasSubstr("b.json: metrics[0] (x/y): \"value\" is not a number"));
  EXPECT_THAT(message(write("c.json", R"({"results": []})")), HasSubstr("not a metrics file"));
  EXPECT_THAT(message(write("d.json", "{ nope")), HasSubstr("d.json: not valid JSON"));
  EXPECT_THAT(message(write("e.csv", "benchmark,metric,value\nb,m,twelve\n")),
              HasSubstr("e.csv:2: value 'twelve' is not a number"));
  EXPECT_THAT(message(write("f.txt", "hello\n")), HasSubstr("f.txt:1: expected the header"));
  EXPECT_THAT(message(dir_ / "missing.json"), HasSubstr("missing.json: cannot read"));
}

TEST_F(Dashboard, TimesGetBetterDownRatesUpAndCountsOnlyChange) {
  const Margin exact{Margin::Kind::absolute, 0};
  EXPECT_EQ(classify("total_ns", "ns", 100, 120, exact), "regression");
  EXPECT_EQ(classify("total_ns", "ns", 100, 80, exact), "improvement");
  EXPECT_EQ(classify("busbw", "GiB/s", 10, 8, exact), "regression");
  EXPECT_EQ(classify("simulated_tokens_per_s", "", 10, 12, exact), "improvement");
  EXPECT_EQ(classify("fraction_of_peak", "1", 0.9, 0.8, exact), "regression");
  EXPECT_EQ(classify("collectives_share", "1", 0.02, 0.03, exact), "regression");
  EXPECT_EQ(classify("peak_memory_bytes", "bytes", 10, 11, exact), "regression");
  EXPECT_EQ(classify("mape_percent", "", 10, 11, exact), "regression");  // correlate --figures
  EXPECT_EQ(classify("mape_percent", "", 11, 10, exact), "improvement");
  EXPECT_EQ(classify("no_fallback", "", 241, 240, exact), "regression");  // opinfo --figures
  EXPECT_EQ(classify("fallback", "", 30, 29, exact), "improvement");
  EXPECT_EQ(classify("mismatch", "", 3, 4, exact), "regression");
  EXPECT_EQ(classify("entries", "", 600, 610, exact), "change");
  EXPECT_EQ(classify("instructions", "count", 42, 43, exact), "change");
  EXPECT_EQ(classify("peak_tflops", "TFLOP/s", 78, 90, exact), "change");
  EXPECT_EQ(classify("total_ns", "ns", 100, 100.00001, Margin{Margin::Kind::relative, 1e-6}), "");
}

TEST_F(Dashboard, TheHistoryGateNamesTheFigureBothValuesAndTheCommitThatLastChangedIt) {
  plant(120);
  const auto history = series_of(read_history(db_));
  const std::vector<Measurement> run{{"trn2/matmul", "total_ns", 150},
                                     {"trn2/matmul", "instructions", 42},
                                     {"trn2/dma", "achieved_bytes_per_ns", 17.5},
                                     {"trn2/dma", "total_ns", 900},
                                     {"trn2/new", "total_ns", 1}};
  const HistoryGateReport report =
      check_against_history(history, run, nullptr, Margin{Margin::Kind::relative, 1e-6});
  ASSERT_EQ(report.moves.size(), 1u);
  const HistoryMove& m = report.moves[0];
  EXPECT_EQ(m.benchmark, "trn2/matmul");
  EXPECT_EQ(m.metric, "total_ns");
  EXPECT_EQ(m.old_value, 120);
  EXPECT_EQ(m.new_value, 150);
  EXPECT_EQ(m.kind, "regression");
  EXPECT_EQ(m.since.commit, "c30000000000000");  // 100 -> 120 happened in c3
  EXPECT_FALSE(m.first_value);
  EXPECT_EQ(report.compared, 4u);
  ASSERT_EQ(report.new_figures.size(), 1u);
  const std::string text = format_history_report(report);
  EXPECT_THAT(text, HasSubstr("REGRESSION trn2/matmul total_ns: 120 ns -> 150 ns (+25%, margin "
                              "1e-06); last changed in commit c30000000000 (2026-12-03"));
  EXPECT_THAT(text, HasSubstr("4 compared, 3 within their margin, 1 moved"));
  EXPECT_THAT(text, Not(HasSubstr("trn2/dma total_ns:")));

  // A margin from an expected file admits the move; a figure that never changed says so.
  const ExpectedFile wide =
      parse_expected("benchmark,metric,value,margin\ntrn2/matmul,total_ns,120,0.5\n", "e.csv");
  EXPECT_TRUE(check_against_history(history, run, &wide, Margin{}).ok());
  const auto dma = check_against_history(history, {{"trn2/dma", "total_ns", 901}}, nullptr,
                                         Margin{Margin::Kind::absolute, 0});
  ASSERT_EQ(dma.moves.size(), 1u);
  EXPECT_TRUE(dma.moves[0].first_value);
  EXPECT_THAT(format_history_report(dma), HasSubstr("unchanged since its first record, commit c1"));
  EXPECT_THAT(history_note(history, "trn2/matmul", "total_ns", Margin{}),
              HasSubstr("120 in the history, last changed in commit c30000000000"));
}

TEST_F(Dashboard, TheReportMarksExactlyThePlantedRegression) {
  plant(150);  // c5 regresses the matmul: 120 -> 150 ns
  const fs::path chartjs = write("chart.min.js", "/* Chart.js stand-in */");
  ReportOptions options;
  options.chartjs = chartjs;
  const fs::path site = dir_ / "site";
  const ReportSummary summary = write_report(db_, site, options);
  EXPECT_EQ(summary.runs, 5u);
  EXPECT_EQ(summary.figures, 4u);
  EXPECT_EQ(summary.regressions, 1u);
  for (const char* f : {"index.html", "chart.min.js", "report.js", "report.css", "runs/1.html",
                        "runs/5.html", "benchmarks/trn2--matmul.html", "benchmarks/trn2--dma.html",
                        "artifacts/5/trn2--matmul/trace.json"})
    EXPECT_TRUE(fs::is_regular_file(site / f)) << f;
  EXPECT_EQ(slurp(site / "chart.min.js"), "/* Chart.js stand-in */");

  const std::string index = slurp(site / "index.html");
  // The overview (a row per benchmark) and the table of every figure: in each, exactly one
  // row marked, the matmul's total_ns, with its change.
  const auto marked_rows = [&](const std::string& section) {
    const size_t from = index.find("<section id=\"" + section + "\">");
    const std::string part = index.substr(from, index.find("</section>", from) - from);
    const std::regex marked(R"re(<tr class="(regression|improvement|change)"[^>]*>)re");
    std::vector<std::string> rows;
    for (std::sregex_iterator it(part.begin(), part.end(), marked), end; it != end; ++it)
      rows.push_back(it->str());
    return rows;
  };
  for (const char* section : {"overview", "figures"}) {
    const auto rows = marked_rows(section);
    ASSERT_EQ(rows.size(), 1u) << section << "\n" << index;
    EXPECT_EQ(rows[0],
              "<tr class=\"regression\" data-benchmark=\"trn2/matmul\" data-metric=\"total_ns\">");
  }
  EXPECT_THAT(index, HasSubstr("<span class=\"regression\">total_ns +25%</span>"));
  EXPECT_THAT(index, HasSubstr("Regressions in run 5 (1)"));
  // The plots: the matmul's total_ns is the only figure that moved; its points are marked
  // exactly at c3 (a regression against c2, 100 -> 120) and c5 (120 -> 150).
  const size_t a = index.find("<script type=\"application/json\" id=\"charts\">");
  ASSERT_NE(a, std::string::npos);
  const size_t from = index.find('>', a) + 1;
  const auto charts =
      nlohmann::json::parse(index.substr(from, index.find("</script>", from) - from));
  ASSERT_EQ(charts.size(), 1u);
  EXPECT_EQ(charts[0]["benchmark"], "trn2/matmul");
  EXPECT_EQ(charts[0]["metric"], "total_ns");
  EXPECT_EQ(charts[0]["status"], nlohmann::json::array({"", "", "regression", "", "regression"}));
  EXPECT_EQ(charts[0]["labels"][4], "c500000000");
  // Drill-down: the run's page lists its figures and links its trace.
  const std::string run5 = slurp(site / "runs/5.html");
  EXPECT_THAT(run5, HasSubstr("href=\"../artifacts/5/trn2--matmul/trace.json\""));
  EXPECT_THAT(run5, HasSubstr("Perfetto"));
  EXPECT_THAT(run5, HasSubstr("c50000000000000"));
  EXPECT_THAT(slurp(site / "benchmarks/trn2--matmul.html"), HasSubstr("<canvas id=\"plot1\">"));
}

TEST_F(Dashboard, AnArtifactNameFromTheHistoryStaysInsideTheSite) {
  record_run(db_, {"c1", "d", "m", "s"}, {{"b", "total_ns", 1}},
             {{"b", "../../escaped.json", "x"}, {"b", "..", "y"}});
  ReportOptions options;
  options.chartjs = write("chart.min.js", "");
  write_report(db_, dir_ / "site", options);
  EXPECT_FALSE(fs::exists(dir_ / "escaped.json"));
  EXPECT_TRUE(fs::is_regular_file(dir_ / "site/artifacts/1/b/.._.._escaped.json"));
  EXPECT_TRUE(fs::is_regular_file(dir_ / "site/artifacts/1/b/artifact"));
}

TEST_F(Dashboard, AReportNeedsARunAndAKnownBaseline) {
  ReportOptions options;
  options.chartjs = write("chart.min.js", "");
  EXPECT_THROW(write_report((dir_ / "none.db").string(), dir_ / "s", options), HistoryError);
  plant(120);
  options.baseline = "ffff";
  try {
    write_report(db_, dir_ / "s", options);
    FAIL() << "an unknown baseline was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("baseline ffff: no run of that commit"));
  }
  options.baseline = "c2";
  EXPECT_NO_THROW(write_report(db_, dir_ / "s", options));
  EXPECT_THAT(slurp(dir_ / "s" / "index.html"),
              HasSubstr("<dt>Baseline</dt><dd><a href=\"runs/2.html\">"));
  options.chartjs = dir_ / "no-chart.js";
  EXPECT_THROW(write_report(db_, dir_ / "s", options), std::runtime_error);
}

TEST_F(Dashboard, AVersionOneHistoryIsReadAndUpgradedOnTheNextWrite) {
  record_run(db_, {"c1", "d", "m", "s"}, {{"b", "total_ns", 1}});
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(
      sqlite3_exec(db, "DROP TABLE artifacts; PRAGMA user_version = 1;", nullptr, nullptr, nullptr),
      SQLITE_OK);
  sqlite3_close(db);
  EXPECT_EQ(read_history(db_).size(), 1u);
  EXPECT_TRUE(read_artifacts(db_, 1).empty());
  record_run(db_, {"c2", "d", "m", "s"}, {{"b", "total_ns", 1}}, {{"b", "trace.json", "{}"}});
  EXPECT_EQ(read_artifacts(db_, 2).size(), 1u);
  EXPECT_EQ(read_runs(db_).size(), 2u);
}

TEST_F(Dashboard, TheSuiteRunsEachCommandAndKeepsItsFiguresAndTrace) {
  const fs::path bench = dir_ / "bench";
  fs::create_directories(bench);
  const fs::path file = bench / "suite.json";
  std::ofstream(file) << R"({"benchmarks": [
    {"name": "a", "command": "printf 'benchmark,metric,value\\na/x,total_ns,5\\n' > {out}"},
    {"name": "b/run", "command": "printf '{\"metrics\":[{\"name\":\"total_time_ns\",\"value\":7}]}' > {out} && echo '{}' > {trace} && pwd > {tmp}/where"},
    {"name": "slow", "labels": ["slow"], "command": "false > {out}"}]})";
  const Suite suite = read_suite(file);
  EXPECT_EQ(suite.root, fs::absolute(dir_));
  std::vector<std::string> lines;
  const SuiteResult r =
      run_suite(suite, {"", {"slow"}}, {}, [&](const std::string& l) { lines.push_back(l); });
  ASSERT_EQ(r.figures.size(), 2u);
  EXPECT_EQ(r.figures[0].benchmark, "a/x");
  EXPECT_EQ(r.figures[1].benchmark, "b/run");
  EXPECT_EQ(r.figures[1].metric, "total_time_ns");
  ASSERT_EQ(r.artifacts.size(), 1u);
  EXPECT_EQ(r.artifacts[0].benchmark, "b/run");
  EXPECT_EQ(r.artifacts[0].content, "{}\n");
  EXPECT_THAT(lines.at(0), HasSubstr("[1/2] a"));
  try {
    run_suite(suite, {"slow", {}}, {}, [](const std::string&) {});
    FAIL() << "a failing benchmark was accepted";
  } catch (const SuiteError& e) {
    EXPECT_THAT(e.what(), HasSubstr("benchmark slow failed (exit status 1)"));
  }
}

TEST_F(Dashboard, AMalformedSuiteIsRefusedNamingTheEntry) {
  const auto message = [&](const std::string& text) {
    try {
      read_suite(write("suite.json", text));
    } catch (const SuiteError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(message(R"({"benchmarks": [{"name": "a", "command": "true"}]})"),
              HasSubstr("benchmarks[0] (a): the command never writes {out}"));
  EXPECT_THAT(message(R"({"benchmarks": [{"command": "x {out}"}]})"),
              HasSubstr("benchmarks[0]: \"name\" must be a non-empty string"));
  EXPECT_THAT(
      message(
          R"({"benchmarks": [{"name": "a", "command": "{out}"}, {"name": "a", "command": "{out}"}]})"),
      HasSubstr("benchmarks[1]: a second benchmark named a"));
  EXPECT_THAT(message(R"([1, 2])"), HasSubstr("expected an object with a \"benchmarks\" list"));
}

}  // namespace
}  // namespace neuronsim::bench
