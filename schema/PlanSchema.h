// What both sides know of a plan beyond its protobuf (proto/plan.proto): the
// format version, types and ops as messages name them, and which ops update
// their operands in place.
#pragma once

#include "plan.pb.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dtf::plan {

/// The plan format dtfc writes and dtf-run reads (Plan.format_version). 10:
/// the LSTM and GRU ops may carry `compute_dtype` (mixed precision), which a
/// format-9 reader would ignore, training them in f32 without a word; 9:
/// a GPU column-reduction kernel may take a `workspace` buffer (its last)
/// and launch grid.y row chunks, which a format-8 reader would launch
/// without the workspace; 8:
/// pushes may be `skippable` and ps_update may guard its updates with
/// dtf.skip_updates_unless over a pushed flag (the loss scale across the
/// ps), and GPU-placed products may carry `compute_dtype`, which a format-7
/// reader would run otherwise; 7:
/// products may carry `compute_dtype "f16"` and the plan loss-scaling ops
/// (mixed_float16), which a format-6 reader would fail on mid-run; 6:
/// products may carry `compute_dtype` (mixed_bfloat16), which a format-5
/// reader would ignore; 5:
/// optimizer updates may carry `weight_decay` and learning-rate schedules may
/// be cosine_decay, which a format-4 reader would ignore; 4: the plan's and
/// its code's digests (Plan.integrity); 3: every task's
/// program cut by dtfc (ps_update per held tensor, the stages, the lookup
/// cut); docs/plan-format.md.
constexpr uint32_t kPlanFormatVersion = 10;

/// The most threads a plan's session may ask for (inter_op_threads,
/// intra_op_threads) and the most in-graph GPU towers: far beyond any
/// machine dtf runs on, so that a damaged number is refused, not obeyed.
constexpr int64_t kMaxSessionThreads = 1024;
constexpr int64_t kMaxGpuTowers = 64;

/// "f32", "i64", ...: a plan dtype as the model language writes it; "?" for
/// one this version does not know.
const char *dtypeName(int planDType);

/// The bytes of one element of a plan dtype (4 for one it does not know).
int64_t elementBytes(int planDType);

/// The dims of a plan shape; -1 stands for the batch.
std::vector<int64_t> dimsOf(const Shape &shape);

/// "[B,784]": dims with B for the batch (-1).
std::string dimsString(const std::vector<int64_t> &dims);

/// "f32[B,784]": the plan type as the model language writes it, with B for
/// the batch (-1) dimension.
std::string typeString(const TensorType &type);

/// True when `actual` (a concrete shape) fits `declared`, where a declared -1
/// matches any size.
bool shapeFits(const std::vector<int64_t> &declared,
               const std::vector<int64_t> &actual);

/// The element count of a static shape, or -1 when a dim is negative or the
/// product would exceed `limit`.
int64_t staticElements(const std::vector<int64_t> &dims, int64_t limit);

/// `text` with control bytes and bytes >= 0x7f written as \xNN, for names
/// from a plan in messages (a corrupted plan may hold anything).
std::string printable(std::string_view text);

/// "model.dtf:12:9: dtf.matmul" or, without a location, "op #12 dtf.matmul":
/// how messages name op `index` of a program.
std::string describeOp(const Program &program, int index);

/// How many leading inputs of `op` it updates in place (an optimizer's
/// variable and slots, assign_add's variable, a moving average, the loss
/// scale and its count): 0 for ops
/// that update nothing.
int updatedOperands(const Op &op);

/// True for the dense optimizer updates (dtf.apply_sgd, apply_momentum,
/// apply_adam, apply_adagrad, apply_ftrl, apply_rmsprop).
bool isDenseUpdate(std::string_view opName);

/// True for the library LSTM and GRU ops (dtf.lstm, dtf.gru and their _train
/// and _grad forms): products that a mixed precision policy marks too.
bool isRecurrentLayerOp(std::string_view opName);

/// How the first lines of dtfc --placement-report and dtf-run say how many
/// ops compute in low precision: "11 matmuls and convolutions", or with
/// recurrent ones among `total`, "5 matmuls and convolutions and 3 LSTM/GRU
/// ops".
std::string lowPrecisionOpsPhrase(int total, int recurrent);

} // namespace dtf::plan
