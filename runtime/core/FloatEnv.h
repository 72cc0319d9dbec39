// The floating-point environment dtf-run trains in: subnormal floats flushed
// to zero.
#pragma once

namespace dtf {

/// Sets flush-to-zero and denormals-are-zero on the calling thread: a
/// subnormal operand reads as zero and a subnormal result is written as zero.
/// Threads made afterwards inherit it (POSIX: a new thread starts with its
/// creator's floating-point environment), so dtf-run calls it first thing in
/// main, before any thread exists. Why: an x86 core takes a microcode assist
/// of about a hundred cycles for each subnormal operand or result, and
/// gradients and Adam's moments drift into that range as a model trains
/// (bench/results/gpu.md: a ps fed by GPU workers, which keep subnormals,
/// slowed from 5,400 to 1,270 images/s per worker over 2,000 steps).
/// TensorFlow's executor flushes them likewise. A no-op where the CPU has no
/// such control (then subnormalsFlushed() is false).
void flushSubnormals();

/// Whether the calling thread flushes subnormals (both FTZ and DAZ set).
bool subnormalsFlushed();

} // namespace dtf
