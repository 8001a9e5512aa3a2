// kilnd over TLS and mutual TLS, with certificates made for the test
// (tests/support/make_test_certs.sh): the right client gets in, every other one does not.
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/support/service_fixture.h"

namespace kiln::server {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

class TlsTest : public ServiceTestBase {
 protected:
  static void SetUpTestSuite() {
    // One folder per process: ctest runs this suite's tests in parallel processes.
    pki_ = ::testing::TempDir() + "/kiln_tls_pki_" + std::to_string(getpid());
    const std::string command = "bash " KILN_SOURCE_DIR "/tests/support/make_test_certs.sh " + pki_;
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
  }

  void StartTls(bool mutual) {
    ServerOptions options;
    options.tls.cert_file = pki_ + "/server.crt";
    options.tls.key_file = pki_ + "/server.key";
    if (mutual) options.tls.client_ca_file = pki_ + "/ca.crt";
    Start(options);
  }

  // A TLS client trusting the test CA, presenting `client` ("": no certificate).
  void ConnectTls(const std::string& client) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = ReadFile(pki_ + "/ca.crt");
    if (!client.empty()) {
      ssl.pem_private_key = ReadFile(pki_ + "/" + client + ".key");
      ssl.pem_cert_chain = ReadFile(pki_ + "/" + client + ".crt");
    }
    Connect(grpc::SslCredentials(ssl));
  }

  grpc::StatusCode ListTargets() {
    v1::ListTargetsResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return stub_->ListTargets(&context, {}, &response).error_code();
  }

  static std::string pki_;
};

std::string TlsTest::pki_;

TEST_F(TlsTest, TlsServesTlsClientsOnly) {
  StartTls(/*mutual=*/false);
  ConnectTls("");
  EXPECT_EQ(ListTargets(), grpc::StatusCode::OK);
  Connect(grpc::InsecureChannelCredentials());
  EXPECT_EQ(ListTargets(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(TlsTest, MutualTlsNeedsAClientCertificateFromTheCa) {
  StartTls(/*mutual=*/true);
  ConnectTls("client");
  EXPECT_EQ(ListTargets(), grpc::StatusCode::OK);
  ConnectTls("");
  EXPECT_EQ(ListTargets(), grpc::StatusCode::UNAVAILABLE);
  ConnectTls("rogue");  // signed by another CA
  EXPECT_EQ(ListTargets(), grpc::StatusCode::UNAVAILABLE);
  ConnectTls("client");
  EXPECT_EQ(ListTargets(), grpc::StatusCode::OK);  // the server lived through the refusals
}

TEST(TlsOptionsTest, IncompleteOrUnreadableTlsSettingsAreRefusedAtStart) {
  const std::string dir = ::testing::TempDir() + "/kiln_tls_bad";
  auto start = [&](TlsOptions tls) {
    return Server::Start({.listen_address = "127.0.0.1:0", .data_dir = dir, .tls = tls}).status();
  };
  absl::Status no_key = start({.cert_file = "/nonexistent/server.crt"});
  EXPECT_TRUE(absl::IsInvalidArgument(no_key)) << no_key;
  EXPECT_THAT(no_key.message(), ::testing::HasSubstr("--tls-key"));
  absl::Status unreadable =
      start({.cert_file = "/nonexistent/server.crt", .key_file = "/nonexistent/server.key"});
  EXPECT_THAT(unreadable.message(), ::testing::HasSubstr("/nonexistent/server.crt"));
  absl::Status ca_only = start({.client_ca_file = "/nonexistent/ca.crt"});
  EXPECT_THAT(ca_only.message(), ::testing::HasSubstr("--tls-client-ca needs"));
}

}  // namespace
}  // namespace kiln::server
