// Load test for kilnd (issue 7): C concurrent clients on loopback for a fixed time, each looping
// over a mix of cache hits (Compile of a model compiled during setup, then FetchArtifact of the
// returned artifact) and misses (Compile of a variant not compiled yet: a new dim_bounds value
// of a setup model, or a freshly uploaded distinct model). It reports requests by kind, errors
// by status code, latency percentiles and the daemon's peak memory. Run by hand, never a test.
//
//   kiln_load_test [--kilnd PATH | --server HOST:PORT] [--clients 64] [--seconds 60]
//                  [--hit-ratio 0.8] [--models 16] [--target x86_64]
//                  [--max-jobs N] [--max-queued-jobs N] [--token T]
//
// Without --server it starts kilnd itself (--listen 127.0.0.1:0, a temporary data dir, the
// port read from its log) so that it can read the daemon's VmHWM from /proc at the end; with
// --server it drives an existing daemon and the peak memory is unknown. --max-jobs and
// --max-queued-jobs go to the kilnd it starts.
//
// Each client is a thread with its own channel and its own TCP connection (a local subchannel
// pool), so C clients are C connections with one request in flight each. Every call has a 60 s
// deadline. RESOURCE_EXHAUSTED is the server's deliberate back-pressure: it is counted apart
// and the client backs off 50-200 ms. The exit status is 1 when any request ended with a
// code other than OK and RESOURCE_EXHAUSTED (or setup failed), so the program is a check too.
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cache/digest.h"
#include "kiln/v1/kiln.grpc.pb.h"
#include "tests/support/onnx_builder.h"

namespace {

using Clock = std::chrono::steady_clock;
using kiln::v1::Kiln;

constexpr auto kDeadline = std::chrono::seconds(60);
constexpr size_t kChunkBytes = size_t{1} << 20;

struct Options {
  std::string kilnd = KILN_KILND_PATH;
  std::string server;  // HOST:PORT; empty: start kilnd
  int clients = 64;
  double seconds = 60;
  double hit_ratio = 0.8;
  int models = 16;
  std::string target = "x86_64";
  int max_jobs = 0;          // 0: kilnd's default
  int max_queued_jobs = -1;  // -1: kilnd's default
  std::string token;
};

// y = relu(x @ W + b) with x[n, 16]: a small MLP layer whose weights come from `seed`, so each
// seed is a distinct model (and a distinct cache entry) that compiles in well under a second.
std::string BuildModel(uint64_t seed) {
  kiln::testing::OnnxBuilder b;
  b.Input("x", {std::string("n"), int64_t{16}});
  b.Output("y", {std::string("n"), int64_t{16}});
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> w(16 * 16), bias(16);
  for (float& v : w) v = dist(rng);
  for (float& v : bias) v = dist(rng);
  b.FloatInitializer("W", {16, 16}, w);
  b.FloatInitializer("b", {16}, bias);
  b.Node("MatMul", {"x", "W"}, {"xw"});
  b.Node("Add", {"xw", "b"}, {"z"});
  b.Node("Relu", {"z"}, {"y"});
  return b.Serialize();
}

enum Kind { kHit, kMiss, kFetch, kUpload, kKinds };
const char* const kKindNames[kKinds] = {"hit", "miss", "fetch", "upload"};

struct Sample {
  double ms;
  grpc::StatusCode code;
};

// What one client saw; merged at the end.
struct Record {
  std::vector<Sample> samples[kKinds];
  int64_t hit_compiled = 0;                // "hits" whose events said CACHE_MISS
  int64_t miss_from_cache = 0;             // "misses" whose events said CACHE_HIT
  std::map<int, std::string> first_error;  // code -> first message
};

class Client {
 public:
  Client(const std::string& address, const std::string& token) : token_(token) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
    stub_ =
        Kiln::NewStub(grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
  }

  grpc::Status Upload(const std::string& bytes, std::string* digest) {
    auto context = NewContext();
    kiln::v1::UploadModelResponse response;
    auto writer = stub_->UploadModel(context.get(), &response);
    const std::string expected = kiln::cache::Sha256Digest(bytes);
    size_t offset = 0;
    do {
      kiln::v1::UploadModelRequest request;
      if (offset == 0) {
        request.set_name("load-test");
        request.set_sha256(expected);
        request.set_total_bytes(bytes.size());
      }
      request.set_chunk(bytes.substr(offset, kChunkBytes));
      if (!writer->Write(request)) break;
      offset += kChunkBytes;
    } while (offset < bytes.size());
    writer->WritesDone();
    grpc::Status status = writer->Finish();
    if (status.ok() && response.model_digest() != expected) {
      return grpc::Status(grpc::StatusCode::DATA_LOSS, "upload: digest mismatch");
    }
    *digest = response.model_digest();
    return status;
  }

  // Fills `artifact` from TARGET_DONE and `cache_hit` from CACHE_HIT / CACHE_MISS.
  grpc::Status Compile(const kiln::v1::CompileRequest& request, std::string* artifact,
                       std::optional<bool>* cache_hit) {
    auto context = NewContext();
    auto reader = stub_->Compile(context.get(), request);
    kiln::v1::CompileEvent event;
    while (reader->Read(&event)) {
      if (event.kind() == kiln::v1::CompileEvent::TARGET_DONE) *artifact = event.artifact_digest();
      if (event.kind() == kiln::v1::CompileEvent::CACHE_HIT) *cache_hit = true;
      if (event.kind() == kiln::v1::CompileEvent::CACHE_MISS) *cache_hit = false;
    }
    grpc::Status status = reader->Finish();
    if (status.ok() && artifact->empty()) {
      return grpc::Status(grpc::StatusCode::INTERNAL, "compile: OK without TARGET_DONE");
    }
    return status;
  }

  grpc::Status Fetch(const std::string& digest) {
    auto context = NewContext();
    kiln::v1::FetchArtifactRequest request;
    request.set_artifact_digest(digest);
    auto reader = stub_->FetchArtifact(context.get(), request);
    kiln::v1::ArtifactChunk chunk;
    std::string bytes;
    uint64_t total = 0;
    for (bool first = true; reader->Read(&chunk); first = false) {
      if (first) total = chunk.total_bytes();
      bytes += chunk.chunk();
    }
    grpc::Status status = reader->Finish();
    if (status.ok() && (bytes.size() != total || kiln::cache::Sha256Digest(bytes) != digest)) {
      return grpc::Status(grpc::StatusCode::DATA_LOSS, "fetch: artifact bytes do not match");
    }
    return status;
  }

  grpc::Status CacheStats(kiln::v1::CacheStats* stats) {
    auto context = NewContext();
    return stub_->GetCacheStats(context.get(), {}, stats);
  }

 private:
  std::unique_ptr<grpc::ClientContext> NewContext() const {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(std::chrono::system_clock::now() + kDeadline);
    if (!token_.empty()) context->AddMetadata("authorization", "Bearer " + token_);
    return context;
  }

  std::string token_;
  std::unique_ptr<Kiln::Stub> stub_;
};

// --- the daemon ---------------------------------------------------------------------------

struct Daemon {
  pid_t pid = -1;
  std::filesystem::path dir;
  std::string address;
};

std::optional<Daemon> StartKilnd(const Options& options) {
  Daemon daemon;
  char tmpl[] = "/tmp/kiln-load-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return std::nullopt;
  daemon.dir = tmpl;
  const std::string log = (daemon.dir / "kilnd.log").string();
  std::vector<std::string> args = {
      options.kilnd,     "--listen", "127.0.0.1:0", "--data-dir", (daemon.dir / "data").string(),
      "--drain-seconds", "5"};
  if (options.max_jobs > 0)
    args.insert(args.end(), {"--max-jobs", std::to_string(options.max_jobs)});
  if (options.max_queued_jobs >= 0) {
    args.insert(args.end(), {"--max-queued-jobs", std::to_string(options.max_queued_jobs)});
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  const int spawned = posix_spawn(&daemon.pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) {
    std::fprintf(stderr, "cannot start %s: %s\n", argv[0], strerror(spawned));
    return std::nullopt;
  }
  // "kilnd serving on port N"
  const std::string marker = "kilnd serving on port ";
  for (int i = 0; i < 600; ++i) {
    std::ifstream in(log);
    std::stringstream text;
    text << in.rdbuf();
    const std::string s = text.str();
    if (size_t at = s.find(marker); at != std::string::npos) {
      daemon.address = "127.0.0.1:" + std::to_string(std::atoi(s.c_str() + at + marker.size()));
      return daemon;
    }
    int status;
    if (waitpid(daemon.pid, &status, WNOHANG) == daemon.pid) {
      std::fprintf(stderr, "kilnd exited before serving; its log:\n%s\n", s.c_str());
      return std::nullopt;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::fprintf(stderr, "kilnd did not say it was serving within 30 s (log %s)\n", log.c_str());
  kill(daemon.pid, SIGKILL);
  waitpid(daemon.pid, nullptr, 0);
  return std::nullopt;
}

// A "Name:   value kB" field of /proc/PID/status, in KiB; -1 when unreadable.
int64_t ProcStatusField(pid_t pid, const std::string& name) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name + ":", 0) == 0) return std::atoll(line.c_str() + name.size() + 1);
  }
  return -1;
}

// SIGTERM, then how long it took to exit (nullopt: still running after 30 s; killed).
std::optional<double> StopKilnd(const Daemon& daemon, int* exit_status) {
  const auto start = Clock::now();
  kill(daemon.pid, SIGTERM);
  while (Clock::now() - start < std::chrono::seconds(30)) {
    if (waitpid(daemon.pid, exit_status, WNOHANG) == daemon.pid) {
      return std::chrono::duration<double>(Clock::now() - start).count();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(daemon.pid, SIGKILL);
  waitpid(daemon.pid, exit_status, 0);
  return std::nullopt;
}

// --- the load ------------------------------------------------------------------------------

struct Shared {
  Options options;
  std::string address;
  std::vector<std::string> warm;  // models compiled during setup
  std::atomic<uint64_t> next_variant{0};
  uint64_t salt = 0;  // makes this run's new models and bounds unlike earlier runs'
  Clock::time_point end;
};

void RunClient(Shared& shared, int index, Record& record) {
  Client client(shared.address, shared.options.token);
  std::mt19937_64 rng(shared.salt + index);
  std::uniform_real_distribution<double> unit(0, 1);
  auto timed = [&](Kind kind, auto call) {
    const auto start = Clock::now();
    grpc::Status status = call();
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    record.samples[kind].push_back({ms, status.error_code()});
    if (!status.ok() && !record.first_error.count(status.error_code())) {
      record.first_error[status.error_code()] =
          std::string(kKindNames[kind]) + ": " + status.error_message();
    }
    if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50 + rng() % 151));
    }
    return status.ok();
  };
  while (Clock::now() < shared.end) {
    kiln::v1::CompileRequest request;
    request.add_targets(shared.options.target);
    std::string artifact;
    std::optional<bool> cache_hit;
    if (unit(rng) < shared.options.hit_ratio) {
      request.set_model_digest(shared.warm[rng() % shared.warm.size()]);
      if (!timed(kHit, [&] { return client.Compile(request, &artifact, &cache_hit); })) continue;
      if (cache_hit == false) ++record.hit_compiled;
      timed(kFetch, [&] { return client.Fetch(artifact); });
      continue;
    }
    const uint64_t variant = shared.next_variant.fetch_add(1);
    if (variant % 2 == 0) {  // a new bound for a compiled model
      request.set_model_digest(shared.warm[rng() % shared.warm.size()]);
      (*request.mutable_dim_bounds())["n"] =
          static_cast<int64_t>(1 + (shared.salt / 7 + variant / 2) % 1'000'000);
    } else {  // a new model
      std::string digest;
      const std::string model = BuildModel(shared.salt + variant);
      if (!timed(kUpload, [&] { return client.Upload(model, &digest); })) continue;
      request.set_model_digest(digest);
    }
    if (!timed(kMiss, [&] { return client.Compile(request, &artifact, &cache_hit); })) continue;
    if (cache_hit == true) ++record.miss_from_cache;
  }
}

// Uploads and compiles the warm pool, retrying back-pressure; false on any other error.
bool Setup(Shared& shared) {
  Client client(shared.address, shared.options.token);
  for (int i = 0; i < shared.options.models; ++i) {
    std::string digest;
    grpc::Status status = client.Upload(BuildModel(shared.salt ^ (0x5eed0000u + i)), &digest);
    for (int attempt = 0; status.ok() && attempt < 100; ++attempt) {
      kiln::v1::CompileRequest request;
      request.set_model_digest(digest);
      request.add_targets(shared.options.target);
      std::string artifact;
      std::optional<bool> cache_hit;
      status = client.Compile(request, &artifact, &cache_hit);
      if (status.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    if (!status.ok()) {
      std::fprintf(stderr, "setup: model %d: %s (code %d)\n", i, status.error_message().c_str(),
                   static_cast<int>(status.error_code()));
      return false;
    }
    shared.warm.push_back(digest);
  }
  return true;
}

// --- the report ----------------------------------------------------------------------------

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

std::string CodeName(int code) {
  static const char* const names[] = {"OK",
                                      "CANCELLED",
                                      "UNKNOWN",
                                      "INVALID_ARGUMENT",
                                      "DEADLINE_EXCEEDED",
                                      "NOT_FOUND",
                                      "ALREADY_EXISTS",
                                      "PERMISSION_DENIED",
                                      "RESOURCE_EXHAUSTED",
                                      "FAILED_PRECONDITION",
                                      "ABORTED",
                                      "OUT_OF_RANGE",
                                      "UNIMPLEMENTED",
                                      "INTERNAL",
                                      "UNAVAILABLE",
                                      "DATA_LOSS",
                                      "UNAUTHENTICATED"};
  return code >= 0 && code <= 16 ? names[code] : std::to_string(code);
}

double Percentile(std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  size_t i = static_cast<size_t>(p * (sorted.size() - 1) + 0.5);
  return sorted[std::min(i, sorted.size() - 1)];
}

std::string Mib(int64_t kib) {
  if (kib < 0) return "unknown";
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", kib / 1024.0);
  return text;
}

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s: missing value (or unknown flag)\n", flag.c_str());
      return false;
    }
    const std::string value = argv[++i];
    if (flag == "--kilnd")
      o->kilnd = value;
    else if (flag == "--server")
      o->server = value;
    else if (flag == "--clients")
      o->clients = std::atoi(value.c_str());
    else if (flag == "--seconds")
      o->seconds = std::atof(value.c_str());
    else if (flag == "--hit-ratio")
      o->hit_ratio = std::atof(value.c_str());
    else if (flag == "--models")
      o->models = std::atoi(value.c_str());
    else if (flag == "--target")
      o->target = value;
    else if (flag == "--max-jobs")
      o->max_jobs = std::atoi(value.c_str());
    else if (flag == "--max-queued-jobs")
      o->max_queued_jobs = std::atoi(value.c_str());
    else if (flag == "--token")
      o->token = value;
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return false;
    }
  }
  return o->clients > 0 && o->seconds > 0 && o->models > 0 && o->hit_ratio >= 0 &&
         o->hit_ratio <= 1;
}

Record Merge(std::vector<Record>& records) {
  Record all;
  for (Record& r : records) {
    for (int k = 0; k < kKinds; ++k) {
      all.samples[k].insert(all.samples[k].end(), r.samples[k].begin(), r.samples[k].end());
    }
    all.hit_compiled += r.hit_compiled;
    all.miss_from_cache += r.miss_from_cache;
    for (auto& [code, message] : r.first_error) all.first_error.insert({code, message});
  }
  return all;
}

// What the report says besides the samples.
struct RunFacts {
  double elapsed_s = 0;
  bool started_here = false;
  int64_t peak_rss_kib = -1, final_rss_kib = -1, peak_threads = -1;
  std::optional<kiln::v1::CacheStats> stats;
};

// Prints the report as Markdown tables; returns the number of requests that failed with a
// code other than OK and RESOURCE_EXHAUSTED.
int64_t PrintReport(const Options& options, Record& all, const RunFacts& facts) {
  int64_t requests = 0, exhausted = 0, failed = 0;
  std::map<int, int64_t> errors;
  for (int k = 0; k < kKinds; ++k) {
    for (const Sample& s : all.samples[k]) {
      ++requests;
      if (s.code == grpc::StatusCode::OK) continue;
      ++errors[s.code];
      if (s.code == grpc::StatusCode::RESOURCE_EXHAUSTED)
        ++exhausted;
      else
        ++failed;
    }
  }
  std::printf("\n| | |\n|---|---|\n");
  std::printf("| CPU | %s, %u online CPUs |\n", CpuModel().c_str(),
              std::thread::hardware_concurrency());
  std::printf("| clients | %d (a channel and connection each) |\n", options.clients);
  std::printf("| duration | %.1f s (%.0f s of new requests, then the ones in flight) |\n",
              facts.elapsed_s, options.seconds);
  std::printf(
      "| hit ratio | %.2f (%d warm models; misses: half new dim_bounds, half new models) |\n",
      options.hit_ratio, options.models);
  std::printf("| requests | %lld (%.1f req/s) |\n", static_cast<long long>(requests),
              requests / facts.elapsed_s);
  std::printf("| RESOURCE_EXHAUSTED (back-pressure) | %lld |\n", static_cast<long long>(exhausted));
  std::printf("| failed (any other non-OK code) | %lld |\n", static_cast<long long>(failed));
  std::printf("| hits that compiled / misses served from cache | %lld / %lld |\n",
              static_cast<long long>(all.hit_compiled),
              static_cast<long long>(all.miss_from_cache));
  if (facts.started_here) {
    std::printf("| kilnd peak RSS (VmHWM) / final RSS | %s / %s |\n",
                Mib(facts.peak_rss_kib).c_str(), Mib(facts.final_rss_kib).c_str());
    std::printf("| kilnd peak threads (sampled) | %lld |\n",
                static_cast<long long>(facts.peak_threads));
  } else {
    std::printf("| kilnd peak RSS | unknown (--server: not started here) |\n");
  }
  if (facts.stats) {
    std::printf("| server cache hits / misses (life of the cache) | %llu / %llu |\n",
                static_cast<unsigned long long>(facts.stats->hits()),
                static_cast<unsigned long long>(facts.stats->misses()));
  }

  std::printf(
      "\n| kind | requests | OK | RESOURCE_EXHAUSTED | other errors | p50 ms | p99 ms | max ms "
      "|\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (int k = 0; k < kKinds; ++k) {
    std::vector<double> ok_ms;
    int64_t re = 0, other = 0;
    for (const Sample& s : all.samples[k]) {
      if (s.code == grpc::StatusCode::OK)
        ok_ms.push_back(s.ms);
      else if (s.code == grpc::StatusCode::RESOURCE_EXHAUSTED)
        ++re;
      else
        ++other;
    }
    std::sort(ok_ms.begin(), ok_ms.end());
    std::printf("| %s | %zu | %zu | %lld | %lld | %.1f | %.1f | %.1f |\n", kKindNames[k],
                all.samples[k].size(), ok_ms.size(), static_cast<long long>(re),
                static_cast<long long>(other), Percentile(ok_ms, 0.5), Percentile(ok_ms, 0.99),
                ok_ms.empty() ? 0.0 : ok_ms.back());
  }
  std::printf("\nLatencies are of OK requests only.\n");
  if (!errors.empty()) {
    std::printf("\n| code | count | first message |\n|---|---|---|\n");
    for (auto& [code, count] : errors) {
      std::printf("| %s | %lld | %s |\n", CodeName(code).c_str(), static_cast<long long>(count),
                  all.first_error[code].c_str());
    }
  }
  return failed;
}

// Runs the clients until the time is up; samples the daemon's thread count meanwhile.
std::vector<Record> RunLoad(Shared& shared, const std::optional<Daemon>& daemon, RunFacts* facts) {
  std::atomic<bool> running{true};
  std::thread sampler([&] {
    while (daemon && running) {
      facts->peak_threads = std::max(facts->peak_threads, ProcStatusField(daemon->pid, "Threads"));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  std::vector<Record> records(shared.options.clients);
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  shared.end = start + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(shared.options.seconds));
  for (int i = 0; i < shared.options.clients; ++i) {
    threads.emplace_back(RunClient, std::ref(shared), i, std::ref(records[i]));
  }
  for (std::thread& t : threads) t.join();
  facts->elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
  running = false;
  sampler.join();
  return records;
}

}  // namespace

int main(int argc, char** argv) {
  Shared shared;
  if (!ParseArgs(argc, argv, &shared.options)) {
    std::fprintf(stderr,
                 "usage: kiln_load_test [--kilnd PATH | --server HOST:PORT] [--clients 64] "
                 "[--seconds 60] [--hit-ratio 0.8] [--models 16] [--target x86_64] "
                 "[--max-jobs N] [--max-queued-jobs N] [--token T]\n");
    return 2;
  }
  const Options& options = shared.options;
  std::optional<Daemon> daemon;
  if (options.server.empty()) {
    daemon = StartKilnd(options);
    if (!daemon) return 1;
    shared.address = daemon->address;
  } else {
    shared.address = options.server;
  }
  shared.salt = std::random_device{}() * uint64_t{1000003} + 1;
  std::printf("kilnd at %s%s\n", shared.address.c_str(),
              daemon ? (" (started here, data in " + daemon->dir.string() + ")").c_str() : "");
  std::fflush(stdout);

  const auto setup_start = Clock::now();
  if (!Setup(shared)) {
    if (daemon) {
      StopKilnd(*daemon, nullptr);
      std::filesystem::remove_all(daemon->dir);
    }
    return 1;
  }
  const double setup_s = std::chrono::duration<double>(Clock::now() - setup_start).count();
  std::printf("setup: %d models uploaded and compiled in %.1f s\n", options.models, setup_s);
  std::fflush(stdout);

  RunFacts facts;
  std::vector<Record> records = RunLoad(shared, daemon, &facts);
  Record all = Merge(records);
  kiln::v1::CacheStats stats;
  if (Client(shared.address, options.token).CacheStats(&stats).ok()) facts.stats = stats;
  if (daemon) {
    facts.started_here = true;
    facts.peak_rss_kib = ProcStatusField(daemon->pid, "VmHWM");
    facts.final_rss_kib = ProcStatusField(daemon->pid, "VmRSS");
  }
  int64_t failed = PrintReport(options, all, facts);

  if (daemon) {
    int exit_status = 0;
    std::optional<double> stop_s = StopKilnd(*daemon, &exit_status);
    if (!stop_s) {
      std::printf("\nkilnd did not exit within 30 s of SIGTERM; killed (log %s)\n",
                  (daemon->dir / "kilnd.log").c_str());
      ++failed;
    } else {
      std::printf("\nkilnd stopped %.2f s after SIGTERM, exit status %d\n", *stop_s,
                  WIFEXITED(exit_status) ? WEXITSTATUS(exit_status) : -WTERMSIG(exit_status));
      if (!WIFEXITED(exit_status) || WEXITSTATUS(exit_status) != 0) ++failed;
    }
    if (failed == 0) std::filesystem::remove_all(daemon->dir);
  }
  return failed == 0 ? 0 : 1;
}
