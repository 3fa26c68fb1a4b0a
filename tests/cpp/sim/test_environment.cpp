// The runtime's switches sim::read_environment reads for every entrance (libnrt, PyTorch).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "neuronsim/sim/environment.h"

namespace neuronsim::sim {
namespace {

// Sets one variable for a test's length and restores what was there.
class Variable {
 public:
  Variable(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~Variable() {
    if (old_.empty())
      unsetenv(name_);
    else
      setenv(name_, old_.c_str(), 1);
  }

 private:
  const char* name_;
  std::string old_;
};

TEST(Environment, TheHostDispatchesAndRunsAheadByDefault) {
  Environment e;
  ASSERT_EQ(read_environment(e), std::nullopt);
  EXPECT_TRUE(e.launch);
  EXPECT_TRUE(e.host_dispatch);
  EXPECT_FALSE(e.launch_blocking);
}

TEST(Environment, TheHostSwitchesAreRead) {
  Variable dispatch("NEURONSIM_HOST_DISPATCH", "0");
  Variable blocking("NEURON_LAUNCH_BLOCKING", "1");
  Environment e;
  ASSERT_EQ(read_environment(e), std::nullopt);
  EXPECT_FALSE(e.host_dispatch);
  EXPECT_TRUE(e.launch_blocking);
}

TEST(Environment, ABadSwitchIsNamedWithItsValue) {
  Variable blocking("NEURON_LAUNCH_BLOCKING", "sometimes");
  Environment e;
  const auto error = read_environment(e);
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(*error, "NEURON_LAUNCH_BLOCKING='sometimes' is not 0 or 1");
}

TEST(Environment, ModesAreNamedAndReadWithOneSpelling) {
  for (Mode m : {Mode::functional_and_timing, Mode::functional_only, Mode::timing_only})
    EXPECT_EQ(parse_mode(mode_name(m)), m);
  EXPECT_EQ(mode_name(Mode::functional_only), "functional-only");
  EXPECT_EQ(parse_mode("TIMING-ONLY"), Mode::timing_only);
  EXPECT_EQ(parse_mode("default"), Mode::functional_and_timing);
  EXPECT_EQ(parse_mode("timing_only"), std::nullopt);

  Variable mode("NEURONSIM_MODE", "Functional-Only");
  Environment e;
  ASSERT_EQ(read_environment(e), std::nullopt);
  EXPECT_EQ(e.mode, Mode::functional_only);
}

TEST(Environment, AnUnknownModeIsNamed) {
  Variable mode("NEURONSIM_MODE", "fast");
  Environment e;
  const auto error = read_environment(e);
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(*error,
            "NEURONSIM_MODE='fast' is not functional-and-timing, functional-only or timing-only");
}

}  // namespace
}  // namespace neuronsim::sim
