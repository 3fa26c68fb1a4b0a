// The wire format between ranks and one framed TCP connection (internal to tcp.cpp).
//
// Every frame is a 32-byte little-endian header, then `bytes` of payload (none when the frame is
// size-only: a timing-only data message that stands for `bytes` it does not carry).
//   u32 magic "NSCC" | u8 version | u8 kind | u16 flags | u64 epoch | u64 tag | u64 bytes
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange without it

#include <boost/asio.hpp>

namespace neuronsim::cc::wire {

namespace asio = boost::asio;
using asio::ip::tcp;

inline constexpr uint32_t kMagic = 0x4343534E;  // "NSCC" in little-endian byte order
inline constexpr uint8_t kVersion = 1;
inline constexpr size_t kHeaderBytes = 32;
inline constexpr uint64_t kMaxControlBytes = 64 * 1024;  // hello, table, reject, abort
inline constexpr uint16_t kSizeOnly = 1;                 // flags: payload absent

enum class Kind : uint8_t { challenge = 1, hello, welcome, reject, table, data, bye, abort };

struct Header {
  uint32_t magic = kMagic;
  uint8_t version = kVersion;
  Kind kind = Kind::data;
  uint16_t flags = 0;
  uint64_t epoch = 0;  // which collective (data frames)
  uint64_t tag = 0;
  uint64_t bytes = 0;
  bool size_only() const { return (flags & kSizeOnly) != 0; }
  // Bytes of payload that follow the header on the wire.
  uint64_t payload_bytes() const { return size_only() ? 0 : bytes; }
};

std::array<uint8_t, kHeaderBytes> encode(const Header& h);
Header decode(const std::array<uint8_t, kHeaderBytes>& b);

struct Frame {
  Header header;
  std::vector<uint8_t> payload;
  std::string text() const { return {payload.begin(), payload.end()}; }
};

// One connection to a peer. Writes are queued and go out in order; reads are one frame at a time.
// Handlers run on the io_context's thread; errors arrive as the handler's error_code.
class Link : public std::enable_shared_from_this<Link> {
 public:
  using WriteDone = std::function<void(const boost::system::error_code&)>;
  using ReadDone = std::function<void(const boost::system::error_code&, Frame)>;

  explicit Link(tcp::socket socket);
  tcp::socket& socket() { return socket_; }
  // "10.0.0.2:41234", or "?" once the socket is gone.
  const std::string& where() const { return where_; }

  void write(Header h, std::vector<uint8_t> payload, WriteDone done);
  void write(Kind kind, const std::string& payload, WriteDone done = {});
  // Reads one frame; a payload over `max_payload` bytes, a bad magic or an unknown version or
  // kind fails with boost::asio::error::invalid_argument (the caller names it garbage).
  void read(uint64_t max_payload, ReadDone done);
  // Sends a last frame, then closes once the peer has gone (its own close, or an error): closing
  // at once could reset the connection and lose the frame before the peer reads it.
  void say_and_close(Kind kind, const std::string& text);
  void close();
  bool is_open() const { return socket_.is_open(); }

 private:
  void write_next();
  void drain();

  tcp::socket socket_;
  std::string where_;
  std::deque<std::pair<std::vector<uint8_t>, WriteDone>> queue_;
  bool writing_ = false;
  std::array<uint8_t, kHeaderBytes> header_buf_{};
  std::array<uint8_t, 4096> drain_buf_{};
};

}  // namespace neuronsim::cc::wire
