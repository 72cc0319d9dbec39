// How a column reduction splits its reduced rows into chunks: one rule, by
// shape alone, shared by the op-by-op kernel (cpu/Reduce.cpp) and the
// generated kernels (GeneratedKernels.cpp), so both sum in the same order.
#pragma once

#include <algorithm>
#include <cstdint>

namespace dtf {

/// A column reduction views its input as [O, R, N] (R the reduced rows, N > 1
/// the kept elements after them) and writes O * N outputs. Split by outputs
/// alone, few outputs (a bias gradient or batch statistic: N = 16 outputs of
/// 50,176 rows) leave the pool one task. So the rows are cut into chunks of
/// the returned number of rows (R when they are not cut): each chunk's sums
/// go into a partial row of N, from 0 (-inf for a max), rows in order; the
/// outputs are then 0 + partial 0 + partial 1 + ..., in chunk order (a mean
/// divides that by R). The rule reads only O, R and N, never the thread
/// count, so a result is the same on every machine and under any load.
///
/// The rows are cut when the reduction is worth at least 2 tasks of 16,384
/// elements, the rows give at least 2 chunks of 64, and the outputs alone
/// would give fewer tasks than wanted (each task at least 64 contiguous
/// outputs, for the vector loop): then into enough chunks for up to 64 tasks
/// in all (O rows times the chunks), at least 64 rows each. The partial rows
/// then hold at most 1/64 of the input's elements.
inline int64_t columnChunkRows(int64_t outer, int64_t reduced, int64_t inner) {
  constexpr int64_t kTaskElements = 16384, kMaxTasks = 64, kMinRows = 64;
  if (inner <= 1 || outer <= 0 || reduced < 2 * kMinRows)
    return reduced;
  // The element count, saturated: past 2^40 it wants kMaxTasks anyway.
  const int64_t limit = int64_t(1) << 40;
  const int64_t work =
      outer > limit / reduced || outer * reduced > limit / inner
          ? limit
          : outer * reduced * inner;
  const int64_t wanted = std::min(kMaxTasks, work / kTaskElements);
  if (wanted < 2 || outer >= wanted)
    return reduced;
  const int64_t outputTasks =
      outer * inner /
      std::max<int64_t>(64, (kTaskElements + reduced - 1) / reduced);
  if (outputTasks >= wanted)
    return reduced;
  const int64_t chunks =
      std::min((wanted + outer - 1) / outer, reduced / kMinRows);
  if (chunks < 2)
    return reduced;
  return (reduced + chunks - 1) / chunks;
}

/// The number of chunks of `rows` rows each (the last may be shorter) that
/// `reduced` rows make.
inline int64_t columnChunkCount(int64_t reduced, int64_t rows) {
  return rows <= 0 ? 1 : (reduced + rows - 1) / rows;
}

/// On a GPU, a column reduction's 32 x 8 blocks (docs/kernels.md, "Column
/// reductions over the whole GPU"): `groups` blocks of 32 neighbouring
/// output elements (grid.x) times the returned number of chunks of the
/// `reduced` rows (grid.y), each block summing ceil(reduced / chunks) rows
/// into partial sums that the group's last block adds in chunk order. Chosen
/// by shape alone (so a result is the same on every GPU): about 4 blocks of
/// 256 threads per multiprocessor of a 132-SM H100 or H200 (528 in all), at
/// least 64 rows per chunk (8 per thread), at most 256 chunks (the last
/// block's threads each add chunks / 8 partials); 1 (no partials) under 128
/// rows or when the groups alone fill the GPU. Every chunk holds rows.
inline int64_t gpuColumnChunkCount(int64_t reduced, int64_t groups) {
  constexpr int64_t kTargetBlocks = 528, kMinRows = 64, kMaxChunks = 256;
  if (reduced < 2 * kMinRows || groups <= 0)
    return 1;
  const int64_t chunks =
      std::min({(kTargetBlocks + groups - 1) / groups, reduced / kMinRows,
                kMaxChunks});
  if (chunks < 2)
    return 1;
  return columnChunkCount(reduced, (reduced + chunks - 1) / chunks);
}

} // namespace dtf
