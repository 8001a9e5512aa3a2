#include "server/metrics_http.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace kiln::server {
namespace {

constexpr size_t kMaxHeadBytes = 8 << 10;
constexpr auto kRequestTimeout = std::chrono::seconds(5);
// How often blocking waits look at the stop flag: bounds how long Stop takes.
constexpr int kPollMillis = 50;

// "host:port", "[v6]:port" or ":port" -> (host, port); host "" means every address.
absl::StatusOr<std::pair<std::string, std::string>> SplitHostPort(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics address '", address, "' is not HOST:PORT"));
  }
  std::string host = address.substr(0, colon);
  const std::string port = address.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics address '", address, "': write an IPv6 host in brackets"));
  }
  int number = -1;
  if (port.empty() || port.find_first_not_of("0123456789") != std::string::npos ||
      !absl::SimpleAtoi(port, &number) || number > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics address '", address, "': bad port '", port, "'"));
  }
  return std::make_pair(host, port);
}

// Waits until `fd` is readable, the deadline passes or `stopping` is set; true if readable.
bool WaitReadable(int fd, std::chrono::steady_clock::time_point deadline,
                  const std::atomic<bool>& stopping) {
  while (!stopping.load() && std::chrono::steady_clock::now() < deadline) {
    pollfd pfd{.fd = fd, .events = POLLIN, .revents = 0};
    const int ready = poll(&pfd, 1, kPollMillis);
    if (ready > 0) return true;
    if (ready < 0 && errno != EINTR) return false;
  }
  return false;
}

void SendAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t sent = send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) return;  // the client left, or the send timeout passed
    bytes.remove_prefix(sent);
  }
}

std::string Response(int code, const std::string& reason, const std::string& content_type,
                     const std::string& body, bool with_body) {
  return absl::StrCat("HTTP/1.1 ", code, " ", reason, "\r\nContent-Type: ", content_type,
                      "\r\nContent-Length: ", body.size(), "\r\nConnection: close\r\n\r\n",
                      with_body ? body : std::string());
}

std::string TextResponse(int code, const std::string& reason, bool with_body = true) {
  return Response(code, reason, "text/plain; charset=utf-8", absl::StrCat(reason, "\n"), with_body);
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& host_port, std::function<std::string()> render) {
  absl::StatusOr<std::pair<std::string, std::string>> parts = SplitHostPort(host_port);
  if (!parts.ok()) return parts.status();
  const auto& [host, port] = *parts;

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* addresses = nullptr;
  const int resolved =
      getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &addresses);
  if (resolved != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics address '", host_port, "': ", gai_strerror(resolved)));
  }
  int fd = -1;
  std::string error = "no address";
  for (addrinfo* a = addresses; a != nullptr; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      error = std::strerror(errno);
      continue;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 16) == 0) break;
    error = std::strerror(errno);
    close(fd);
    fd = -1;
  }
  freeaddrinfo(addresses);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", host_port, ": ", error));
  }
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length);
  const int bound_port = bound.ss_family == AF_INET6
                             ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                             : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return std::unique_ptr<MetricsHttpServer>(
      new MetricsHttpServer(fd, bound_port, std::move(render)));
}

MetricsHttpServer::MetricsHttpServer(int listen_fd, int port, std::function<std::string()> render)
    : listen_fd_(listen_fd), port_(port), render_(std::move(render)) {
  thread_ = std::thread([this] { Serve(); });
}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

void MetricsHttpServer::Stop() {
  if (stopping_.exchange(true)) return;
  // Wakes a blocked accept at once; the poll loops notice the flag within kPollMillis.
  shutdown(listen_fd_, SHUT_RDWR);
  thread_.join();
  close(listen_fd_);
}

void MetricsHttpServer::Serve() {
  const auto forever = std::chrono::steady_clock::time_point::max();
  while (WaitReadable(listen_fd_, forever, stopping_)) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;  // the client gave up, or the port is closing
    Answer(fd);
    close(fd);
  }
}

void MetricsHttpServer::Answer(int fd) {
  // A client that does not read its answer cannot hold the thread either.
  const timeval send_timeout{.tv_sec = 5, .tv_usec = 0};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof(send_timeout));

  const auto deadline = std::chrono::steady_clock::now() + kRequestTimeout;
  std::string head;
  size_t end = std::string::npos;
  while (end == std::string::npos) {
    if (head.size() >= kMaxHeadBytes) {
      SendAll(fd, TextResponse(431, "Request Header Fields Too Large"));
      break;
    }
    if (!WaitReadable(fd, deadline, stopping_)) {
      if (!head.empty() && !stopping_.load()) SendAll(fd, TextResponse(408, "Request Timeout"));
      return;
    }
    char buffer[1024];
    const ssize_t got = recv(fd, buffer, std::min(sizeof(buffer), kMaxHeadBytes - head.size()), 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      if (!head.empty()) SendAll(fd, TextResponse(400, "Bad Request"));
      return;
    }
    head.append(buffer, got);
    end = head.find("\r\n\r\n");
    if (end == std::string::npos) end = head.find("\n\n");
  }
  if (end != std::string::npos) {
    // The request line: METHOD SP TARGET SP HTTP/1.x; headers are not needed.
    const std::string_view line = std::string_view(head).substr(0, head.find_first_of("\r\n"));
    std::vector<std::string_view> words;
    for (size_t start = 0; start <= line.size();) {
      const size_t space = std::min(line.find(' ', start), line.size());
      words.push_back(line.substr(start, space - start));
      start = space + 1;
    }
    std::string reply;
    if (words.size() != 3 || words[1].empty() || words[1][0] != '/' ||
        words[2].substr(0, 7) != "HTTP/1.") {
      reply = TextResponse(400, "Bad Request");
    } else if (words[0] != "GET" && words[0] != "HEAD") {
      reply = TextResponse(405, "Method Not Allowed");
    } else {
      const bool with_body = words[0] == "GET";
      const std::string_view path = words[1].substr(0, words[1].find('?'));
      if (path == "/metrics") {
        try {
          reply =
              Response(200, "OK", "text/plain; version=0.0.4; charset=utf-8", render_(), with_body);
        } catch (const std::exception&) {
          reply = TextResponse(500, "Internal Server Error", with_body);
        }
      } else if (path == "/healthz") {
        reply = Response(200, "OK", "text/plain; charset=utf-8", "ok\n", with_body);
      } else {
        reply = TextResponse(404, "Not Found", with_body);
      }
    }
    SendAll(fd, reply);
  }
  // Read what the client still sends for a moment before closing: closing with unread bytes
  // resets the connection, and the client could lose the answer.
  shutdown(fd, SHUT_WR);
  const auto linger = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  char sink[4096];
  while (WaitReadable(fd, linger, stopping_) && recv(fd, sink, sizeof(sink), 0) > 0) {
  }
}

}  // namespace kiln::server
