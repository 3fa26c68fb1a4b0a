#include "neuronsim/isa/npy.h"

#include <cstring>
#include <regex>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "neuronsim/isa/error.h"

namespace neuronsim::isa {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;

struct DescrEntry {
  DType dtype;
  const char* descr;
};
// Types NumPy lacks are stored as same-width unsigned integers.
constexpr DescrEntry kDescrs[] = {
    {DType::fp32, "<f4"},     {DType::fp16, "<f2"},   {DType::int8, "|i1"},
    {DType::uint8, "|u1"},    {DType::int16, "<i2"},  {DType::uint16, "<u2"},
    {DType::int32, "<i4"},    {DType::uint32, "<u4"}, {DType::boolean, "|b1"},
    {DType::bf16, "<u2"},     {DType::tf32, "<u4"},   {DType::fp8_e4m3, "|u1"},
    {DType::fp8_e5m2, "|u1"},
};

[[noreturn]] void bad(const std::string& source, const std::string& what) {
  throw NeffError(fmt::format("{}: not a valid .npy file: {}", source, what));
}

size_t descr_item_size(const std::string& descr) {
  if (descr.size() < 3) return 0;
  return static_cast<size_t>(std::atoi(descr.c_str() + 2));
}

}  // namespace

uint64_t NpyArray::num_elems() const {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

std::string npy_descr(DType t) {
  for (const DescrEntry& e : kDescrs)
    if (e.dtype == t) return e.descr;
  return "|u1";
}

std::optional<DType> dtype_from_npy_descr(const std::string& descr) {
  // "=" and "<" are the same on the little-endian hosts we support; "|" marks 1-byte types.
  std::string d = descr;
  if (!d.empty() && d[0] == '=') d[0] = '<';
  for (const DescrEntry& e : kDescrs)  // the first entry of a descr is its native type
    if (d == e.descr) return e.dtype;
  return std::nullopt;
}

NpyArray parse_npy(std::span<const uint8_t> bytes, const std::string& source) {
  if (bytes.size() < 10 || std::memcmp(bytes.data(), kMagic, kMagicLen) != 0)
    bad(source, "missing the \\x93NUMPY magic");
  const uint8_t major = bytes[6];
  size_t header_len = 0, start = 0;
  if (major == 1) {
    header_len = bytes[8] | (size_t{bytes[9]} << 8);
    start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) bad(source, "truncated header");
    header_len =
        bytes[8] | (size_t{bytes[9]} << 8) | (size_t{bytes[10]} << 16) | (size_t{bytes[11]} << 24);
    start = 12;
  } else {
    bad(source, fmt::format("unsupported format version {}", major));
  }
  if (start + header_len > bytes.size()) bad(source, "header runs past the end of the file");
  const std::string header(reinterpret_cast<const char*>(bytes.data() + start), header_len);

  static const std::regex descr_re(R"('descr'\s*:\s*'([^']+)')");
  static const std::regex fortran_re(R"('fortran_order'\s*:\s*(True|False))");
  static const std::regex shape_re(R"('shape'\s*:\s*\(([^)]*)\))");
  std::smatch m;
  NpyArray a;
  if (!std::regex_search(header, m, descr_re)) bad(source, "header has no 'descr'");
  a.descr = m[1];
  if (std::regex_search(header, m, fortran_re) && m[1] == "True")
    bad(source, "Fortran-order arrays are not supported; save with np.ascontiguousarray");
  if (!std::regex_search(header, m, shape_re)) bad(source, "header has no 'shape'");
  const std::string dims = m[1];
  static const std::regex int_re(R"(\d+)");
  for (auto it = std::sregex_iterator(dims.begin(), dims.end(), int_re);
       it != std::sregex_iterator(); ++it)
    a.shape.push_back(std::stoll(it->str()));
  const size_t item = descr_item_size(a.descr);
  if (item == 0 || a.descr[0] == '>') bad(source, fmt::format("unsupported dtype '{}'", a.descr));
  const uint64_t want = a.num_elems() * item;
  const size_t have = bytes.size() - start - header_len;
  if (have != want)
    bad(source, fmt::format("shape ({}) of '{}' needs {} data bytes, file has {}",
                            fmt::join(a.shape, ", "), a.descr, want, have));
  a.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(start + header_len), bytes.end());
  return a;
}

std::vector<uint8_t> write_npy(const NpyArray& a) {
  std::string shape = fmt::format("{}", fmt::join(a.shape, ", "));
  if (a.shape.size() == 1) shape += ",";
  std::string header =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", a.descr, shape);
  // Pad with spaces so the data starts on a 64-byte boundary, ending in a newline.
  const size_t total = kMagicLen + 4 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::vector<uint8_t> out(kMagic, kMagic + kMagicLen);
  out.push_back(1);
  out.push_back(0);
  out.push_back(static_cast<uint8_t>(header.size() & 0xff));
  out.push_back(static_cast<uint8_t>(header.size() >> 8));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), a.data.begin(), a.data.end());
  return out;
}

}  // namespace neuronsim::isa
