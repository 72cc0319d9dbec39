// Tensor: dtype helpers, aligned allocation, views and reshapes.
#include "runtime/core/Tensor.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace dtf {

size_t dtypeSize(DType dtype) {
  switch (dtype) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::I64:
  case DType::F64:
    return 8;
  case DType::Bool:
    return 1;
  }
  return 0;
}

const char *dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "f32";
  case DType::F64:
    return "f64";
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  case DType::I32:
    return "i32";
  case DType::I64:
    return "i64";
  case DType::Bool:
    return "bool";
  }
  return "?";
}

std::optional<DType> parseDType(std::string_view name) {
  if (name == "f32")
    return DType::F32;
  if (name == "f64")
    return DType::F64;
  if (name == "f16")
    return DType::F16;
  if (name == "bf16")
    return DType::BF16;
  if (name == "i32")
    return DType::I32;
  if (name == "i64")
    return DType::I64;
  if (name == "bool" || name == "i1")
    return DType::Bool;
  return std::nullopt;
}

bool isFloatingPoint(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F64 || dtype == DType::F16 ||
         dtype == DType::BF16;
}

int64_t numElementsOf(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += ",";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Tensor Tensor::allocate(DType dtype, std::vector<int64_t> shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.numElements_ = numElementsOf(shape);
  t.shape_ = std::move(shape);
  assert(t.numElements_ >= 0 && "negative dimension");
  // Round up so that every buffer is non-null and vector loops may read a
  // whole last cache line.
  size_t bytes = t.byteSize();
  size_t capacity = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (capacity == 0)
    capacity = kAlignment;
  void *p = std::aligned_alloc(kAlignment, capacity);
  if (!p)
    return Tensor();
  t.buffer_ = std::shared_ptr<void>(p, std::free);
  t.data_ = p;
  t.capacity_ = capacity;
  return t;
}

Tensor Tensor::adopt(DType dtype, std::vector<int64_t> shape,
                     std::shared_ptr<void> buffer, size_t capacity) {
  Tensor t;
  t.dtype_ = dtype;
  t.numElements_ = numElementsOf(shape);
  t.shape_ = std::move(shape);
  assert(buffer && capacity >= t.byteSize() && "adopt: buffer too small");
  t.data_ = buffer.get();
  t.buffer_ = std::move(buffer);
  t.capacity_ = capacity;
  return t;
}

Tensor Tensor::zeros(DType dtype, std::vector<int64_t> shape) {
  Tensor t = allocate(dtype, std::move(shape));
  if (t.defined())
    std::memset(t.data_, 0, t.byteSize());
  return t;
}

Tensor Tensor::reserveZeros(DType dtype, std::vector<int64_t> shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.numElements_ = numElementsOf(shape);
  t.shape_ = std::move(shape);
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  size_t capacity =
      (std::max<size_t>(t.byteSize(), 1) + page - 1) / page * page;
  void *p = mmap(nullptr, capacity, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return Tensor();
  t.buffer_ =
      std::shared_ptr<void>(p, [capacity](void *q) { munmap(q, capacity); });
  t.data_ = p;
  t.capacity_ = capacity;
  return t;
}

Tensor Tensor::view(DType dtype, std::vector<int64_t> shape, void *data) {
  Tensor t;
  t.dtype_ = dtype;
  t.numElements_ = numElementsOf(shape);
  t.shape_ = std::move(shape);
  t.data_ = data;
  return t;
}

Tensor Tensor::reshaped(std::vector<int64_t> shape) const {
  assert(numElementsOf(shape) == numElements_ && "reshape changes the size");
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

bool Tensor::canHold(DType dtype, const std::vector<int64_t> &shape) const {
  return ownsBuffer() &&
         size_t(numElementsOf(shape)) * dtypeSize(dtype) <= capacity_;
}

void Tensor::retype(DType dtype, std::vector<int64_t> shape) {
  assert((!ownsBuffer() || canHold(dtype, shape)) && "buffer too small");
  dtype_ = dtype;
  numElements_ = numElementsOf(shape);
  shape_ = std::move(shape);
}

std::string Tensor::describe() const {
  return std::string(dtypeName(dtype_)) + shapeString(shape_);
}

} // namespace dtf
