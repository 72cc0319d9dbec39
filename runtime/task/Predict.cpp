// dtf-run --predict: restore, run the eval program's output over a data
// source in order, write CSV or NPY.
#include "runtime/task/Predict.h"

#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/core/ThreadPool.h"
#include "runtime/data/BatchIterator.h"
#include "runtime/plan/ModelOutput.h"
#include "runtime/plan/PlanTypes.h"
#include "runtime/train/DynamicTable.h"
#include "runtime/train/Feeding.h"
#include "runtime/train/Initializers.h"
#include "runtime/train/Trainer.h"

#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>

namespace dtf::task {
namespace {

using dtf::errorStatus;
using dtf::Status;

bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The data source DATA names.
Status sourceOf(const dtf::plan::Plan &plan, const std::string &text,
                dtf::plan::DataSource *out, const char **role) {
  const dtf::plan::Training &t = plan.training();
  *role = "eval";
  if (text == "eval") {
    if (t.eval().kind().empty())
      return errorStatus("--predict eval: the plan has no eval source");
    *out = t.eval();
    return Status::ok();
  }
  if (text == "data") {
    *out = t.data();
    *role = "data";
    return Status::ok();
  }
  const size_t colon = text.find(':');
  const std::string kind = text.substr(0, colon);
  if (colon == std::string::npos || colon + 1 == text.size() ||
      (kind != "idx" && kind != "csv" && kind != "tfrecord"))
    return errorStatus("--predict expects eval, data, idx:DIR, csv:FILE or "
                       "tfrecord:PATTERN, not '",
                       text, "'");
  out->set_kind(kind);
  out->set_path(text.substr(colon + 1));
  if (kind == "csv")
    out->set_header(true);
  if (kind == "tfrecord") {
    // The plan's tfrecord feature names and on_corrupt carry over; the
    // compression follows the file names.
    for (const dtf::plan::DataSource *s : {&t.eval(), &t.data()})
      if (s->kind() == "tfrecord") {
        *out->mutable_features() = s->features();
        out->set_skip_corrupt(s->skip_corrupt());
        break;
      }
    out->set_compression(endsWith(out->path(), ".gz") ||
                                 endsWith(out->path(), ".gzip")
                             ? "gzip"
                             : "none");
  }
  return Status::ok();
}

// Every variable from the checkpoint of `dir` that `policy` picks (the
// dynamic tables' live rows into `tables`), said on stderr with its path and
// step; a damaged one is refused.
Status restore(const dtf::plan::Plan &plan, const std::string &dir,
               dtf::checkpoint::RestorePolicy policy,
               dtf::exec::VariableStore *store,
               std::unique_ptr<dtf::train::DynamicTables> *tables,
               int64_t *step) {
  DTF_RETURN_IF_ERROR(dtf::train::initializeVariables(plan, 0, store));
  DTF_RETURN_IF_ERROR(
      dtf::train::DynamicTables::create(plan, 0, store, tables));
  dtf::checkpoint::RestoreChoice choice;
  Status s = dtf::checkpoint::chooseCheckpoint(dir, policy, nullptr, &choice);
  for (const std::string &why : choice.warnings())
    std::fprintf(stderr, "dtf-run: warning: %s\n", why.c_str());
  DTF_RETURN_IF_ERROR(s);
  *step = choice.step;
  if (*step < 0)
    return errorStatus(dir, " holds no checkpoint: train with --model-dir ",
                       dir, " first");
  const std::string name = dtf::checkpoint::checkpointName(*step);
  std::fprintf(stderr, "dtf-run: --predict reads checkpoint %s (step %lld)\n",
               dtf::checkpoint::checkpointPath(dir, *step).c_str(),
               (long long)*step);
  std::unique_ptr<dtf::checkpoint::CheckpointReader> reader;
  DTF_RETURN_IF_ERROR(
      dtf::checkpoint::CheckpointReader::open(dir, *step, &reader));
  return dtf::train::restoreVariables(
      *reader, "checkpoint " + name + " in " + dir, store, tables->get());
}

// Rows of the output, as CSV or as an NPY array.
class OutputWriter {
public:
  ~OutputWriter() {
    if (f_)
      std::fclose(f_);
  }
  Status open(const std::string &path, dtf::DType dtype,
              std::vector<int64_t> rowShape, const std::string &name) {
    npy_ = endsWith(path, ".npy");
    if (!npy_ && !endsWith(path, ".csv"))
      return errorStatus("-o ", path, ": the output is a .csv or .npy file");
    path_ = path;
    dtype_ = dtype;
    rowShape_ = std::move(rowShape);
    rowElements_ = 1;
    for (int64_t d : rowShape_)
      rowElements_ *= d;
    f_ = std::fopen(path.c_str(), "wb");
    if (!f_)
      return errorStatus(path, ": cannot create: ", std::strerror(errno));
    if (npy_) {
      // The header is written again at the end, when the rows are counted;
      // room for it now.
      std::string header(kNpyHeader, ' ');
      std::fwrite(header.data(), 1, header.size(), f_);
    } else {
      for (int64_t k = 0; k < rowElements_; ++k)
        std::fprintf(f_, "%s%s_%lld", k ? "," : "", name.c_str(), (long long)k);
      std::fputc('\n', f_);
    }
    return Status::ok();
  }

  /// The first `rows` rows of `t` (a padded last batch holds more).
  Status write(const dtf::Tensor &t, int64_t rows) {
    if (t.numElements() < rows * rowElements_)
      return errorStatus("the output ", t.describe(), " does not hold ", rows,
                         " rows of ", rowElements_, " values");
    if (npy_) {
      std::fwrite(t.rawData(), 1,
                  size_t(rows * rowElements_) * dtf::dtypeSize(t.dtype()), f_);
    } else {
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t k = 0; k < rowElements_; ++k) {
          const int64_t i = r * rowElements_ + k;
          if (k)
            std::fputc(',', f_);
          switch (dtype_) {
          case dtf::DType::F64:
            std::fprintf(f_, "%.17g", t.data<double>()[i]);
            break;
          case dtf::DType::I32:
            std::fprintf(f_, "%d", t.data<int32_t>()[i]);
            break;
          case dtf::DType::I64:
            std::fprintf(f_, "%lld", (long long)t.data<int64_t>()[i]);
            break;
          case dtf::DType::Bool:
            std::fprintf(f_, "%d", t.data<bool>()[i] ? 1 : 0);
            break;
          default:
            std::fprintf(f_, "%.9g", double(t.data<float>()[i]));
            break;
          }
        }
        std::fputc('\n', f_);
      }
    }
    rows_ += rows;
    if (std::ferror(f_))
      return errorStatus(path_, ": write failed");
    return Status::ok();
  }

  Status close() {
    if (npy_) {
      const char *descr = dtype_ == dtf::DType::F64    ? "<f8"
                          : dtype_ == dtf::DType::I32  ? "<i4"
                          : dtype_ == dtf::DType::I64  ? "<i8"
                          : dtype_ == dtf::DType::Bool ? "|b1"
                                                       : "<f4";
      std::string shape = std::to_string(rows_) + ",";
      for (int64_t d : rowShape_)
        shape += " " + std::to_string(d) + ",";
      if (!rowShape_.empty())
        shape.pop_back();
      std::string dict = std::string("{'descr': '") + descr +
                         "', 'fortran_order': False, 'shape': (" + shape +
                         "), }";
      std::string header = "\x93NUMPY\x01";
      header += '\0';
      header += char((kNpyHeader - 10) & 0xff);
      header += char((kNpyHeader - 10) >> 8);
      header += dict;
      if (header.size() + 1 > size_t(kNpyHeader))
        return errorStatus(path_, ": the output's shape is too long for NPY");
      header.resize(kNpyHeader - 1, ' ');
      header += '\n';
      std::fseek(f_, 0, SEEK_SET);
      std::fwrite(header.data(), 1, header.size(), f_);
    }
    const bool failed = std::fflush(f_) != 0 || std::ferror(f_);
    std::fclose(f_);
    f_ = nullptr;
    if (failed)
      return errorStatus(path_, ": write failed");
    return Status::ok();
  }

  int64_t rows() const { return rows_; }

private:
  static constexpr int kNpyHeader = 256; // a multiple of 64, as NPY asks
  std::FILE *f_ = nullptr;
  std::string path_;
  bool npy_ = false;
  dtf::DType dtype_ = dtf::DType::F32;
  std::vector<int64_t> rowShape_;
  int64_t rowElements_ = 1;
  int64_t rows_ = 0;
};

} // namespace

int runPredict(const dtf::plan::Plan &plan, const PredictOptions &flags) {
  auto fail = [](int code, const Status &s) {
    std::fprintf(stderr, "dtf-run: error: %s\n", s.message().c_str());
    return code;
  };
  if (!endsWith(flags.output, ".csv") && !endsWith(flags.output, ".npy"))
    return fail(2, errorStatus("-o ", flags.output,
                               ": the output is a .csv or .npy file"));
  dtf::plan::DataSource src;
  const char *role = "eval";
  Status s = sourceOf(plan, flags.source, &src, &role);
  if (!s.isOk())
    return fail(2, s);
  dtf::plan::ModelOutput output;
  s = dtf::plan::findModelOutput(plan.eval(), &output, &plan.kernels());
  if (!s.isOk())
    return fail(4, s);
  const dtf::plan::Program program =
      dtf::plan::inferenceProgram(plan.eval(), output);

  dtf::exec::VariableStore variables;
  std::unique_ptr<dtf::train::DynamicTables> tables;
  int64_t step = -1;
  s = restore(plan, flags.modelDir, flags.restore, &variables, &tables, &step);
  if (!s.isOk())
    return fail(4, errorStatus("--predict: ", s.message()));

  std::shared_ptr<const dtf::data::Dataset> data;
  dtf::train::FeedLayout layout;
  s = dtf::train::openPlanSource(plan, src, role, program, &data, &layout);
  if (!s.isOk())
    return fail(4, s);

  const int threads =
      flags.threads > 0
          ? flags.threads
          : int(std::max(1u, std::thread::hardware_concurrency()));
  dtf::ThreadPool pool(threads);
  dtf::exec::ExecutorOptions o;
  o.intraOpPool = &pool;
  dtf::exec::applySessionOptions(plan, &o);
  // Prediction runs every op here, whatever device the plan names.
  o.softPlacement = true;
  std::FILE *devNull = std::fopen("/dev/null", "w");
  o.log = devNull ? devNull : stderr;
  o.programName = "eval (" + output.name + ")";
  o.dynamicRows = tables && !tables->empty() ? tables.get() : nullptr;
  std::unique_ptr<dtf::exec::Executor> executor;
  s = dtf::exec::Executor::create(
      program, variables, dtf::train::cpuKernelRegistry(), o, &executor);
  if (!s.isOk()) {
    if (devNull)
      std::fclose(devNull);
    return fail(3, s);
  }
  std::unique_ptr<dtf::train::BatchFeeder> feeder;
  s = dtf::train::BatchFeeder::bind(*executor, *data, layout, &feeder);
  if (!s.isOk())
    return fail(4, s);

  dtf::data::BatchOptions bo;
  bo.batchSize = size_t(feeder->fixedBatch() ? feeder->fixedBatch()
                        : plan.training().batch() > 0
                            ? std::max<int64_t>(plan.training().batch(), 256)
                            : 256);
  bo.shuffle = false;
  bo.numEpochs = 1;
  bo.prefetch = 2;
  bo.dropRemainder = false;
  auto it = dtf::data::BatchIterator::create(data, bo);
  if (!it)
    return fail(4, errorStatus(it.error()));

  const int fetch = executor->findFetch(output.name);
  const dtf::exec::TensorSlotInfo &info = executor->fetchInfo(fetch);
  if (info.dims.empty() ||
      (info.dims[0] >= 0 && info.dims[0] != feeder->fixedBatch()))
    return fail(4, errorStatus("the model's ", output.name, " (",
                               dtf::plan::typeString(info.dtype, info.dims),
                               ") has no batch dimension first"));
  OutputWriter writer;
  s = writer.open(flags.output, info.dtype,
                  std::vector<int64_t>(info.dims.begin() + 1, info.dims.end()),
                  output.name);
  if (!s.isOk())
    return fail(4, s);
  while (std::optional<dtf::data::Batch> batch = (*it)->next()) {
    const size_t rows = batch->size();
    if (feeder->fixedBatch() && rows < size_t(feeder->fixedBatch())) {
      // Inputs of a fixed batch size: the last batch padded with zeros, and
      // only its real rows written.
      const size_t n = size_t(feeder->fixedBatch());
      batch->features.resize(batch->features.size() / rows * n, 0.0f);
      batch->labels.resize(n, 0);
      if (!batch->featureShape.empty())
        batch->featureShape[0] = int64_t(n);
    }
    s = feeder->feed(*batch);
    if (s.isOk())
      s = executor->run(uint64_t(step));
    if (!s.isOk())
      return fail(5, s);
    s = writer.write(executor->fetch(fetch), int64_t(rows));
    if (!s.isOk())
      return fail(4, s);
  }
  if (auto err = (*it)->error())
    return fail(4, errorStatus(err->message()));
  s = writer.close();
  if (!s.isOk())
    return fail(4, s);
  if (devNull)
    std::fclose(devNull);
  std::printf("predicted %lld examples of %s with checkpoint %s of %s: %s "
              "-> %s\n",
              (long long)writer.rows(), data->description().c_str(),
              dtf::checkpoint::checkpointName(step).c_str(),
              flags.modelDir.c_str(), output.name.c_str(),
              flags.output.c_str());
  return 0;
}

} // namespace dtf::task
