// KernelContext attribute access and output allocation; KernelRegistry.
#include "runtime/kernels/Kernel.h"

namespace dtf {

Status KernelContext::allocateOutput(int i, DType dtype,
                                     std::vector<int64_t> shape, Tensor **out) {
  if (i >= numOutputs())
    outputs_.resize(i + 1);
  Tensor &t = outputs_[i];
  // Reuse a buffer that nobody else holds: steady-state steps allocate nothing.
  if (t.canHold(dtype, shape) && t.bufferUseCount() == 1) {
    t.retype(dtype, std::move(shape));
  } else {
    std::string what = strCat(dtypeName(dtype), shapeString(shape));
    t = Tensor::allocate(dtype, std::move(shape));
    if (!t.defined())
      return errorStatus("out of memory allocating a tensor of ", what);
  }
  *out = &t;
  return Status::ok();
}

void KernelContext::setOutput(int i, Tensor value) {
  if (i >= numOutputs())
    outputs_.resize(i + 1);
  outputs_[i] = std::move(value);
}

const AttrValue *KernelContext::findAttr(std::string_view name) const {
  auto it = attrs_.find(name);
  return it == attrs_.end() ? nullptr : &it->second;
}

void KernelContext::noteBadAttr(std::string_view name,
                                const char *wanted) const {
  if (attrError_.isOk())
    attrError_ = errorStatus(opName_.empty() ? "" : opName_ + ": ",
                             "attribute '", name, "' should be ", wanted);
}

int64_t KernelContext::getInt(std::string_view name, int64_t dflt) const {
  const AttrValue *v = findAttr(name);
  if (!v)
    return dflt;
  if (auto *i = std::get_if<int64_t>(v))
    return *i;
  if (auto *b = std::get_if<bool>(v))
    return *b;
  noteBadAttr(name, "an integer");
  return dflt;
}

double KernelContext::getFloat(std::string_view name, double dflt) const {
  const AttrValue *v = findAttr(name);
  if (!v)
    return dflt;
  if (auto *d = std::get_if<double>(v))
    return *d;
  if (auto *i = std::get_if<int64_t>(v))
    return static_cast<double>(*i);
  noteBadAttr(name, "a number");
  return dflt;
}

bool KernelContext::getBool(std::string_view name, bool dflt) const {
  const AttrValue *v = findAttr(name);
  if (!v)
    return dflt;
  if (auto *b = std::get_if<bool>(v))
    return *b;
  if (auto *i = std::get_if<int64_t>(v))
    return *i != 0;
  noteBadAttr(name, "a bool");
  return dflt;
}

std::string KernelContext::getString(std::string_view name,
                                     std::string dflt) const {
  const AttrValue *v = findAttr(name);
  if (!v)
    return dflt;
  if (auto *s = std::get_if<std::string>(v))
    return *s;
  noteBadAttr(name, "a string");
  return dflt;
}

std::vector<int64_t> KernelContext::getInts(std::string_view name,
                                            std::vector<int64_t> dflt) const {
  const AttrValue *v = findAttr(name);
  if (!v)
    return dflt;
  if (auto *l = std::get_if<std::vector<int64_t>>(v))
    return *l;
  if (auto *i = std::get_if<int64_t>(v))
    return {*i};
  noteBadAttr(name, "a list of integers");
  return dflt;
}

std::vector<double> KernelContext::getFloats(std::string_view name,
                                             std::vector<double> dflt) const {
  const AttrValue *v = findAttr(name);
  if (!v)
    return dflt;
  if (auto *l = std::get_if<std::vector<double>>(v))
    return *l;
  if (auto *l = std::get_if<std::vector<int64_t>>(v))
    return std::vector<double>(l->begin(), l->end());
  if (auto *d = std::get_if<double>(v))
    return {*d};
  noteBadAttr(name, "a list of numbers");
  return dflt;
}

Status callKernel(KernelFn fn, KernelContext &ctx) {
  ctx.clearAttrError();
  Status s = fn(ctx);
  if (!ctx.attrError().isOk())
    return ctx.attrError();
  return s;
}

KernelFn KernelRegistry::lookup(std::string_view op) const {
  auto it = kernels_.find(op);
  return it == kernels_.end() ? nullptr : it->second;
}

std::vector<std::string> KernelRegistry::registeredOps() const {
  std::vector<std::string> ops;
  ops.reserve(kernels_.size());
  for (const auto &[name, fn] : kernels_)
    ops.push_back(name);
  return ops;
}

} // namespace dtf
