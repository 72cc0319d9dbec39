// Opening a plan's datasets and copying their batches into feeds.
#include "runtime/train/Feeding.h"
#include "dtf/OpNames.h"

#include "runtime/data/CsvDataset.h"
#include "runtime/data/IdxDataset.h"
#include "runtime/data/Random.h"
#include "runtime/data/SyntheticDataset.h"
#include "runtime/data/TFRecordDataset.h"
#include "runtime/plan/FusedKernels.h"
#include "runtime/plan/PlanTypes.h"
#include "runtime/train/PlanInputs.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <type_traits>

namespace dtf::train {
namespace {

constexpr int64_t kDefaultSyntheticExamples = 10000;

// Examples [begin, begin + count) of another dataset: a held-out part of a
// synthetic task.
class SliceDataset : public data::Dataset {
public:
  SliceDataset(std::shared_ptr<const data::Dataset> base, size_t begin,
               size_t count, std::string description)
      : base_(std::move(base)), begin_(begin), count_(count),
        description_(std::move(description)) {}

  size_t size() const override { return count_; }
  const std::vector<int64_t> &exampleShape() const override {
    return base_->exampleShape();
  }
  std::optional<int32_t> numClasses() const override {
    return base_->numClasses();
  }
  int32_t label(size_t i) const override { return base_->label(begin_ + i); }
  void copyFeatures(size_t i, float *out) const override {
    base_->copyFeatures(begin_ + i, out);
  }
  int32_t copyExample(size_t i, float *out) const override {
    return base_->copyExample(begin_ + i, out);
  }
  std::string description() const override { return description_; }

private:
  std::shared_ptr<const data::Dataset> base_;
  size_t begin_, count_;
  std::string description_;
};

bool isInteger(DType d) { return d == DType::I32 || d == DType::I64; }

// The feeds that take data: all but the learning-rate feed.
std::vector<int> dataFeeds(const exec::Executor &e) {
  std::vector<int> feeds;
  for (int i = 0; i < e.numFeeds(); ++i)
    if (e.feedInfo(i).name != kLearningRateFeed)
      feeds.push_back(i);
  return feeds;
}

// The values per example of an input of type [B, ...]: the product of its
// dims after the batch.
Status perExampleOf(const PlanInput &in, int64_t *count) {
  std::vector<int64_t> dims = plan::dimsOf(in.type->shape());
  if (dims.empty())
    return errorStatus("synthetic data cannot feed the scalar input '", in.name,
                       "' of type ", plan::typeString(*in.type));
  int64_t n = 1;
  for (size_t d = 1; d < dims.size(); ++d) {
    if (dims[d] < 0)
      return errorStatus("synthetic data cannot feed input '", in.name,
                         "' of type ", plan::typeString(*in.type),
                         ": its batch must be its first dimension");
    n *= dims[d];
  }
  if (n > (int64_t(1) << 24))
    return errorStatus("input '", in.name, "' holds ", n,
                       " values per example, too many for synthetic data");
  *count = n;
  return Status::ok();
}

// Random examples for models whose inputs are not one float features input:
// floats from a standard normal, integer ids uniform below the table they
// index, bools at random, and the label uniform below the loss's class
// count. Example i is made from (seed, i) alone, on demand.
class RandomInputsDataset : public data::Dataset {
public:
  struct Column {
    int64_t count = 0;
    bool isFloat = false; // else integers uniform below `bound`
    int64_t bound = 2;
  };

  RandomInputsDataset(std::vector<Column> columns, size_t size, int32_t classes,
                      uint64_t seed, std::string description)
      : columns_(std::move(columns)), size_(size), classes_(classes),
        seed_(seed), description_(std::move(description)) {
    int64_t n = 0;
    for (const Column &c : columns_)
      n += c.count;
    shape_ = {n};
  }

  size_t size() const override { return size_; }
  const std::vector<int64_t> &exampleShape() const override { return shape_; }
  std::optional<int32_t> numClasses() const override { return classes_; }
  int32_t label(size_t i) const override {
    data::SplitMix64 rng(data::deriveSeed(seed_, 2 * i + 1));
    return int32_t(rng.next() % uint64_t(classes_));
  }
  void copyFeatures(size_t i, float *out) const override {
    data::SplitMix64 rng(data::deriveSeed(seed_, 2 * i));
    for (const Column &c : columns_) {
      if (c.isFloat) {
        // Box-Muller, both results used.
        for (int64_t k = 0; k < c.count; k += 2) {
          const double u1 = double((rng.next() >> 11) + 1) * 0x1.0p-53;
          const double u2 = double(rng.next() >> 11) * 0x1.0p-53;
          const double r = std::sqrt(-2.0 * std::log(u1));
          *out++ = float(r * std::cos(6.283185307179586 * u2));
          if (k + 1 < c.count)
            *out++ = float(r * std::sin(6.283185307179586 * u2));
        }
      } else {
        // Ids stay exact as floats below 2^24; the feeder converts them.
        for (int64_t k = 0; k < c.count; ++k)
          *out++ = float(rng.next() % uint64_t(c.bound));
      }
    }
  }
  std::string description() const override { return description_; }

private:
  std::vector<Column> columns_;
  std::vector<int64_t> shape_;
  size_t size_;
  int32_t classes_;
  uint64_t seed_;
  std::string description_;
};

Status openSynthetic(const plan::Plan &plan, const plan::DataSource &src,
                     size_t examples, std::shared_ptr<const data::Dataset> *out,
                     FeedLayout *layout) {
  // The step op by op: the loss whose labels and classes the data follows
  // may be a generated row kernel (a dtf.fused op).
  plan::Program program = plan.train_step();
  DTF_RETURN_IF_ERROR(plan::expandFusedOps(plan.kernels(), &program));
  const uint64_t seed =
      uint64_t(src.seed() != 0 ? src.seed() : plan.training().seed());
  const int32_t classes = lossClasses(program);
  std::vector<PlanInput> inputs = planInputs(program);
  const int label = labelInputOf(program, inputs);
  std::vector<const PlanInput *> others;
  for (size_t k = 0; k < inputs.size(); ++k)
    if (int(k) != label)
      others.push_back(&inputs[k]);
  if (others.empty())
    return errorStatus("synthetic data needs an input other than the labels "
                       "in the train_step");

  if (others.size() == 1 && isFloatType(*others[0]->type)) {
    // Features and labels: learnable data (label = argmax of a fixed
    // projection of the features).
    int64_t count = 0;
    DTF_RETURN_IF_ERROR(perExampleOf(*others[0], &count));
    data::SyntheticOptions o;
    o.size = examples;
    o.seed = seed;
    o.numClasses = classes;
    std::vector<int64_t> dims = plan::dimsOf(others[0]->type->shape());
    o.exampleShape.assign(dims.begin() + 1, dims.end());
    if (o.exampleShape.empty())
      o.exampleShape = {1};
    data::Expected<data::SyntheticDataset> d =
        data::SyntheticDataset::create(std::move(o));
    if (!d)
      return errorStatus(d.error());
    *out = std::make_shared<data::SyntheticDataset>(std::move(d).value());
    *layout = FeedLayout::featuresAndLabels();
    return Status::ok();
  }

  std::vector<RandomInputsDataset::Column> columns;
  std::string what;
  for (const PlanInput *in : others) {
    RandomInputsDataset::Column c;
    DTF_RETURN_IF_ERROR(perExampleOf(*in, &c.count));
    c.isFloat = isFloatType(*in->type);
    if (!c.isFloat)
      c.bound =
          in->type->dtype() == plan::BOOL ? 2 : idBound(program, in->value);
    columns.push_back(c);
    what +=
        strCat(what.empty() ? "" : ", ", in->name, " ",
               c.isFloat ? std::string("normal") : strCat("below ", c.bound));
  }
  *out = std::make_shared<RandomInputsDataset>(
      std::move(columns), examples, classes, seed,
      strCat("synthetic:", examples, " random examples (", what,
             label >= 0 ? strCat(", ", inputs[label].name, " below ", classes)
                        : std::string(),
             "), seed ", seed));
  *layout = label >= 0 ? FeedLayout::columns(inputs[label].name)
                       : FeedLayout::columnsWithoutLabels();
  return Status::ok();
}

Status openTFRecord(const plan::Plan &plan, const plan::Program &program,
                    const plan::DataSource &src, DataShard shard,
                    std::shared_ptr<const data::Dataset> *out,
                    FeedLayout *layout, bool *shardedByFile) {
  const std::vector<PlanInput> inputs = planInputs(program);
  // Labels are checked against the classes of the loss they feed (as
  // synthetic data follows them), which may sit in a dtf.fused op.
  plan::Program trainStep = plan.train_step();
  DTF_RETURN_IF_ERROR(plan::expandFusedOps(plan.kernels(), &trainStep));
  const std::vector<PlanInput> modelInputs = planInputs(trainStep);
  const int label = labelInputOf(trainStep, modelInputs);
  std::map<std::string, std::string> renamed;
  for (const std::string &f : src.features()) {
    const size_t eq = f.find('=');
    if (eq == std::string::npos)
      return errorStatus(src.path(), ": the features entry '",
                         plan::printable(f), "' is not INPUT=FEATURE");
    const std::string input = f.substr(0, eq);
    bool known = false;
    for (const PlanInput &in : modelInputs)
      known |= in.name == input;
    if (!known)
      return errorStatus(src.path(), ": features maps '",
                         plan::printable(input),
                         "', which is not an input of the model");
    renamed[input] = f.substr(eq + 1);
  }
  data::TFRecordOptions o;
  o.pattern = src.path();
  if (src.compression() != "gzip" && src.compression() != "none" &&
      !src.compression().empty())
    return errorStatus(src.path(), ": unknown compression '",
                       plan::printable(src.compression()), "' (none or gzip)");
  o.gzip = src.compression() == "gzip";
  o.skipCorrupt = src.skip_corrupt();
  o.shardIndex = shard.index;
  o.shardCount = shard.count;
  FeedLayout named;
  named.kind = FeedLayout::Kind::kNamed;
  named.hasLabels = false;
  for (const PlanInput &in : inputs) {
    std::vector<int64_t> dims = plan::dimsOf(in.type->shape());
    int64_t n = 1;
    for (size_t d = 1; d < dims.size(); ++d) {
      if (dims[d] < 0)
        return errorStatus("input '", in.name, "' of type ",
                           plan::typeString(*in.type),
                           ": a tfrecord source feeds batches along dimension "
                           "0, and every other dimension must be a number");
      n *= dims[d];
    }
    if (dims.empty())
      return errorStatus("input '", in.name,
                         "' is a scalar, so it cannot take a batch of ",
                         src.path());
    auto it = renamed.find(in.name);
    o.columns.push_back(
        {in.name, it != renamed.end() ? it->second : in.name, n,
         isIntegerType(*in.type),
         label >= 0 && modelInputs[size_t(label)].name == in.name
             ? lossClasses(trainStep)
             : 0});
    named.named.push_back({in.name, o.columns.back().feature, n});
  }
  data::TFRecordReport report;
  data::Expected<data::InMemoryDataset> d = data::readTFRecords(o, &report);
  if (!d)
    return errorStatus(d.error());
  for (const std::string &line : data::describeSkips(src.path(), report))
    std::fprintf(stderr, "dtf-run: warning: %s\n", line.c_str());
  *out = std::make_shared<data::InMemoryDataset>(std::move(d).value());
  *layout = std::move(named);
  if (shardedByFile)
    *shardedByFile = report.shardedByFile;
  return Status::ok();
}

// The classes of the train step's loss (its generated kernels expanded), when
// the loss reads its labels from an input: idx and csv labels must lie in
// them, or the loss kernel would refuse the step that meets one.
std::optional<int32_t> labelClasses(const plan::Plan &plan) {
  plan::Program program = plan.train_step();
  if (!plan::expandFusedOps(plan.kernels(), &program).isOk() ||
      labelInputOf(program, planInputs(program)) < 0)
    return std::nullopt;
  return lossClassesIfAny(program);
}

Status openSource(const plan::Plan &plan, const plan::DataSource &src,
                  const char *role, std::shared_ptr<const data::Dataset> *out,
                  FeedLayout *layout, DataShard shard = {},
                  bool *shardedByFile = nullptr,
                  const plan::Program *program = nullptr) {
  const std::string &kind = src.kind();
  *layout = FeedLayout::featuresAndLabels();
  if (kind == "tfrecord")
    return openTFRecord(plan, program ? *program : plan.train_step(), src,
                        shard, out, layout, shardedByFile);
  if (kind == "idx") {
    std::string split =
        src.split().empty()
            ? std::string(role == std::string("eval") ? "test" : "train")
            : src.split();
    data::IdxOptions o;
    if (!program) // training or evaluation: labels feed the loss
      o.numClasses = labelClasses(plan);
    data::Expected<data::IdxDataset> d =
        data::IdxDataset::openSplit(src.path(), split, o);
    if (!d)
      return errorStatus(d.error());
    *out = std::make_shared<data::IdxDataset>(std::move(d).value());
    return Status::ok();
  }
  if (kind == "csv") {
    data::CsvOptions o;
    o.hasHeader = src.header();
    o.labelColumn = src.label();
    if (!program)
      o.numClasses = labelClasses(plan);
    if (!o.labelColumn.empty() && !o.hasHeader)
      return errorStatus(src.path(), ": the label column '", src.label(),
                         "' is named, but the csv source has no header");
    data::Expected<data::InMemoryDataset> d = data::readCsv(src.path(), o);
    if (!d)
      return errorStatus(d.error());
    *out = std::make_shared<data::InMemoryDataset>(std::move(d).value());
    *layout = FeedLayout::csv();
    return Status::ok();
  }
  if (kind == "synthetic") {
    int64_t n = src.examples() > 0 ? src.examples() : kDefaultSyntheticExamples;
    return openSynthetic(plan, src, size_t(n), out, layout);
  }
  if (kind.empty())
    return errorStatus("the plan names no ", role,
                       " source (idx, csv, tfrecord or synthetic)");
  return errorStatus("the ", role, " source has an unknown kind '",
                     plan::printable(kind),
                     "' (idx, csv, tfrecord or synthetic)");
}

// Feed i's elements per example (its dims after the batch), and its fixed
// batch (a number as its first dim) into *fixedBatch, which every feed with
// one must agree on.
Status feedExampleElements(const exec::Executor &executor, int i,
                           const std::string &source, int64_t *fixedBatch,
                           int64_t *count) {
  const exec::TensorSlotInfo &info = executor.feedInfo(i);
  const std::string type = plan::typeString(info.dtype, info.dims);
  if (info.dims.empty())
    return errorStatus("input '", info.name, "' of type ", type,
                       " is a scalar, so it cannot take a batch of ", source);
  int64_t n = 1;
  for (size_t d = 1; d < info.dims.size(); ++d) {
    if (info.dims[d] < 0)
      return errorStatus("input '", info.name, "' of type ", type,
                         " has the batch in dimension ", d,
                         "; dtf-run feeds batches along dimension 0");
    n *= info.dims[d];
  }
  if (info.dims[0] >= 0) {
    if (*fixedBatch != 0 && *fixedBatch != info.dims[0])
      return errorStatus("the inputs disagree on the batch size (", *fixedBatch,
                         " and ", info.dims[0], ")");
    *fixedBatch = info.dims[0];
  }
  *count = n;
  return Status::ok();
}

// Every bound feed takes a dtype the data converts to.
Status checkFeedTypes(const exec::Executor &executor,
                      const std::vector<FeedBinding> &bindings) {
  for (const FeedBinding &b : bindings) {
    DType d = executor.feedInfo(b.feed).dtype;
    // The data are f32 (pixels / 255, csv numbers); an f64 input gets them
    // converted exactly. f16 and bf16 inputs have no CPU kernels to feed.
    if (d != DType::F32 && d != DType::F64 && !isInteger(d) &&
        !(d == DType::Bool && b.source == FeedBinding::Source::kFeatures))
      return errorStatus("input '", executor.feedInfo(b.feed).name, "' is ",
                         dtypeName(d),
                         "; dtf-run feeds data to f32, f64, i32, i64 and bool "
                         "inputs");
  }
  return Status::ok();
}

template <typename T>
void copyColumns(const data::Batch &batch, int64_t elements, int64_t offset,
                 int64_t count, T *out) {
  const float *src = batch.features.data();
  const int64_t n = int64_t(batch.size());
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < count; ++c) {
      const float v = src[r * elements + offset + c];
      if constexpr (std::is_same_v<T, bool>)
        out[r * count + c] = v != 0.0f;
      else
        out[r * count + c] = static_cast<T>(v);
    }
}

template <typename T> void copyLabels(const data::Batch &batch, T *out) {
  for (size_t r = 0; r < batch.size(); ++r)
    out[r] = static_cast<T>(batch.labels[r]);
}

} // namespace

Status openPlanSource(const plan::Plan &plan, const plan::DataSource &source,
                      const char *role, const plan::Program &program,
                      std::shared_ptr<const data::Dataset> *out,
                      FeedLayout *layout) {
  DTF_RETURN_IF_ERROR(
      openSource(plan, source, role, out, layout, {}, nullptr, &program));
  if (layout->kind != FeedLayout::Kind::kColumns || !layout->hasLabels)
    return Status::ok();
  // The labels' input: named by the layout, else the model's last input (as
  // bind() picks it for the program that trains or evaluates). An inference
  // program that does not read it leaves the source's labels unread instead
  // of binding them to its own last input.
  std::string label = layout->labelInput;
  if (label.empty()) {
    const std::vector<PlanInput> model = planInputs(
        plan.eval().ops_size() > 0 ? plan.eval() : plan.train_step());
    if (model.empty())
      return Status::ok();
    label = model.back().name;
  }
  for (const PlanInput &in : planInputs(program))
    if (in.name == label)
      return Status::ok();
  layout->hasLabels = false;
  layout->labelInput.clear();
  return Status::ok();
}

Status openPlanData(const plan::Plan &plan, PlanData *out, DataShard shard) {
  const plan::Training &t = plan.training();
  DTF_RETURN_IF_ERROR(openSource(plan, t.data(), "data", &out->train,
                                 &out->trainLayout, shard,
                                 &out->trainShardedByFile));
  if (!t.has_eval() || t.eval().kind().empty())
    return Status::ok();
  const plan::DataSource &e = t.eval();
  if (e.kind() == "synthetic" && t.data().kind() == "synthetic" &&
      (e.seed() == 0 || e.seed() == t.data().seed())) {
    // One task, split: the training examples first, then the held-out ones.
    const size_t n =
        size_t(t.data().examples() > 0 ? t.data().examples()
                                       : kDefaultSyntheticExamples);
    const size_t m =
        size_t(e.examples() > 0 ? e.examples() : kDefaultSyntheticExamples);
    std::shared_ptr<const data::Dataset> all;
    FeedLayout layout;
    DTF_RETURN_IF_ERROR(openSynthetic(plan, t.data(), n + m, &all, &layout));
    out->train = std::make_shared<SliceDataset>(
        all, 0, n, all->description() + ", examples 0.." + std::to_string(n));
    out->eval = std::make_shared<SliceDataset>(
        all, n, m,
        all->description() + ", examples " + std::to_string(n) + ".." +
            std::to_string(n + m));
    out->trainLayout = out->evalLayout = layout;
    return Status::ok();
  }
  return openSource(plan, e, "eval", &out->eval, &out->evalLayout);
}

Status BatchFeeder::bind(exec::Executor &executor, const data::Dataset &dataset,
                         FeedLayout layout, std::unique_ptr<BatchFeeder> *out) {
  std::unique_ptr<BatchFeeder> f(new BatchFeeder());
  f->executor_ = &executor;
  f->exampleElements_ = int64_t(dataset.exampleElements());
  const std::string source = dataset.description();
  std::vector<int> feeds = dataFeeds(executor);

  // Each feed's elements per example, and its fixed batch if it has one.
  auto perExample = [&](int i, int64_t *count) {
    return feedExampleElements(executor, i, source, &f->fixedBatch_, count);
  };

  if (layout.kind == FeedLayout::Kind::kNamed) {
    for (int i : feeds) {
      const std::string &name = executor.feedInfo(i).name;
      int64_t offset = 0, columns = -1;
      std::string feature;
      for (const FeedLayout::NamedColumn &c : layout.named) {
        if (c.input == name) {
          columns = c.count;
          feature = c.feature;
          break;
        }
        offset += c.count;
      }
      if (columns < 0)
        return errorStatus("input '", name, "' gets no data from ", source);
      int64_t count = 0;
      DTF_RETURN_IF_ERROR(perExample(i, &count));
      if (count != columns)
        return errorStatus("input '", name, "' holds ", count,
                           " values per example, but ", source, " has ",
                           columns, " for it");
      f->bindings_.push_back({i, FeedBinding::Source::kFeatures, offset, count,
                              "feature '" + feature + "'"});
    }
  } else if (layout.kind == FeedLayout::Kind::kFeaturesAndLabels) {
    int featureFeed = -1, labelFeed = -1;
    for (int i : feeds) {
      DType d = executor.feedInfo(i).dtype;
      if (featureFeed < 0 && isFloatingPoint(d))
        featureFeed = i;
      else if (labelFeed < 0 && isInteger(d))
        labelFeed = i;
    }
    if (featureFeed < 0)
      return errorStatus("the plan has no floating-point input to take the "
                         "features of ",
                         source);
    for (int i : feeds)
      if (i != featureFeed && i != labelFeed)
        return errorStatus(
            "input '", executor.feedInfo(i).name, "' gets no data from ",
            source,
            ": dtf-run feeds the features to the first floating-point input "
            "and the labels to the first integer input");
    int64_t count = 0;
    DTF_RETURN_IF_ERROR(perExample(featureFeed, &count));
    if (count != f->exampleElements_) {
      const exec::TensorSlotInfo &info = executor.feedInfo(featureFeed);
      return errorStatus("input '", info.name, "' of type ",
                         plan::typeString(info.dtype, info.dims), " holds ",
                         count, " values per example, but ", source, " has ",
                         f->exampleElements_, " (",
                         shapeString(dataset.exampleShape()), ")");
    }
    f->bindings_.push_back(
        {featureFeed, FeedBinding::Source::kFeatures, 0, count, {}});
    if (labelFeed >= 0) {
      DTF_RETURN_IF_ERROR(perExample(labelFeed, &count));
      if (count != 1)
        return errorStatus("input '", executor.feedInfo(labelFeed).name,
                           "' takes the labels, so it needs one value per "
                           "example, not ",
                           count);
      f->bindings_.push_back(
          {labelFeed, FeedBinding::Source::kLabels, 0, 1, {}});
    }
  } else {
    // The label's feed: named by the layout, else the last one.
    int labelFeed = -1;
    if (layout.hasLabels) {
      if (feeds.empty())
        return errorStatus("the plan has no input to take the labels of ",
                           source);
      labelFeed = feeds.back();
      if (!layout.labelInput.empty()) {
        labelFeed = executor.findFeed(layout.labelInput);
        if (labelFeed < 0)
          return errorStatus("the plan has no input '", layout.labelInput,
                             "' to take the labels of ", source);
      }
    }
    int64_t offset = 0;
    for (int i : feeds) {
      if (i == labelFeed)
        continue;
      int64_t count = 0;
      DTF_RETURN_IF_ERROR(perExample(i, &count));
      f->bindings_.push_back(
          {i, FeedBinding::Source::kFeatures, offset, count, {}});
      offset += count;
    }
    if (offset != f->exampleElements_)
      return errorStatus(
          "the inputs ", layout.hasLabels ? "besides the label's " : "",
          "take ", offset, " values per example, but ", source, " has ",
          f->exampleElements_,
          layout.labelInput.empty() && layout.hasLabels
              ? " (a csv source feeds its label column to the last input and "
                "the other columns, left to right, to the inputs before it)"
              : "");
    if (labelFeed >= 0) {
      int64_t count = 0;
      DTF_RETURN_IF_ERROR(perExample(labelFeed, &count));
      DType d = executor.feedInfo(labelFeed).dtype;
      if (count != 1 || (d != DType::F32 && d != DType::F64 && !isInteger(d)))
        return errorStatus("input '", executor.feedInfo(labelFeed).name,
                           "' takes the labels, so it needs one f32, f64, "
                           "i32 or i64 value per example");
      f->bindings_.push_back(
          {labelFeed, FeedBinding::Source::kLabels, 0, 1, {}});
    }
  }
  DTF_RETURN_IF_ERROR(checkFeedTypes(executor, f->bindings_));
  *out = std::move(f);
  return Status::ok();
}

Status BatchFeeder::feed(const data::Batch &batch) {
  const int64_t n = int64_t(batch.size());
  if (int64_t(batch.features.size()) != n * exampleElements_)
    return errorStatus("a batch of ", n, " examples holds ",
                       batch.features.size(), " feature values, not ",
                       n * exampleElements_);
  for (const FeedBinding &b : bindings_) {
    Tensor *t = nullptr;
    DTF_RETURN_IF_ERROR(executor_->prepareFeed(b.feed, n, &t));
    if (b.source == FeedBinding::Source::kLabels) {
      switch (t->dtype()) {
      case DType::I32:
        std::memcpy(t->data<int32_t>(), batch.labels.data(),
                    size_t(n) * sizeof(int32_t));
        break;
      case DType::I64:
        copyLabels(batch, t->data<int64_t>());
        break;
      case DType::F64:
        copyLabels(batch, t->data<double>());
        break;
      default:
        copyLabels(batch, t->data<float>());
        break;
      }
      continue;
    }
    switch (t->dtype()) {
    case DType::F32:
      if (b.offset == 0 && b.count == exampleElements_)
        std::memcpy(t->data<float>(), batch.features.data(),
                    batch.features.size() * sizeof(float));
      else
        copyColumns(batch, exampleElements_, b.offset, b.count,
                    t->data<float>());
      break;
    case DType::F64:
      copyColumns(batch, exampleElements_, b.offset, b.count,
                  t->data<double>());
      break;
    case DType::I32:
      copyColumns(batch, exampleElements_, b.offset, b.count,
                  t->data<int32_t>());
      break;
    case DType::Bool:
      copyColumns(batch, exampleElements_, b.offset, b.count, t->data<bool>());
      break;
    default:
      copyColumns(batch, exampleElements_, b.offset, b.count,
                  t->data<int64_t>());
      break;
    }
  }
  return Status::ok();
}

std::string BatchFeeder::describe() const {
  std::string s;
  for (const FeedBinding &b : bindings_) {
    if (!s.empty())
      s += ", ";
    s += executor_->feedInfo(b.feed).name + " <- ";
    if (!b.what.empty())
      s += b.what;
    else if (b.source == FeedBinding::Source::kLabels)
      s += "labels";
    else if (b.offset == 0 && b.count == exampleElements_)
      s += "features";
    else
      s += strCat("columns ", b.offset, "..", b.offset + b.count - 1);
  }
  return s;
}

} // namespace dtf::train
