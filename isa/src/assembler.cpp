#include "neuronsim/isa/assembler.h"

#include <bit>
#include <cctype>
#include <charconv>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "neuronsim/isa/error.h"
#include "neuronsim/isa/validate.h"

namespace neuronsim::isa {
namespace {

// Short dtype spellings used in operands; parse_dtype accepts these and the long names.
constexpr std::array<std::string_view, kNumDTypes> kShortDType = {
    "fp32", "bf16", "fp16", "tf32", "fp8e4", "fp8e5", "i8",
    "u8",   "i16",  "u16",  "i32",  "u32",   "bool"};

std::string_view short_dtype(DType t) {
  return kShortDType[static_cast<size_t>(t)];
}

// ---------------------------------------------------------------------------------------------
// Formatting

std::string format_float(float v) {
  return fmt::format("{}", v);
}

std::string format_tensor_ref(uint16_t id, const Program* program) {
  if (program)
    if (const TensorDecl* t = program->find_tensor(id)) return t->name;
  return fmt::format("{}", id);
}

std::string format_dims(const AccessPattern& ap, bool rows_first) {
  std::vector<std::string> pairs;
  if (rows_first) pairs.push_back(fmt::format("[{},{}]", ap.partition_stride, ap.num_partitions));
  for (const Dim& d : ap.free_dims()) pairs.push_back(fmt::format("[{},{}]", d.stride, d.size));
  return fmt::format("[{}]", fmt::join(pairs, ","));
}

std::string format_param(const Instruction& in, const ParamInfo& p) {
  switch (p.field) {
    case ParamField::func:
      return std::string(act_func_name(in.func));
    case ParamField::alu0:
      return std::string(alu_op_name(in.alu0));
    case ParamField::alu1:
      return std::string(alu_op_name(in.alu1));
    case ParamField::alu2:
      return std::string(alu_op_name(in.alu2));
    case ParamField::axes:
      return fmt::format("{:#x}", in.axes);
    case ParamField::imm0:
      return format_float(in.imm0);
    case ParamField::imm1:
      return format_float(in.imm1);
    case ParamField::flag:
      return in.has_flag(static_cast<Flag>(p.flag)) ? "true" : "false";
    case ParamField::mask: {
      size_t n = in.mask.size();
      while (n > 0 && in.mask[n - 1] == 0) --n;
      return fmt::format("[{}]",
                         fmt::join(in.mask.begin(), in.mask.begin() + static_cast<long>(n), ","));
    }
    default:
      return fmt::format(
          "{}", in.ints[static_cast<size_t>(p.field) - static_cast<size_t>(ParamField::int0)]);
  }
}

bool param_is_default(const Instruction& in, const ParamInfo& p) {
  const Instruction d;
  switch (p.field) {
    case ParamField::func:
      return in.func == d.func;
    case ParamField::alu0:
      return in.alu0 == d.alu0;
    case ParamField::alu1:
      return in.alu1 == d.alu1;
    case ParamField::alu2:
      return in.alu2 == d.alu2;
    case ParamField::axes:
      return in.axes == 0;
    case ParamField::imm0:
      return std::bit_cast<uint32_t>(in.imm0) == std::bit_cast<uint32_t>(p.default_value);
    case ParamField::imm1:
      return std::bit_cast<uint32_t>(in.imm1) == std::bit_cast<uint32_t>(p.default_value);
    case ParamField::flag:
      return !in.has_flag(static_cast<Flag>(p.flag));
    case ParamField::mask:
      return in.mask == d.mask;
    default:
      return in.ints[static_cast<size_t>(p.field) - static_cast<size_t>(ParamField::int0)] == 0;
  }
}

std::string format_sync(const Instruction& in) {
  std::string out;
  if (in.wait.cond != WaitCond::none)
    out += fmt::format(" wait=S[{}]{}{}", in.wait.sem,
                       in.wait.cond == WaitCond::ge ? ">=" : "==", in.wait.value);
  if (in.signal.op != SemOp::none)
    out += fmt::format(" signal=S[{}]{}{}", in.signal.sem, in.signal.op == SemOp::add ? "+=" : "=",
                       in.signal.value);
  return out;
}

std::string hex_bytes(const std::vector<uint8_t>& data) {
  std::string s;
  s.reserve(data.size() * 2);
  for (uint8_t b : data) s += fmt::format("{:02x}", b);
  return s;
}

// ---------------------------------------------------------------------------------------------
// Parsing

// A cursor over one line of assembly; errors carry "file:line:column".
class Cursor {
 public:
  Cursor(std::string_view text, const std::string& file, size_t line)
      : text_(text), file_(file), line_(line) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw AsmError(fmt::format("{}:{}:{}: {}", file_, line_, pos_ + 1, what));
  }
  std::string where() const { return fmt::format("{}:{}", file_, line_); }

  void skip_ws() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool at_end() {
    skip_ws();
    return pos_ >= text_.size();
  }
  bool accept(char c) {
    skip_ws();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool accept(std::string_view s) {
    skip_ws();
    if (text_.substr(pos_, s.size()) == s) {
      pos_ += s.size();
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!accept(c)) fail(fmt::format("expected '{}'{}", c, found()));
  }
  std::string found() const {
    if (pos_ >= text_.size()) return " at end of line";
    return fmt::format(" before '{}'", text_.substr(pos_, 12));
  }
  std::string ident() {
    skip_ws();
    const size_t start = pos_;
    while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) ||
                                   text_[pos_] == '_' || text_[pos_] == '.'))
      ++pos_;
    if (start == pos_) fail(fmt::format("expected a name{}", found()));
    return std::string(text_.substr(start, pos_ - start));
  }
  // A run of characters up to whitespace: a value of key=value.
  std::string word() {
    skip_ws();
    const size_t start = pos_;
    int depth = 0;
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == '[' || c == '(') ++depth;
      if (c == ']' || c == ')') --depth;
      if (depth <= 0 && std::isspace(static_cast<unsigned char>(c))) break;
      ++pos_;
    }
    return std::string(text_.substr(start, pos_ - start));
  }
  // Decimal, or hexadecimal with 0x; nothing else (no octal surprises).
  int64_t integer() {
    skip_ws();
    const size_t start = pos_;
    if (pos_ < text_.size() && (text_[pos_] == '-' || text_[pos_] == '+')) ++pos_;
    while (pos_ < text_.size() && std::isalnum(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    const std::string tok(text_.substr(start, pos_ - start));
    if (tok.empty()) fail(fmt::format("expected an integer{}", found()));
    const bool negative = tok[0] == '-';
    std::string_view digits(tok);
    if (tok[0] == '-' || tok[0] == '+') digits.remove_prefix(1);
    int base = 10;
    if (digits.starts_with("0x") || digits.starts_with("0X")) {
      digits.remove_prefix(2);
      base = 16;
    }
    uint64_t magnitude = 0;
    auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), magnitude, base);
    if (digits.empty() || ec != std::errc() || p != digits.data() + digits.size() ||
        magnitude > (negative ? uint64_t{1} << 63 : uint64_t{INT64_MAX})) {
      pos_ = start;
      fail(fmt::format("'{}' is not an integer in range", tok));
    }
    return negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
  }
  size_t pos() const { return pos_; }
  std::string_view rest() const { return text_.substr(pos_); }

 private:
  std::string_view text_;
  const std::string& file_;
  size_t line_;
  size_t pos_ = 0;
};

template <typename T>
T checked(Cursor& c, int64_t v, const char* what) {
  const bool fits = std::is_same_v<T, uint64_t>
                        ? v >= 0
                        : v >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
                              v <= static_cast<int64_t>(std::numeric_limits<T>::max());
  if (!fits) c.fail(fmt::format("{} {} is out of range", what, v));
  return static_cast<T>(v);
}

float parse_float(Cursor& c, const std::string& s) {
  char* end = nullptr;
  const float v = std::strtof(s.c_str(), &end);
  if (s.empty() || *end != '\0') c.fail(fmt::format("'{}' is not a number", s));
  return v;
}

std::vector<int64_t> parse_int_list(Cursor& c) {
  std::vector<int64_t> out;
  c.expect('[');
  if (c.accept(']')) return out;
  do out.push_back(c.integer());
  while (c.accept(','));
  c.expect(']');
  return out;
}

class Parser {
 public:
  Parser(std::string_view text, const std::string& file) : text_(text), file_(file) {}

  Program run() {
    size_t line_no = 0;
    size_t start = 0;
    while (start <= text_.size()) {
      size_t end = text_.find('\n', start);
      if (end == std::string_view::npos) end = text_.size();
      std::string_view line = text_.substr(start, end - start);
      if (size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
      ++line_no;
      Cursor c(line, file_, line_no);
      if (!c.at_end()) statement(c);
      start = end + 1;
    }
    return std::move(program_);
  }

 private:
  void statement(Cursor& c) {
    if (c.accept('.')) return directive(c);
    const std::string engine_name_str = c.ident();
    const auto engine = parse_engine(engine_name_str);
    if (!engine)
      c.fail(fmt::format("unknown engine '{}' (pe, act, dve, pool, sp)", engine_name_str));
    const std::string op_name = c.ident();
    const auto opcode = parse_opcode(op_name);
    if (!opcode) c.fail(fmt::format("unknown opcode '{}'", op_name));
    Instruction in;
    in.engine = *engine;
    in.opcode = *opcode;
    for (const ParamInfo& p : opcode_info(in.opcode).params) {
      if (p.field == ParamField::imm0) in.imm0 = p.default_value;
      if (p.field == ParamField::imm1) in.imm1 = p.default_value;
    }
    std::vector<std::string> seen;
    while (!c.at_end()) {
      const std::string key = c.ident();
      c.expect('=');
      if (std::find(seen.begin(), seen.end(), key) != seen.end())
        c.fail(fmt::format("'{}' given twice", key));
      seen.push_back(key);
      argument(c, in, key);
    }
    try {
      validate(in, program_, c.where());
    } catch (const IsaError& e) {
      throw AsmError(e.what());
    }
    program_.stream(in.engine).push_back(std::move(in));
  }

  void directive(Cursor& c) {
    const std::string name = c.ident();
    if (name == "target") {
      const std::string t = c.ident();
      if (!find_target_name(t))
        c.fail(fmt::format("unknown target '{}' ({})", t, fmt::join(target_names(), ", ")));
      if (program_.num_instructions() > 0) c.fail(".target must come before the first instruction");
      program_.target = std::string(*find_target_name(t));
    } else if (name == "tensor") {
      tensor(c);
    } else {
      c.fail(fmt::format("unknown directive '.{}' (.target, .tensor)", name));
    }
    if (!c.at_end()) c.fail(fmt::format("unexpected text '{}'", c.rest()));
  }

  // .tensor <name> <dtype> [<dims>] <input|output|constant|scratch> [id=<n>] [data=<hex>]
  void tensor(Cursor& c) {
    TensorDecl t;
    t.name = c.ident();
    if (program_.find_tensor(t.name)) c.fail(fmt::format("tensor '{}' is declared twice", t.name));
    const std::string dt = c.ident();
    const auto dtype = parse_dtype(dt);
    if (!dtype) c.fail(fmt::format("unknown dtype '{}'", dt));
    t.dtype = *dtype;
    t.shape = parse_int_list(c);
    for (int64_t d : t.shape)
      if (d <= 0) c.fail(fmt::format("tensor '{}' has a dimension of size {}", t.name, d));
    const std::string kind = c.ident();
    bool known = false;
    for (int k = 0; k < 4; ++k)
      if (kind == tensor_kind_name(static_cast<TensorKind>(k))) {
        t.kind = static_cast<TensorKind>(k);
        known = true;
      }
    if (!known)
      c.fail(fmt::format("unknown tensor kind '{}' (input, output, constant, scratch)", kind));
    uint16_t next_id = 1;
    for (const TensorDecl& other : program_.tensors)
      next_id = std::max<uint16_t>(next_id, static_cast<uint16_t>(other.var_id + 1));
    t.var_id = next_id;
    if (c.accept("id=")) t.var_id = checked<uint16_t>(c, c.integer(), "tensor id");
    if (t.var_id == 0 || program_.find_tensor(t.var_id))
      c.fail(fmt::format("tensor id {} is taken", t.var_id));
    if (c.accept("data=")) t.data = parse_hex(c, c.word());
    if ((t.kind == TensorKind::constant) != !t.data.empty() && t.size_bytes() > 0)
      c.fail(t.kind == TensorKind::constant ? "a constant needs data=<hex bytes>"
                                            : "only constants carry data");
    if (t.kind == TensorKind::constant && t.data.size() != t.size_bytes())
      c.fail(fmt::format("constant '{}' has {} bytes of data, its shape needs {}", t.name,
                         t.data.size(), t.size_bytes()));
    try {
      validate(t);
    } catch (const IsaError& e) {
      c.fail(e.what());
    }
    program_.tensors.push_back(std::move(t));
  }

  static std::vector<uint8_t> parse_hex(Cursor& c, const std::string& s) {
    if (s.size() % 2) c.fail("hex data has an odd number of digits");
    std::vector<uint8_t> out(s.size() / 2);
    for (size_t i = 0; i < out.size(); ++i) {
      auto [p, ec] = std::from_chars(s.data() + 2 * i, s.data() + 2 * i + 2, out[i], 16);
      if (ec != std::errc() || p != s.data() + 2 * i + 2) c.fail("hex data has a non-hex digit");
    }
    return out;
  }

  void argument(Cursor& c, Instruction& in, const std::string& key) {
    if (key == "wait") return wait(c, in);
    if (key == "signal") return signal(c, in);
    const OpcodeInfo& info = opcode_info(in.opcode);
    // `scale` and `initial` name both an operand and an immediate: a memory
    // operand starts with its space, anything else is the immediate.
    const std::string_view rest =
        c.rest().substr(c.rest().find_first_not_of(" \t") == std::string_view::npos
                            ? 0
                            : c.rest().find_first_not_of(" \t"));
    const bool looks_like_operand = rest.starts_with("sbuf") || rest.starts_with("psum") ||
                                    rest.starts_with("hbm") || rest.starts_with("pattern");
    const bool is_param = std::any_of(info.params.begin(), info.params.end(),
                                      [&](const ParamInfo& p) { return p.name == key; });
    for (const RoleInfo& r : info.roles)
      if (role_name(r.role) == key && (looks_like_operand || !is_param)) {
        in.operands.push_back({r.role, access_pattern(c)});
        return;
      }
    for (const ParamInfo& p : info.params)
      if (p.name == key) return param(c, in, p);
    std::vector<std::string_view> keys;
    for (const RoleInfo& r : info.roles) keys.push_back(role_name(r.role));
    for (const ParamInfo& p : info.params) keys.push_back(p.name);
    c.fail(fmt::format("{} has no argument '{}' (it takes: {}, wait, signal)", info.name, key,
                       fmt::join(keys, ", ")));
  }

  void wait(Cursor& c, Instruction& in) {
    c.expect('S');
    c.expect('[');
    in.wait.sem = checked<uint16_t>(c, c.integer(), "semaphore");
    c.expect(']');
    if (c.accept(">="))
      in.wait.cond = WaitCond::ge;
    else if (c.accept("=="))
      in.wait.cond = WaitCond::eq;
    else
      c.fail("expected >= or == in wait=S[n]>=v");
    in.wait.value = checked<uint32_t>(c, c.integer(), "semaphore value");
  }

  void signal(Cursor& c, Instruction& in) {
    c.expect('S');
    c.expect('[');
    in.signal.sem = checked<uint16_t>(c, c.integer(), "semaphore");
    c.expect(']');
    if (c.accept("+="))
      in.signal.op = SemOp::add;
    else if (c.accept('='))
      in.signal.op = SemOp::set;
    else
      c.fail("expected += or = in signal=S[n]+=v");
    in.signal.value = checked<uint32_t>(c, c.integer(), "semaphore value");
  }

  void param(Cursor& c, Instruction& in, const ParamInfo& p) {
    const size_t start = c.pos();
    const std::string v = c.word();
    auto bad = [&](std::string_view what) -> void {
      c.fail(fmt::format("{}={}: {}", p.name, v, what));
    };
    switch (p.field) {
      case ParamField::func:
        if (auto f = parse_act_func(v))
          in.func = *f;
        else
          bad("unknown activation function");
        break;
      case ParamField::alu0:
      case ParamField::alu1:
      case ParamField::alu2:
        if (auto op = parse_alu_op(v))
          (p.field == ParamField::alu0   ? in.alu0
           : p.field == ParamField::alu1 ? in.alu1
                                         : in.alu2) = *op;
        else
          bad("unknown ALU operation");
        break;
      case ParamField::imm0:
        in.imm0 = parse_float(c, v);
        break;
      case ParamField::imm1:
        in.imm1 = parse_float(c, v);
        break;
      case ParamField::flag:
        if (v == "true" || v == "1")
          in.flags = static_cast<uint16_t>(in.flags | p.flag);
        else if (v != "false" && v != "0")
          bad("expected true or false");
        break;
      case ParamField::axes:
      case ParamField::mask:
      default: {
        Cursor sub(v, file_, 0);
        (void)start;
        try {
          if (p.field == ParamField::mask) {
            const auto list = parse_int_list(sub);
            if (list.size() > in.mask.size()) bad("at most 32 entries");
            for (size_t i = 0; i < list.size(); ++i)
              in.mask[i] = checked<uint8_t>(sub, list[i], "mask entry");
          } else if (p.field == ParamField::axes) {
            in.axes = checked<uint8_t>(sub, sub.integer(), "axes");
          } else {
            in.ints[static_cast<size_t>(p.field) - static_cast<size_t>(ParamField::int0)] =
                checked<int32_t>(sub, sub.integer(), p.name.data());
          }
          if (!sub.at_end()) bad("unexpected text");
        } catch (const AsmError& e) {
          bad(std::string(e.what()).substr(std::string(e.what()).find(": ") + 2));
        }
      }
    }
  }

  // sbuf.bf16[0:128]+256[[1,512]] | psum.fp32[0:64][[1,512]] | hbm.fp32(x)+0[[512,128],[1,512]]
  // | pattern[[1,128]]
  AccessPattern access_pattern(Cursor& c) {
    AccessPattern ap;
    const std::string head = c.ident();
    const size_t dot = head.find('.');
    const std::string space = head.substr(0, dot);
    if (space == "pattern") {
      if (dot != std::string::npos) c.fail("a pattern has no dtype");
      ap.space = MemSpace::Pattern;
      ap.dtype = DType::int32;
      free_dims(c, ap, parse_pairs(c));
      return ap;
    }
    if (dot == std::string::npos)
      c.fail(fmt::format("operand '{}' lacks .dtype (e.g. sbuf.fp32)", head));
    const auto dtype = parse_dtype(head.substr(dot + 1));
    if (!dtype) c.fail(fmt::format("unknown dtype '{}'", head.substr(dot + 1)));
    ap.dtype = *dtype;
    if (space == "sbuf" || space == "psum") {
      ap.space = space == "sbuf" ? MemSpace::SBUF : MemSpace::PSUM;
      c.expect('[');
      ap.start_partition = checked<uint16_t>(c, c.integer(), "start partition");
      c.expect(':');
      ap.num_partitions = checked<uint32_t>(c, c.integer(), "partition count");
      if (c.accept(':')) partition_step(c, ap);
      c.expect(']');
      if (c.accept('+')) ap.offset = checked<uint64_t>(c, c.integer(), "offset");
      free_dims(c, ap, parse_pairs(c));
    } else if (space == "hbm") {
      ap.space = MemSpace::HBM;
      c.expect('(');
      ap.tensor = tensor_ref(c);
      c.expect(')');
      if (c.accept('+')) ap.offset = checked<uint64_t>(c, c.integer(), "offset");
      auto pairs = parse_pairs(c);
      if (pairs.size() < 2)
        c.fail("an HBM pattern needs [row stride, rows] and at least one free dim");
      ap.partition_stride = pairs[0].first;
      ap.num_partitions = checked<uint32_t>(c, pairs[0].second, "row count");
      pairs.erase(pairs.begin());
      free_dims(c, ap, pairs);
    } else {
      c.fail(fmt::format("unknown memory space '{}' (sbuf, psum, hbm, pattern)", space));
    }
    return ap;
  }

  // The optional third field of [start:count:step]. Consecutive partitions have one
  // spelling, [start:count], so the only step written out is 0: every partition of the
  // walk reads the start partition (a DMA source's partition broadcast).
  void partition_step(Cursor& c, AccessPattern& ap) {
    const int64_t step = c.integer();
    if (step != 0)
      c.fail(
          fmt::format("partition step {}: only 0 (a broadcast of the start partition) may "
                      "be given; consecutive partitions are written [start:count]",
                      step));
    ap.partition_broadcast = true;
  }

  // A declared tensor's name, or a numeric tensor id.
  uint16_t tensor_ref(Cursor& c) {
    c.skip_ws();
    if (!c.rest().empty() && std::isdigit(static_cast<unsigned char>(c.rest()[0])))
      return checked<uint16_t>(c, c.integer(), "tensor id");
    const std::string name = c.ident();
    if (const TensorDecl* t = program_.find_tensor(name)) return t->var_id;
    c.fail(fmt::format("unknown tensor '{}' (declare it with .tensor)", name));
  }

  std::vector<std::pair<int64_t, int64_t>> parse_pairs(Cursor& c) {
    std::vector<std::pair<int64_t, int64_t>> out;
    c.expect('[');
    do {
      c.expect('[');
      const int64_t stride = c.integer();
      c.expect(',');
      const int64_t size = c.integer();
      c.expect(']');
      out.emplace_back(stride, size);
    } while (c.accept(','));
    c.expect(']');
    return out;
  }

  void free_dims(Cursor& c, AccessPattern& ap,
                 const std::vector<std::pair<int64_t, int64_t>>& pairs) {
    if (pairs.empty() || pairs.size() > kMaxDims)
      c.fail(fmt::format("{} free dims (1 to {} allowed)", pairs.size(), kMaxDims));
    ap.num_dims = static_cast<uint8_t>(pairs.size());
    for (size_t i = 0; i < pairs.size(); ++i)
      ap.dims[i] = {checked<int32_t>(c, pairs[i].first, "stride"),
                    checked<uint32_t>(c, pairs[i].second, "size")};
  }

  std::string_view text_;
  const std::string& file_;
  Program program_;
};

}  // namespace

std::string format_access_pattern(const AccessPattern& ap, const Program* program) {
  switch (ap.space) {
    case MemSpace::Pattern:
      return "pattern" + format_dims(ap, false);
    case MemSpace::HBM:
      return fmt::format("hbm.{}({})+{}{}", short_dtype(ap.dtype),
                         format_tensor_ref(ap.tensor, program), ap.offset, format_dims(ap, true));
    default:
      return fmt::format("{}.{}[{}:{}{}]+{}{}", mem_space_name(ap.space), short_dtype(ap.dtype),
                         ap.start_partition, ap.num_partitions, ap.partition_broadcast ? ":0" : "",
                         ap.offset, format_dims(ap, false));
  }
}

std::string format_instruction(const Instruction& in, const Program* program) {
  const OpcodeInfo& info = opcode_info(in.opcode);
  std::string out = fmt::format("{} {}", engine_name(in.engine), info.name);
  for (const Operand& op : in.operands)
    out += fmt::format(" {}={}", role_name(op.role), format_access_pattern(op.ap, program));
  for (const ParamInfo& p : info.params)
    if (!param_is_default(in, p)) out += fmt::format(" {}={}", p.name, format_param(in, p));
  return out + format_sync(in);
}

std::string disassemble(const Program& program) {
  std::string out = fmt::format(".target {}\n", program.target);
  for (const TensorDecl& t : program.tensors) {
    out += fmt::format(".tensor {} {} [{}] {} id={}", t.name, dtype_name(t.dtype),
                       fmt::join(t.shape, ","), tensor_kind_name(t.kind), t.var_id);
    if (!t.data.empty()) out += " data=" + hex_bytes(t.data);
    out += '\n';
  }
  for (int e = 0; e < kNumEngines; ++e) {
    const auto& stream = program.streams[e];
    if (stream.empty()) continue;
    out += fmt::format("\n# {} stream: {} instructions\n", engine_neff_name(static_cast<Engine>(e)),
                       stream.size());
    for (const Instruction& in : stream) out += format_instruction(in, &program) + '\n';
  }
  return out;
}

Program assemble(std::string_view text, const std::string& file) {
  return Parser(text, file).run();
}

}  // namespace neuronsim::isa
