#include <sstream>

#include <gtest/gtest.h>

#include "neuronsim/traces/summary.h"
#include "sample_run.h"

namespace neuronsim::traces {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// The line of a section (after `header`) that starts with `label`.
std::string row(const std::string& text, const std::string& header, const std::string& label) {
  bool in_section = false;
  for (const std::string& line : lines_of(text)) {
    if (line.rfind(header, 0) == 0)
      in_section = true;
    else if (in_section && line.empty())
      break;
    else if (in_section && line.rfind("  " + label, 0) == 0)
      return line;
  }
  return "";
}

TEST(SummaryTable, MentionsTheRunTotalTimeAndEveryCore) {
  const auto s = make_sample_run();
  const std::string text = summary_table(s->result);
  EXPECT_NE(text.find("trn2.3xlarge"), std::string::npos) << text;
  EXPECT_NE(text.find("2 NeuronCores, total simulated time 10.000 µs"), std::string::npos) << text;
  EXPECT_NE(text.find("NeuronCore 2 (finished at 6.416 µs)"), std::string::npos) << text;
  EXPECT_NE(text.find("NeuronCore 5 (finished at 3.000 µs)"), std::string::npos) << text;
  EXPECT_NE(text.find("All cores (11 instructions)"), std::string::npos) << text;
  EXPECT_EQ(text.back(), '\n');
}

TEST(SummaryTable, EngineRowsGiveBusyTimeUtilisationAndCountsInAlignedColumns) {
  const auto s = make_sample_run();
  const std::string text = summary_table(s->result);
  for (const char* engine :
       {"Tensor (PE)", "Vector (DVE)", "Scalar (ACT)", "GpSimd (Pool)", "Sync (SP)"}) {
    EXPECT_FALSE(row(text, "NeuronCore 2", engine).empty()) << engine << "\n" << text;
    EXPECT_FALSE(row(text, "NeuronCore 5", engine).empty()) << engine << "\n" << text;
    EXPECT_FALSE(row(text, "All cores", engine).empty()) << engine << "\n" << text;
  }
  // Core 2 Tensor: 0.5 us busy of 10 us = 5.0 %, 1 instruction.
  const std::string pe = row(text, "NeuronCore 2", "Tensor (PE)");
  EXPECT_NE(pe.find(" 0.500 "), std::string::npos) << pe;
  EXPECT_NE(pe.find(" 5.0 "), std::string::npos) << pe;
  // All cores Vector: 2.7 us of 2 x 10 us = 13.5 %, 4 instructions.
  const std::string dve = row(text, "All cores", "Vector (DVE)");
  EXPECT_NE(dve.find(" 2.700 "), std::string::npos) << dve;
  EXPECT_NE(dve.find(" 13.5 "), std::string::npos) << dve;
  EXPECT_EQ(dve.back(), '4') << dve;
  // Columns line up: every engine row and the header have the same length.
  const std::string header = row(text, "NeuronCore 2", "engine");
  ASSERT_FALSE(header.empty());
  for (const char* engine : {"Tensor (PE)", "Vector (DVE)", "GpSimd (Pool)", "Sync (SP)"})
    EXPECT_EQ(row(text, "NeuronCore 2", engine).size(), header.size() - (sizeof("µ") - 2))
        << engine;
}

TEST(SummaryTable, GivesDmaTrafficHbmBandwidthFlopsAndMfu) {
  const auto s = make_sample_run();
  const std::string text = summary_table(s->result);
  const std::string dma = row(text, "All cores", "DMA");
  EXPECT_NE(dma.find("106,496 bytes in 6 transfers"), std::string::npos) << dma;
  const std::string hbm = row(text, "All cores", "HBM");
  EXPECT_NE(hbm.find("read 73,728 B, write 32,768 B"), std::string::npos) << hbm;
  EXPECT_NE(hbm.find("10.65 GB/s"), std::string::npos) << hbm;
  EXPECT_NE(hbm.find("(0.37 % of the chip's 2900 GB/s)"), std::string::npos) << hbm;
  const std::string flops = row(text, "All cores", "FLOPs");
  EXPECT_NE(flops.find("17,039,360 (matmul 16,777,216), MFU 0.84 %"), std::string::npos) << flops;
  EXPECT_NE(row(text, "NeuronCore 2", "FLOPs").find("MFU 1.68 %"), std::string::npos) << text;
  EXPECT_NE(row(text, "NeuronCore 5", "DMA").find("8,192 bytes in 1 transfers"), std::string::npos)
      << text;
}

}  // namespace

TEST(SummaryTable, OneCoreHasNoSeparateTotal) {
  auto s = make_sample_run();
  s->result.cores.resize(1);
  s->result.core_ids.resize(1);
  const std::string text = summary_table(s->result);
  EXPECT_NE(text.find("NeuronCore 2"), std::string::npos) << text;
  EXPECT_EQ(text.find("All cores"), std::string::npos) << text;
}

}  // namespace neuronsim::traces
