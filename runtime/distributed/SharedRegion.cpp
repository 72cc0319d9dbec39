// Shared-memory regions: made by a worker, checked and mapped by a ps, lent
// to one call at a time.
#include "runtime/distributed/SharedRegion.h"

#include "runtime/plan/PlanTypes.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <random>

namespace dtf::dist {
namespace {

std::string modeOf(mode_t m) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", unsigned(m & 07777));
  return buf;
}

// A region's name after the task's prefix: what create writes (digits,
// hex, dashes), nothing that could leave the directory.
bool plainSuffix(const std::string &s) {
  if (s.empty() || s.size() > 128)
    return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '-'))
      return false;
  return true;
}

} // namespace

std::string regionPrefix(const std::string &task) {
  return "dtf-shm-" + task + "-";
}

int removeStaleRegions(const std::string &dir, const std::string &task) {
  const std::string prefix = regionPrefix(task);
  std::vector<std::string> stale;
  if (DIR *d = ::opendir(dir.c_str())) {
    while (const dirent *e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name.compare(0, prefix.size(), prefix) != 0 ||
          !plainSuffix(name.substr(prefix.size())))
        continue;
      // "PID-N-RANDOM": a process that no longer exists made it.
      const long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
      if (pid > 0 && pid != long(getpid()) && ::kill(pid_t(pid), 0) != 0 &&
          errno == ESRCH)
        stale.push_back(name);
    }
    ::closedir(d);
  }
  int removed = 0;
  for (const std::string &name : stale)
    removed += ::unlink((dir + "/" + name).c_str()) == 0;
  return removed;
}

Status SharedRegion::create(const std::string &dir, const std::string &task,
                            uint64_t bytes,
                            std::unique_ptr<SharedRegion> *out) {
  static std::atomic<uint64_t> counter{0};
  std::random_device random;
  char suffix[64];
  std::snprintf(suffix, sizeof suffix, "%d-%llu-%08x%08x", int(getpid()),
                (unsigned long long)++counter, unsigned(random()),
                unsigned(random()));
  const std::string name = regionPrefix(task) + suffix;
  const std::string path = dir + "/" + name;
  bytes = std::max<uint64_t>(alignRegion(bytes), kRegionAlignment);
  const int fd = ::open(
      path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return errorStatus("cannot make the shared-memory region ", path, ": ",
                       std::strerror(errno));
  auto undo = [&](const char *what, int err) {
    ::close(fd);
    ::unlink(path.c_str());
    return errorStatus("cannot ", what, " the shared-memory region ", path,
                       " (", bytes, " bytes): ", std::strerror(err));
  };
  // The umask may have taken bits away, never added any: make it exactly
  // what the ps checks.
  if (::fchmod(fd, 0600) != 0)
    return undo("set the mode of", errno);
  if (int err = ::posix_fallocate(fd, 0, off_t(bytes)); err != 0)
    return undo("reserve the memory of", err);
  void *p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED)
    return undo("map", errno);
  ::close(fd);
  *out = mapped(name, path, p, bytes, /*owner=*/true);
  return Status::ok();
}

Status SharedRegion::open(const std::string &dir, const std::string &task,
                          const std::string &name, uint64_t bytes,
                          std::unique_ptr<SharedRegion> *out, Refusal *why) {
  const std::string prefix = regionPrefix(task);
  *why = Refusal::kInvalid;
  if (name.compare(0, prefix.size(), prefix) != 0 ||
      !plainSuffix(name.substr(prefix.size())))
    return errorStatus("the shared-memory region '", plan::printable(name),
                       "' is not a region name of ", task, " (", prefix,
                       "..., in ", dir, ")");
  const std::string path = dir + "/" + name;
  // The directory must be this user's alone: then only this user made
  // what is in it.
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) ||
      st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
    *why = Refusal::kDenied;
    return errorStatus("the shared-memory directory ", dir,
                       " is not a directory of this user with mode 0700");
  }
  const int fd =
      ::open(path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    *why = err == ELOOP ? Refusal::kDenied : Refusal::kInvalid;
    return errorStatus("cannot open the shared-memory region ", path, ": ",
                       err == ELOOP ? "it is a symbolic link"
                                    : std::strerror(err));
  }
  auto refuse = [&](Refusal r, const std::string &what) {
    ::close(fd);
    *why = r;
    return errorStatus("the shared-memory region ", path, " ", what);
  };
  if (::fstat(fd, &st) != 0)
    return refuse(Refusal::kInvalid,
                  std::string("cannot be read: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    return refuse(Refusal::kDenied, "is not a regular file");
  if (st.st_uid != geteuid())
    return refuse(Refusal::kDenied,
                  "belongs to uid " + std::to_string(st.st_uid) +
                      ", not to this task's uid " + std::to_string(geteuid()));
  if ((st.st_mode & 07777) != 0600)
    return refuse(Refusal::kDenied,
                  "has mode " + modeOf(st.st_mode) + ", not 0600");
  if (uint64_t(st.st_size) != bytes || bytes == 0)
    return refuse(Refusal::kInvalid, "holds " + std::to_string(st.st_size) +
                                         " bytes, but the call says " +
                                         std::to_string(bytes));
  void *p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED)
    return refuse(Refusal::kInvalid,
                  std::string("cannot be mapped: ") + std::strerror(errno));
  ::close(fd);
  *out = mapped(name, path, p, bytes, /*owner=*/false);
  return Status::ok();
}

std::unique_ptr<SharedRegion> SharedRegion::mapped(const std::string &name,
                                                   const std::string &path,
                                                   void *data, uint64_t bytes,
                                                   bool owner) {
  auto r = std::unique_ptr<SharedRegion>(new SharedRegion());
  r->name_ = name;
  r->path_ = path;
  r->data_ = static_cast<char *>(data);
  r->size_ = bytes;
  r->owner_ = owner;
  return r;
}

SharedRegion::~SharedRegion() {
  if (data_)
    ::munmap(data_, size_);
  if (owner_)
    ::unlink(path_.c_str());
}

// --- RegionPool: the worker's side -------------------------------------

RegionPool::Lease &RegionPool::Lease::operator=(Lease &&o) noexcept {
  if (this != &o) {
    release();
    pool_ = o.pool_;
    index_ = o.index_;
    o.pool_ = nullptr;
  }
  return *this;
}

void RegionPool::Lease::release() {
  if (!pool_)
    return;
  std::lock_guard<std::mutex> lock(pool_->mu_);
  pool_->regions_[index_].busy = false;
  pool_ = nullptr;
}

void RegionPool::Lease::retire() {
  if (!pool_)
    return;
  std::lock_guard<std::mutex> lock(pool_->mu_);
  pool_->regions_[index_].region.reset();
  pool_->regions_[index_].busy = false;
  pool_ = nullptr;
}

rpc::RegionSlice SharedRegion::slice() const {
  rpc::RegionSlice s;
  s.set_region(name_);
  s.set_region_bytes(size_);
  s.set_offset(0);
  s.set_capacity(size_);
  return s;
}

rpc::RegionSlice RegionPool::Lease::slice() const { return region().slice(); }

RegionPool::Lease RegionPool::take(uint64_t bytes, std::string *failure) {
  std::lock_guard<std::mutex> lock(mu_);
  if (off_)
    return Lease();
  // The smallest idle region that fits; else a new one, in a free place
  // or instead of an idle one too small.
  size_t best = regions_.size(), small = regions_.size();
  for (size_t i = 0; i < regions_.size(); ++i) {
    if (regions_[i].busy)
      continue;
    if (!regions_[i].region) { // retired: a free place
      small = i;
      continue;
    }
    if (regions_[i].region->size() >= bytes) {
      if (best == regions_.size() ||
          regions_[i].region->size() < regions_[best].region->size())
        best = i;
    } else if (small == regions_.size() || regions_[small].region) {
      small = i;
    }
  }
  if (best < regions_.size()) {
    regions_[best].busy = true;
    return Lease(this, best);
  }
  size_t at = regions_.size();
  if (at >= kMaxRegions) {
    if (small == regions_.size())
      return Lease(); // every region is in use
    at = small;
  }
  std::unique_ptr<SharedRegion> made;
  // Room to grow a little (sparse pushes vary from step to step).
  Status s = SharedRegion::create(dir_, task_, bytes + bytes / 8, &made);
  if (!s.isOk()) {
    if (!failed_)
      *failure = s.message();
    failed_ = true;
    return Lease();
  }
  if (at == regions_.size())
    regions_.emplace_back();
  regions_[at].region = std::move(made);
  regions_[at].busy = true;
  return Lease(this, at);
}

std::shared_ptr<SharedRegion> RegionPool::makeHome(uint64_t bytes,
                                                   std::string *failure) {
  std::lock_guard<std::mutex> lock(mu_);
  if (off_)
    return nullptr;
  std::unique_ptr<SharedRegion> made;
  Status s = SharedRegion::create(dir_, task_, bytes, &made);
  if (!s.isOk()) {
    if (!failed_)
      *failure = s.message();
    failed_ = true;
    return nullptr;
  }
  return std::shared_ptr<SharedRegion>(std::move(made));
}

void RegionPool::turnOff(bool *first) {
  std::lock_guard<std::mutex> lock(mu_);
  *first = !off_;
  off_ = true;
}

bool RegionPool::off() const {
  std::lock_guard<std::mutex> lock(mu_);
  return off_;
}

// --- MappedRegions: the ps's side ----------------------------------------

grpc::Status MappedRegions::slot(const std::string &task,
                                 const rpc::RegionSlice &s, char **slot,
                                 std::shared_ptr<SharedRegion> *keep) {
  if (dir_.empty())
    return regionRefusal(grpc::StatusCode::FAILED_PRECONDITION,
                         self_ + " takes no shared memory (started with "
                                 "--same-host unix or tcp, or --insecure): "
                                 "send the bytes");
  std::shared_ptr<SharedRegion> region;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = byName_.find(s.region());
    if (it != byName_.end() && it->second.task == task) {
      region = it->second.region;
      it->second.used = ++clock_;
    }
  }
  if (!region) {
    std::unique_ptr<SharedRegion> opened;
    SharedRegion::Refusal why = SharedRegion::Refusal::kInvalid;
    Status st = SharedRegion::open(dir_, task, s.region(), s.region_bytes(),
                                   &opened, &why);
    if (!st.isOk())
      return regionRefusal(why == SharedRegion::Refusal::kDenied
                               ? grpc::StatusCode::PERMISSION_DENIED
                               : grpc::StatusCode::INVALID_ARGUMENT,
                           self_ + ": refused " + task +
                               "'s shared memory: " + st.message());
    region = std::move(opened);
    std::lock_guard<std::mutex> lock(mu_);
    while (byName_.size() >= kMaxMapped) {
      auto oldest = byName_.begin();
      for (auto it = byName_.begin(); it != byName_.end(); ++it)
        if (it->second.used < oldest->second.used)
          oldest = it;
      byName_.erase(oldest);
    }
    byName_[s.region()] = {task, region, ++clock_};
  }
  if (!region->contains(s.offset(), s.capacity()))
    return regionRefusal(
        grpc::StatusCode::INVALID_ARGUMENT,
        self_ + ": refused " + task + "'s shared memory: the slot of " +
            std::to_string(s.capacity()) + " bytes at offset " +
            std::to_string(s.offset()) + " lies outside the region " +
            plan::printable(s.region()) + " of " +
            std::to_string(region->size()) + " bytes");
  *slot = region->data() + s.offset();
  *keep = std::move(region);
  return grpc::Status::OK;
}

void MappedRegions::forget(const std::string &task) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = byName_.begin(); it != byName_.end();)
    it = it->second.task == task ? byName_.erase(it) : std::next(it);
}

size_t MappedRegions::mapped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return byName_.size();
}

} // namespace dtf::dist
