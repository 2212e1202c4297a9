// For serve_cli_test: a real `kvtier serve` process (its "serving on" line read from its stdout
// for the port) and a small HTTP/1.1 client on Boost.Beast, blocking, one connection per call
// (RawStream keeps one open to read a stream part-way and then drop it).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

// Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format off: <utility> must come first
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
// clang-format on
#include <chrono>
#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

namespace kvtier::serve_test {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

// `kvtier serve ARGS` in a child process; Start returns once it printed its "serving on" line
// (or exited: then port() is 0 and output() says why).
class ServerProcess {
 public:
  bool Start(const std::string& binary, const std::vector<std::string>& args) {
    int out[2];
    if (::pipe(out) != 0) return false;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], 1);
      ::dup2(out[1], 2);
      ::close(out[0]);
      std::vector<char*> argv = {const_cast<char*>(binary.c_str())};
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(binary.c_str(), argv.data());
      ::_exit(127);
    }
    ::close(out[1]);
    out_ = ::fdopen(out[0], "r");
    char line[4096];
    while (std::fgets(line, sizeof(line), out_) != nullptr) {
      output_ += line;
      const std::string l = line;
      const size_t at = l.find("serving ");
      const size_t colon =
          l.rfind(':', l.find(" (") == std::string::npos ? l.size() : l.find(" ("));
      if (at != std::string::npos && colon != std::string::npos) {
        port_ = static_cast<uint16_t>(std::stoi(l.substr(colon + 1)));
        return true;
      }
    }
    return false;
  }

  // SIGTERM, then the exit code (-1: killed by a signal).
  int Stop() {
    if (pid_ <= 0) return -1;
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = 0;
    char line[4096];
    while (out_ != nullptr && std::fgets(line, sizeof(line), out_) != nullptr) output_ += line;
    if (out_ != nullptr) std::fclose(out_);
    out_ = nullptr;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  ~ServerProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (out_ != nullptr) std::fclose(out_);
  }

  uint16_t port() const { return port_; }
  const std::string& output() const { return output_; }

 private:
  pid_t pid_ = 0;
  FILE* out_ = nullptr;
  uint16_t port_ = 0;
  std::string output_;
};

struct Reply {
  int status = 0;
  std::string body;
  std::string content_type, allow, transfer_encoding;
};

// One request on a new connection; the whole response (a chunked one de-chunked). A reply not
// whole within 120 s gives status 0 and a body that says so (not a test hung until ctest's
// timeout). (Beast's timeouts hold for asynchronous reads only; SO_RCVTIMEO does not stop Asio's
// synchronous read, which polls again after it.)
inline Reply Send(uint16_t port, http::verb method, const std::string& target,
                  const std::string& body = "",
                  const std::string& content_type = "application/json") {
  asio::io_context io;
  beast::tcp_stream socket(io);
  socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  http::request<http::string_body> req{method, target, 11};
  req.set(http::field::host, "127.0.0.1");
  if (!body.empty() || method == http::verb::post) {
    req.set(http::field::content_type, content_type);
    req.body() = body;
    req.prepare_payload();
  }
  http::write(socket, req);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 << 20);
  beast::error_code ec;
  socket.expires_after(std::chrono::seconds(120));
  http::async_read(socket, buffer, parser, [&ec](beast::error_code e, size_t) { ec = e; });
  io.run();
  Reply r;
  if (ec) {
    r.body = "no whole reply to " + std::string(target) + ": " + ec.message();
    return r;
  }
  const auto& res = parser.get();
  r.status = static_cast<int>(res.result_int());
  r.body = res.body();
  r.content_type = std::string(res[http::field::content_type]);
  r.allow = std::string(res[http::field::allow]);
  r.transfer_encoding = std::string(res[http::field::transfer_encoding]);
  beast::error_code ignored;
  socket.socket().shutdown(tcp::socket::shutdown_both, ignored);
  return r;
}

inline Reply Post(uint16_t port, const std::string& target, const std::string& body) {
  return Send(port, http::verb::post, target, body);
}

// A connection driven by hand: raw bytes out, raw bytes in (for streams read part-way, and for
// requests a well-behaved client would never send).
class RawStream {
 public:
  explicit RawStream(uint16_t port) : socket_(io_) {
    socket_.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  }
  void Write(const std::string& bytes) { asio::write(socket_, asio::buffer(bytes)); }
  // Reads until `needle` occurs `count` times in everything read (or the peer closes); all read.
  const std::string& ReadUntil(const std::string& needle, int count = 1) {
    for (;;) {
      int seen = 0;
      for (size_t at = data_.find(needle); at != std::string::npos;
           at = data_.find(needle, at + 1)) {
        ++seen;
      }
      if (seen >= count) return data_;
      char buf[4096];
      beast::error_code ec;
      const size_t n = socket_.read_some(asio::buffer(buf), ec);
      if (ec) return data_;
      data_.append(buf, n);
    }
  }
  void Close() {
    beast::error_code ignored;
    socket_.close(ignored);
  }

 private:
  asio::io_context io_;
  tcp::socket socket_;
  std::string data_;
};

// A POST with `body` as raw HTTP/1.1 bytes.
inline std::string RawPost(const std::string& target, const std::string& body) {
  return "POST " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

}  // namespace kvtier::serve_test
