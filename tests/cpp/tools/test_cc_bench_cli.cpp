// End-to-end tests of `neuron-sim cc-bench`: the built binary ($NEURON_SIM) runs as a
// subprocess; its table, metrics JSON, exit codes and error messages are checked.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_support.h"

namespace neuronsim::tools {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;

using test::Result;

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

// One row of nccom-test's table: size, count, type, time, algbw, busbw, then #wrong (with
// --check) and the algorithm (with --show-algorithm, last).
struct Row {
  uint64_t bytes = 0, count = 0;
  std::string type, algo;
  double time_us = 0, algbw = 0, busbw = 0;
  long wrong = -1;
};

std::vector<Row> parse_table(const std::string& out) {
  std::vector<Row> rows;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line.find("size(B)") != std::string::npos) continue;
    std::istringstream l(line);
    Row r;
    if (!(l >> r.bytes >> r.count >> r.type >> r.time_us >> r.algbw >> r.busbw)) continue;
    for (std::string more; l >> more;) {
      if (std::isdigit(static_cast<unsigned char>(more[0])))
        r.wrong = std::stol(more);
      else
        r.algo = more;
    }
    rows.push_back(r);
  }
  return rows;
}

class CcBenchCli : public test::CliTest {
 protected:
  // A run that must fail with exit code 1 and "neuron-sim: error: ...<message>..." on stderr.
  void expect_error(const std::vector<std::string>& args, const std::string& message) {
    std::vector<std::string> full{"cc-bench"};
    full.insert(full.end(), args.begin(), args.end());
    const Result r = run(full);
    ASSERT_TRUE(r.exited()) << r.describe();
    EXPECT_EQ(r.code(), 1) << r.describe();
    EXPECT_THAT(r.err, HasSubstr("neuron-sim: error:")) << r.describe();
    EXPECT_THAT(r.err, HasSubstr(message)) << r.describe();
  }
};

TEST_F(CcBenchCli, CheckedAllReduceOnTwoRanksOfTrn1) {
  const Result r =
      run({"cc-bench", "--op", "all-reduce", "--ranks", "2", "--instance", "trn1.32xlarge",
           "--minbytes", "1K", "--maxbytes", "64K", "--stepfactor", "4", "--check"});
  ASSERT_TRUE(r.exited()) << r.describe();
  ASSERT_EQ(r.code(), 0) << r.describe();
  for (const char* column :
       {"size(B)", "count(elems)", "type", "time:avg(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong"})
    EXPECT_THAT(r.out, HasSubstr(column)) << r.describe();
  const std::vector<Row> rows = parse_table(r.out);
  ASSERT_EQ(rows.size(), 4u) << r.describe();
  const uint64_t sizes[] = {1024, 4096, 16384, 65536};
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].bytes, sizes[i]);
    EXPECT_EQ(rows[i].count, sizes[i] / 4);
    EXPECT_EQ(rows[i].type, "fp32");
    EXPECT_EQ(rows[i].algo, "");  // only with --show-algorithm
    EXPECT_GT(rows[i].time_us, 0.0);
    EXPECT_EQ(rows[i].wrong, 0) << r.describe();
  }
}

// A wrong value (one bit of the last rank's output flipped by the tool's test hook) is
// reported per size in #wrong, and the run exits 1 after printing the table.
// A command line written for nccom-test runs unchanged: the operation by nccom-test's short
// name, its options (-r, -b, -e, -f or -i, -n, -w, -d, --show-algorithm,
// --report-to-json-file), its table and its closing line, last.
TEST_F(CcBenchCli, SpeaksNccomTestsLanguage) {
  const fs::path report = tmp_ / "nccom.json";
  const Result r = run({"cc-bench",
                        "allr",
                        "-r",
                        "2",
                        "-b",
                        "1kb",
                        "-e",
                        "4kb",
                        "-f",
                        "2",
                        "-n",
                        "20",
                        "-w",
                        "5",
                        "-d",
                        "fp32",
                        "--show-algorithm",
                        "--non-interactive",
                        "--report-to-json-file",
                        report.string()});
  ASSERT_EQ(r.code(), 0) << r.describe();
  EXPECT_THAT(r.out, HasSubstr("size(B)    count(elems)")) << r.describe();
  const std::vector<Row> rows = parse_table(r.out);
  ASSERT_EQ(rows.size(), 3u) << r.describe();
  double sum = 0;
  for (const Row& row : rows) {
    EXPECT_EQ(row.type, "fp32");
    EXPECT_EQ(row.algo, "mesh");  // small sizes: the mesh, shown last
    sum += row.busbw;
  }
  // The closing line is the last, nccom-test's words, the mean busbw with four decimals.
  std::string last = r.out.substr(0, r.out.size() - 1);
  last = last.substr(last.rfind('\n') + 1);
  EXPECT_THAT(last, ::testing::MatchesRegex("Avg bus bandwidth:\t[0-9]+\\.[0-9]{4}GB/s"));
  EXPECT_NEAR(std::stod(last.substr(last.find('\t') + 1)), sum / 3, 0.01);
  const json doc = json::parse(slurp(report));
  ASSERT_EQ(doc["results"].size(), 3u);
  EXPECT_EQ(doc["results"][0]["size(B)"], 1024);
  EXPECT_EQ(doc["results"][0]["type"], "fp32");
  for (const char* key : {"count(elems)", "algbw(GB/s)", "busbw(GB/s)", "time:avg(us)"})
    EXPECT_TRUE(doc["results"][0].contains(key)) << key;
  // The other short names, and an additive step (-i).
  const Result rs = run({"cc-bench", "-r", "4", "redsct", "-d", "bf16", "-b", "1K", "-e", "4K",
                         "-i", "1K", "--timing-only"});
  ASSERT_EQ(rs.code(), 0) << rs.describe();
  std::vector<uint64_t> sizes;
  for (const Row& row : parse_table(rs.out)) sizes.push_back(row.bytes);
  EXPECT_EQ(sizes, (std::vector<uint64_t>{1024, 2048, 3072, 4096}));
  EXPECT_EQ(run({"cc-bench", "allg", "-r", "2", "-b", "1K", "-e", "1K", "--timing-only"}).code(),
            0);
  expect_error({"allgv"}, "variable-size collectives of nccom-test are not supported yet");
  expect_error({"allr", "--iters", "0"}, "--iters 0: must be at least 1");
}

TEST_F(CcBenchCli, CheckReportsAWrongValueAndExitsOne) {
  setenv("NEURONSIM_CC_BENCH_CORRUPT", "1", 1);
  const Result r = run({"cc-bench", "--ranks", "4", "--instance", "trn1.32xlarge", "--minbytes",
                        "1K", "--maxbytes", "4K", "--check"});
  unsetenv("NEURONSIM_CC_BENCH_CORRUPT");
  ASSERT_TRUE(r.exited()) << r.describe();
  EXPECT_EQ(r.code(), 1) << r.describe();
  EXPECT_THAT(r.err, HasSubstr("cc-bench --check: 3 of 3 sizes had wrong values")) << r.describe();
  const std::vector<Row> rows = parse_table(r.out);
  ASSERT_EQ(rows.size(), 3u) << r.describe();
  for (const Row& row : rows) EXPECT_EQ(row.wrong, 1) << r.describe();
}

TEST_F(CcBenchCli, CheckedOtherOperationsPass) {
  for (const char* op : {"all-gather", "reduce-scatter", "all-to-all", "broadcast", "reduce",
                         "permute", "send-recv"}) {
    const Result r = run({"cc-bench", "--op", op, "--ranks", "4", "--instance", "trn1.32xlarge",
                          "--minbytes", "256", "--maxbytes", "16K", "--stepfactor", "8", "--dtype",
                          "bf16", "--reduce-op", "max", "--check"});
    ASSERT_EQ(r.code(), 0) << op << "\n" << r.describe();
    for (const Row& row : parse_table(r.out)) EXPECT_EQ(row.wrong, 0) << op << "\n" << r.describe();
  }
}

TEST_F(CcBenchCli, AllReduceBusBandwidthIsTwoTimesRMinusOneOverRTimesAlgbw) {
  for (int ranks : {2, 4, 16}) {
    const Result r = run({"cc-bench", "--ranks", std::to_string(ranks), "--minbytes", "1K",
                          "--maxbytes", "16M", "--stepfactor", "16", "--timing-only"});
    ASSERT_EQ(r.code(), 0) << r.describe();
    const std::vector<Row> rows = parse_table(r.out);
    ASSERT_EQ(rows.size(), 4u) << r.describe();
    const double factor = 2.0 * (ranks - 1) / ranks;
    for (const Row& row : rows) {
      // Printed with two decimals, as nccom-test does.
      EXPECT_NEAR(row.busbw, factor * row.algbw, 0.011 + 1e-3 * row.busbw) << r.describe();
      // algbw = bytes / time, in GiB/s.
      EXPECT_NEAR(row.algbw,
                  static_cast<double>(row.bytes) / (row.time_us * 1e-6) / double(1u << 30),
                  0.006 + 2e-3 * row.algbw);
    }
  }
}

TEST_F(CcBenchCli, TimingOnlyAtOneGibIsQuick) {
  const auto start = std::chrono::steady_clock::now();
  const Result r = run({"cc-bench", "--ranks", "2", "--instance", "trn1.32xlarge", "--minbytes",
                        "1G", "--maxbytes", "1G", "--timing-only"},
                       std::chrono::seconds(30));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(r.code(), 0) << r.describe();
  const std::vector<Row> rows = parse_table(r.out);
  ASSERT_EQ(rows.size(), 1u) << r.describe();
  EXPECT_EQ(rows[0].bytes, uint64_t{1} << 30);
  EXPECT_EQ(rows[0].wrong, -1);  // no #wrong column without --check
  EXPECT_LT(seconds, 10.0);
}

// One rank per chip: two ranks on neighbouring trn1 chips approach the 96 GiB/s link
// (docs/collectives.md, "Runner"); packed, they share a chip and go through HBM instead.
// An all-gather, whose data only moves: since 2026-12 an all-reduce's reductions take its DMA
// engines' time (docs/collectives.md, "Fabric model"), which a link of 96 GiB/s outruns.
TEST_F(CcBenchCli, OnePerChipPlacementCrossesNeuronLink) {
  const Result r =
      run({"cc-bench", "allg", "--ranks", "2", "--instance", "trn1.32xlarge", "--minbytes", "1G",
           "--maxbytes", "1G", "--timing-only", "--placement", "one-per-chip"});
  ASSERT_EQ(r.code(), 0) << r.describe();
  const std::vector<Row> rows = parse_table(r.out);
  ASSERT_EQ(rows.size(), 1u) << r.describe();
  EXPECT_GT(rows[0].busbw, 90.0) << r.describe();
  EXPECT_LE(rows[0].busbw, 96.0) << r.describe();
  expect_error({"--instance", "inf2.48xlarge", "--ranks", "13", "--placement", "one-per-chip"},
               "no EFA figure");
  expect_error({"--placement", "scattered"}, "--placement 'scattered'");
}

// --runtime-release: the runtime release whose fixed cost per collective and algorithms apply
// (spec/configs/runtime-releases.json), the newest by default, none for the fabric model alone.
TEST_F(CcBenchCli, RuntimeReleaseSetsTheFloorAndTheAlgorithms) {
  const std::vector<std::string> cmd{
      "cc-bench", "allr", "-r", "2",  "--instance",    "trn1.32xlarge",
      "-b",       "1K",   "-e", "1K", "--timing-only", "--show-algorithm"};
  const Result newest = run(cmd);
  ASSERT_EQ(newest.code(), 0) << newest.describe();
  EXPECT_THAT(newest.out, HasSubstr(", runtime release 2.")) << newest.describe();
  auto with = [&](const std::string& release) {
    std::vector<std::string> args = cmd;
    args.insert(args.end(), {"--runtime-release", release});
    return run(args);
  };
  // Release 2.10: ring only inside a host, and the floor of its nccom-test example (58 us).
  const Result old = with("2.10");
  ASSERT_EQ(old.code(), 0) << old.describe();
  EXPECT_THAT(old.out, HasSubstr("runtime release 2.10")) << old.describe();
  EXPECT_THAT(old.out, HasSubstr("mesh below 0 B, rdh below 0 B")) << old.describe();
  std::vector<Row> rows = parse_table(old.out);
  ASSERT_EQ(rows.size(), 1u) << old.describe();
  EXPECT_EQ(rows[0].algo, "ring");
  EXPECT_NEAR(rows[0].time_us, 58, 58 * 0.05) << old.describe();
  // none: the fabric model alone, two hops of 1.5 us by mesh.
  const Result bare = with("none");
  ASSERT_EQ(bare.code(), 0) << bare.describe();
  rows = parse_table(bare.out);
  ASSERT_EQ(rows.size(), 1u) << bare.describe();
  EXPECT_EQ(rows[0].algo, "mesh");
  EXPECT_LT(rows[0].time_us, 4) << bare.describe();
  // The newest release's floor lies between.
  rows = parse_table(newest.out);
  ASSERT_EQ(rows.size(), 1u) << newest.describe();
  EXPECT_LT(rows[0].time_us, 58);
  expect_error({"--runtime-release", "1.0"}, "unknown runtime release '1.0' (known: 2.10, 2.24");
}

TEST_F(CcBenchCli, MetricsJsonHasOneRecordPerSize) {
  const fs::path metrics = tmp_ / "metrics.json";
  const Result r = run({"cc-bench", "--ranks", "8", "--minbytes", "1K", "--maxbytes", "1M",
                        "--stepfactor", "4", "--timing-only", "--metrics", metrics.string()});
  ASSERT_EQ(r.code(), 0) << r.describe();
  json d;
  ASSERT_NO_THROW(d = json::parse(slurp(metrics))) << slurp(metrics);
  ASSERT_TRUE(d["metrics"].is_array());
  const json& results = d["details"]["results"];
  ASSERT_EQ(results.size(), 6u) << d.dump(2);  // 1K 4K 16K 64K 256K 1M
  EXPECT_EQ(d["metrics"].size(), 3 * results.size());
  for (const json& m : d["metrics"]) {
    EXPECT_TRUE(m["name"].is_string());
    EXPECT_TRUE(m["unit"].is_string());
    EXPECT_TRUE(m["value"].is_number());
  }
  uint64_t size = 1024;
  for (const json& rec : results) {
    EXPECT_EQ(rec["size_bytes"], size);
    EXPECT_GT(rec["time_us"].get<double>(), 0.0);
    EXPECT_NEAR(rec["busbw_gib_per_s"].get<double>(),
                2.0 * 7 / 8 * rec["algbw_gib_per_s"].get<double>(), 1e-9);
    size *= 4;
  }
  EXPECT_EQ(d["metrics"][0]["name"], "cc_bench/all_reduce/1024B/time_us");

  // --metrics-prefix names the figures for a history (bench/suite.json).
  const Result named = run({"cc-bench", "allr", "-r", "2", "-b", "1K", "-e", "1K", "--timing-only",
                            "--metrics", metrics.string(), "--metrics-prefix", "trn2/cc/ar2"});
  ASSERT_EQ(named.code(), 0) << named.describe();
  const json n = json::parse(slurp(metrics));
  ASSERT_EQ(n["metrics"].size(), 3u);
  EXPECT_EQ(n["metrics"][2]["name"], "trn2/cc/ar2/1024B/busbw");
}

TEST_F(CcBenchCli, BadInputsExitOneWithAMessage) {
  expect_error({"--op", "all-shuffle"}, "operation 'all-shuffle': unknown");
  expect_error({"--dtype", "fp64"}, "--dtype 'fp64': unknown data type");
  expect_error({"--algorithm", "tree"}, "--algorithm 'tree': unknown algorithm");
  expect_error({"--reduce-op", "xor"}, "--reduce-op 'xor': unknown reduction");
  expect_error({"--instance", "trn9.huge"}, "trn9.huge");
  expect_error({"--instance", "inf2.48xlarge", "--ranks", "48"}, "inf2.48xlarge has no EFA figure");
  expect_error({"--minbytes", "1M", "--maxbytes", "1K"},
               "--minbytes 1M is larger than --maxbytes 1K");
  expect_error({"--stepfactor", "1"}, "--stepfactor 1: must be at least 2");
  expect_error({"--minbytes", "12Q"}, "--minbytes '12Q': expected a size");
  expect_error({"--ranks", "6", "--algorithm", "rdh"}, "rdh needs a power-of-two rank count");
  expect_error({"--op", "all-to-all", "--algorithm", "ring"}, "--algorithm ring is not available");
  expect_error({"--check", "--timing-only"}, "cannot be combined with --timing-only");
  expect_error({"--processes", "--rank", "0"}, "cannot be combined with --rank");
  expect_error({"--ranks", "4", "--rank", "4"}, "--rank 4: must be a rank of the job, 0 to 3");
  expect_error({"--timeout", "0"}, "--timeout 0: must be a positive number of seconds");
  expect_error({"--instance", "trn2.48xlarge", "--lnc", "3"},
               "--lnc 3: logical cores of 3 physical cores (LNC=3) do not divide");
}

// The table of a job across processes is the in-process table, row for row: the same data
// (checked on every rank) and the same simulated times.
TEST_F(CcBenchCli, ProcessesGiveTheInProcessTable) {
  for (const char* ranks : {"2", "4"})
    for (const char* op :
         {"all-reduce", "all-gather", "reduce-scatter", "all-to-all", "broadcast", "send-recv"})
      for (const char* dtype : {"bf16", "int8"}) {
        SCOPED_TRACE(std::string(op) + " " + dtype + " on " + ranks + " ranks");
        const std::vector<std::string> args{"cc-bench",
                                            "--op",
                                            op,
                                            "--ranks",
                                            ranks,
                                            "--dtype",
                                            dtype,
                                            "--instance",
                                            "trn1.32xlarge",
                                            "--minbytes",
                                            "256",
                                            "--maxbytes",
                                            "64K",
                                            "--stepfactor",
                                            "16",
                                            "--check",
                                            "--show-algorithm"};
        const Result one = run(args);
        std::vector<std::string> multi = args;
        multi.push_back("--processes");
        const Result many = run(multi);
        ASSERT_EQ(one.code(), 0) << one.describe();
        ASSERT_EQ(many.code(), 0) << many.describe();
        EXPECT_THAT(many.out, HasSubstr("one process per rank"));
        const auto a = parse_table(one.out), b = parse_table(many.out);
        ASSERT_EQ(a.size(), 3u) << one.describe();
        ASSERT_EQ(b.size(), a.size()) << many.describe();
        for (size_t i = 0; i < a.size(); ++i) {
          EXPECT_EQ(b[i].bytes, a[i].bytes);
          EXPECT_EQ(b[i].algo, a[i].algo);
          EXPECT_EQ(b[i].time_us, a[i].time_us);
          EXPECT_EQ(b[i].wrong, 0);
        }
      }
}

TEST_F(CcBenchCli, ProcessesReportAWrongValueOfAnyRank) {
  ::setenv("NEURONSIM_CC_BENCH_CORRUPT", "1", 1);
  const Result r = run({"cc-bench", "--ranks", "4", "--instance", "trn1.32xlarge", "--minbytes",
                        "1K", "--maxbytes", "4K", "--check", "--processes"});
  ::unsetenv("NEURONSIM_CC_BENCH_CORRUPT");
  EXPECT_EQ(r.code(), 1) << r.describe();
  for (const Row& row : parse_table(r.out))
    EXPECT_EQ(row.wrong, 1);  // rank 3's flipped bit, counted by rank 0
  EXPECT_THAT(r.err, HasSubstr("rank 3 exited with status 1")) << r.describe();
}

// The automatic choice follows the generation config's thresholds unless overridden.
TEST_F(CcBenchCli, ThresholdsComeFromTheConfigAndCanBeOverridden) {
  const std::vector<std::string> base{"cc-bench",
                                      "--ranks",
                                      "8",
                                      "--instance",
                                      "trn1.32xlarge",
                                      "--minbytes",
                                      "64K",
                                      "--maxbytes",
                                      "64M",
                                      "--stepfactor",
                                      "32",
                                      "--timing-only",
                                      "--show-algorithm"};
  const Result dflt = run(base);
  ASSERT_EQ(dflt.code(), 0) << dflt.describe();
  EXPECT_THAT(dflt.out, HasSubstr("auto (mesh below 1000000 B, rdh below 56000000 B)"));
  std::vector<std::string> algos;
  for (const Row& r : parse_table(dflt.out)) algos.push_back(r.algo);
  EXPECT_EQ(algos, (std::vector<std::string>{"mesh", "rdh", "ring"}));
  std::vector<std::string> over = base;
  over.insert(over.end(), {"--mesh-below", "0", "--rdh-below", "0"});
  const Result ring = run(over);
  ASSERT_EQ(ring.code(), 0) << ring.describe();
  for (const Row& r : parse_table(ring.out)) EXPECT_EQ(r.algo, "ring");
  expect_error({"--mesh-below", "2M", "--rdh-below", "1M"},
               "--rdh-below 1048576 is below --mesh-below 2097152");
}

TEST_F(CcBenchCli, RanksBeyondOneInstanceCrossEfa) {
  const Result one = run({"cc-bench", "--ranks", "32", "--instance", "trn1.32xlarge", "--minbytes",
                          "64M", "--maxbytes", "64M", "--algorithm", "ring", "--timing-only"});
  const Result two = run({"cc-bench", "--ranks", "64", "--instance", "trn1.32xlarge", "--minbytes",
                          "64M", "--maxbytes", "64M", "--algorithm", "ring", "--timing-only"});
  ASSERT_EQ(one.code(), 0) << one.describe();
  ASSERT_EQ(two.code(), 0) << two.describe();
  EXPECT_THAT(two.out, HasSubstr("64 ranks of 2 x trn1.32xlarge"));
  EXPECT_THAT(two.out, HasSubstr("joined by EFA"));
  ASSERT_EQ(parse_table(one.out).size(), 1u);
  ASSERT_EQ(parse_table(two.out).size(), 1u);
  EXPECT_LT(parse_table(two.out)[0].busbw,
            parse_table(one.out)[0].busbw / 5);  // 50 Gbps per chip vs NeuronLink
}

TEST_F(CcBenchCli, TimingOnlyAcrossProcesses) {
  const Result r =
      run({"cc-bench", "--ranks", "4", "--instance", "trn2.48xlarge", "--minbytes", "1M",
           "--maxbytes", "1G", "--stepfactor", "32", "--timing-only", "--processes"});
  ASSERT_EQ(r.code(), 0) << r.describe();
  EXPECT_EQ(parse_table(r.out).size(), 3u) << r.describe();
}

// Ranks started by hand, as on several machines: the address and the token come from the
// environment; rank 1 is a separate command.
TEST_F(CcBenchCli, RanksStartedByHand) {
  const std::vector<std::string> common{
      "cc-bench", "--ranks",    "2",  "--instance", "trn1.32xlarge", "--minbytes",
      "1K",       "--maxbytes", "8K", "--check",    "--timeout",     "20"};
  // A port that is free now.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  ::close(fd);
  ::setenv("NEURON_RT_ROOT_COMM_ID", fmt::format("127.0.0.1:{}", ntohs(addr.sin_port)).c_str(), 1);
  ::setenv("NEURONSIM_JOB_TOKEN", "by hand", 1);
  Result r0, r1;
  std::thread other([&] {
    std::vector<std::string> a = common;
    a.insert(a.end(), {"--rank", "1"});
    r1 = test::run_binary(binary_, a, tmp_ / "out1", tmp_ / "err1", std::chrono::seconds(60));
  });
  std::vector<std::string> a = common;
  a.insert(a.end(), {"--rank", "0"});
  r0 = test::run_binary(binary_, a, tmp_ / "out0", tmp_ / "err0", std::chrono::seconds(60));
  other.join();
  ::unsetenv("NEURON_RT_ROOT_COMM_ID");
  ::unsetenv("NEURONSIM_JOB_TOKEN");
  EXPECT_EQ(r0.code(), 0) << r0.describe();
  EXPECT_EQ(r1.code(), 0) << r1.describe();
  EXPECT_EQ(parse_table(r0.out).size(), 4u) << r0.describe();
  EXPECT_TRUE(parse_table(r1.out).empty()) << "only rank 0 prints the table\n" << r1.describe();
}

TEST_F(CcBenchCli, RankAloneGivesUpAfterTheTimeout) {
  ::setenv("NEURON_RT_ROOT_COMM_ID", "127.0.0.1:1", 1);  // nobody listens there
  ::setenv("NEURONSIM_JOB_TOKEN", "alone", 1);
  const auto t0 = std::chrono::steady_clock::now();
  const Result r = run({"cc-bench", "--ranks", "2", "--rank", "1", "--timeout", "1"});
  const auto took = std::chrono::steady_clock::now() - t0;
  ::unsetenv("NEURON_RT_ROOT_COMM_ID");
  ::unsetenv("NEURONSIM_JOB_TOKEN");
  EXPECT_EQ(r.code(), 1) << r.describe();
  EXPECT_THAT(r.err, HasSubstr("could not reach rank 0 at 127.0.0.1:1")) << r.describe();
  EXPECT_LT(took, std::chrono::seconds(5));
}

TEST_F(CcBenchCli, RankNeedsTheJobEnvironment) {
  ::unsetenv("NEURON_RT_ROOT_COMM_ID");
  expect_error({"--rank", "0"}, "NEURON_RT_ROOT_COMM_ID is not set");
  ::setenv("NEURON_RT_ROOT_COMM_ID", "127.0.0.1:5000", 1);
  ::unsetenv("NEURONSIM_JOB_TOKEN");
  ::unsetenv("TORCHELASTIC_RUN_ID");
  expect_error({"--rank", "0"}, "NEURONSIM_JOB_TOKEN is not set");
  ::unsetenv("NEURON_RT_ROOT_COMM_ID");
}

}  // namespace
}  // namespace neuronsim::tools
