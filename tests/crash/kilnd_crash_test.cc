// Crash safety of the real kilnd (issue 7, deliverable 5). Kills the daemon with SIGKILL at
// random points while clients upload, compile and fetch, restarts it on the same data dir and
// checks what survived: kiln.db passes integrity_check, every acknowledged upload is still
// there, and every artifact ever announced is either served whole (its bytes hash to its
// digest) or NOT_FOUND, never partial. A second test stops it with SIGTERM mid-job: health
// goes NOT_SERVING, jobs finish or are cancelled within the grace, the log is checkpointed.
//
// KILN_CRASH_ROUNDS (default 100) and KILN_CRASH_SEED (default: random, printed) make a
// failure reproducible and a soak longer (tests/soak/crash_soak.sh); KILN_CRASH_KEEP=1 keeps
// the data dir and kilnd's log.
#include <gtest/gtest.h>
#include <sys/prctl.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <set>

#include "cache/digest.h"
#include "kiln/v1/kiln.grpc.pb.h"
#include "tests/crash/kilnd_process.h"
#include "tests/support/onnx_builder.h"

namespace kiln::crash {
namespace {

using testing::OnnxBuilder;

constexpr size_t kChunkBytes = 1 << 20;  // the API's largest chunk
constexpr int kWorkers = 3;

int64_t EnvInt(const char* name, int64_t fallback) {
  const char* text = std::getenv(name);
  return text != nullptr && *text != '\0' ? std::strtoll(text, nullptr, 10) : fallback;
}

// ---------------------------------------------------------------------------------------
// What the clients upload. Every model has an id; its bytes follow from the id alone, so
// the ledger keeps ids, not megabytes.

enum class ModelKind { kSmall, kMedium, kBlob };

struct ModelSpec {
  ModelKind kind;
  uint64_t id;
  size_t size;  // kMedium: floats in the constant; kBlob: bytes
};

std::vector<float> Floats(uint64_t id, size_t n) {
  std::mt19937_64 rng(id * 0x9e3779b97f4a7c15ull + 1);
  std::uniform_real_distribution<float> uniform(-1, 1);
  std::vector<float> values(n);
  for (float& v : values) v = uniform(rng);
  return values;
}

// y = x + c, x [n, k]: a compile of well under a second. A small model has 4 constants;
// a medium one has up to a few hundred thousand, so its artifact (weights embedded) is big
// enough for a kill to land while the cache writes it.
std::string Onnx(uint64_t id, size_t k) {
  OnnxBuilder b;
  b.Input("x", {"n", static_cast<int64_t>(k)});
  b.FloatInitializer("c", {static_cast<int64_t>(k)}, Floats(id, k));
  b.Node("Add", {"x", "c"}, {"y"});
  b.Output("y", {"n", static_cast<int64_t>(k)});
  return b.Serialize();
}

std::string ModelBytes(const ModelSpec& spec) {
  switch (spec.kind) {
    case ModelKind::kSmall:
      return Onnx(spec.id, 4);
    case ModelKind::kMedium:
      return Onnx(spec.id, spec.size);
    case ModelKind::kBlob: {
      // Not ONNX: only stored, never compiled. Big, so a kill lands mid-upload or mid-write.
      std::string bytes(spec.size, '\0');
      std::mt19937_64 rng(spec.id);
      for (size_t i = 0; i < bytes.size(); i += 8) {
        const uint64_t word = rng();
        std::memcpy(bytes.data() + i, &word, std::min<size_t>(8, bytes.size() - i));
      }
      return bytes;
    }
  }
  return "";
}

// ---------------------------------------------------------------------------------------
// The calls, through the generated stub, so a truncated stream shows.

std::unique_ptr<grpc::ClientContext> Context(int seconds = 30) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  return context;
}

grpc::Status Upload(v1::Kiln::Stub& stub, const std::string& bytes,
                    v1::UploadModelResponse* response) {
  auto context = Context();
  std::unique_ptr<grpc::ClientWriter<v1::UploadModelRequest>> writer =
      stub.UploadModel(context.get(), response);
  for (size_t offset = 0; offset == 0 || offset < bytes.size(); offset += kChunkBytes) {
    v1::UploadModelRequest message;
    if (offset == 0) {
      message.set_name("crash.onnx");
      message.set_sha256(cache::Sha256Digest(bytes));
      message.set_total_bytes(bytes.size());
    }
    message.set_chunk(bytes.substr(offset, kChunkBytes));
    if (!writer->Write(message)) break;
  }
  writer->WritesDone();
  return writer->Finish();
}

struct CompileOutcome {
  grpc::Status status;
  std::vector<v1::CompileEvent> done;  // TARGET_DONE events
  std::vector<v1::CompileEvent> all;
};

CompileOutcome Compile(v1::Kiln::Stub& stub, const v1::CompileRequest& request, int seconds = 60) {
  auto context = Context(seconds);
  CompileOutcome outcome;
  std::unique_ptr<grpc::ClientReader<v1::CompileEvent>> reader =
      stub.Compile(context.get(), request);
  v1::CompileEvent event;
  while (reader->Read(&event)) {
    if (event.kind() == v1::CompileEvent::TARGET_DONE) outcome.done.push_back(event);
    outcome.all.push_back(event);
  }
  outcome.status = reader->Finish();
  return outcome;
}

CompileOutcome CompileFor(v1::Kiln::Stub& stub, const std::string& model_digest,
                          const std::string& target = "x86_64") {
  v1::CompileRequest request;
  request.set_model_digest(model_digest);
  request.add_targets(target);
  return Compile(stub, request);
}

enum class FetchVerdict {
  kServedWhole,  // OK, bytes hash to the digest, sizes agree, a manifest
  kNotFound,
  kCorrupt,  // OK, but the bytes or the header are wrong: must never happen
  kFailed,   // any other status
};

struct FetchOutcome {
  FetchVerdict verdict;
  grpc::Status status;
  std::string why;  // for kCorrupt
};

FetchOutcome Fetch(v1::Kiln::Stub& stub, const std::string& digest) {
  v1::FetchArtifactRequest request;
  request.set_artifact_digest(digest);
  auto context = Context();
  std::unique_ptr<grpc::ClientReader<v1::ArtifactChunk>> reader =
      stub.FetchArtifact(context.get(), request);
  v1::ArtifactChunk chunk, first;
  cache::Sha256Hasher hasher;
  uint64_t received = 0;
  int chunks = 0;
  while (reader->Read(&chunk)) {
    if (chunks++ == 0) first = chunk;
    hasher.Update(chunk.chunk());
    received += chunk.chunk().size();
  }
  FetchOutcome outcome{FetchVerdict::kFailed, reader->Finish(), ""};
  if (outcome.status.error_code() == grpc::StatusCode::NOT_FOUND) {
    outcome.verdict = FetchVerdict::kNotFound;
  }
  if (!outcome.status.ok()) return outcome;
  const std::string got = hasher.FinishDigest();
  outcome.verdict = FetchVerdict::kCorrupt;
  if (chunks == 0) {
    outcome.why = "OK with no chunk";
  } else if (got != digest) {
    outcome.why = "bytes hash to " + got + ", " + std::to_string(received) + " bytes";
  } else if (first.total_bytes() != received) {
    outcome.why = "header says " + std::to_string(first.total_bytes()) + " bytes, got " +
                  std::to_string(received);
  } else if (first.artifact_digest() != digest) {
    outcome.why = "header names " + first.artifact_digest();
  } else if (first.manifest_json().empty()) {
    outcome.why = "no manifest";
  } else {
    outcome.verdict = FetchVerdict::kServedWhole;
  }
  return outcome;
}

// ---------------------------------------------------------------------------------------
// The ledger: what the daemon acknowledged, and the counts the test asserts on.

struct Counts {
  std::atomic<int64_t> rounds{0}, kills{0}, startup_kills{0};
  std::atomic<int64_t> kills_after_a_compile{0};  // held until the round's first TARGET_DONE
  // Calls the kill cut short: evidence that it landed in the middle of work.
  std::atomic<int64_t> cut_uploads{0}, cut_compiles{0}, cut_fetches{0};
  std::atomic<int64_t> adopted_workers{0};   // kilnd's children still alive right after a kill
  std::atomic<int64_t> leaked_temp_dirs{0};  // left in kilnd's TMPDIR by the kills
  std::atomic<int64_t> uploads_acked{0}, blob_bytes_acked{0}, compiles_done{0};
  std::atomic<int64_t> fetched_live{0};  // served whole while the kills went on
  std::atomic<int64_t> upload_checks{0}, artifact_checks{0}, recompiles{0};
  std::atomic<int64_t> served_whole_after{0}, not_found_after{0};
  std::atomic<int64_t> recompiled_differently{0};  // another digest than the first compile's
  // Must stay 0.
  std::atomic<int64_t> corrupt_served{0}, lost_uploads{0}, integrity_failures{0};
  std::atomic<int64_t> failed_checks{0};      // unexpected statuses on a healthy restarted daemon
  std::atomic<int64_t> surviving_workers{0};  // alive 2 s after the daemon that started them
};

class Ledger {
 public:
  void AddUpload(const ModelSpec& spec, const std::string& digest) {
    std::lock_guard lock(mu_);
    uploads_.push_back({spec, digest});
    if (spec.kind != ModelKind::kBlob) compilable_.push_back({spec, digest});
  }
  // `model`: the model it was compiled from. Returns the artifact first announced for it.
  std::string AddArtifact(const std::string& digest, const std::string& model) {
    std::lock_guard lock(mu_);
    if (artifact_set_.insert(digest).second) artifacts_.push_back(digest);
    return first_artifact_.emplace(model, digest).first->second;
  }
  std::optional<std::string> RandomArtifact(std::mt19937_64& rng) {
    std::lock_guard lock(mu_);
    if (artifacts_.empty()) return std::nullopt;
    return artifacts_[rng() % artifacts_.size()];
  }
  struct Upload {
    ModelSpec spec;
    std::string digest;
  };
  // Snapshots, for the checks after a restart.
  std::vector<Upload> uploads() {
    std::lock_guard lock(mu_);
    return uploads_;
  }
  std::vector<Upload> compilable() {
    std::lock_guard lock(mu_);
    return compilable_;
  }
  std::vector<std::string> artifacts() {
    std::lock_guard lock(mu_);
    return artifacts_;
  }

 private:
  std::mutex mu_;
  std::vector<Upload> uploads_, compilable_;
  std::vector<std::string> artifacts_;
  std::set<std::string> artifact_set_;
  std::map<std::string, std::string> first_artifact_;  // model digest -> artifact digest
};

// Items [from, end) plus up to `sample` random earlier ones.
template <typename T>
std::vector<T> RecentAndSample(const std::vector<T>& all, size_t from, size_t sample,
                               std::mt19937_64& rng) {
  std::vector<T> picked(all.begin() + std::min(from, all.size()), all.end());
  for (size_t i = 0; i < sample && from > 0; ++i) picked.push_back(all[rng() % from]);
  return picked;
}

class CrashTest : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_ = static_cast<uint64_t>(EnvInt("KILN_CRASH_SEED", std::random_device{}()));
    rounds_ = EnvInt("KILN_CRASH_ROUNDS", 100);
    keep_ = EnvInt("KILN_CRASH_KEEP", 0) != 0;
    dir_ = fs::path(::testing::TempDir()) /
           ("kiln_crash_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "data");
    std::cout << "seed " << seed_ << " (KILN_CRASH_SEED), " << rounds_
              << " rounds (KILN_CRASH_ROUNDS), data dir " << dir_ << std::endl;
  }
  void TearDown() override {
    if (keep_ || HasFailure()) {
      std::cout << "kept " << dir_ << " (kilnd.log holds the daemon's log)" << std::endl;
    } else {
      fs::remove_all(dir_);
    }
  }

  fs::path data() const { return dir_ / "data"; }

  uint64_t seed_ = 0;
  int64_t rounds_ = 0;
  bool keep_ = false;
  fs::path dir_;
};

// ---------------------------------------------------------------------------------------
// The clients while the kill is coming: any call may fail (the daemon dies under it), but
// whatever the daemon answered OK goes in the ledger, and whatever it served must be whole.

struct Chaos {
  v1::Kiln::Stub& stub;
  Ledger& ledger;
  Counts& counts;
  std::atomic<uint64_t>& next_id;
  std::atomic<bool>& stop;
  std::mutex& report_mu;
  std::vector<std::string>& problems;

  void Problem(const std::string& what) {
    std::lock_guard lock(report_mu);
    problems.push_back(what);
  }

  // A call that failed under fire failed because the daemon died: UNAVAILABLE, nothing else.
  void ExpectCutByKill(const char* what, const grpc::Status& status) {
    if (status.error_code() == grpc::StatusCode::UNAVAILABLE) return;
    ++counts.failed_checks;
    Problem(std::string(what) + " while the kill was coming: code " +
            std::to_string(status.error_code()) + " " + status.error_message());
  }

  void CheckFetch(const std::string& digest) {
    FetchOutcome fetched = Fetch(stub, digest);
    if (fetched.verdict == FetchVerdict::kServedWhole) ++counts.fetched_live;
    if (fetched.verdict == FetchVerdict::kFailed) {
      ++counts.cut_fetches;
      ExpectCutByKill("fetch", fetched.status);
    }
    if (fetched.verdict == FetchVerdict::kCorrupt) {
      ++counts.corrupt_served;
      Problem("served a partial or corrupt artifact " + digest + ": " + fetched.why);
    }
  }

  // Uploads a new model; compiles and fetches it when it is ONNX. False once calls fail.
  bool UploadAndCompile(ModelSpec spec, bool compile) {
    const std::string bytes = ModelBytes(spec);
    v1::UploadModelResponse response;
    grpc::Status status = Upload(stub, bytes, &response);
    if (!status.ok()) {
      ++counts.cut_uploads;
      ExpectCutByKill("upload", status);
      return false;
    }
    if (response.model_digest() != cache::Sha256Digest(bytes)) {
      Problem("upload acknowledged under " + response.model_digest());
    }
    ledger.AddUpload(spec, response.model_digest());
    ++counts.uploads_acked;
    if (spec.kind == ModelKind::kBlob) counts.blob_bytes_acked += bytes.size();
    if (!compile || stop) return !stop;
    CompileOutcome outcome = CompileFor(stub, response.model_digest());
    for (const v1::CompileEvent& done : outcome.done) {
      ledger.AddArtifact(done.artifact_digest(), response.model_digest());
      ++counts.compiles_done;
    }
    if (!outcome.status.ok()) {
      ++counts.cut_compiles;
      ExpectCutByKill("compile", outcome.status);
    }
    if (!outcome.status.ok() || stop) return false;
    for (const v1::CompileEvent& done : outcome.done) CheckFetch(done.artifact_digest());
    return true;
  }

  void Run(uint64_t worker_seed) {
    std::mt19937_64 rng(worker_seed);
    while (!stop) {
      const int dice = static_cast<int>(rng() % 100);
      bool going = true;
      if (dice < 45) {
        going = UploadAndCompile({ModelKind::kSmall, next_id++, 4}, true);
      } else if (dice < 60) {
        going = UploadAndCompile({ModelKind::kMedium, next_id++, 16384 + rng() % 196608}, true);
      } else if (dice < 75) {
        going =
            UploadAndCompile({ModelKind::kBlob, next_id++, 256 * 1024 + rng() % (3 << 20)}, false);
      } else if (std::optional<std::string> digest = ledger.RandomArtifact(rng)) {
        CheckFetch(*digest);
      } else {
        going = UploadAndCompile({ModelKind::kSmall, next_id++, 4}, false);
      }
      if (!going) break;
    }
  }
};

// ---------------------------------------------------------------------------------------
// The checks on a restarted daemon.

struct Verifier {
  v1::Kiln::Stub& stub;
  Ledger& ledger;
  Counts& counts;
  std::vector<std::string>& problems;

  // Uploading the same bytes again must find them already there.
  void CheckUpload(const Ledger::Upload& upload) {
    ++counts.upload_checks;
    v1::UploadModelResponse response;
    grpc::Status status = Upload(stub, ModelBytes(upload.spec), &response);
    if (!status.ok()) {
      ++counts.failed_checks;
      problems.push_back("re-upload of " + upload.digest + ": " + status.error_message());
    } else if (!response.already_present()) {
      ++counts.lost_uploads;
      problems.push_back("acknowledged upload lost: " + upload.digest);
    }
  }

  // Whole or NOT_FOUND.
  void CheckArtifact(const std::string& digest) {
    ++counts.artifact_checks;
    FetchOutcome fetched = Fetch(stub, digest);
    switch (fetched.verdict) {
      case FetchVerdict::kServedWhole:
        ++counts.served_whole_after;
        break;
      case FetchVerdict::kNotFound:
        ++counts.not_found_after;
        break;
      case FetchVerdict::kCorrupt:
        ++counts.corrupt_served;
        problems.push_back("served a partial or corrupt artifact " + digest + ": " + fetched.why);
        break;
      case FetchVerdict::kFailed:
        ++counts.failed_checks;
        problems.push_back("fetch " + digest + ": code " +
                           std::to_string(fetched.status.error_code()) + " " +
                           fetched.status.error_message());
        break;
    }
  }

  // Compiles again (a cache hit or a rebuild) and fetches what it announces: must be whole.
  void Recompile(const Ledger::Upload& model) {
    ++counts.recompiles;
    CompileOutcome outcome = CompileFor(stub, model.digest);
    if (!outcome.status.ok() || outcome.done.size() != 1) {
      ++counts.failed_checks;
      problems.push_back("recompile of " + model.digest + ": code " +
                         std::to_string(outcome.status.error_code()) + " " +
                         outcome.status.error_message());
      return;
    }
    const std::string& digest = outcome.done[0].artifact_digest();
    if (ledger.AddArtifact(digest, model.digest) != digest) ++counts.recompiled_differently;
    FetchOutcome fetched = Fetch(stub, digest);
    if (fetched.verdict == FetchVerdict::kServedWhole) {
      ++counts.served_whole_after;
    } else if (fetched.verdict == FetchVerdict::kCorrupt) {
      ++counts.corrupt_served;
      problems.push_back("served a partial or corrupt artifact " + digest + ": " + fetched.why);
    } else {
      ++counts.failed_checks;
      problems.push_back("fetch right after its compile announced it, " + digest + ": code " +
                         std::to_string(fetched.status.error_code()) + " " +
                         fetched.status.error_message());
    }
  }
};

// Polls `count` until it passes `before` or `timeout` has passed.
void WaitForMore(const std::atomic<int64_t>& count, int64_t before, Clock::duration timeout) {
  const auto deadline = Clock::now() + timeout;
  while (count <= before && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void PrintCounts(const Counts& c, double seconds) {
  std::cout << "rounds " << c.rounds << ", SIGKILLs " << c.kills << " (" << c.kills_after_a_compile
            << " held until the round's first TARGET_DONE), " << seconds << " s\n"
            << "acknowledged: " << c.uploads_acked << " uploads (" << (c.blob_bytes_acked >> 20)
            << " MiB of big blobs), " << c.compiles_done << " TARGET_DONE\n"
            << "served whole under fire: " << c.fetched_live << "\n"
            << "cut short by a kill: " << c.cut_uploads << " uploads, " << c.cut_compiles
            << " compiles, " << c.cut_fetches << " fetches; " << c.startup_kills
            << " extra kills while kilnd opened kiln.db; " << c.adopted_workers
            << " kilnd children alive right after a kill, " << c.surviving_workers
            << " still alive 2 s later; " << c.leaked_temp_dirs
            << " temporary dirs left in DATA_DIR/tmp\n"
            << "after restarts: " << c.upload_checks << " uploads re-checked, " << c.artifact_checks
            << " announced artifacts fetched, " << c.recompiles << " recompiles; "
            << c.served_whole_after << " served whole, " << c.not_found_after << " NOT_FOUND; "
            << c.recompiled_differently
            << " recompiles announced another artifact than the model's first compile\n"
            << "partial/corrupt served " << c.corrupt_served << ", acknowledged uploads lost "
            << c.lost_uploads << ", integrity failures " << c.integrity_failures
            << ", unexpected statuses " << c.failed_checks << std::endl;
}

TEST_F(CrashTest, SigkillAtRandomPointsLosesNothingAcknowledgedAndServesNothingPartial) {
  fs::create_directories(dir_ / "tmp");
  KilndProcess kilnd(KILND_PATH, data(), dir_ / "kilnd.log", dir_ / "tmp");
  Ledger ledger;
  Counts counts;
  std::atomic<uint64_t> next_id{seed_ << 20};
  std::vector<std::string> problems;
  std::mt19937_64 rng(seed_);
  const auto start = Clock::now();
  size_t uploads_seen = 0, artifacts_seen = 0, compilable_seen = 0;

  // What a killed kilnd leaves running (compile workers) is reparented here, to be counted.
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);

  for (int64_t round = 0; round <= rounds_ && problems.size() < 20; ++round) {
    if (round > 0 && rng() % 8 == 0) {
      // Now and then a kill while the daemon opens kiln.db (quick check, log replay).
      ASSERT_EQ(kilnd.Spawn(), "");
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 30000));
      kilnd.Signal(SIGKILL);
      ASSERT_TRUE(kilnd.Wait(std::chrono::seconds(10)).has_value());
      ++counts.startup_kills;
      const std::string integrity = IntegrityCheckCopy(data(), dir_ / "scratch");
      if (integrity != "ok") {
        ++counts.integrity_failures;
        problems.push_back("startup kill before round " + std::to_string(round) +
                           ": integrity_check: " + integrity);
      }
    }
    const std::string started = kilnd.Start();
    ASSERT_EQ(started, "") << "round " << round;
    std::shared_ptr<grpc::Channel> channel = kilnd.NewChannel();
    std::unique_ptr<v1::Kiln::Stub> stub = v1::Kiln::NewStub(channel);

    // What the previous rounds left: this round's news in full, a sample of the older.
    // After the last kill, everything.
    const bool last = round == rounds_;
    Verifier verifier{*stub, ledger, counts, problems};
    const std::vector<Ledger::Upload> uploads = ledger.uploads();
    for (const auto& upload : RecentAndSample(uploads, last ? 0 : uploads_seen, 4, rng)) {
      verifier.CheckUpload(upload);
    }
    const std::vector<std::string> artifacts = ledger.artifacts();
    for (const auto& digest : RecentAndSample(artifacts, last ? 0 : artifacts_seen, 6, rng)) {
      verifier.CheckArtifact(digest);
    }
    const std::vector<Ledger::Upload> compilable = ledger.compilable();
    std::vector<Ledger::Upload> recompile =
        RecentAndSample(compilable, last ? 0 : compilable_seen, 0, rng);
    std::shuffle(recompile.begin(), recompile.end(), rng);
    if (!last && recompile.size() > 3) recompile.resize(3);
    for (const auto& model : recompile) verifier.Recompile(model);
    uploads_seen = uploads.size();
    artifacts_seen = artifacts.size();
    compilable_seen = compilable.size();
    if (last) break;

    // Work, and a SIGKILL somewhere in it.
    std::atomic<bool> stop{false};
    std::mutex report_mu;
    std::vector<std::thread> workers;
    const uint64_t round_seed = rng();
    const int64_t compiles_before = counts.compiles_done;
    for (int i = 0; i < kWorkers; ++i) {
      workers.emplace_back([&, i] {
        Chaos{*stub, ledger, counts, next_id, stop, report_mu, problems}.Run(round_seed + i);
      });
    }
    // Every fourth round the kill waits for the round's first acknowledged compile (30 s at
    // most), then comes within the same window: on a loaded machine a compile can outlast the
    // whole window, and then no artifact is acknowledged under fire and the checks on them
    // check nothing (CI once saw none in 100 rounds, the conformance suite running beside it).
    if (rng() % 4 == 0) {
      ++counts.kills_after_a_compile;
      WaitForMore(counts.compiles_done, compiles_before, std::chrono::seconds(30));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 300000));
    kilnd.Signal(SIGKILL);
    stop = true;
    ++counts.kills;
    const bool died = kilnd.Wait(std::chrono::seconds(10)).has_value();
    for (std::thread& worker : workers) worker.join();
    ASSERT_TRUE(died) << "kilnd outlived SIGKILL";
    ++counts.rounds;
    counts.adopted_workers += AdoptedSurvivors(std::chrono::seconds(0)).size();
    for (pid_t survivor : AdoptedSurvivors(std::chrono::seconds(2))) {
      ++counts.surviving_workers;
      problems.push_back("round " + std::to_string(round) + ": pid " + std::to_string(survivor) +
                         " (" + ReadFile("/proc/" + std::to_string(survivor) + "/cmdline") +
                         ") outlived the killed kilnd by 2 s");
      kill(survivor, SIGKILL);
    }

    const std::string integrity = IntegrityCheckCopy(data(), dir_ / "scratch");
    if (integrity != "ok") {
      ++counts.integrity_failures;
      problems.push_back("round " + std::to_string(round) + ": integrity_check: " + integrity);
    }
    if (round % 10 == 9) {
      std::cout << "round " << round + 1 << ": " << counts.uploads_acked << " uploads, "
                << counts.compiles_done << " artifacts acknowledged, "
                << fs::file_size(data() / "kiln.db") / 1024 << " KiB kiln.db" << std::endl;
    }
  }
  // kilnd empties DATA_DIR/tmp when it starts, so what killed runs left there (link files of
  // compiles cut short) is gone; the running, idle kilnd has nothing there.
  for (const fs::directory_entry& entry : fs::directory_iterator(data() / "tmp")) {
    ++counts.leaked_temp_dirs;
    if (counts.leaked_temp_dirs == 1) std::cout << "left behind: " << entry.path() << std::endl;
  }
  EXPECT_EQ(counts.leaked_temp_dirs, 0);
  // No crash left a torn blob for the store to find and quarantine.
  {
    std::unique_ptr<v1::Kiln::Stub> stub = v1::Kiln::NewStub(kilnd.NewChannel());
    v1::CacheStats stats;
    auto context = Context();
    grpc::Status status = stub->GetCacheStats(context.get(), {}, &stats);
    EXPECT_TRUE(status.ok()) << status.error_message();
    std::cout << "cache at the end: " << stats.blobs() << " blobs, " << (stats.blob_bytes() >> 20)
              << " MiB, " << stats.models() << " models, " << stats.artifacts() << " artifacts, "
              << stats.quarantined() << " quarantined" << std::endl;
    EXPECT_EQ(stats.quarantined(), 0u) << "the store found corrupt blobs after the crashes";
  }
  // The last start stops cleanly, so the data dir is left as a normal stop leaves it.
  kilnd.Signal(SIGTERM);
  std::optional<int> status = kilnd.Wait(std::chrono::seconds(30));
  EXPECT_TRUE(status.has_value() && WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
  EXPECT_EQ(IntegrityCheck(data() / "kiln.db"), "ok");

  PrintCounts(counts, std::chrono::duration<double>(Clock::now() - start).count());
  for (const std::string& problem : problems) ADD_FAILURE() << problem;
  EXPECT_EQ(counts.rounds, rounds_);
  EXPECT_EQ(counts.corrupt_served, 0);
  EXPECT_EQ(counts.lost_uploads, 0);
  EXPECT_EQ(counts.integrity_failures, 0);
  EXPECT_EQ(counts.failed_checks, 0);
  EXPECT_EQ(counts.surviving_workers, 0);
  // The kills landed while work was acknowledged, not only on an idle daemon.
  EXPECT_GT(counts.uploads_acked, rounds_);
  EXPECT_GT(counts.compiles_done, 0);
}

// ---------------------------------------------------------------------------------------
// SIGTERM: drain, then stop.

// y = a @ w: a [n, 64], w [64, 48]: one tunable kernel, so a tuning budget keeps a job busy.
std::string MatmulModel(uint64_t id) {
  OnnxBuilder b;
  b.Input("a", {"n", 64});
  b.FloatInitializer("w", {64, 48}, Floats(id, 64 * 48));
  b.Node("MatMul", {"a", "w"}, {"y"});
  b.Output("y", {"n", 48});
  return b.Serialize();
}

TEST_F(CrashTest, SigtermDrainsJobsStopsServingAndCheckpoints) {
  constexpr int kDrainSeconds = 5;
  KilndProcess kilnd(KILND_PATH, data(), dir_ / "kilnd.log");
  ASSERT_EQ(kilnd.Start({"--drain-seconds", std::to_string(kDrainSeconds), "--max-jobs", "2"}), "");
  std::shared_ptr<grpc::Channel> channel = kilnd.NewChannel();
  std::unique_ptr<v1::Kiln::Stub> stub = v1::Kiln::NewStub(channel);
  ASSERT_EQ(HealthStatus(*channel, std::chrono::milliseconds(5000)), 1);

  std::string digests[3];
  for (int i = 0; i < 3; ++i) {
    v1::UploadModelResponse response;
    ASSERT_TRUE(Upload(*stub, MatmulModel(seed_ + i), &response).ok());
    digests[i] = response.model_digest();
  }

  // A compile that tunes for 2 s: it finishes within the grace.
  std::atomic<bool> compile_running{false}, compile_ended{false};
  CompileOutcome compile;
  Clock::time_point compile_end;
  std::thread compiler([&] {
    v1::CompileRequest request;
    request.set_model_digest(digests[0]);
    request.add_targets("host");
    request.set_tune_trials(1000000);
    request.set_tune_seconds(2);
    auto context = Context(120);
    std::unique_ptr<grpc::ClientReader<v1::CompileEvent>> reader =
        stub->Compile(context.get(), request);
    v1::CompileEvent event;
    while (reader->Read(&event)) {
      if (event.kind() == v1::CompileEvent::TUNING) compile_running = true;
      if (event.kind() == v1::CompileEvent::TARGET_DONE) compile.done.push_back(event);
    }
    compile.status = reader->Finish();
    compile_end = Clock::now();
    compile_ended = true;
  });
  // A tune for a minute: it outlasts the grace and is cancelled at its end.
  std::atomic<bool> tune_running{false}, tune_ended{false};
  grpc::Status tune_status;
  Clock::time_point tune_end;
  std::thread tuner([&] {
    v1::TuneRequest request;
    request.set_model_digest(digests[1]);
    request.set_target("host");
    request.set_trials(1000000);
    request.set_seconds(60);
    (*request.mutable_dim_values())["n"] = 64;
    auto context = Context(120);
    std::unique_ptr<grpc::ClientReader<v1::TuneEvent>> reader = stub->Tune(context.get(), request);
    v1::TuneEvent event;
    while (reader->Read(&event)) tune_running = true;
    tune_status = reader->Finish();
    tune_end = Clock::now();
    tune_ended = true;
  });
  const auto wait_deadline = Clock::now() + std::chrono::seconds(60);
  while (!(compile_running && tune_running) && !compile_ended && !tune_ended &&
         Clock::now() < wait_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!(compile_running && tune_running)) {
    kilnd.Signal(SIGKILL);
    compiler.join();
    tuner.join();
    FAIL() << "the jobs never started tuning: compile " << compile.status.error_code() << " "
           << compile.status.error_message() << ", tune " << tune_status.error_code() << " "
           << tune_status.error_message();
  }

  const Clock::time_point sigterm = Clock::now();
  kilnd.Signal(SIGTERM);

  // Health stops answering SERVING at once, and does not come back.
  int health = 1;
  while (health == 1 && Clock::now() < sigterm + std::chrono::seconds(2)) {
    health = HealthStatus(*channel, std::chrono::milliseconds(500));
  }
  EXPECT_NE(health, 1) << "still SERVING 2 s after SIGTERM";
  std::cout << "health after SIGTERM: " << health << " (2 NOT_SERVING, <0 a failed call) after "
            << std::chrono::duration<double>(Clock::now() - sigterm).count() << " s" << std::endl;
  // A new job is refused while draining.
  CompileOutcome late = CompileFor(*stub, digests[2], "host");
  EXPECT_FALSE(late.status.ok()) << "a compile submitted during the drain was accepted";
  std::cout << "compile during the drain: code " << late.status.error_code() << " "
            << late.status.error_message() << std::endl;
  for (int i = 0; i < 5; ++i) {
    const int again = HealthStatus(*channel, std::chrono::milliseconds(500));
    EXPECT_NE(again, 1) << "SERVING again during the drain";
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }

  compiler.join();
  tuner.join();
  const auto grace = std::chrono::seconds(kDrainSeconds);
  EXPECT_TRUE(compile.status.ok()) << compile.status.error_message();
  EXPECT_EQ(compile.done.size(), 1u);
  EXPECT_LT(compile_end - sigterm, grace + std::chrono::seconds(2));
  EXPECT_TRUE(tune_status.error_code() == grpc::StatusCode::CANCELLED ||
              tune_status.error_code() == grpc::StatusCode::UNAVAILABLE ||
              tune_status.error_code() == grpc::StatusCode::OK)
      << tune_status.error_code() << " " << tune_status.error_message();
  EXPECT_LT(tune_end - sigterm, grace + std::chrono::seconds(3));
  std::cout << "compile ended after "
            << std::chrono::duration<double>(compile_end - sigterm).count()
            << " s, tune ended after " << std::chrono::duration<double>(tune_end - sigterm).count()
            << " s with code " << tune_status.error_code() << " " << tune_status.error_message()
            << std::endl;

  std::optional<int> status = kilnd.Wait(grace + std::chrono::seconds(5));
  ASSERT_TRUE(status.has_value()) << "kilnd still running " << kDrainSeconds + 5
                                  << " s after SIGTERM";
  std::cout << "kilnd exited after "
            << std::chrono::duration<double>(Clock::now() - sigterm).count() << " s" << std::endl;
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << "wait status " << *status;
  const fs::path wal = data() / "kiln.db-wal";
  EXPECT_TRUE(!fs::exists(wal) || fs::file_size(wal) == 0)
      << "kiln.db-wal holds " << fs::file_size(wal) << " bytes after a clean stop";
  EXPECT_EQ(IntegrityCheck(data() / "kiln.db"), "ok");

  // The job that finished during the drain left its artifact.
  if (!compile.done.empty()) {
    ASSERT_EQ(kilnd.Start(), "");
    std::shared_ptr<grpc::Channel> again = kilnd.NewChannel();
    std::unique_ptr<v1::Kiln::Stub> stub2 = v1::Kiln::NewStub(again);
    FetchOutcome fetched = Fetch(*stub2, compile.done[0].artifact_digest());
    EXPECT_EQ(fetched.verdict, FetchVerdict::kServedWhole)
        << fetched.why << " " << fetched.status.error_message();
    kilnd.Signal(SIGTERM);
    EXPECT_TRUE(kilnd.Wait(std::chrono::seconds(15)).has_value());
  }
}

}  // namespace
}  // namespace kiln::crash
