// Shared-memory regions between a worker and a ps on the same host: the
// file both map (SharedRegion), the worker's regions per ps (RegionPool) and
// the ps's checked mappings of its callers' regions (MappedRegions), so that
// a pull's or a push's tensor bytes cross as one memcpy on each side instead
// of through gRPC and a socket (docs/protocol.md, "Shared memory").
#pragma once

#include "schema/Status.h"

#include "service.grpc.pb.h"

#include <grpcpp/grpcpp.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace dtf::dist {

/// Where each tensor of a slot starts: a multiple of this.
inline constexpr uint64_t kRegionAlignment = 64;
inline uint64_t alignRegion(uint64_t n) {
  return (n + kRegionAlignment - 1) / kRegionAlignment * kRegionAlignment;
}

/// One mapped file of shared memory.
class SharedRegion {
public:
  /// The worker's side: a new file of `bytes` in `dir` (O_CREAT|O_EXCL,
  /// O_NOFOLLOW, mode 0600) named "dtf-shm-TASK-PID-N-RANDOM", its pages
  /// reserved at once (posix_fallocate: a full tmpfs is an error here, not a
  /// SIGBUS at the first write), mapped shared. The file is removed when the
  /// region goes.
  static Status create(const std::string &dir, const std::string &task,
                       uint64_t bytes, std::unique_ptr<SharedRegion> *out);

  /// Why open refused a region: a request that names what cannot be (a
  /// name outside the directory, a size that differs: INVALID_ARGUMENT), or
  /// a file this task may not trust (a symlink, not a regular file, another
  /// owner, another mode: PERMISSION_DENIED).
  enum class Refusal { kInvalid, kDenied };
  /// The ps's side: maps the region `name` that task `task` made in `dir`,
  /// after checking that the name is a plain file name of that task's
  /// regions, and, on the open file (O_NOFOLLOW, fstat), that it is a
  /// regular file of this process's uid, mode 0600, of exactly `bytes`.
  static Status open(const std::string &dir, const std::string &task,
                     const std::string &name, uint64_t bytes,
                     std::unique_ptr<SharedRegion> *out, Refusal *why);

  ~SharedRegion();
  SharedRegion(const SharedRegion &) = delete;
  SharedRegion &operator=(const SharedRegion &) = delete;

  const std::string &name() const { return name_; }
  uint64_t size() const { return size_; }
  char *data() const { return data_; }
  /// The whole region as the slot a call names (a pull's reply_into, a
  /// push's values_in).
  rpc::RegionSlice slice() const;
  /// Whether [offset, offset + n) lies inside the region (no overflow).
  bool contains(uint64_t offset, uint64_t n) const {
    return offset <= size_ && n <= size_ - offset;
  }

private:
  SharedRegion() = default;
  static std::unique_ptr<SharedRegion> mapped(const std::string &name,
                                              const std::string &path,
                                              void *data, uint64_t bytes,
                                              bool owner);
  std::string name_, path_;
  char *data_ = nullptr;
  uint64_t size_ = 0;
  bool owner_ = false; // made it: removes the file
};

/// The file names of `task`'s regions start with this.
std::string regionPrefix(const std::string &task);

/// Removes the regions of `task` in `dir` whose process is gone (killed
/// before it could remove them: the PID in their name runs no more); those
/// of a live process stay. Returns how many went.
int removeStaleRegions(const std::string &dir, const std::string &task);

/// A worker's regions for its calls to one ps: each call that moves tensor
/// bytes takes a whole region of at least its bytes (a pull and a push in
/// flight together, a prefetched pull: each its own), made on first need
/// and kept for the next calls; at most kMaxRegions. Thread-safe.
class RegionPool {
public:
  static constexpr size_t kMaxRegions = 4;
  RegionPool(std::string dir, std::string task)
      : dir_(std::move(dir)), task_(std::move(task)) {
    // A lease reads its entry without the lock: the vector never moves.
    regions_.reserve(kMaxRegions);
  }

  /// A region taken for one call, given back when it goes.
  class Lease {
  public:
    Lease() = default;
    Lease(RegionPool *pool, size_t index) : pool_(pool), index_(index) {}
    Lease(Lease &&o) noexcept : pool_(o.pool_), index_(o.index_) {
      o.pool_ = nullptr;
    }
    Lease &operator=(Lease &&o) noexcept;
    ~Lease() { release(); }
    explicit operator bool() const { return pool_ != nullptr; }
    SharedRegion &region() const { return *pool_->regions_[index_].region; }
    /// The whole region as the slot a request names.
    rpc::RegionSlice slice() const;
    /// Removes the region instead of giving it back: its call failed, and
    /// the ps may still write into it (a pull whose caller gave up).
    void retire();

  private:
    void release();
    RegionPool *pool_ = nullptr;
    size_t index_ = 0;
  };

  /// A region of at least `bytes` for one call; none (the call sends
  /// bytes) when every region is taken or a new one cannot be made, which
  /// *failure says (once: later failures leave it empty).
  Lease take(uint64_t bytes, std::string *failure);

  /// A region of `bytes` apart from the calls' regions, for the variables
  /// a worker pulls from this ps to live in (PsClient's home regions); none
  /// when shared memory is off for this ps or the region cannot be made
  /// (*failure says why, once). It goes when the last holder lets it go.
  std::shared_ptr<SharedRegion> makeHome(uint64_t bytes, std::string *failure);

  /// Stops using shared memory for this ps (it refused a region): every
  /// later take gives none. *first: whether this is the first time.
  void turnOff(bool *first);
  bool off() const;

private:
  struct Entry {
    std::unique_ptr<SharedRegion> region;
    bool busy = false;
  };
  std::string dir_, task_;
  mutable std::mutex mu_;
  std::vector<Entry> regions_;
  bool off_ = false, failed_ = false;
};

/// The status details (`grpc::Status::error_details`) of every refusal of a
/// caller's shared memory: the worker sends the same call again as bytes
/// on seeing them, whatever the message says.
inline constexpr char kRegionRefused[] = "dtf.shared-memory-refused";

/// A refusal of a caller's shared memory, marked with kRegionRefused.
inline grpc::Status regionRefusal(grpc::StatusCode code,
                                  const std::string &message) {
  return grpc::Status(code, message, kRegionRefused);
}

/// The ps's mappings of its callers' regions, each checked once (on first
/// sight) by SharedRegion::open; at most kMaxMapped (the least recently
/// used are unmapped first; a call using one keeps it mapped until it
/// ends). Thread-safe.
class MappedRegions {
public:
  static constexpr size_t kMaxMapped = 64;
  /// `dir`: the region directory; "" turns shared memory off (every slot
  /// refused: the ps was started with --same-host unix or tcp, or
  /// --insecure).
  MappedRegions(std::string dir, std::string self)
      : dir_(std::move(dir)), self_(std::move(self)) {}

  /// The slot `s` of caller `task`: its region mapped (and checked) on
  /// first sight, the slot checked to lie inside it. *slot points at its
  /// first byte, *keep holds the mapping. A refusal is INVALID_ARGUMENT or
  /// PERMISSION_DENIED (FAILED_PRECONDITION when this ps takes none) with a
  /// message naming the region, marked kRegionRefused.
  grpc::Status slot(const std::string &task, const rpc::RegionSlice &s,
                    char **slot, std::shared_ptr<SharedRegion> *keep);
  /// Unmaps the regions of `task` (a worker that finished or left).
  void forget(const std::string &task);
  size_t mapped() const;

private:
  struct Mapped {
    std::string task;
    std::shared_ptr<SharedRegion> region;
    uint64_t used = 0;
  };
  std::string dir_, self_;
  mutable std::mutex mu_;
  std::map<std::string, Mapped> byName_;
  uint64_t clock_ = 0;
};

/// Whether [offset, offset + n) lies inside a slot of `capacity` bytes
/// (no overflow).
inline bool insideSlot(uint64_t offset, uint64_t n, uint64_t capacity) {
  return offset <= capacity && n <= capacity - offset;
}

} // namespace dtf::dist
