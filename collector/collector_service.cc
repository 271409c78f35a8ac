// The collector service and server. Threading: see collector_service.h. Each stream's
// reactor serialises its own callbacks with a mutex: one read and one write may be in
// flight at a time, acks are cumulative so a pending ack is replaced by a newer one.
#include "collector/collector_service.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "collector/event_ingest.h"
#include "collector/server_claims.h"
#include "collector/stream_checks.h"
#include "collector/watch_delta.h"
#include "grpcpp/alarm.h"
#include "grpcpp/health_check_service_interface.h"
#include "ring/clocks.h"
#include "ring/collector_address.h"
#include "collector/finding_codec.h"

namespace collwatch {
void BlockAllSignalsInThisThread() {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
}

namespace {

class EventStreamReactor final
    : public grpc::ServerBidiReactor<v1::StreamEventsRequest, v1::StreamEventsResponse> {
 public:
  EventStreamReactor(CollectorService* service, grpc::CallbackServerContext* context)
      : service_(service), peer_(context->peer()), ingest_(service) {
    if (absl::Status auth = service_->Authenticate(*context); !auth.ok()) {
      service_->Log(LogLevel::kError, absl::StrCat("refused stream from ", peer_, ": ", auth.message()));
      service_->monitoring().Refused(auth.code(), 0);
      Finish(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, std::string(auth.message())));
      return;
    }
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    if (!ok) {  // the agent closed its side (or the call broke)
      FinishLocked(grpc::Status::OK);
      return;
    }
    absl::StatusOr<v1::StreamEventsResponse> answer = ingest_.Accept(request_);
    if (!answer.ok()) {
      service_->Log(LogLevel::kError,
                    absl::StrCat("stream from ", peer_, " (", ingest_.key().empty() ? "no hello" : ingest_.key(),
                                 ") ended: ", answer.status().ToString()));
      service_->monitoring().Refused(answer.status().code(), static_cast<uint64_t>(request_.events_size()));
      FinishLocked(grpc::Status(static_cast<grpc::StatusCode>(answer.status().code()),
                                std::string(answer.status().message())));
      return;
    }
    if (writing_) {
      // Acks are cumulative: a newer one replaces the pending one; resume points stay.
      pending_.set_acked_batch_seq(answer->acked_batch_seq());
      if (answer->resume_size() > 0) *pending_.mutable_resume() = answer->resume();
      if (answer->has_take_stacks()) *pending_.mutable_take_stacks() = answer->take_stacks();
      has_pending_ = true;
    } else {
      response_ = *std::move(answer);
      writing_ = true;
      StartWrite(&response_);
    }
    StartRead(&request_);
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    writing_ = false;
    if (ok && has_pending_ && !finish_status_) {
      response_ = pending_;
      pending_.Clear();
      has_pending_ = false;
      writing_ = true;
      StartWrite(&response_);
      return;
    }
    if (finish_status_) Finish(*finish_status_);
  }

  void OnDone() override {
    ingest_.Close();
    delete this;
  }

 private:
  // Finishes once no write is in flight (gRPC allows one operation of each kind).
  void FinishLocked(grpc::Status status) {
    if (finish_status_) return;
    finish_status_ = std::make_unique<grpc::Status>(std::move(status));
    if (!writing_) Finish(*finish_status_);
  }

  CollectorService* service_;
  std::string peer_;
  std::recursive_mutex mutex_;  // recursive: a reaction gRPC runs inline re-enters
  v1::StreamEventsRequest request_;
  v1::StreamEventsResponse response_;
  v1::StreamEventsResponse pending_;
  bool has_pending_ = false;
  bool writing_ = false;
  std::unique_ptr<grpc::Status> finish_status_;
  EventIngest ingest_;
};

}  // namespace

// Sends the cluster state, then again every watch interval (a gRPC alarm paces it, so no
// thread of ours ever touches a reactor that may be finishing). One write or one alarm is
// outstanding at a time; Finish comes from the write or alarm callback that sees the end.
class CollectorService::WatchReactor final : public grpc::ServerWriteReactor<v1::WatchResponse> {
 public:
  WatchReactor(CollectorService* service, grpc::CallbackServerContext* context, std::string job)
      : service_(service) {
    service_->watchers_.fetch_add(1);
    if (absl::Status auth = service_->Authenticate(*context); !auth.ok()) {
      service_->Log(LogLevel::kError, absl::StrCat("refused Watch from ", context->peer(), ": ", auth.message()));
      Finish(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, std::string(auth.message())));
      return;
    }
    const std::string served = service_->job();
    if (!job.empty() && !served.empty() && job != served) {
      Finish(grpc::Status(grpc::StatusCode::NOT_FOUND,
                          absl::StrCat("this collector serves job '", served, "', not '", job, "'")));
      return;
    }
    SendState();
  }

  void OnWriteDone(bool ok) override {
    bool finish = !ok || service_->stopping();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      finish = finish || cancelled_;
      alarm_pending_ = !finish;
    }
    if (finish) {
      Finish(grpc::Status::OK);
      return;
    }
    alarm_.Set(std::chrono::system_clock::now() +
                   std::chrono::microseconds(static_cast<int64_t>(service_->options().watch_interval_s * 1e6)),
               [this](bool fired) { OnAlarm(fired); });
  }

  void OnCancel() override {
    bool pending;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      cancelled_ = true;
      pending = alarm_pending_;
    }
    if (pending) alarm_.Cancel();  // its callback then finishes the call
  }

  void OnDone() override {
    CollectorService* service = service_;
    delete this;
    service->watchers_.fetch_sub(1);  // last: the service may go once none is left
  }

 private:
  void OnAlarm(bool fired) {
    bool finish;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      alarm_pending_ = false;
      finish = !fired || cancelled_ || service_->stopping();
    }
    if (finish) {
      Finish(grpc::Status::OK);
    } else {
      SendState();
    }
  }

  // The whole state first, then what changed since the previous message.
  void SendState() {
    v1::ClusterState current = service_->live_state().Snapshot(service_->job());
    if (sent_any_) {
      response_ = MakeWatchDelta(last_sent_, current);
    } else {
      response_.Clear();
      *response_.mutable_state() = current;
      response_.set_full(true);
      sent_any_ = true;
    }
    response_.set_collector_time_ns(RealtimeNs());
    last_sent_ = std::move(current);
    StartWrite(&response_);
  }

  CollectorService* service_;
  std::mutex mutex_;
  grpc::Alarm alarm_;
  v1::WatchResponse response_;
  v1::ClusterState last_sent_;  // what the dashboard has, to send the next delta against
  bool sent_any_ = false;
  bool alarm_pending_ = false;
  bool cancelled_ = false;
};

bool IsLoopbackAddress(const std::string& address) {
  if (absl::StartsWith(address, "unix:") || absl::StartsWith(address, "unix-abstract:")) return true;
  // host:port, [v6]:port, ipv4:host:port, ipv6:[v6]:port. The host must be a loopback IP
  // literal or "localhost": a name such as "127.example.com" may resolve anywhere.
  std::string host = address;
  if (absl::StartsWith(host, "ipv4:") || absl::StartsWith(host, "ipv6:")) host = host.substr(5);
  const size_t colon = host.rfind(':');
  if (colon == std::string::npos) return false;
  host = host.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  return inet_pton(AF_INET6, host.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

bool ConstantTimeEquals(const std::string& given, const std::string& expected) {
  // No early exit: every byte of `expected` is compared whatever `given` holds, so the
  // time taken shows neither where the first difference is nor whether the lengths differ.
  volatile unsigned char difference = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    const unsigned char given_byte = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    difference = difference | static_cast<unsigned char>(given_byte ^ static_cast<unsigned char>(expected[i]));
  }
  return difference == 0;
}

CollectorService::CollectorService(const CollectorOptions& options, std::unique_ptr<CollectorMonitoring> monitoring)
    : options_(options),
      monitoring_(monitoring != nullptr ? std::move(monitoring) : std::make_unique<CollectorMonitoring>()),
      store_(options.out_dir, StoreOptions{options.fsync}),
      online_analyzer_(options.analyzer),
      job_(options.job) {
  if (monitoring_->wants_process_changes()) live_state_.KeepProcessChanges();
  if (options_.analyze || monitoring_->wants_process_changes()) {
    analysis_thread_ = std::thread([this] { AnalysisLoop(); });
  }
}

CollectorService::~CollectorService() { StopAnalysis(); }

void CollectorService::StopAnalysis() {
  {
    std::lock_guard<std::mutex> lock(analysis_mutex_);
    analysis_stop_ = true;
  }
  analysis_wake_.notify_all();
  if (analysis_thread_.joinable()) analysis_thread_.join();
}

void CollectorService::AnalysisLoop() {
  BlockAllSignalsInThisThread();
  std::unique_lock<std::mutex> lock(analysis_mutex_);
  const auto period = std::chrono::duration<double>(options_.analyze_interval_s);
  while (!analysis_wake_.wait_for(lock, period, [this] { return analysis_stop_; })) {
    lock.unlock();
    AnalyseOnce();
    lock.lock();
  }
}

void CollectorService::AnalyseOnce(bool final_pass) {
  if (options_.analyze) {
    const std::string served = job();
    for (const analyzer::Finding& finding : online_analyzer_.Tick(static_cast<int64_t>(RealtimeNs()), final_pass)) {
      v1::Finding proto;
      FindingToProto(finding, &proto);
      live_state_.AddFinding(proto);
      Log(LogLevel::kFinding, absl::StrCat("finding: ", finding.headline));
      monitoring_->Finding(served, finding);
      if (analyzer::Analyzer::WantsStacks(finding)) {
        RequestStacks(online_analyzer_.StreamsNamedBy(finding), finding.headline);
      }
    }
    for (const auto& [index, finding] : online_analyzer_.TakeUpdatedFindings()) {
      v1::Finding proto;
      FindingToProto(finding, &proto);
      live_state_.ReplaceFinding(index, proto);
    }
    live_state_.SetInflight(online_analyzer_.Inflight());
  }
  if (monitoring_->wants_process_changes()) {
    uint64_t dropped = 0;
    const std::vector<ProcessChange> changes = live_state_.TakeProcessChanges(&dropped);
    monitoring_->ProcessChanges(changes, dropped);
  }
}

void CollectorService::RequestStacks(const std::vector<std::string>& keys, const std::string& reason) {
  std::lock_guard<std::mutex> lock(stacks_mutex_);
  for (const std::string& key : keys) {
    v1::StacksRequest& request = stacks_wanted_[key];
    request.set_request_id(next_stacks_request_++);
    request.set_reason(reason);
  }
}

std::optional<v1::StacksRequest> CollectorService::TakeStacksRequest(const std::string& key) {
  std::lock_guard<std::mutex> lock(stacks_mutex_);
  auto wanted = stacks_wanted_.find(key);
  if (wanted == stacks_wanted_.end()) return std::nullopt;
  v1::StacksRequest request = std::move(wanted->second);
  stacks_wanted_.erase(wanted);
  return request;
}

absl::Status CollectorService::WriteReport(const std::string& dir) {
  analyzer::ReportInfo info = online_analyzer_.Info(job());
  info.source = options_.out_dir;
  std::string error;
  if (!analyzer::WriteReportFiles(dir, online_analyzer_.Findings(), info, &error)) return absl::InternalError(error);
  return absl::OkStatus();
}

void CollectorService::StopWatchers() { stopping_ = true; }

std::string CollectorService::job() {
  std::lock_guard<std::mutex> lock(job_mutex_);
  return job_;
}

void CollectorService::Log(LogLevel level, const std::string& line) const {
  if (options_.log) WriteLog(level, "collwatch collector", line);
}

absl::Status CollectorService::Authenticate(const grpc::CallbackServerContext& context) const {
  if (options_.token.empty()) return absl::OkStatus();
  const auto& metadata = context.client_metadata();
  auto found = metadata.find(kTokenMetadataKey);
  if (found == metadata.end()) {
    return absl::UnauthenticatedError(absl::StrCat("no ", kTokenMetadataKey,
                                                   " metadata: this collector needs its token (agent --token-file)"));
  }
  if (!ConstantTimeEquals(std::string(found->second.data(), found->second.size()), options_.token)) {
    return absl::UnauthenticatedError("wrong token: check the agent's --token-file against the collector's");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<RankTraceWriter>> CollectorService::Hello(const v1::RankIdentity& identity,
                                                                         v1::StreamEventsResponse* answer) {
  if (absl::Status valid = CheckHelloIdentity(identity, kMaxStreamLanes); !valid.ok()) return valid;
  std::string served;
  {
    std::lock_guard<std::mutex> lock(job_mutex_);
    if (job_.empty()) job_ = identity.job();  // the first job to say hello is the one served
    served = job_;
  }
  if (identity.job() != served) {
    // The served job's findings and report say so: what they say of this rank may only
    // mean that its records never came in.
    const analyzer::RefusedStream refused{
        .job = identity.job(), .host = identity.host(), .pid = identity.pid(), .rank = identity.rank()};
    online_analyzer_.NoteRefusedStream(refused);
    live_state_.StreamRefused(refused);
    return absl::PermissionDeniedError(absl::StrCat("events of job '", identity.job(),
                                                    "' refused: this collector serves job '", served,
                                                    "' (give every node the same COLLWATCH_JOB_ID)"));
  }
  absl::StatusOr<std::shared_ptr<RankTraceWriter>> writer = store_.Writer(identity);
  if (!writer.ok()) return writer.status();
  for (const v1::LaneResume& resume : (*writer)->Resume()) *answer->add_resume() = resume;
  return writer;
}

grpc::ServerBidiReactor<v1::StreamEventsRequest, v1::StreamEventsResponse>* CollectorService::StreamEvents(
    grpc::CallbackServerContext* context) {
  return new EventStreamReactor(this, context);
}

grpc::ServerWriteReactor<v1::WatchResponse>* CollectorService::Watch(grpc::CallbackServerContext* context,
                                                                     const v1::WatchRequest* request) {
  return new WatchReactor(this, context, request->job());
}

grpc::ServerUnaryReactor* CollectorService::TakeStacks(grpc::CallbackServerContext* context,
                                                       const v1::TakeStacksRequest* request,
                                                       v1::TakeStacksResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (absl::Status auth = Authenticate(*context); !auth.ok()) {
    reactor->Finish(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, std::string(auth.message())));
    return reactor;
  }
  const std::string served = job();
  if (!request->job().empty() && !served.empty() && request->job() != served) {
    reactor->Finish(grpc::Status(grpc::StatusCode::NOT_FOUND,
                                 absl::StrCat("this collector serves job '", served, "', not '", request->job(), "'")));
    return reactor;
  }
  const std::vector<std::string> streams = live_state_.ConnectedStreams();
  RequestStacks(streams, "asked for from collwatch top");
  response->set_processes(static_cast<int32_t>(streams.size()));
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

absl::Status CheckListenAddress(const std::string& address) {
  char why[512];
  if (!CheckCollectorAddress(address.c_str(), /*min_port=*/0, why, sizeof why)) {
    return absl::InvalidArgumentError(absl::StrCat("cannot listen on ", why));
  }
  if (absl::StartsWith(address, "unix:")) {
    const std::filesystem::path socket = address.substr(5);
    const std::filesystem::path folder = socket.has_parent_path() ? socket.parent_path() : ".";
    std::error_code error;
    if (!std::filesystem::is_directory(folder, error)) {
      return absl::InvalidArgumentError(absl::StrCat("cannot listen on ", address, ": no folder ", folder.string()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CollectorServer>> CollectorServer::Start(const CollectorOptions& options) {
  if (absl::Status address = CheckListenAddress(options.listen); !address.ok()) return address;
  if (!IsLoopbackAddress(options.listen) && options.token.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "refusing to listen on ", options.listen,
        " without a token: anyone who reaches it could write traces. Give --token-file, or listen on 127.0.0.1"));
  }
  if (options.tls_cert_pem.empty() != options.tls_key_pem.empty()) {
    return absl::InvalidArgumentError("TLS needs both --tls-cert and --tls-key");
  }
  if (absl::Status folder = PrepareOutputFolder(options.out_dir); !folder.ok()) return folder;
  // The store is this collector's for its life, by folder and by path (server_claims.h).
  absl::StatusOr<FolderLock> lock = FolderLock::Take(options.out_dir, "another collector");
  if (!lock.ok()) return lock.status();
  absl::StatusOr<StorePathLock> path_lock = StorePathLock::Take(options.out_dir, options.log);
  if (!path_lock.ok()) return path_lock.status();
  if (absl::StartsWith(options.listen, "unix:")) {
    if (absl::Status socket = ClaimUnixSocketPath(options.listen.substr(5)); !socket.ok()) return socket;
  }
  auto monitoring = std::make_unique<CollectorMonitoring>();
  if (absl::Status started = monitoring->Start(options.monitoring); !started.ok()) return started;
  std::unique_ptr<CollectorServer> server(new CollectorServer());
  server->store_path_lock_ = *std::move(path_lock);
  server->store_lock_ = *std::move(lock);
  server->service_ = std::make_unique<CollectorService>(options, std::move(monitoring));
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (!options.tls_cert_pem.empty()) {
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({options.tls_key_pem, options.tls_cert_pem});
    credentials = grpc::SslServerCredentials(ssl);
  }
  // The standard grpc.health.v1 service, for Kubernetes' gRPC probes and load balancers:
  // it needs no token and says only whether the server serves (docs/monitoring.md).
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options.listen, credentials, &port);
  // gRPC sets SO_REUSEPORT by default: a second collector on the same port would bind too
  // and the agents would split between two stores.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterService(server->service_.get());
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(64 << 20);
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || (port == 0 && !absl::StartsWith(options.listen, "unix:"))) {
    server->service_->StopWatchers();
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.listen,
                                               " (address in use, or not an address of this machine)"));
  }
  if (absl::StartsWith(options.listen, "unix:")) {
    server->address_ = options.listen;
  } else {
    const size_t colon = options.listen.rfind(':');
    server->address_ = absl::StrCat(options.listen.substr(0, colon), ":", port);
  }
  if (grpc::HealthCheckServiceInterface* health = server->server_->GetHealthCheckService(); health != nullptr) {
    health->SetServingStatus(kCollectorServiceName, true);
  }
  if (!options.monitoring.metrics_listen.empty()) {
    absl::StatusOr<std::unique_ptr<MetricsEndpoint>> metrics =
        MetricsEndpoint::Start(options.monitoring.metrics_listen, server->service_.get());
    if (!metrics.ok()) return metrics.status();
    server->metrics_ = *std::move(metrics);
  }
  return server;
}

void CollectorServer::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  service_->StopWatchers();
  metrics_.reset();
  // No server when it could not listen: Start returns the error and this destructor runs.
  if (server_ != nullptr) {
    // Probes see the end before the port closes.
    if (grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService(); health != nullptr) {
      health->Shutdown();
    }
  }
  if (server_ != nullptr) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
}

CollectorServer::~CollectorServer() {
  Shutdown();
  server_.reset();
  // A Watch reactor's alarm runs on gRPC's own threads, which the server does not wait
  // for: the service (its live state) must outlive the last reactor's callback.
  for (int waited_ms = 0; service_->watchers_.load() > 0 && waited_ms < 5000; ++waited_ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace collwatch
