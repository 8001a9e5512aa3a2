// One HTTP/1.1 exchange over a plain socket on 127.0.0.1, for tests of kilnd's metrics port.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "gtest/gtest.h"

namespace kiln::server {

struct HttpReply {
  std::string status_line;
  std::string head;
  std::string body;
};

// Sends `request` on a fresh connection and reads until the server closes it.
inline HttpReply Exchange(int port, const std::string& request) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  EXPECT_EQ(send(fd, request.data(), request.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(request.size()));
  std::string reply;
  char buffer[4096];
  for (ssize_t got; (got = recv(fd, buffer, sizeof(buffer), 0)) > 0;) reply.append(buffer, got);
  close(fd);
  HttpReply parsed;
  const size_t end = reply.find("\r\n\r\n");
  parsed.head = reply.substr(0, end);
  parsed.status_line = reply.substr(0, reply.find("\r\n"));
  if (end != std::string::npos) parsed.body = reply.substr(end + 4);
  return parsed;
}

inline std::string HttpGetBody(int port, const std::string& path) {
  return Exchange(port, "GET " + path + " HTTP/1.1\r\nHost: test\r\n\r\n").body;
}

}  // namespace kiln::server
