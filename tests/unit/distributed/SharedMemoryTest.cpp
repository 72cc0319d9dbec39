// Shared memory between a worker and a ps on one host (docs/protocol.md,
// "Shared memory"): a ps task in this process with the job's real TLS
// material, reached over its Unix socket as dtf-run's tasks on one host are;
// PsClient's pulls and pushes through its regions give bit-identical
// tensors to the bytes path (f32 and the bf16 wire); a region the ps must
// not trust (a name outside the directory or of another task, a symlink, a
// FIFO, another mode or owner, another size, a slot or value past the
// mapping, a directory others may enter) is refused with a message while
// the ps goes on serving; a worker whose region is refused, or that cannot
// make one, sends bytes and says so once; its regions go with it, and
// those of a killed process go with the next run of its task.
#include "runtime/cluster/Certificates.h"
#include "runtime/core/Bf16.h"
#include "runtime/distributed/ParameterServer.h"
#include "runtime/distributed/PsClient.h"
#include "runtime/distributed/SharedRegion.h"
#include "runtime/distributed/TensorMessage.h"
#include "runtime/distributed/Wire.h"
#include "runtime/plan/PlanReader.h"
#include "schema/ClusterSpec.h"
#include "schema/Placement.h"
#include "tests/support/OneVariablePs.h"

#include <gtest/gtest.h>

#include <grpc/grpc.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

namespace dtf::dist {
namespace {

constexpr int64_t kElements = 100000; // 400 KB: more than a 64 KiB chunk

// gRPC 1.51's shutdown, when the last channel of a test goes, sometimes
// waits 10 s for its executor thread's poll after these TLS channels: one
// reference held for the whole process keeps each test from paying it.
[[maybe_unused]] const bool kGrpcKeptUp = (grpc_init(), true);

std::string readAll(const std::string &path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The region files of worker.0 in `dir`.
std::vector<std::string> regionsIn(const std::string &dir) {
  std::vector<std::string> names;
  if (DIR *d = ::opendir(dir.c_str())) {
    while (dirent *e = ::readdir(d))
      if (std::string(e->d_name).rfind(regionPrefix("worker.0"), 0) == 0)
        names.push_back(e->d_name);
    ::closedir(d);
  }
  return names;
}

// The file mapped at `p` in this process ("" when none): from
// /proc/self/maps, whose lines end with the mapped file's path.
std::string mappedFileAt(const void *p) {
  std::ifstream maps("/proc/self/maps");
  const auto at = reinterpret_cast<uintptr_t>(p);
  for (std::string line; std::getline(maps, line);) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi) != 2 || at < lo ||
        at >= hi)
      continue;
    const size_t slash = line.find('/');
    return slash == std::string::npos ? "" : line.substr(slash);
  }
  return "";
}

// Whether the ps's `log` says it moved `calls` ("N pulls, M pushes")
// through shared memory and read `inPlace` pushed values in their slots.
::testing::AssertionResult saidThrough(const std::string &log,
                                       const std::string &calls,
                                       int inPlace) {
  const std::string want = "through shared memory: " + calls;
  const size_t at = log.find(want);
  const std::string read =
      "; " + std::to_string(inPlace) + " pushed values read where they lay";
  if (at != std::string::npos && log.find(read, at) != std::string::npos)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "the ps did not say '" << want << " (...)" << read << "':\n"
         << log;
}

class SharedMemory : public ::testing::Test {
protected:
  void SetUp() override {
    root_ = ::testing::TempDir() + "dtf-shm-test-" + std::to_string(getpid());
    ASSERT_EQ(std::system(("rm -rf '" + root_ + "'").c_str()), 0);
    ASSERT_EQ(::mkdir(root_.c_str(), 0700), 0);
    shmDir_ = root_ + "/shm";
    plan_ = testing::oneVariableSgdPlan(kElements, "shm");
    ASSERT_TRUE(
        plan::placeVariables(plan_, 1, "round_robin", &placement_).isOk());
    address_ = "127.0.0.1:" + std::to_string(testing::freeLoopbackPort());
    cluster::ClusterSpec spec;
    ASSERT_TRUE(
        cluster::ClusterSpec::parseJson(
            "{\"ps\": [\"" + address_ + "\"], \"worker\": [\"127.0.0.1:1\"]}",
            "test", &spec)
            .isOk());
    ASSERT_TRUE(
        cluster::writeClusterCertificates(spec, root_ + "/certs", false, 1)
            .isOk());
    psConfig_.roster.ps.push_back({"ps.0", address_});
    psConfig_.roster.workers.push_back({"worker.0", "127.0.0.1:1"});
    psConfig_.planPath = "shm.plan";
    psConfig_.planFingerprint = 42;
    psConfig_.chunkBytes = 65536;
    psLog_ = root_ + "/ps.log";
    psOut_ = std::fopen(psLog_.c_str(), "w");
    psConfig_.out = psOut_;
    workerLog_ = root_ + "/worker.log";
    workerOut_ = std::fopen(workerLog_.c_str(), "w");
    workerConfig_ = psConfig_;
    workerConfig_.out = workerOut_;
    ASSERT_TRUE(wire(&psConfig_.transport, "ps.0").isOk());
    ASSERT_TRUE(wire(&workerConfig_.transport, "worker.0").isOk());
    ASSERT_TRUE(workerConfig_.transport.sharedMemoryTo(address_));
    ASSERT_TRUE(workerConfig_.transport.checkRegionDirectory().isOk());
    ps_ = std::thread([this] {
      code_ = runParameterServer(plan_, placement_, 0, psConfig_);
    });
    channel_ = workerConfig_.transport.channel(address_);
    stub_ = rpc::ParameterServer::NewStub(channel_);
    raw_ = std::make_unique<grpc::GenericStub>(channel_);
    ASSERT_TRUE(channel_->WaitForConnected(std::chrono::system_clock::now() +
                                           std::chrono::seconds(20)));
    caller_.set_task("worker.0");
    caller_.set_plan_fingerprint(42);
  }

  // A task's transport: the job's TLS material, this test's socket and
  // region directories.
  Status wire(Transport *t, const std::string &task) {
    t->taskAt[address_] = "ps.0";
    t->taskAt["127.0.0.1:1"] = "worker.0";
    t->socketDir = root_ + "/sockets";
    t->shmDir = shmDir_;
    DTF_RETURN_IF_ERROR(loadTlsMaterial(root_ + "/certs", task, t));
    return t->checkSocketDirectory();
  }

  // Stops the ps; its log.
  std::string stop() {
    if (ps_.joinable()) {
      grpc::ClientContext ctx;
      setDeadline(&ctx, std::chrono::milliseconds(5000));
      rpc::ShutdownRequest req;
      *req.mutable_caller() = caller_;
      rpc::ShutdownReply reply;
      (void)stub_->Shutdown(&ctx, req, &reply);
      ps_.join();
      EXPECT_EQ(code_, 0);
    }
    if (psOut_)
      std::fflush(psOut_);
    return readAll(psLog_);
  }

  // Starts the ps again (after stop()), its log in a fresh file.
  void restartPs() {
    std::fclose(psOut_);
    psOut_ = std::fopen(psLog_.c_str(), "w");
    psConfig_.out = psOut_;
    ps_ = std::thread([this] {
      code_ = runParameterServer(plan_, placement_, 0, psConfig_);
    });
    ASSERT_TRUE(channel_->WaitForConnected(std::chrono::system_clock::now() +
                                           std::chrono::seconds(20)));
  }

  void TearDown() override {
    if (stub_)
      (void)stop();
    if (psOut_)
      std::fclose(psOut_);
    if (workerOut_)
      std::fclose(workerOut_);
    (void)std::system(
        ("chmod -R u+rwx '" + root_ + "'; rm -rf '" + root_ + "'").c_str());
  }

  // Sets the variable to `values` (the chief's Initialize).
  void initialize(const Tensor &values) {
    rpc::InitializeRequest req;
    *req.mutable_caller() = caller_;
    req.set_force(true);
    toWire("big", values, req.add_values());
    grpc::ClientContext ctx;
    setDeadline(&ctx, std::chrono::milliseconds(10000));
    rpc::InitializeReply reply;
    grpc::Status st = stub_->Initialize(&ctx, req, &reply);
    ASSERT_TRUE(st.ok()) << describe(st);
  }

  static Tensor pattern(float scale) {
    Tensor t = Tensor::zeros(DType::F32, {kElements});
    for (int64_t i = 0; i < kElements; ++i)
      t.data<float>()[i] = scale * float(i % 977) / 977.0f + 1.0f / 3.0f;
    return t;
  }

  // worker.0's PsClient with `config`, connected, pulling into its store.
  struct Worker {
    Links links;
    PsClient client;
    exec::VariableStore store;
    Worker(SharedMemory &test, const TaskConfig &config)
        : links(config, "worker.0"),
          client(test.plan_, test.placement_, links, &test.plan_.train_step()) {
      EXPECT_TRUE(
          store.add("big", Tensor::zeros(DType::F32, {kElements})).isOk());
      client.bind(&store);
      EXPECT_TRUE(client.connect().isOk());
    }
    Status pull() {
      int64_t step = 0;
      return client.pull(false, false, &step);
    }
  };

  // A pull through PsClient with `config`, into a fresh store.
  Tensor pullWith(const TaskConfig &config) {
    Worker w(*this, config);
    Status s = w.pull();
    EXPECT_TRUE(s.isOk()) << s.message();
    Tensor out = Tensor::zeros(DType::F32, {kElements});
    std::memcpy(out.rawData(), w.store.find("big")->rawData(), out.byteSize());
    return out;
  }

  // A push of (grad, lr) through PsClient with `config`.
  void pushWith(const TaskConfig &config, const Tensor &grad, float lr) {
    Worker w(*this, config);
    ASSERT_TRUE(w.pull().isOk()); // the version
    Tensor rate = Tensor::zeros(DType::F32, {});
    rate.data<float>()[0] = lr;
    PsClient::PushResult result;
    Status s = w.client.push(
        [&](const std::string &key) -> const Tensor * {
          return key == "big:grad" ? &grad : &rate;
        },
        {}, &result);
    ASSERT_TRUE(s.isOk()) << s.message();
  }

  // A raw pull whose reply goes into `slice`; its status.
  grpc::Status pullInto(const rpc::RegionSlice &slice) {
    rpc::PullRequest req;
    *req.mutable_caller() = caller_;
    req.add_names("big");
    *req.mutable_reply_into() = slice;
    grpc::ClientContext ctx;
    setDeadline(&ctx, std::chrono::milliseconds(10000));
    grpc::ByteBuffer response;
    return rawCall(*raw_, &ctx, kPullMethod, serializeMessage(req), &response);
  }

  // A file in the region directory, as a region of worker.0 would be named.
  std::string regionFile(const std::string &suffix, mode_t mode,
                         uint64_t bytes) {
    const std::string name = regionPrefix("worker.0") + suffix;
    const std::string path = shmDir_ + "/" + name;
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    EXPECT_GE(fd, 0) << path;
    EXPECT_EQ(::ftruncate(fd, off_t(bytes)), 0);
    EXPECT_EQ(::fchmod(fd, mode), 0);
    ::close(fd);
    return name;
  }

  static rpc::RegionSlice sliceOf(const std::string &name, uint64_t bytes,
                                  uint64_t offset = 0,
                                  uint64_t capacity = uint64_t(-1)) {
    rpc::RegionSlice s;
    s.set_region(name);
    s.set_region_bytes(bytes);
    s.set_offset(offset);
    s.set_capacity(capacity == uint64_t(-1) ? bytes - offset : capacity);
    return s;
  }

  std::string root_, shmDir_, address_, psLog_, workerLog_;
  plan::Plan plan_;
  plan::Placement placement_;
  TaskConfig psConfig_, workerConfig_;
  std::FILE *psOut_ = nullptr, *workerOut_ = nullptr;
  std::thread ps_;
  int code_ = -1;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<rpc::ParameterServer::Stub> stub_;
  std::unique_ptr<grpc::GenericStub> raw_;
  rpc::Caller caller_;
};

TEST_F(SharedMemory, PullsAndPushesMatchTheBytesPathBitForBit) {
  TaskConfig bytes = workerConfig_;
  bytes.transport.sharedMemory = false; // --same-host unix
  const Tensor start = pattern(3.0f);
  initialize(start);
  Tensor viaShm = pullWith(workerConfig_);
  Tensor viaBytes = pullWith(bytes);
  EXPECT_EQ(std::memcmp(viaShm.rawData(), start.rawData(), start.byteSize()),
            0);
  EXPECT_EQ(std::memcmp(viaShm.rawData(), viaBytes.rawData(), start.byteSize()),
            0);

  // The same push from the same start, once each way.
  const Tensor grad = pattern(-0.7f);
  pushWith(workerConfig_, grad, 0.01f);
  Tensor afterShm = pullWith(bytes);
  initialize(start);
  pushWith(bytes, grad, 0.01f);
  Tensor afterBytes = pullWith(bytes);
  EXPECT_NE(std::memcmp(afterShm.rawData(), start.rawData(), start.byteSize()),
            0)
      << "the push changed nothing";
  EXPECT_EQ(
      std::memcmp(afterShm.rawData(), afterBytes.rawData(), start.byteSize()),
      0);

  // --wire bf16: narrowed into the region, widened out of it.
  TaskConfig bf16 = workerConfig_, bf16Bytes = bytes;
  bf16.wireBf16 = bf16Bytes.wireBf16 = true;
  initialize(start);
  pushWith(bf16, grad, 0.01f);
  Tensor narrowShm = pullWith(bf16);
  initialize(start);
  pushWith(bf16Bytes, grad, 0.01f);
  Tensor narrowBytes = pullWith(bf16Bytes);
  EXPECT_EQ(
      std::memcmp(narrowShm.rawData(), narrowBytes.rawData(), start.byteSize()),
      0);
  EXPECT_NE(
      std::memcmp(narrowShm.rawData(), afterShm.rawData(), start.byteSize()), 0)
      << "bf16 rounds what f32 keeps";

  // Each PsClient's regions went with it.
  EXPECT_TRUE(regionsIn(shmDir_).empty());
  // 4 pulls and 2 pushes with shared memory on: all of them through it; an
  // async ps read each push's two values (gradient, rate) where they lay.
  EXPECT_TRUE(saidThrough(stop(), "4 pulls, 2 pushes", 4));
}

// A sync ps keeps a push's values past its call (until the update's other
// gradients come), so it copies them out of the caller's slot; the update is
// the async one's, bit for bit.
TEST_F(SharedMemory, ASyncPsCopiesAPushOutOfTheSlotAndAppliesTheSameUpdate) {
  TaskConfig bytes = workerConfig_;
  bytes.transport.sharedMemory = false;
  const Tensor start = pattern(3.0f), grad = pattern(-0.7f);
  initialize(start);
  pushWith(workerConfig_, grad, 0.01f);
  const Tensor async = pullWith(bytes);
  EXPECT_TRUE(saidThrough(stop(), "1 pulls, 1 pushes", 2));

  plan_.mutable_training()->set_update("sync");
  plan_.mutable_training()->set_replication("between_graph");
  plan_.mutable_training()->set_replicas_to_aggregate(1);
  restartPs();
  initialize(start);
  pushWith(workerConfig_, grad, 0.01f);
  const Tensor sync = pullWith(bytes);
  EXPECT_NE(std::memcmp(sync.rawData(), start.rawData(), start.byteSize()), 0)
      << "the sync push changed nothing";
  EXPECT_EQ(std::memcmp(sync.rawData(), async.rawData(), start.byteSize()), 0);
  EXPECT_TRUE(saidThrough(stop(), "1 pulls, 1 pushes", 0));
}

// The variables a worker pulls from a ps on its host live in a region of
// their own, where the ps writes a pull: the pull lands in them with no copy,
// in the same place every time, and they hold what the bytes path gives.
TEST_F(SharedMemory, PulledVariablesLiveInTheirRegionAndPullsLandInPlace) {
  TaskConfig bytes = workerConfig_;
  bytes.transport.sharedMemory = false;
  const Tensor start = pattern(3.0f);
  initialize(start);
  {
    Worker w(*this, workerConfig_);
    const void *own = w.store.find("big")->rawData();
    EXPECT_EQ(mappedFileAt(own), "");
    ASSERT_TRUE(w.pull().isOk());
    const Tensor *big = w.store.find("big");
    const std::string file = mappedFileAt(big->rawData());
    EXPECT_EQ(file.rfind(shmDir_ + "/" + regionPrefix("worker.0"), 0), 0u)
        << "the variable is not in a region of worker.0: '" << file << "'";
    EXPECT_EQ(std::memcmp(big->rawData(), start.rawData(), start.byteSize()),
              0);
    EXPECT_EQ(regionsIn(shmDir_).size(), 1u);

    // A push, then a pull into the same place: the pushed update, as the
    // bytes path reads it.
    const void *home = big->rawData();
    const Tensor grad = pattern(-0.7f);
    Tensor rate = Tensor::zeros(DType::F32, {});
    rate.data<float>()[0] = 0.01f;
    ASSERT_TRUE(w.client
                    .push(
                        [&](const std::string &key) -> const Tensor * {
                          return key == "big:grad" ? &grad : &rate;
                        },
                        {}, nullptr)
                    .isOk());
    ASSERT_TRUE(w.pull().isOk());
    EXPECT_EQ(w.store.find("big")->rawData(), home);
    const Tensor viaBytes = pullWith(bytes);
    EXPECT_NE(std::memcmp(viaBytes.rawData(), start.rawData(),
                          start.byteSize()),
              0)
        << "the push changed nothing";
    EXPECT_EQ(std::memcmp(home, viaBytes.rawData(), start.byteSize()), 0);
  }
  // The region went with the worker's variables.
  EXPECT_TRUE(regionsIn(shmDir_).empty());
  EXPECT_TRUE(saidThrough(stop(), "2 pulls, 1 pushes", 2));
}

// A worker's gradients are made in a region of their own, where the ps reads
// a push: after the first push (copied in) the step's output is given a
// buffer there, and a push of it copies nothing. What the ps applies is what
// the bytes path applies. A failed push moves the output out of the region.
TEST_F(SharedMemory, PushedGradientsAreMadeInTheirRegionAndPushedInPlace) {
  TaskConfig bytes = workerConfig_;
  bytes.transport.sharedMemory = false;
  const Tensor start = pattern(3.0f);
  const Tensor g1 = pattern(-0.7f), g2 = pattern(0.4f);
  Tensor rate = Tensor::zeros(DType::F32, {});
  rate.data<float>()[0] = 0.01f;
  initialize(start);
  Tensor got;
  {
    Worker w(*this, workerConfig_);
    ASSERT_TRUE(w.pull().isOk()); // the version
    // The "step's outputs": the gradient, then what the push placed.
    std::map<std::string, Tensor> outputs{{"big:grad", g1}};
    std::map<std::string, int> placements;
    PsClient::PushOptions options;
    options.place = [&](const std::string &key, Tensor buffer) {
      ++placements[key];
      if (key != "big:grad")
        return false; // as an executor for a fetch no kernel makes
      outputs[key] = std::move(buffer);
      return true;
    };
    auto value = [&](const std::string &key) -> const Tensor * {
      return key == "big:grad" ? &outputs.at(key) : &rate;
    };
    ASSERT_TRUE(w.client.push(value, options, nullptr).isOk());
    EXPECT_EQ(w.client.pushedInPlace(), 0);
    EXPECT_EQ(w.client.pushedCopied(), 2);
    const std::string file = mappedFileAt(outputs.at("big:grad").rawData());
    EXPECT_EQ(file.rfind(shmDir_ + "/" + regionPrefix("worker.0"), 0), 0u)
        << "the gradient is not in a region of worker.0: '" << file << "'";
    EXPECT_NE(file, mappedFileAt(w.store.find("big")->rawData()))
        << "the pushed gradient shares the pulled variables' region";

    // The next step's kernel writes the gradient there; the push reads it
    // in place (the rate, which stayed put, is copied again).
    const void *placed = outputs.at("big:grad").rawData();
    std::memcpy(outputs.at("big:grad").rawData(), g2.rawData(), g2.byteSize());
    ASSERT_TRUE(w.pull().isOk());
    ASSERT_TRUE(w.client.push(value, options, nullptr).isOk());
    EXPECT_EQ(w.client.pushedInPlace(), 1);
    EXPECT_EQ(w.client.pushedCopied(), 3);
    EXPECT_EQ(outputs.at("big:grad").rawData(), placed);
    EXPECT_EQ(std::memcmp(placed, g2.rawData(), g2.byteSize()), 0)
        << "the ps, reading the push in the slot, wrote into it";
    EXPECT_EQ(placements["big:grad"], 1);
    for (const auto &[key, n] : placements) {
      if (key != "big:grad") {
        EXPECT_EQ(n, 1) << key << ": refused once, asked again";
      }
    }
    got = pullWith(bytes);

    // A failed push (the ps gone): the gradient leaves the region, which
    // the ps might still read.
    EXPECT_TRUE(saidThrough(stop(), "2 pulls, 2 pushes", 4));
    EXPECT_FALSE(w.client.push(value, options, nullptr).isOk());
    EXPECT_EQ(placements["big:grad"], 2);
    EXPECT_EQ(mappedFileAt(outputs.at("big:grad").rawData()), "");
    EXPECT_EQ(std::memcmp(outputs.at("big:grad").rawData(), g2.rawData(),
                          g2.byteSize()),
              0)
        << "the gradient moved out of the region without its values";
    outputs.clear();
  }
  EXPECT_TRUE(regionsIn(shmDir_).empty());
  // The same two updates through the bytes path, on a fresh ps.
  restartPs();
  initialize(start);
  pushWith(bytes, g1, 0.01f);
  pushWith(bytes, g2, 0.01f);
  const Tensor want = pullWith(bytes);
  EXPECT_NE(std::memcmp(want.rawData(), start.rawData(), start.byteSize()), 0);
  EXPECT_EQ(std::memcmp(got.rawData(), want.rawData(), want.byteSize()), 0)
      << "the pushes in place applied other values than the bytes path";
}

TEST_F(SharedMemory, RefusesRegionsItMustNotTrustAndGoesOnServing) {
  initialize(pattern(1.0f));
  const uint64_t size = 4 * kElements + 4096;
  auto expectRefused = [&](const rpc::RegionSlice &s, grpc::StatusCode code,
                           const char *says) {
    grpc::Status st = pullInto(s);
    EXPECT_EQ(st.error_code(), code) << describe(st);
    EXPECT_NE(st.error_message().find(says), std::string::npos) << describe(st);
  };
  const std::string good = regionFile("1-1-good", 0600, size);
  // Names that leave the directory, or are no region of this caller.
  expectRefused(sliceOf("../" + good, size), grpc::StatusCode::INVALID_ARGUMENT,
                "is not a region name of worker.0");
  expectRefused(sliceOf(regionPrefix("worker.0") + "1/../../x", size),
                grpc::StatusCode::INVALID_ARGUMENT, "is not a region name");
  expectRefused(sliceOf(regionPrefix("worker.1") + "1-1-x", size),
                grpc::StatusCode::INVALID_ARGUMENT,
                "is not a region name of worker.0");
  expectRefused(sliceOf(regionPrefix("worker.0") + "404", size),
                grpc::StatusCode::INVALID_ARGUMENT, "No such file");
  // A symlink to a good region, a FIFO, a directory.
  const std::string link = regionPrefix("worker.0") + "2-2-link";
  ASSERT_EQ(
      ::symlink((shmDir_ + "/" + good).c_str(), (shmDir_ + "/" + link).c_str()),
      0);
  expectRefused(sliceOf(link, size), grpc::StatusCode::PERMISSION_DENIED,
                "it is a symbolic link");
  const std::string fifo = regionPrefix("worker.0") + "3-3-fifo";
  ASSERT_EQ(::mkfifo((shmDir_ + "/" + fifo).c_str(), 0600), 0);
  expectRefused(sliceOf(fifo, size), grpc::StatusCode::PERMISSION_DENIED,
                "is not a regular file");
  // Another mode, another size.
  expectRefused(sliceOf(regionFile("4-4-open", 0644, size), size),
                grpc::StatusCode::PERMISSION_DENIED, "has mode 0644, not 0600");
  expectRefused(sliceOf(good, size + 4096), grpc::StatusCode::INVALID_ARGUMENT,
                "but the call says");
  // Another owner (only root can make one).
  if (geteuid() == 0) {
    const std::string theirs = regionFile("5-5-theirs", 0600, size);
    ASSERT_EQ(::chown((shmDir_ + "/" + theirs).c_str(), 65534, 65534), 0);
    expectRefused(sliceOf(theirs, size), grpc::StatusCode::PERMISSION_DENIED,
                  "belongs to uid 65534");
  } else {
    std::printf("[ note ] another owner's region not tried: only root can "
                "give a file away\n");
  }
  // A slot past the mapping, in every way the numbers can overflow.
  expectRefused(sliceOf(good, size, size, 1),
                grpc::StatusCode::INVALID_ARGUMENT, "lies outside the region");
  expectRefused(sliceOf(good, size, 64, size),
                grpc::StatusCode::INVALID_ARGUMENT, "lies outside the region");
  expectRefused(sliceOf(good, size, uint64_t(-64), 128),
                grpc::StatusCode::INVALID_ARGUMENT, "lies outside the region");
  // A push whose value lies past its slot: nothing applied.
  {
    Tensor grad = pattern(1.0f), lr = Tensor::zeros(DType::F32, {});
    rpc::PushRequest req;
    *req.mutable_caller() = caller_;
    describeTensor("big:grad", grad, req.add_values());
    describeTensor("big:apply_sgd:2", lr, req.add_values());
    req.mutable_values(0)->set_offset(0);
    req.mutable_values(1)->set_offset(size - 2); // 4 bytes at size - 2
    *req.mutable_values_in() = sliceOf(good, size);
    grpc::ClientContext ctx;
    setDeadline(&ctx, std::chrono::milliseconds(10000));
    grpc::ByteBuffer response;
    grpc::Status st = rawCall(*raw_, &ctx, kPushMethod,
                              packTensors(req, {}, false), &response);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << describe(st);
    EXPECT_NE(st.error_message().find("'big:apply_sgd:2' (4 bytes at offset " +
                                      std::to_string(size - 2) +
                                      ") lies outside its shared-memory "
                                      "slot"),
              std::string::npos)
        << describe(st);
  }
  // A region directory others may enter: nothing in it is trusted.
  ASSERT_EQ(::chmod(shmDir_.c_str(), 0755), 0);
  const std::string fresh = regionFile("6-6-fresh", 0600, size);
  expectRefused(sliceOf(fresh, size), grpc::StatusCode::PERMISSION_DENIED,
                "is not a directory of this user with mode 0700");
  ASSERT_EQ(::chmod(shmDir_.c_str(), 0700), 0);

  // Still serving: the good region works, and holds the variable.
  EXPECT_TRUE(pullInto(sliceOf(good, size)).ok());
  Tensor viaRegion = Tensor::zeros(DType::F32, {kElements});
  std::ifstream in(shmDir_ + "/" + good, std::ios::binary);
  in.read(static_cast<char *>(viaRegion.rawData()),
          std::streamsize(viaRegion.byteSize()));
  const Tensor want = pattern(1.0f);
  EXPECT_EQ(std::memcmp(viaRegion.rawData(), want.rawData(), want.byteSize()),
            0);
  EXPECT_EQ(std::memcmp(pullWith(workerConfig_).rawData(), want.rawData(),
                        want.byteSize()),
            0);
}

TEST_F(SharedMemory, AWorkerWithoutRegionsSendsBytesAndSaysSoOnce) {
  initialize(pattern(2.0f));
  TaskConfig noDir = workerConfig_;
  noDir.transport.shmDir = root_ + "/missing/shm"; // cannot be made there
  Worker w(*this, noDir);
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(w.pull().isOk());
  const Tensor want = pattern(2.0f);
  EXPECT_EQ(std::memcmp(w.store.find("big")->rawData(), want.rawData(),
                        want.byteSize()),
            0);
  std::fflush(workerOut_);
  const std::string said = readAll(workerLog_);
  const std::string line = "worker.0: no shared memory for ps.0 (cannot make "
                           "the shared-memory region " +
                           root_ + "/missing/shm";
  EXPECT_NE(said.find(line), std::string::npos) << said;
  EXPECT_EQ(said.find(line), said.rfind(line)) << "said once: " << said;
}

// A ps that refuses a worker's region (here: the region directory became
// one others may enter): the worker says so once and makes the same call
// again with bytes, and every later one; the push is applied once.
TEST_F(SharedMemory, ARefusedRegionIsSaidOnceAndTheCallsSendBytes) {
  initialize(pattern(2.0f));
  ASSERT_EQ(::chmod(shmDir_.c_str(), 0755), 0);
  {
    Worker w(*this, workerConfig_);
    for (int i = 0; i < 2; ++i)
      ASSERT_TRUE(w.pull().isOk());
    const Tensor want = pattern(2.0f);
    EXPECT_EQ(std::memcmp(w.store.find("big")->rawData(), want.rawData(),
                          want.byteSize()),
              0);
    // The variable left the region the ps refused, for memory of its own.
    EXPECT_EQ(mappedFileAt(w.store.find("big")->rawData()), "");
  }
  const Tensor grad = pattern(1.0f);
  pushWith(workerConfig_, grad, 1.0f);
  ASSERT_EQ(::chmod(shmDir_.c_str(), 0700), 0);
  const Tensor after = pullWith(workerConfig_);
  for (int64_t i = 0; i < kElements; i += 997)
    ASSERT_EQ(after.data<float>()[i],
              pattern(2.0f).data<float>()[i] - grad.data<float>()[i])
        << "applied once, at " << i;
  std::fflush(workerOut_);
  const std::string said = readAll(workerLog_);
  const std::string line =
      "worker.0: PERMISSION_DENIED: ps.0: refused worker.0's shared memory: "
      "the shared-memory directory " +
      shmDir_ +
      " is not a directory of this user with mode 0700; the "
      "tensors to and from ps.0 go through the socket from now on";
  // Once per PsClient: the pulling one, and the pushing one.
  size_t n = 0;
  for (size_t at = said.find(line); at != std::string::npos;
       at = said.find(line, at + 1))
    ++n;
  EXPECT_EQ(n, 2u) << said;
  // The last pull, with the directory private again, went through it.
  EXPECT_TRUE(saidThrough(stop(), "1 pulls, 0 pushes", 0));
}

TEST(SharedMemoryRegions, APsWithoutADirectoryTakesNone) {
  MappedRegions off("", "ps.0");
  rpc::RegionSlice s;
  s.set_region(regionPrefix("worker.0") + "1-1-ab");
  s.set_region_bytes(4096);
  s.set_capacity(4096);
  char *slot = nullptr;
  std::shared_ptr<SharedRegion> keep;
  grpc::Status st = off.slot("worker.0", s, &slot, &keep);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(st.error_message().find("ps.0 takes no shared memory"),
            std::string::npos)
      << describe(st);
  EXPECT_EQ(slot, nullptr);
}

// A worker killed with SIGKILL cannot remove its regions: the next run of
// its task removes those whose process is gone, and no other.
TEST(SharedMemoryRegions, ThoseOfADeadProcessAreRemovedAndNoOthers) {
  const std::string dir =
      ::testing::TempDir() + "dtf-shm-stale-" + std::to_string(getpid());
  ASSERT_EQ(std::system(("rm -rf '" + dir + "'").c_str()), 0);
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  const pid_t dead = ::fork();
  if (dead == 0)
    std::_Exit(0);
  ASSERT_GT(dead, 0);
  ASSERT_EQ(::waitpid(dead, nullptr, 0), dead);
  auto make = [&](const std::string &name) {
    std::ofstream(dir + "/" + name) << "x";
  };
  const std::string mine =
      regionPrefix("worker.0") + std::to_string(getpid()) + "-1-ab";
  const std::string live =
      regionPrefix("worker.0") + std::to_string(getppid()) + "-1-ab";
  const std::string gone =
      regionPrefix("worker.0") + std::to_string(dead) + "-1-ab";
  const std::string other =
      regionPrefix("worker.1") + std::to_string(dead) + "-1-ab";
  for (const std::string &n : {mine, live, gone, other})
    make(n);
  EXPECT_EQ(removeStaleRegions(dir, "worker.0"), 1);
  std::vector<std::string> left = regionsIn(dir);
  std::sort(left.begin(), left.end());
  std::vector<std::string> want = {mine, live};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(left, want);
  EXPECT_EQ(::access((dir + "/" + other).c_str(), F_OK), 0)
      << "another task's region is none of its business";
  ASSERT_EQ(std::system(("rm -rf '" + dir + "'").c_str()), 0);
}

} // namespace
} // namespace dtf::dist
