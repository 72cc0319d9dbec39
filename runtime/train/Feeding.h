// From the plan's data sources to a program's feeds: opening the datasets,
// and the rule that maps a batch's features and labels onto the inputs.
#pragma once

#include "schema/Status.h"
#include "runtime/data/BatchIterator.h"
#include "runtime/data/Dataset.h"
#include "runtime/exec/Executor.h"

#include "plan.pb.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace dtf::train {

/// How a dataset's features and labels are laid onto the feeds.
struct FeedLayout {
  enum class Kind {
    /// idx and learnable synthetic data: the features to the first
    /// floating-point feed, the labels to the first integer feed.
    kFeaturesAndLabels,
    /// csv and random synthetic data: the labels to one feed, the feature
    /// columns left to right to the other feeds in order, each taking as many
    /// columns as one of its examples holds.
    kColumns,
    /// tfrecord: the dataset's columns are named after inputs (`named`, in
    /// column order); each feed takes its own column, whatever the feed order.
    kNamed,
  };
  Kind kind = Kind::kFeaturesAndLabels;
  /// kColumns: the feed that takes the labels; empty: the last feed.
  std::string labelInput;
  /// kColumns: false when no feed takes the labels.
  bool hasLabels = true;
  /// kNamed: each column's input, the feature it comes from and its values
  /// per example, in column order.
  struct NamedColumn {
    std::string input, feature;
    int64_t count = 0;
  };
  std::vector<NamedColumn> named;

  static FeedLayout featuresAndLabels() { return {}; }
  /// The model language's rule for csv: the label column to the last input.
  static FeedLayout csv() { return {Kind::kColumns, "", true, {}}; }
  static FeedLayout columns(std::string labelInput) {
    return {Kind::kColumns, std::move(labelInput), true, {}};
  }
  static FeedLayout columnsWithoutLabels() {
    return {Kind::kColumns, "", false, {}};
  }
};

/// The name of the feed that dtf-run fills with the learning rate of the
/// plan's schedule at each step, when a program declares it (a floating-point
/// scalar). It takes no data.
constexpr const char *kLearningRateFeed = "learning_rate";

/// The datasets of a plan.
struct PlanData {
  std::shared_ptr<const data::Dataset> train;
  /// Null when the plan has no eval source.
  std::shared_ptr<const data::Dataset> eval;
  FeedLayout trainLayout;
  FeedLayout evalLayout;
  /// The train source read only this worker's files (tfrecord with at least
  /// as many files as workers): the batches need no further sharding.
  bool trainShardedByFile = false;
};

/// Which part of the training data a worker reads: worker `index` of `count`.
struct DataShard {
  size_t index = 0;
  size_t count = 1;
};

/// Opens Training.data and Training.eval:
///   idx: IdxDataset::openSplit(path, split), split "train" for data and
///     "test" for eval when not given;
///   csv: readCsv(path) with the header flag and the label column (default:
///     the last column);
///   synthetic (seed DataSource.seed, or Training.seed when 0; examples
///     default 10000; labels below the class count of the loss's logits, 10
///     when no sparse_softmax_cross_entropy says): for a model whose inputs
///     are one floating-point input and the labels, learnable data
///     (SyntheticDataset: label = argmax of a fixed projection); for any
///     other, random examples: floats from a standard normal, integer ids
///     below the rows of the table they gather from (or a one_hot's depth),
///     bools at random. A synthetic eval set with the train set's seed holds
///     further examples of the same task, not seen in training.
///   tfrecord: readTFRecords(path glob) with the plan's compression and
///     on_corrupt; one column per input of the train_step, from the feature
///     of the input's name (or the one `features` maps it to), holding the
///     input's values per example; the training files sharded by `shard`
///     when there are at least as many files as workers.
/// Errors name the source and what is wrong with it.
Status openPlanData(const plan::Plan &plan, PlanData *out,
                    DataShard shard = {});

/// Opens one data source of the plan as openPlanData does (`role` "data" or
/// "eval" picks the default split of idx): for dtf-run --predict. A tfrecord
/// source reads the features of `program`'s inputs only (so records without
/// labels do for a program that does not read them).
Status openPlanSource(const plan::Plan &plan, const plan::DataSource &source,
                      const char *role, const plan::Program &program,
                      std::shared_ptr<const data::Dataset> *out,
                      FeedLayout *layout);

/// The element type and layout of one example of a feed: its declared dims
/// after the batch.
struct FeedBinding {
  enum class Source { kFeatures, kLabels };
  int feed = -1;
  Source source = Source::kFeatures;
  /// Features: the first column and the number of columns per example.
  int64_t offset = 0;
  int64_t count = 0;
  /// What the start-up line calls the data ("feature 'image'"); empty: the
  /// columns.
  std::string what;
};

/// Copies each batch of a dataset into an executor's feeds.
class BatchFeeder {
public:
  /// Binds `dataset` to the feeds of `executor` by `layout`. The feed named
  /// learning_rate is left out. Fails, naming the feed and the dataset, when
  /// the example shape does not fit, a feed has no data, or a feed's batch
  /// dimension is not its first.
  static Status bind(exec::Executor &executor, const data::Dataset &dataset,
                     FeedLayout layout, std::unique_ptr<BatchFeeder> *out);

  /// Copies `batch` into the feed tensors (converting to each feed's dtype).
  Status feed(const data::Batch &batch);

  /// The batch size a feed requires (its first dim is a number), or 0 when
  /// every feed takes any batch size.
  int64_t fixedBatch() const { return fixedBatch_; }
  /// "x <- features, y <- labels", for the start-up line.
  std::string describe() const;

private:
  BatchFeeder() = default;
  exec::Executor *executor_ = nullptr;
  std::vector<FeedBinding> bindings_;
  int64_t exampleElements_ = 0;
  int64_t fixedBatch_ = 0;
};

} // namespace dtf::train
