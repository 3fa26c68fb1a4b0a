// docs/isa.md must keep up with the opcode table: every opcode has a section that names
// its engines, operand roles and parameter keywords, every ALU operation, activation
// function, role and dtype is listed with its code, and every example assembles.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "neuronsim/isa/assembler.h"
#include "neuronsim/isa/dtype.h"
#include "neuronsim/isa/error.h"
#include "neuronsim/isa/instruction.h"
#include "test_support.h"

namespace neuronsim::isa {
namespace {

const std::string& docs() {
  static const std::string text = test::read_file(test::source_dir() / "docs/isa.md");
  return text;
}

std::string quoted(std::string_view name) {
  return fmt::format("`{}`", name);
}

// The body of the "### `name`" section, up to the next heading; empty when there is none.
std::string section(std::string_view name) {
  const std::string& doc = docs();
  const std::string heading = "\n### " + quoted(name) + "\n";
  const size_t at = doc.find(heading);
  if (at == std::string::npos) return {};
  const size_t start = at + heading.size();
  const size_t end = std::min(doc.find("\n### ", start), doc.find("\n## ", start));
  return doc.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

// The names in backquotes in `text`.
std::set<std::string> quoted_names(std::string_view text) {
  std::set<std::string> out;
  size_t at = 0;
  while ((at = text.find('`', at)) != std::string_view::npos) {
    const size_t end = text.find('`', at + 1);
    if (end == std::string_view::npos) break;
    out.emplace(text.substr(at + 1, end - at - 1));
    at = end + 1;
  }
  return out;
}

// Lines inside ```asm fences.
std::vector<std::string> asm_examples(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    if (line.starts_with("```")) {
      inside = !inside && line == "```asm";
      continue;
    }
    if (inside && !line.empty()) out.push_back(line);
  }
  return out;
}

// The directives of tests/data/every_opcode.s, which the examples are written against.
std::string example_preamble() {
  std::istringstream in(test::read_file(test::source_dir() / "tests/data/every_opcode.s"));
  std::string line, out;
  while (std::getline(in, line))
    if (line.starts_with(".")) out += line + "\n";
  return out;
}

TEST(IsaDocs, Exists) {
  ASSERT_GT(docs().size(), 1000u) << "docs/isa.md is missing or empty";
}

TEST(IsaDocs, EveryOpcodeHasASectionWithItsEnginesRolesAndParameters) {
  ASSERT_EQ(all_opcodes().size(), static_cast<size_t>(kNumOpcodes));
  for (const OpcodeInfo& info : all_opcodes()) {
    SCOPED_TRACE(std::string(info.name));
    const std::string body = section(info.name);
    ASSERT_FALSE(body.empty()) << "no section '### `" << info.name << "`'";

    // "Engines: `a`, `b`. Opcode N." names exactly the table's engines and the opcode's code.
    const size_t line_at = body.find("Engines: ");
    ASSERT_NE(line_at, std::string::npos) << "no 'Engines:' line";
    const std::string line = body.substr(line_at, body.find('\n', line_at) - line_at);
    const size_t code_at = line.find(". Opcode ");
    ASSERT_NE(code_at, std::string::npos) << line;
    std::set<std::string> expected;
    for (Engine e : info.engines) expected.emplace(engine_name(e));
    EXPECT_EQ(quoted_names(line.substr(0, code_at)), expected) << line;
    EXPECT_EQ(std::stoi(line.substr(code_at + 9)), static_cast<int>(info.opcode)) << line;

    for (const RoleInfo& r : info.roles)
      EXPECT_NE(body.find(quoted(role_name(r.role))), std::string::npos)
          << "operand " << role_name(r.role) << " is not documented";
    for (const ParamInfo& p : info.params)
      EXPECT_NE(body.find(quoted(p.name)), std::string::npos)
          << "parameter " << p.name << " is not documented";
  }
}

TEST(IsaDocs, EveryOpcodeHasAnExampleThatAssembles) {
  const std::string preamble = example_preamble();
  for (const OpcodeInfo& info : all_opcodes()) {
    SCOPED_TRACE(std::string(info.name));
    const auto examples = asm_examples(section(info.name));
    EXPECT_FALSE(examples.empty()) << "no ```asm example";
    for (const std::string& line : examples) {
      try {
        const Program p = assemble(preamble + line + "\n", "docs/isa.md");
        ASSERT_EQ(p.num_instructions(), 1u) << line;
        for (const auto& stream : p.streams)
          if (!stream.empty()) {
            EXPECT_EQ(stream[0].opcode, info.opcode) << line;
          }
      } catch (const AsmError& e) {
        ADD_FAILURE() << e.what() << "\n  " << line;
      }
    }
  }
}

TEST(IsaDocs, EveryAluOpIsListedWithItsCode) {
  for (int i = 0; i < kNumAluOps; ++i) {
    const std::string_view name = alu_op_name(static_cast<AluOp>(i));
    EXPECT_NE(docs().find("| " + std::to_string(i) + " | " + quoted(name) + " |"),
              std::string::npos)
        << "ALU operation " << name;
  }
}

TEST(IsaDocs, EveryActivationFunctionIsListedWithItsCode) {
  for (int i = 0; i < kNumActFuncs; ++i) {
    const std::string_view name = act_func_name(static_cast<ActFunc>(i));
    EXPECT_NE(docs().find("| " + std::to_string(i) + " | " + quoted(name) + " |"),
              std::string::npos)
        << "activation function " << name;
  }
}

TEST(IsaDocs, EveryRoleIsListedWithItsCode) {
  for (int i = 0; i < kNumRoles; ++i) {
    const std::string_view name = role_name(static_cast<Role>(i));
    EXPECT_NE(docs().find(std::to_string(i) + " " + quoted(name)), std::string::npos)
        << "role " << name;
  }
}

TEST(IsaDocs, EveryEngineIsListedWithItsCode) {
  for (int i = 0; i < kNumEngines; ++i) {
    const auto e = static_cast<Engine>(i);
    EXPECT_NE(docs().find(std::to_string(i) + " " + quoted(engine_name(e))), std::string::npos)
        << "engine " << engine_name(e);
    EXPECT_NE(docs().find(quoted(engine_neff_name(e))), std::string::npos)
        << "engine " << engine_neff_name(e);
  }
}

TEST(IsaDocs, EveryDTypeIsListedWithItsCodeAndSize) {
  for (int i = 0; i < kNumDTypes; ++i) {
    const auto t = static_cast<DType>(i);
    const std::string row = "| " + std::to_string(i) + " | " + std::to_string(dtype_size(t)) +
                            " | " + quoted(dtype_name(t)) + " |";
    EXPECT_NE(docs().find(row), std::string::npos) << "dtype row " << row;
  }
}

}  // namespace
}  // namespace neuronsim::isa
