// Tensor: a dtype, a shape and a 64-byte aligned buffer, owned or viewed.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace dtf {

/// Element types of the runtime; the names are the model language's.
enum class DType : uint8_t { F32, F16, BF16, I32, I64, Bool, F64 };

/// Bytes per element (Bool is one byte).
size_t dtypeSize(DType dtype);
/// "f32", "f64", "f16", "bf16", "i32", "i64" or "bool".
const char *dtypeName(DType dtype);
/// The inverse of dtypeName; also accepts MLIR's "i1" for bool.
std::optional<DType> parseDType(std::string_view name);
bool isFloatingPoint(DType dtype);

/// The DType of a C++ element type: float, double, int32_t, int64_t or bool.
template <typename T> constexpr DType dtypeOf() {
  if constexpr (std::is_same_v<T, float>)
    return DType::F32;
  else if constexpr (std::is_same_v<T, double>)
    return DType::F64;
  else if constexpr (std::is_same_v<T, int32_t>)
    return DType::I32;
  else if constexpr (std::is_same_v<T, int64_t>)
    return DType::I64;
  else {
    static_assert(std::is_same_v<T, bool>, "no DType for this C++ type");
    return DType::Bool;
  }
}

/// The product of the dimensions (1 for a scalar).
int64_t numElementsOf(const std::vector<int64_t> &shape);
/// "[3,5,7]"; "[]" for a scalar.
std::string shapeString(const std::vector<int64_t> &shape);

/// A dense row-major tensor. Copies share the buffer (like a shared_ptr):
/// an owning tensor keeps its buffer alive for as long as any copy or
/// reshaped view of it lives; a view (Tensor::view) points into memory that
/// someone else owns, such as an arena planned by the executor.
class Tensor {
public:
  /// The buffer alignment of allocate(): enough for AVX-512 loads.
  static constexpr size_t kAlignment = 64;

  /// An undefined tensor: no dtype that matters, no buffer.
  Tensor() = default;

  /// A new owned, uninitialized buffer for `shape` (dimensions >= 0). The
  /// result is undefined() only when memory runs out.
  static Tensor allocate(DType dtype, std::vector<int64_t> shape);
  /// As allocate(), with every byte zero (0, 0.0 and false).
  static Tensor zeros(DType dtype, std::vector<int64_t> shape);
  /// As zeros(), but the memory is reserved, not committed: pages are
  /// taken from the system only when first written (an anonymous mapping
  /// without swap reservation). For dynamic tables, whose capacity is far
  /// larger than the rows they hold.
  static Tensor reserveZeros(DType dtype, std::vector<int64_t> shape);
  /// A tensor that shares `buffer` (`capacity` bytes, aligned to
  /// kAlignment, at least the bytes of `shape`), as allocate()'s own: the
  /// buffer's deleter runs when the last tensor over it goes (a pool of
  /// transfer buffers takes it back there).
  static Tensor adopt(DType dtype, std::vector<int64_t> shape,
                      std::shared_ptr<void> buffer, size_t capacity);
  /// A tensor over `data`, which must hold numElementsOf(shape) elements and
  /// outlive every use of the view.
  static Tensor view(DType dtype, std::vector<int64_t> shape, void *data);

  bool defined() const { return data_ != nullptr; }
  DType dtype() const { return dtype_; }
  const std::vector<int64_t> &shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  /// Dimension `i`; negative `i` counts from the end.
  int64_t dim(int i) const { return shape_[i < 0 ? i + rank() : i]; }
  int64_t numElements() const { return numElements_; }
  size_t byteSize() const { return size_t(numElements_) * dtypeSize(dtype_); }
  /// Bytes the buffer can hold (>= byteSize()); 0 for a view of unknown size.
  size_t capacityBytes() const { return capacity_; }
  /// True for a tensor made by allocate()/zeros() (or a copy or reshape of
  /// one).
  bool ownsBuffer() const { return buffer_ != nullptr; }
  /// How many tensors share this owned buffer (0 for a view).
  long bufferUseCount() const { return buffer_.use_count(); }

  template <typename T> T *data() {
    assert(dtypeOf<T>() == dtype_ && "Tensor::data<T>() with the wrong T");
    return static_cast<T *>(data_);
  }
  template <typename T> const T *data() const {
    assert(dtypeOf<T>() == dtype_ && "Tensor::data<T>() with the wrong T");
    return static_cast<const T *>(data_);
  }
  void *rawData() { return data_; }
  const void *rawData() const { return data_; }

  /// The same buffer under another shape of the same element count.
  Tensor reshaped(std::vector<int64_t> shape) const;

  /// Gives this tensor a new dtype and shape over its own buffer, which must
  /// be large enough (canHold); used to reuse buffers from step to step.
  void retype(DType dtype, std::vector<int64_t> shape);
  /// True when this owned buffer has room for `shape` elements of `dtype`.
  bool canHold(DType dtype, const std::vector<int64_t> &shape) const;

  /// "f32[3,5,7]".
  std::string describe() const;

private:
  DType dtype_ = DType::F32;
  std::vector<int64_t> shape_;
  int64_t numElements_ = 0;
  std::shared_ptr<void> buffer_; // null for views
  void *data_ = nullptr;
  size_t capacity_ = 0;
};

} // namespace dtf
