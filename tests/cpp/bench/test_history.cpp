// The benchmark history (tools/bench/history.h): runs appended to SQLite and read back, the
// same run twice, and the files it must refuse without touching them: not a database, another
// database, a half-written one; a run that fails midway leaves the earlier rows as they were.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "history.h"

namespace neuronsim::bench {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class History : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("neuronsim_history_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    db_ = (dir_ / "history.db").string();
  }
  void TearDown() override { fs::remove_all(dir_); }
  static std::string slurp(const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), {}};
  }
  fs::path dir_;
  std::string db_;
  const RunInfo info_{"abc1234", "2026-12-03T05:00:00Z", "ci-2core", "neuron-sim bench"};
  const std::vector<Measurement> figures_{{"trn2/dma_hbm_to_sbuf", "total_ns", 1234.5},
                                          {"trn2/dma_hbm_to_sbuf", "dma_bytes", 65536},
                                          {"trn2/matmul_bf16", "fraction_of_peak", 0.875}};
};

TEST_F(History, RecordsARunAndReadsItBack) {
  EXPECT_EQ(record_run(db_, info_, figures_), 1);
  const std::vector<RecordedFigure> rows = read_history(db_);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].benchmark, "trn2/dma_hbm_to_sbuf");
  EXPECT_EQ(rows[0].metric, "dma_bytes");
  EXPECT_EQ(rows[0].unit, "bytes");
  EXPECT_EQ(rows[1].metric, "total_ns");
  EXPECT_EQ(rows[1].value, 1234.5);
  EXPECT_EQ(rows[1].unit, "ns");
  EXPECT_EQ(rows[2].unit, "1");
  for (const RecordedFigure& r : rows) {
    EXPECT_EQ(r.run, 1);
    EXPECT_EQ(r.info.commit, "abc1234");
    EXPECT_EQ(r.info.date, "2026-12-03T05:00:00Z");
    EXPECT_EQ(r.info.machine, "ci-2core");
  }
}

TEST_F(History, TheSameRunTwiceIsTwoRunsWithTheSameValues) {
  record_run(db_, info_, figures_);
  EXPECT_EQ(record_run(db_, info_, figures_), 2);
  const std::vector<RecordedFigure> rows = read_history(db_);
  ASSERT_EQ(rows.size(), 6u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(rows[i].run, 1);
    EXPECT_EQ(rows[i + 3].run, 2);
    EXPECT_EQ(rows[i].value, rows[i + 3].value);
  }
}

TEST_F(History, AFileThatIsNotADatabaseIsRefusedAndLeftAsItWas) {
  {
    std::ofstream f(db_, std::ios::binary);
    f << "benchmark,metric,value\nthis is a CSV file, not a history\n";
  }
  const std::string before = slurp(db_);
  try {
    record_run(db_, info_, figures_);
    FAIL() << "a CSV file was taken for a history";
  } catch (const HistoryError& e) {
    EXPECT_THAT(e.what(), HasSubstr(db_));
    EXPECT_THAT(e.what(), HasSubstr("file is not a database"));  // SQLite's words
  }
  EXPECT_EQ(slurp(db_), before);
  EXPECT_THROW(read_history(db_), HistoryError);
}

TEST_F(History, AnotherSQLiteDatabaseIsRefused) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(
      sqlite3_exec(db, "CREATE TABLE t (x); INSERT INTO t VALUES (1);", nullptr, nullptr, nullptr),
      SQLITE_OK);
  sqlite3_close(db);
  try {
    record_run(db_, info_, figures_);
    FAIL() << "another database was taken for a history";
  } catch (const HistoryError& e) {
    EXPECT_THAT(e.what(), HasSubstr("not a neuronsim benchmark history"));
  }
}

TEST_F(History, ARunThatFailsMidwayLeavesTheEarlierRowsAsTheyWere) {
  record_run(db_, info_, figures_);
  // The same figure twice in one run breaks the table's key after the first rows went in.
  std::vector<Measurement> broken = figures_;
  broken.push_back(figures_[0]);
  try {
    record_run(db_, {"def5678", "2026-12-04T00:00:00Z", "ci", "neuron-sim bench"}, broken);
    FAIL() << "a run with a figure twice was recorded";
  } catch (const HistoryError& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot add trn2/dma_hbm_to_sbuf total_ns"));
  }
  const std::vector<RecordedFigure> rows = read_history(db_);
  ASSERT_EQ(rows.size(), 3u);
  for (const RecordedFigure& r : rows) EXPECT_EQ(r.info.commit, "abc1234");
  EXPECT_EQ(record_run(db_, info_, figures_), 2);  // and the history goes on
}

TEST_F(History, AHalfWrittenDatabaseIsAClearError) {
  for (int i = 0; i < 40; ++i) record_run(db_, info_, figures_);
  const std::string whole = slurp(db_);
  ASSERT_GT(whole.size(), 8192u);
  {
    std::ofstream f(db_, std::ios::binary | std::ios::trunc);
    f << whole.substr(0, whole.size() / 2);
  }
  try {
    read_history(db_);
    FAIL() << "a half-written history was read";
  } catch (const HistoryError& e) {
    EXPECT_THAT(e.what(), HasSubstr(db_));
  }
}

TEST(HistoryUnits, ComeFromTheMetricsNames) {
  EXPECT_EQ(unit_of("total_ns"), "ns");
  EXPECT_EQ(unit_of("hbm_read_bytes"), "bytes");
  EXPECT_EQ(unit_of("achieved_bytes_per_ns"), "bytes/ns");
  EXPECT_EQ(unit_of("achieved_elems_per_cycle"), "elems/cycle");
  EXPECT_EQ(unit_of("cycles_per_instruction"), "cycles/instruction");
  EXPECT_EQ(unit_of("achieved_tflops"), "TFLOP/s");
  EXPECT_EQ(unit_of("mfu_percent"), "%");
  EXPECT_EQ(unit_of("simulated_us_per_step"), "us");
  EXPECT_EQ(unit_of("instructions"), "count");
}

}  // namespace
}  // namespace neuronsim::bench
