// `kiln jobs`: kilnd's compile and tune jobs, listed, watched, cancelled.
#include <chrono>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/commands.h"
#include "client/remote.h"

namespace kiln::client {
namespace {

std::string Lower(const std::string& name) {
  std::string text = name;
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// id, kind, state, targets, model, events, tenant; tab-separated.
void PrintJob(const v1::Job& job, std::ostream& out) {
  std::string targets;
  for (const std::string& target : job.targets()) {
    absl::StrAppend(&targets, targets.empty() ? "" : ",", target);
  }
  out << job.id() << "\t" << Lower(v1::Job::Kind_Name(job.kind())) << "\t"
      << Lower(v1::Job::State_Name(job.state())) << "\t" << targets << "\t" << job.model_digest()
      << "\t" << job.events() << " events";
  if (!job.tenant().empty()) out << "\ttenant " << job.tenant();
  if (job.error_code() != 0) {
    out << "\t" << absl::StatusCodeToString(static_cast<absl::StatusCode>(job.error_code())) << ": "
        << job.error_message();
  }
  out << "\n";
}

void PrintEvent(const v1::JobEvent& event, std::ostream& err) {
  if (event.has_compile()) return PrintCompileEvent(event.compile(), err);
  if (event.has_tune() && !event.tune().message().empty()) err << event.tune().message() << "\n";
}

// The job's own outcome, so a failed or cancelled job makes the command fail.
absl::Status OutcomeOf(const v1::Job& job) {
  if (job.state() == v1::Job::SUCCEEDED) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(job.error_code()),
                      absl::StrCat("job ", job.id(), ": ", job.error_message()));
}

}  // namespace

absl::Status Jobs(const JobsArgs& args, Console console) {
  absl::StatusOr<std::unique_ptr<RemoteKiln>> remote =
      RemoteKiln::Connect(args.server, std::chrono::seconds(args.timeout_s));
  if (!remote.ok()) return remote.status();
  if (args.action == "list") {
    absl::StatusOr<v1::ListJobsResponse> jobs = (*remote)->ListJobs();
    if (!jobs.ok()) return jobs.status();
    for (const v1::Job& job : jobs->jobs()) PrintJob(job, console.out);
    return absl::OkStatus();
  }
  absl::StatusOr<v1::Job> job;
  if (args.action == "get") {
    job = (*remote)->GetJob(args.job_id);
  } else if (args.action == "cancel") {
    job = (*remote)->CancelJob(args.job_id);
  } else {
    job = (*remote)->WatchJob(args.job_id, args.from_event,
                              [&](const v1::JobEvent& event) { PrintEvent(event, console.err); });
  }
  if (!job.ok()) return job.status();
  PrintJob(*job, console.out);
  return args.action == "watch" ? OutcomeOf(*job) : absl::OkStatus();
}

}  // namespace kiln::client
