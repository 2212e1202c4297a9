#include "tools/stat/metrics_source.h"

#include <fmt/format.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace kvtier::stat {
namespace {

// The value of label `label` in `series` (`name{a="x",b="y"}`), if present.
std::optional<std::string> LabelOf(const std::string& series, const std::string& label) {
  const std::string needle = label + "=\"";
  size_t at = series.find('{');
  while (at != std::string::npos) {
    at = series.find(needle, at);
    if (at == std::string::npos) return std::nullopt;
    const char before = series[at - 1];
    if (before == '{' || before == ',') {
      const size_t begin = at + needle.size();
      return series.substr(begin, series.find('"', begin) - begin);
    }
    at += needle.size();
  }
  return std::nullopt;
}

bool InFamily(const std::string& series, const std::string& name) {
  return series.compare(0, name.size(), name) == 0 &&
         (series.size() == name.size() || series[name.size()] == '{');
}

// A connected TCP socket to url, or Unavailable naming it.
absl::StatusOr<int> Connect(const MetricsUrl& url) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(url.host.c_str(), url.port.c_str(), &hints, &found); rc != 0) {
    return absl::UnavailableError(
        fmt::format("cannot resolve {}: {}", url.ToString(), ::gai_strerror(rc)));
  }
  int err = 0;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const timeval timeout{5, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      ::freeaddrinfo(found);
      return fd;
    }
    err = errno;
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return absl::UnavailableError(
      fmt::format("cannot reach kvtierd's metrics at {}: {} (is kvtierd running, and is this its "
                  "metrics.listen_address?)",
                  url.ToString(), std::strerror(err)));
}

}  // namespace

std::string MetricsUrl::ToString() const { return fmt::format("http://{}:{}{}", host, port, path); }

absl::StatusOr<MetricsUrl> ParseMetricsUrl(const std::string& text) {
  std::string rest = text;
  if (rest.rfind("http://", 0) == 0) rest = rest.substr(7);
  MetricsUrl url;
  if (const size_t slash = rest.find('/'); slash != std::string::npos) {
    url.path = rest.substr(slash);
    rest = rest.substr(0, slash);
  }
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == rest.size() ||
      rest.find_first_not_of("0123456789", colon + 1) != std::string::npos) {
    return absl::InvalidArgumentError(
        fmt::format("--metrics '{}': expected host:port or http://host:port[/path]", text));
  }
  url.host = rest.substr(0, colon);
  url.port = rest.substr(colon + 1);
  return url;
}

absl::StatusOr<std::string> FetchMetrics(const MetricsUrl& url) {
  KVTIER_ASSIGN_OR_RETURN(const int fd, Connect(url));
  const std::string request =
      fmt::format("GET {} HTTP/1.0\r\nHost: {}\r\nAccept: text/plain\r\n\r\n", url.path, url.host);
  std::string response;
  bool sent = ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
              static_cast<ssize_t>(request.size());
  char buf[16384];
  for (ssize_t n; sent && (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;) response.append(buf, n);
  ::close(fd);
  const size_t body = response.find("\r\n\r\n");
  if (!sent || body == std::string::npos) {
    return absl::UnavailableError(fmt::format("no HTTP answer from {}", url.ToString()));
  }
  if (response.rfind("HTTP/1.1 200", 0) != 0 && response.rfind("HTTP/1.0 200", 0) != 0) {
    return absl::FailedPreconditionError(
        fmt::format("{} answered: {}", url.ToString(), response.substr(0, response.find("\r\n"))));
  }
  return response.substr(body + 4);
}

MetricsSample::MetricsSample(const std::string& text) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    if (space == std::string::npos) continue;
    samples_[line.substr(0, space)] = std::strtod(line.c_str() + space + 1, nullptr);
  }
}

std::optional<double> MetricsSample::Get(const std::string& series) const {
  auto it = samples_.find(series);
  if (it == samples_.end()) return std::nullopt;
  return it->second;
}

double MetricsSample::Sum(const std::string& name) const {
  double sum = 0;
  for (auto it = samples_.lower_bound(name); it != samples_.end(); ++it) {
    if (it->first.compare(0, name.size(), name) != 0) break;
    if (InFamily(it->first, name)) sum += it->second;
  }
  return sum;
}

double MetricsSample::SumWhere(const std::string& name, const std::string& label,
                               const std::string& value) const {
  double sum = 0;
  for (auto it = samples_.lower_bound(name); it != samples_.end(); ++it) {
    if (it->first.compare(0, name.size(), name) != 0) break;
    if (InFamily(it->first, name) && LabelOf(it->first, label) == value) sum += it->second;
  }
  return sum;
}

double MetricsSample::SumWhere(const std::string& name,
                               const std::map<std::string, std::string>& labels) const {
  double sum = 0;
  for (auto it = samples_.lower_bound(name); it != samples_.end(); ++it) {
    if (it->first.compare(0, name.size(), name) != 0) break;
    if (!InFamily(it->first, name)) continue;
    const bool all = std::all_of(labels.begin(), labels.end(), [&](const auto& label) {
      return LabelOf(it->first, label.first) == label.second;
    });
    if (all) sum += it->second;
  }
  return sum;
}

std::set<std::string> MetricsSample::LabelValues(const std::string& name,
                                                 const std::string& label) const {
  std::set<std::string> values;
  for (auto it = samples_.lower_bound(name); it != samples_.end(); ++it) {
    if (it->first.compare(0, name.size(), name) != 0) break;
    if (!InFamily(it->first, name)) continue;
    if (std::optional<std::string> v = LabelOf(it->first, label)) values.insert(*v);
  }
  return values;
}

}  // namespace kvtier::stat
