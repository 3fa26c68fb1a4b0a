#include "tcp_link.h"

#include <fmt/format.h>

namespace neuronsim::cc::wire {
namespace {

template <typename T>
void put(uint8_t* p, T v) {
  for (size_t i = 0; i < sizeof(T); ++i)
    p[i] = static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * i));
}
template <typename T>
T get(const uint8_t* p) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return static_cast<T>(v);
}

std::string endpoint_text(const tcp::socket& s) {
  boost::system::error_code ec;
  auto ep = s.remote_endpoint(ec);
  return ec ? std::string("?") : fmt::format("{}:{}", ep.address().to_string(), ep.port());
}

}  // namespace

std::array<uint8_t, kHeaderBytes> encode(const Header& h) {
  std::array<uint8_t, kHeaderBytes> b{};
  put(&b[0], h.magic);
  b[4] = h.version;
  b[5] = static_cast<uint8_t>(h.kind);
  put(&b[6], h.flags);
  put(&b[8], h.epoch);
  put(&b[16], h.tag);
  put(&b[24], h.bytes);
  return b;
}

Header decode(const std::array<uint8_t, kHeaderBytes>& b) {
  Header h;
  h.magic = get<uint32_t>(&b[0]);
  h.version = b[4];
  h.kind = static_cast<Kind>(b[5]);
  h.flags = get<uint16_t>(&b[6]);
  h.epoch = get<uint64_t>(&b[8]);
  h.tag = get<uint64_t>(&b[16]);
  h.bytes = get<uint64_t>(&b[24]);
  return h;
}

Link::Link(tcp::socket socket) : socket_(std::move(socket)), where_(endpoint_text(socket_)) {
  boost::system::error_code ec;
  socket_.set_option(tcp::no_delay(true), ec);  // small control frames must not wait for Nagle
}

void Link::write(Header h, std::vector<uint8_t> payload, WriteDone done) {
  const auto head = encode(h);
  payload.insert(payload.begin(), head.begin(), head.end());
  queue_.emplace_back(std::move(payload), std::move(done));
  if (!writing_) write_next();
}

void Link::write(Kind kind, const std::string& payload, WriteDone done) {
  Header h;
  h.kind = kind;
  h.bytes = payload.size();
  write(h, std::vector<uint8_t>(payload.begin(), payload.end()), std::move(done));
}

void Link::write_next() {
  if (queue_.empty()) {
    writing_ = false;
    return;
  }
  writing_ = true;
  auto self = shared_from_this();
  asio::async_write(socket_, asio::buffer(queue_.front().first),
                    [self](const boost::system::error_code& ec, size_t) {
                      auto done = std::move(self->queue_.front().second);
                      self->queue_.pop_front();
                      if (ec) {
                        // Fail everything queued behind it, in order, with the same error.
                        self->writing_ = false;
                        if (done) done(ec);
                        while (!self->queue_.empty()) {
                          auto d = std::move(self->queue_.front().second);
                          self->queue_.pop_front();
                          if (d) d(ec);
                        }
                        return;
                      }
                      if (done) done(ec);
                      self->write_next();
                    });
}

void Link::read(uint64_t max_payload, ReadDone done) {
  auto self = shared_from_this();
  asio::async_read(
      socket_, asio::buffer(header_buf_),
      [self, max_payload, done](const boost::system::error_code& ec, size_t) {
        if (ec) return done(ec, {});
        Frame f;
        f.header = decode(self->header_buf_);
        const Header& h = f.header;
        const bool known = h.kind >= Kind::challenge && h.kind <= Kind::abort;
        if (h.magic != kMagic || h.version != kVersion || !known || h.payload_bytes() > max_payload)
          return done(asio::error::invalid_argument, std::move(f));
        if (h.payload_bytes() == 0) return done({}, std::move(f));
        f.payload.resize(h.payload_bytes());
        auto frame = std::make_shared<Frame>(std::move(f));
        asio::async_read(self->socket_, asio::buffer(frame->payload),
                         [frame, done](const boost::system::error_code& ec2, size_t) {
                           done(ec2, std::move(*frame));
                         });
      });
}

void Link::say_and_close(Kind kind, const std::string& text) {
  auto self = shared_from_this();
  write(kind, text, [self](const boost::system::error_code& ec) {
    if (ec) return self->close();
    boost::system::error_code ignored;
    self->socket_.shutdown(tcp::socket::shutdown_send, ignored);
    self->drain();
  });
}

void Link::drain() {
  auto self = shared_from_this();
  socket_.async_read_some(asio::buffer(drain_buf_),
                          [self](const boost::system::error_code& ec, size_t) {
                            if (ec) return self->close();
                            self->drain();
                          });
}

void Link::close() {
  boost::system::error_code ec;
  socket_.shutdown(tcp::socket::shutdown_both, ec);
  socket_.close(ec);
}

}  // namespace neuronsim::cc::wire
