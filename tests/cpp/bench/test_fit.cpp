// Fitting free figures on a calibration set (tools/bench/fit.h): the figure's name, the edit of
// a configuration that keeps the rest of its text, and the search with its band.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fit.h"

namespace neuronsim::bench {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string error_of(const std::string& text) {
  try {
    parse_free_figure(text);
  } catch (const CorrelationError& e) {
    return e.what();
  }
  return "no error";
}

TEST(Fit, ParsesAFreeFigure) {
  const FreeFigure f = parse_free_figure("trn1.json#/dma_core_bytes_per_ns=50..272.5");
  EXPECT_EQ(f.file, "trn1.json");
  EXPECT_EQ(f.pointer, "/dma_core_bytes_per_ns");
  EXPECT_EQ(f.lo, 50);
  EXPECT_EQ(f.hi, 272.5);
  EXPECT_EQ(f.name(), "trn1.json#/dma_core_bytes_per_ns");
}

TEST(Fit, RefusesAMalformedFreeFigure) {
  EXPECT_THAT(error_of("trn1.json/dma=1..2"), HasSubstr("not of that form"));
  EXPECT_THAT(error_of("trn1.json#dma=1..2"), HasSubstr("no file or pointer"));
  EXPECT_THAT(error_of("trn1.json#/dma=a..2"), HasSubstr("not two numbers"));
  EXPECT_THAT(error_of("trn1.json#/dma=3..2"), HasSubstr("0 < LO < HI"));
  EXPECT_THAT(error_of("trn1.json#/dma=0..2"), HasSubstr("0 < LO < HI"));
}

constexpr const char* kConfig = R"({
  "name": "g",
  "clocks": {
    "pe": {"value": 2.8, "source": "a, with \"quotes\" and {braces}"},
    "act": {"value": 1.4, "source": "b"}
  },
  "releases": {"2.10": {"fixed_ns": {"value": 58000, "source": "c"}, "n": 1}},
  "dma_fixed_ns": {"value": 0, "source": "d"}
}
)";

TEST(Fit, ReplacesOneFigureAndKeepsTheRestOfTheText) {
  const std::string out = replace_figure(kConfig, "/clocks/act", 1.25, "fitted on x.csv", "g.json");
  const nlohmann::json doc = nlohmann::json::parse(out);
  EXPECT_EQ(doc["clocks"]["act"]["value"], 1.25);
  EXPECT_EQ(doc["clocks"]["act"]["source"], "fitted on x.csv");
  EXPECT_EQ(doc["clocks"]["pe"]["source"], "a, with \"quotes\" and {braces}");
  // Only the figure's own text changed.
  std::string expected = kConfig;
  const std::string old = R"({"value": 1.4, "source": "b"})";
  expected.replace(expected.find(old), old.size(),
                   R"({"value": 1.25, "source": "fitted on x.csv"})");
  EXPECT_EQ(out, expected);
  // Nested, with a key that holds a dot.
  const nlohmann::json nested =
      nlohmann::json::parse(replace_figure(kConfig, "/releases/2.10/fixed_ns", 6000, "s", "g"));
  EXPECT_EQ(nested["releases"]["2.10"]["fixed_ns"]["value"], 6000);
  EXPECT_EQ(nested["releases"]["2.10"]["n"], 1);
  EXPECT_EQ(nested["dma_fixed_ns"]["value"], 0);
}

TEST(Fit, RefusesAFigureThatIsNotThere) {
  EXPECT_THROW(replace_figure(kConfig, "/clocks/dve", 1, "s", "g.json"), CorrelationError);
  EXPECT_THROW(replace_figure(kConfig, "/name", 1, "s", "g.json"), CorrelationError);
  try {
    replace_figure(kConfig, "/nowhere/x", 1, "s", "g.json");
    FAIL();
  } catch (const CorrelationError& e) {
    EXPECT_THAT(e.what(), HasSubstr("g.json: /nowhere/x"));
  }
}

TEST(Fit, WritesConfigurationsWithTheFiguresSet) {
  const fs::path dir = fs::temp_directory_path() / ("neuronsim_fit_" + std::to_string(::getpid()));
  fs::create_directories(dir / "in");
  std::ofstream(dir / "in" / "g.json") << kConfig;
  std::ofstream(dir / "in" / "other.json") << R"({"x": 1})";
  const std::vector<FreeFigure> figures = {parse_free_figure("g.json#/clocks/pe=1..4")};
  EXPECT_EQ(figure_value(dir / "in", figures[0]), 2.8);
  write_configs(dir / "in", dir / "out", figures, {3.5});
  EXPECT_EQ(figure_value(dir / "out", figures[0]), 3.5);
  EXPECT_EQ(figure_value(dir / "in", figures[0]), 2.8);  // the source folder is untouched
  EXPECT_TRUE(fs::exists(dir / "out" / "other.json"));
  EXPECT_THROW(figure_value(dir / "in", parse_free_figure("g.json#/name=1..2")), CorrelationError);
  EXPECT_THROW(write_configs(dir / "in", dir / "x", {parse_free_figure("no.json#/a=1..2")}, {1}),
               CorrelationError);
  fs::remove_all(dir);
}

// Cases whose simulated time is measured * (v / truth) for the figure's value v.
std::vector<CaseResult> cases_at(double v, double truth) {
  std::vector<CaseResult> out;
  for (double measured : {1e3, 5e4, 2e6}) {
    CaseResult r;
    r.c.measured_ns = measured;
    r.simulated_ns = measured * v / truth;
    out.push_back(r);
  }
  return out;
}

TEST(Fit, FindsTheValueThatFitsAndItsBand) {
  const std::vector<FreeFigure> figures = {parse_free_figure("g.json#/a=1..1000")};
  size_t calls = 0;
  const FitResult r = fit_figures(figures, {10}, [&](const std::vector<double>& v) {
    ++calls;
    return cases_at(v[0], 37);
  });
  EXPECT_NEAR(r.after[0], 37, 0.4);
  EXPECT_NEAR(r.mape_before, 100 * (37 - 10) / 37.0, 1e-9);
  EXPECT_LT(r.mape_after, 1);
  // MAPE = |v/37 - 1|: within 2 points of the best for about 37 * (1 -/+ 0.02).
  EXPECT_NEAR(r.bands[0].first, 37 * 0.98, 0.5);
  EXPECT_NEAR(r.bands[0].second, 37 * 1.02, 0.5);
  EXPECT_LT(r.evaluations, 40u);
  EXPECT_GE(calls, r.evaluations);
}

TEST(Fit, FitsSeveralFiguresCoordinateByCoordinate) {
  const std::vector<FreeFigure> figures = {parse_free_figure("g.json#/a=1..100"),
                                           parse_free_figure("g.json#/b=1..100")};
  // The time is a + b per case: the first case pins a, the second b.
  const FitResult r = fit_figures(figures, {50, 50}, [](const std::vector<double>& v) {
    CaseResult x, y;
    x.c.measured_ns = 3, x.simulated_ns = v[0];
    y.c.measured_ns = 20, y.simulated_ns = v[1];
    return std::vector<CaseResult>{x, y};
  });
  EXPECT_NEAR(r.after[0], 3, 0.05);
  EXPECT_NEAR(r.after[1], 20, 0.3);
  EXPECT_LT(r.mape_after, 1.5);
}

}  // namespace
}  // namespace neuronsim::bench
