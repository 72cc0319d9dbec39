// In-graph towers over a task's GPUs (TensorFlow's multi-GPU tower
// training): the worker_step once per tower, each tower on its share of the
// batch and its own GPU, the towers' gradients averaged (weighted by their
// shares) with NCCL, then one update (one process) or one push (a worker).
#include "schema/DeviceName.h"
#include "runtime/gpu/GpuAllReduce.h"
#include "schema/Placement.h"
#include "runtime/plan/PlanTypes.h"
#include "runtime/train/DynamicTable.h"
#include "runtime/train/Trainer.h"

#include <algorithm>
#include <map>
#include <set>

namespace dtf::train {

namespace {

// The GPUs one copy of the program uses: 1 + the largest GPU index its ops
// name (1 when none names a GPU).
int gpuSpan(const plan::Program &program) {
  int span = 1;
  for (const plan::Op &op : program.ops()) {
    DeviceNameParse parsed = parseDeviceName(op.device());
    if (parsed.name && parsed.name->type == DeviceType::GPU)
      span = std::max(span, parsed.name->index.value_or(0) + 1);
  }
  return span;
}

// Examples [begin, end) of `batch`.
data::Batch slice(const data::Batch &batch, size_t begin, size_t end) {
  data::Batch out;
  const size_t n = batch.size();
  const size_t row = n ? batch.features.size() / n : 0;
  out.features.assign(batch.features.begin() + ptrdiff_t(begin * row),
                      batch.features.begin() + ptrdiff_t(end * row));
  out.featureShape = batch.featureShape;
  if (!out.featureShape.empty())
    out.featureShape[0] = int64_t(end - begin);
  out.labels.assign(batch.labels.begin() + ptrdiff_t(begin),
                    batch.labels.begin() + ptrdiff_t(end));
  out.epoch = batch.epoch;
  out.indexInEpoch = batch.indexInEpoch;
  return out;
}

} // namespace

std::set<std::string> Trainer::towerDeviceSends(const plan::Program &worker,
                                                int towers) {
  const int span = gpuSpan(worker);
  std::vector<int> gpus;
  for (int k = 0; k < towers; ++k)
    gpus.push_back(k * span);
  std::set<std::string> names;
  if (!gpu::TowerAllReduce::sumsOnGpus(gpus))
    return names; // summed on the host: the gradients come down
  std::map<int32_t, plan::DType> types;
  for (const plan::Value &v : worker.values())
    types[v.id()] = v.type().dtype();
  for (const plan::Transfer &send : worker.sends())
    if (!send.sparse() && types[send.value()] == plan::DType::F32)
      names.insert(send.key());
  return names;
}

Status Trainer::setUpTowers(const plan::Plan &plan, const plan::Program &worker,
                            const data::Dataset &data, const FeedLayout &layout,
                            const BuildFn &build, FailureKind *kind) {
  auto refuse = [&](const std::string &why) {
    setKind(kind, FailureKind::kPlan);
    return errorStatus("gpu_towers = ", towers_, ": ", why);
  };
  if (options_.workerProgram || options_.rendezvous)
    return refuse("towers replicate a whole worker_step; they do not combine "
                  "with a replica that spans worker tasks (model parallelism)");
  if (dynamicTables_)
    return refuse("towers do not share the rows of a table with a dynamic "
                  "vocabulary (embedding(vocab = dynamic))");
  if (batch_ < towers_)
    return refuse(
        strCat("a batch of ", batch_, " examples cannot give every tower one"));
  for (const plan::Transfer &send : worker.sends())
    if (send.sparse())
      return refuse(strCat("the worker_step sends sparse rows ('",
                           plan::printable(send.key()),
                           "', an embedding looked up on its ps); towers "
                           "average dense gradients only"));
  if (trainFeeder_ && trainFeeder_->fixedBatch())
    return refuse(strCat("the inputs take batches of exactly ",
                         trainFeeder_->fixedBatch(),
                         " examples; towers split each batch, so the inputs' "
                         "batch dimension must be B (-1)"));
  const int span = gpuSpan(worker);
  std::vector<int> gpus;
  for (int k = 0; k < towers_; ++k)
    gpus.push_back(k * span);
  for (int k = 1; k < towers_; ++k) {
    std::unique_ptr<exec::Executor> e;
    DTF_RETURN_IF_ERROR(
        build(worker, strCat("worker_step (tower ", k, ")"), &e, k * span));
    std::unique_ptr<BatchFeeder> feeder;
    Status s = BatchFeeder::bind(*e, data, layout, &feeder);
    if (!s.isOk()) {
      setKind(kind, FailureKind::kData);
      return errorStatus("worker_step (tower ", k, "): ", s.message());
    }
    towerExecs_.push_back(std::move(e));
    towerFeeders_.push_back(std::move(feeder));
  }

  // The float32 sends are averaged (the gradients, a learning rate that is
  // the same in every tower); the others (the global step's increment) are
  // tower 0's.
  std::vector<int64_t> elements;
  for (int i = numMetrics_; i < train_->numFetches(); ++i) {
    const exec::TensorSlotInfo &info = train_->fetchInfo(i);
    if (info.dtype != DType::F32)
      continue;
    int64_t n = 1;
    for (int64_t d : info.dims) {
      if (d < 0)
        return refuse(strCat("the send '", plan::printable(info.name),
                             "' has a batch-dependent shape"));
      n *= d;
    }
    reducedSends_.push_back(i);
    elements.push_back(n);
  }
  towerPool_ = std::make_unique<ThreadPool>(towers_);
  std::string note;
  DTF_RETURN_IF_ERROR(
      gpu::TowerAllReduce::create(gpus, elements, &allReduce_, &note));
  towersNote_ = strCat(towers_, " towers on GPU ");
  for (size_t k = 0; k < gpus.size(); ++k)
    towersNote_ += strCat(k ? ", " : "", gpus[k]);
  towersNote_ += strCat("; ", note);

  if (options_.driver)
    shareTowerPulls(gpus);
  else
    DTF_RETURN_IF_ERROR(setUpTowerUpdate(plan, gpus, build));
  return Status::ok();
}

void Trainer::shareTowerPulls(const std::vector<int> &gpus) {
  // A worker pulls its variables to the host every step. With NCCL, one
  // that every tower keeps on its first GPU goes up once, into tower 0's
  // copy, and from there to the other towers' (ncclBroadcast) before they
  // run; any other goes up to every tower that keeps it.
  for (const std::string &name : variables_.names()) {
    std::vector<uint64_t> copies;
    size_t bytes = 0;
    for (int k = 0; k < towers_; ++k)
      if (exec::Executor::ResidentBuffer b =
              towerExecutor(k).residentBuffer(name);
          b.gpu == gpus[size_t(k)]) {
        copies.push_back(b.ptr);
        bytes = b.bytes;
      }
    if (allReduce_->usesNccl() && int(copies.size()) == towers_) {
      train_->uploadEveryRun(name);
      for (int k = 1; k < towers_; ++k)
        towerExecutor(k).receiveEveryRun(name);
      broadcast_.push_back(std::move(copies));
      broadcastBytes_.push_back(bytes);
    } else {
      for (int k = 0; k < towers_; ++k)
        towerExecutor(k).uploadEveryRun(name);
    }
  }
  if (!broadcast_.empty())
    towersNote_ +=
        strCat("; ", broadcast_.size(),
               broadcast_.size() == 1 ? " pulled variable goes"
                                      : " pulled variables go",
               " up to GPU ", gpus[0],
               " once per step and to the others with ncclBroadcast");
}

Status Trainer::setUpTowerUpdate(const plan::Plan &plan,
                                 const std::vector<int> &gpus,
                                 const BuildFn &build) {
  // One process: the plan's ps_update, as a single ps would run it, applies
  // the averaged sends to this process's variables.
  plan::Placement placement;
  DTF_RETURN_IF_ERROR(plan::placeVariables(plan, 1, "", &placement));
  plan::Program update;
  DTF_RETURN_IF_ERROR(plan::psProgramFor(plan, placement, 0, &update));
  // With NCCL, the variables that tower 0's first GPU reads live there, and
  // the update writes them in place (on that GPU, from the sum there) when
  // every tower keeps them on its first GPU too: NCCL's communicators are on
  // those GPUs and refuse buffers on others. The other resident variables
  // are updated on the host and uploaded to the towers each step.
  if (allReduce_->usesNccl())
    for (const std::string &name : variables_.names()) {
      const exec::Executor::ResidentBuffer b = train_->residentBuffer(name);
      bool shared = b.gpu == gpus[0];
      for (int k = 1; k < towers_ && shared; ++k)
        shared = towerExecutor(k).residentBuffer(name).gpu == gpus[size_t(k)];
      if (shared)
        updateShared_[name] = {b.gpu, b.ptr};
      else
        for (int k = 0; k < towers_; ++k)
          towerExecutor(k).uploadEveryRun(name);
    }
  DTF_RETURN_IF_ERROR(build(update, "ps_update", &update_, 0));
  for (int i = numMetrics_; i < train_->numFetches(); ++i)
    if (int feed = update_->findFeed(train_->fetchInfo(i).name); feed >= 0)
      updateFeeds_.push_back({i, feed});
  // A variable the towers keep on their GPUs goes from tower 0's to the
  // others' after each update (ncclBroadcast) when the update ran on
  // tower 0's GPU, else (an update on the host) up from the host each step.
  for (const auto &[name, where] : updateShared_) {
    std::vector<uint64_t> copies;
    for (int k = 0; k < towers_; ++k)
      if (exec::Executor::ResidentBuffer b =
              towerExecutor(k).residentBuffer(name);
          b.gpu >= 0)
        copies.push_back(b.ptr);
    const exec::Executor::ResidentBuffer mine = update_->residentBuffer(name);
    if (mine.gpu >= 0 && int(copies.size()) == towers_) {
      broadcast_.push_back(std::move(copies));
      broadcastBytes_.push_back(mine.bytes);
      continue;
    }
    for (int k = 0; k < towers_; ++k)
      towerExecutor(k).uploadEveryRun(name);
  }
  if (!broadcast_.empty())
    towersNote_ +=
        strCat("; ", broadcast_.size(),
               broadcast_.size() == 1 ? " variable stays" : " variables stay",
               " on every tower's GPU, updated on GPU ", gpus[0],
               " and sent to the others with ncclBroadcast");
  return Status::ok();
}

Status Trainer::syncResidentVariables() {
  DTF_RETURN_IF_ERROR(train_->syncVariablesToHost());
  if (update_)
    DTF_RETURN_IF_ERROR(update_->syncVariablesToHost());
  return Status::ok();
}

Status Trainer::runStep(const data::Batch &batch, int64_t globalStep) {
  if (towers_ <= 1) {
    DTF_RETURN_IF_ERROR(trainFeeder_->feed(batch));
    DTF_RETURN_IF_ERROR(feedLearningRate(*train_, globalStep));
    return train_->run(uint64_t(globalStep));
  }
  // Tower k takes examples [begin_k, end_k): n / N each, the first n % N one
  // more.
  const size_t n = batch.size(), towers = size_t(towers_);
  std::vector<float> weights;
  std::vector<size_t> begins;
  size_t begin = 0;
  for (size_t k = 0; k < towers; ++k) {
    const size_t take = n / towers + (k < n % towers ? 1 : 0);
    if (take == 0)
      return errorStatus("a batch of ", n, " examples leaves tower ", k,
                         " none");
    weights.push_back(float(double(take) / double(n)));
    begins.push_back(begin);
    begin += take;
  }
  begins.push_back(n);
  // The towers run at the same time, one per thread of towerPool_: each
  // feeds its share and runs its step on its own GPU (its executor, feeder
  // and device are its own; the variables are only read until the update).
  if (options_.driver && !broadcast_.empty()) {
    // The variables this worker pulled: up to tower 0's GPU once, then from
    // there to the other towers' GPUs.
    Status s = train_->uploadResidentBeforeRun();
    if (s.isOk())
      s = allReduce_->broadcast(broadcast_, broadcastBytes_);
    if (!s.isOk())
      return errorStatus("the pulled variables to the towers' GPUs: ",
                         s.message());
  }
  std::vector<Status> status(towers);
  towerPool_->parallelFor(int64_t(towers), 1, [&](int64_t lo, int64_t hi) {
    for (int64_t k = lo; k < hi; ++k) {
      exec::Executor &e = towerExecutor(int(k));
      BatchFeeder &feeder = k == 0 ? *trainFeeder_ : *towerFeeders_[k - 1];
      Status s = feeder.feed(slice(batch, begins[k], begins[k + 1]));
      if (s.isOk())
        s = feedLearningRate(e, globalStep);
      e.setBatchOffset(int64_t(begins[k]), int64_t(begins[k + 1] - begins[k]));
      // The last step's all-reduce (and broadcast) on this GPU may still
      // read its gradients and write its variables: its stream waits for
      // them by an event, not the host. The run ends by synchronizing its
      // GPUs, so the all-reduce's streams may then read the gradients.
      if (s.isOk() && allReduce_ && allReduce_->finished(k))
        s = e.waitOnGpu(allReduce_->gpu(k), allReduce_->finished(k));
      if (s.isOk())
        s = e.run(uint64_t(globalStep));
      status[k] = std::move(s);
    }
  });
  for (size_t k = 0; k < towers; ++k)
    if (!status[k].isOk())
      return errorStatus("tower ", k, ": ", status[k].message());
  // The metrics: each tower's mean, weighted by its share, into tower 0's
  // fetch (a scalar metric becomes the whole batch's mean).
  for (int i = 0; i < numMetrics_; ++i) {
    Tensor *t = train_->mutableFetch(i);
    if (t->numElements() != 1 ||
        (t->dtype() != DType::F32 && t->dtype() != DType::F64))
      continue;
    double mean = 0;
    for (size_t k = 0; k < towers; ++k)
      mean += weights[k] * meanValue(towerExecutor(int(k)).fetch(i));
    if (t->dtype() == DType::F32)
      *t->data<float>() = float(mean);
    else
      *t->data<double>() = mean;
  }
  // The gradients: sum_k weight_k * gradient_k, the gradient of the whole
  // batch's mean loss, into tower 0's sends.
  // A gradient that a tower's GPU made is read there (deviceFetch), never
  // copied down; the sum comes down once, into tower 0's fetch.
  std::vector<std::vector<const Tensor *>> values(towers), onDevice(towers);
  std::vector<Tensor *> out;
  for (int i : reducedSends_) {
    for (size_t k = 0; k < towers; ++k) {
      values[k].push_back(&towerExecutor(int(k)).fetch(i));
      onDevice[k].push_back(towerExecutor(int(k)).deviceFetch(i));
    }
    Tensor *t = train_->mutableFetch(i);
    // Read on tower 0's GPU only (by the update there): no copy down.
    if (update_ && !options_.driver && train_->deviceFetch(i)) {
      int feed = -1;
      for (const auto &[fetch, f] : updateFeeds_)
        if (fetch == i)
          feed = f;
      if (feed >= 0 && !update_->feedReadOnHost(feed)) {
        out.push_back(nullptr);
        continue;
      }
    }
    if (train_->deviceFetch(i) &&
        (!t->defined() ||
         t->numElements() != onDevice[0].back()->numElements()))
      *t = Tensor::allocate(DType::F32, onDevice[0].back()->shape());
    out.push_back(t);
  }
  DTF_RETURN_IF_ERROR(allReduce_->reduce(values, onDevice, weights, out));
  if (!update_)
    return Status::ok(); // the driver pushes tower 0's sends
  // The update reads tower 0's sends in place: they live until its next
  // run, after this update.
  for (const auto &[i, feed] : updateFeeds_) {
    if (update_->feedReadOnDevice(feed)) {
      // The sum on tower 0's GPU, read there.
      size_t j = 0;
      while (j < reducedSends_.size() && reducedSends_[j] != i)
        ++j;
      if (j == reducedSends_.size() || !allReduce_->sumOnGpu(j))
        return errorStatus("ps_update: the gradient '",
                           train_->fetchInfo(i).name,
                           "' is not summed on tower 0's GPU");
      DTF_RETURN_IF_ERROR(update_->setDeviceFeed(
          feed, Tensor::view(DType::F32, train_->fetchInfo(i).dims,
                             reinterpret_cast<void *>(
                                 uintptr_t(allReduce_->sumOnGpu(j))))));
    }
    if (!update_->feedReadOnHost(feed))
      continue;
    Tensor &t = *train_->mutableFetch(i);
    DTF_RETURN_IF_ERROR(update_->setFeed(
        feed, Tensor::view(t.dtype(), t.shape(), t.rawData())));
  }
  // The update reads the sums on tower 0's GPU after the all-reduce's
  // stream made them (an event, no host wait).
  Status s =
      allReduce_->finished(0)
          ? update_->waitOnGpu(allReduce_->gpu(0), allReduce_->finished(0))
          : Status::ok();
  if (s.isOk())
    s = update_->run(uint64_t(globalStep));
  // The new values from tower 0's GPU to the other towers' GPUs (the
  // update's run ended by synchronizing its GPUs).
  if (s.isOk() && !broadcast_.empty())
    s = allReduce_->broadcast(broadcast_, broadcastBytes_);
  if (!s.isOk())
    return errorStatus("ps_update: ", s.message());
  return Status::ok();
}

} // namespace dtf::train
