// Test helpers for the metrics endpoint: a blocking HTTP/1.0 GET over a plain TCP socket (what a
// Prometheus scrape is, minus compression), and a reader of the text exposition format.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "common/status.h"

namespace kvtier::testing {

// GET http://127.0.0.1:<port><path>: the body of a 200 answer, or why not.
inline absl::StatusOr<std::string> HttpGet(int port, const std::string& path = "/metrics") {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return absl::UnavailableError("cannot connect to port " + std::to_string(port));
  }
  const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  std::string response;
  bool sent = ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
              static_cast<ssize_t>(request.size());
  char buf[16384];
  for (ssize_t n; sent && (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;) response.append(buf, n);
  ::close(fd);
  const size_t body = response.find("\r\n\r\n");
  if (!sent || body == std::string::npos) return absl::DataLossError("no HTTP answer");
  if (!absl::StartsWith(response, "HTTP/1.1 200") && !absl::StartsWith(response, "HTTP/1.0 200")) {
    return absl::FailedPreconditionError("HTTP answer: " + response.substr(0, body));
  }
  return response.substr(body + 4);
}

// The samples of a text-format page, keyed by everything before the value: `name` or
// `name{label="value",...}` exactly as served.
class MetricsPage {
 public:
  explicit MetricsPage(const std::string& text) {
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
      if (line.empty() || line[0] == '#') continue;
      const size_t space = line.rfind(' ');
      if (space == std::string::npos) continue;
      samples_[line.substr(0, space)] = std::strtod(line.c_str() + space + 1, nullptr);
    }
  }
  // The value of `series` (e.g. `kvtier_put_blocks_total{result="stored"}`), if served.
  std::optional<double> Get(const std::string& series) const {
    auto it = samples_.find(series);
    if (it == samples_.end()) return std::nullopt;
    return it->second;
  }
  // Like Get, with -1 (never a valid counter or level here) when the series is absent.
  double Value(const std::string& series) const { return Get(series).value_or(-1); }
  size_t size() const { return samples_.size(); }

 private:
  std::map<std::string, double> samples_;
};

}  // namespace kvtier::testing
