// Internal invariants and Status propagation. A failed KILN_CHECK is a compiler bug: it
// prints which invariant broke and aborts. User errors are absl::Status values instead.
#pragma once

#include <cstdlib>
#include <iostream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kiln::internal {

class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition) {
    stream_ << file << ":" << line << ": check failed: " << condition << " ";
  }
  [[noreturn]] ~CheckFailure() {
    std::cerr << stream_.str() << std::endl;
    std::abort();
  }
  std::ostream& stream() { return stream_; }

 private:
  std::ostringstream stream_;
};

}  // namespace kiln::internal

#define KILN_CHECK(condition) \
  if (condition) {            \
  } else                      \
    ::kiln::internal::CheckFailure(__FILE__, __LINE__, #condition).stream()
#define KILN_CHECK_EQ(a, b) KILN_CHECK((a) == (b)) << "(" << (a) << " vs " << (b) << ") "

#define KILN_STATUS_CONCAT_INNER(a, b) a##b
#define KILN_STATUS_CONCAT(a, b) KILN_STATUS_CONCAT_INNER(a, b)

#define KILN_RETURN_IF_ERROR(expr)               \
  do {                                           \
    ::absl::Status kiln_status_ = (expr);        \
    if (!kiln_status_.ok()) return kiln_status_; \
  } while (0)

#define KILN_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(*tmp)

// Expands to several statements (it may declare `lhs`), so it cannot be the unbraced body of
// an if/else/for: write `if (c) { KILN_ASSIGN_OR_RETURN(x, f()); }`.
#define KILN_ASSIGN_OR_RETURN(lhs, expr) \
  KILN_ASSIGN_OR_RETURN_IMPL(KILN_STATUS_CONCAT(kiln_statusor_, __LINE__), lhs, expr)
