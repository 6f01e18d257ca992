//===- StageSets.h - a stage's activation sets and what they share -------===//
//
// A pipeline stage keeps one activation set per micro-batch in flight
// (cost_model/pipeline/ActivationSets.h). The gradients of the tensors inside
// the stage are needed only while a micro-batch's backward runs, and a
// stage's backwards run one at a time (each whole, on one stream), so the
// sets share one copy of them: a generated set struct declares those members
// as SetShared<T>, the others as the backend's own buffers. DESIGN.md §5b,
// docs/codegen.md "Activation sets".
//
// How the sharing is done: StageSets constructs its sets one by one, and
// while it constructs one, the k-th SetShared member made gets the k-th block
// of the StageSets' pool (allocated by the first set, reused by the others).
// Every set is the same struct constructed the same way, so the k-th member
// is the same one in each, and every set sees the same addresses: a step
// graph captures them once.
//
//===----------------------------------------------------------------------===//
#ifndef AUTODDL_BACKENDS_COMMON_HARNESS_STAGESETS_H
#define AUTODDL_BACKENDS_COMMON_HARNESS_STAGESETS_H

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace autoddl::rt::harness {

/// Where SetShared members take their storage while a set is constructed.
class SharedSource {
public:
  virtual void *take(int64_t bytes) = 0;

protected:
  ~SharedSource() = default;
};

namespace detail {
/// The source of the set under construction (none outside StageSets).
inline SharedSource *&current_shared_source() {
  static SharedSource *source = nullptr;
  return source;
}
} // namespace detail

/// A buffer of n T that every set of a stage shares: a view of a block its
/// StageSets owns (zero-filled when allocated). Made only while a StageSets
/// constructs a set; n == 0 takes nothing (a recomputed layer's dropped
/// member).
template <class T> class SetShared {
public:
  SetShared() = default;
  explicit SetShared(int64_t n) : n_(n > 0 ? n : 0) {
    if (n_ == 0)
      return;
    SharedSource *source = detail::current_shared_source();
    if (!source)
      throw std::logic_error(
          "a shared buffer was made outside its stage's sets");
    ptr_ = static_cast<T *>(source->take(n_ * int64_t(sizeof(T))));
  }
  T *data() { return ptr_; }
  const T *data() const { return ptr_; }
  int64_t size() const { return n_; }
  T *begin() { return ptr_; }
  T *end() { return ptr_ + n_; }

private:
  T *ptr_ = nullptr;
  int64_t n_ = 0;
};

/// One stage's activation sets (a vector of Set) and the blocks their
/// SetShared members share. `Block` is the backend's zero-filled byte buffer
/// (DeviceBuffer<unsigned char>, std::vector<unsigned char>): constructible
/// from a size, with data() and size(). Each backend's harness names its
/// instance StageSets<Set>.
template <class Set, class Block> class StageSetsOn : SharedSource {
public:
  StageSetsOn() = default;
  StageSetsOn(const StageSetsOn &) = delete;
  StageSetsOn &operator=(const StageSetsOn &) = delete;

  /// Constructs one more set from `args`, its shared members on the pool.
  template <class... Args> Set &emplace_back(Args &&...args) {
    next_ = 0;
    SharedSource *self = this;
    SharedSource *outer = std::exchange(detail::current_shared_source(), self);
    try {
      sets_.emplace_back(std::forward<Args>(args)...);
    } catch (...) {
      detail::current_shared_source() = outer;
      throw;
    }
    detail::current_shared_source() = outer;
    if (sets_.size() > 1 && next_ != blocks_.size())
      throw std::logic_error("the sets of a stage share " +
                             std::to_string(blocks_.size()) +
                             " buffers, one set took " + std::to_string(next_));
    return sets_.back();
  }
  void resize(size_t n) {
    while (sets_.size() > n)
      sets_.pop_back();
    while (sets_.size() < n)
      emplace_back();
  }
  /// The sets, then the blocks they share.
  void clear() {
    sets_.clear();
    blocks_.clear();
  }
  Set &operator[](size_t i) { return sets_[i]; }
  const Set &operator[](size_t i) const { return sets_[i]; }
  Set &front() { return sets_.front(); }
  size_t size() const { return sets_.size(); }
  auto begin() { return sets_.begin(); }
  auto end() { return sets_.end(); }
  auto begin() const { return sets_.begin(); }
  auto end() const { return sets_.end(); }
  /// Bytes of the shared blocks (held once, whatever the number of sets).
  int64_t shared_bytes() const {
    int64_t b = 0;
    for (const Block &k : blocks_)
      b += int64_t(k.size());
    return b;
  }

private:
  void *take(int64_t bytes) override {
    if (next_ == blocks_.size())
      blocks_.emplace_back(bytes);
    else if (int64_t(blocks_[next_].size()) != bytes)
      throw std::logic_error("the sets of a stage declare different shared "
                             "buffers (member " +
                             std::to_string(next_) + ")");
    return blocks_[next_++].data();
  }

  std::vector<Set> sets_;
  std::vector<Block> blocks_;
  size_t next_ = 0;
};

} // namespace autoddl::rt::harness

#endif
