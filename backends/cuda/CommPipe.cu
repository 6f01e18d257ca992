// The CUDA program's scheduled communication (Comm.h): the data-parallel
// gradient buckets all-reduced on their own stream as backward fills them
// (GradSync), and the pipeline links between devices, one NCCL communicator
// and stream per used link, set up from a recorded first step (Pipe).
#include "backends/cuda/Bootstrap.h" // progress: the watchdog's clock
#include "backends/cuda/Comm.h"
#include "backends/host/CommStats.h" // comm_count

#include <algorithm>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

namespace autoddl::rt {

// ---- GradSync ----

void GradSync::configure(
    const Comm &comm,
    std::vector<std::vector<std::pair<float *, int64_t>>> buckets,
    std::vector<int> expected) {
  buckets_ = std::move(buckets);
  bucket_comms_.assign(buckets_.size(), comm);
  expected_ = std::move(expected);
  seen_.assign(buckets_.size(), 0);
  if (!stream_) {
    AUTODDL_CUDA_CHECK(
        cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    AUTODDL_CUDA_CHECK(
        cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
  }
  for (size_t b = ready_events_.size(); b < buckets_.size(); ++b) {
    cudaEvent_t e;
    AUTODDL_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    ready_events_.push_back(e);
  }
}

void GradSync::start_step() {
  tcp::progress("the start of a step");
  comm_inject_fault();
  std::fill(seen_.begin(), seen_.end(), 0);
  launched_any_ = false;
}

void GradSync::set_bucket_comm(int bucket, const Comm &comm) {
  bucket_comms_.at(size_t(bucket)) = comm;
}

void GradSync::ready(int bucket) {
  if (bucket < 0 || size_t(bucket) >= buckets_.size() ||
      bucket_comms_[size_t(bucket)].size <= 1)
    return;
  if (++seen_[size_t(bucket)] != expected_[size_t(bucket)])
    return;
  // The bucket's last gradient is written: fence, then all-reduce its tensors
  // as one group on the sync stream.
  AUTODDL_CUDA_CHECK(
      cudaEventRecord(ready_events_[size_t(bucket)], compute_stream()));
  AUTODDL_CUDA_CHECK(
      cudaStreamWaitEvent(stream_, ready_events_[size_t(bucket)], 0));
  AUTODDL_NCCL_CHECK(ncclGroupStart());
  for (const auto &[ptr, n] : buckets_[size_t(bucket)]) {
    comm_count("all_reduce", n * int64_t(sizeof(float)));
    AUTODDL_NCCL_CHECK(ncclAllReduce(ptr, ptr, size_t(n), ncclFloat32, ncclSum,
                                     bucket_comms_[size_t(bucket)].nccl,
                                     stream_));
  }
  AUTODDL_NCCL_CHECK(ncclGroupEnd());
  launched_any_ = true;
}

void GradSync::wait() {
  if (!launched_any_)
    return;
  for (size_t b = 0; b < buckets_.size(); ++b)
    if (seen_[b] < expected_[b])
      throw std::logic_error("gradient bucket " + std::to_string(b) + " saw " +
                             std::to_string(seen_[b]) + " of " +
                             std::to_string(expected_[b]) + " backward passes");
  AUTODDL_CUDA_CHECK(cudaEventRecord(done_, stream_));
  AUTODDL_CUDA_CHECK(cudaStreamWaitEvent(compute_stream(), done_, 0));
  launched_any_ = false; // joined: a second wait() this step has nothing to do
}

// ---- Pipe ----

void Pipe::setup(MPI_Comm pp_comm, int device, int devices, int color_base,
                 int groups) {
  pp_ = pp_comm;
  device_ = device;
  devices_ = devices;
  color_base_ = color_base;
  groups_ = groups;
  AUTODDL_CUDA_CHECK(cudaEventCreateWithFlags(&fence_, cudaEventDisableTiming));
}

void Pipe::send(const void *buf, int64_t bytes, int peer, int tag) {
  Link &l = out_[peer];
  if (recording_) {
    l.index[tag] = l.order.size();
    l.order.push_back({tag, const_cast<void *>(buf), bytes});
    return;
  }
  if (l.next >= l.order.size() || l.order[l.next].tag != tag)
    throw std::logic_error("pipeline send to device " + std::to_string(peer) +
                           " out of the recorded order (tag " +
                           std::to_string(tag) + ")");
  ++l.next;
  AUTODDL_CUDA_CHECK(cudaEventRecord(fence_, compute_stream()));
  AUTODDL_CUDA_CHECK(cudaStreamWaitEvent(l.stream, fence_, 0));
  comm_count("send", bytes);
  AUTODDL_NCCL_CHECK(ncclSend(buf, size_t(bytes), ncclChar, 1 - l.comm.rank,
                              l.comm.nccl, l.stream));
  AUTODDL_CUDA_CHECK(cudaEventRecord(l.events[l.next - 1], l.stream));
}

void Pipe::wait_sent(int peer, int tag) {
  if (recording_)
    return;
  auto l = out_.find(peer);
  if (l == out_.end())
    return;
  auto it = l->second.index.find(tag);
  if (it == l->second.index.end() || it->second >= l->second.next)
    return; // not sent this step
  AUTODDL_CUDA_CHECK(
      cudaStreamWaitEvent(compute_stream(), l->second.events[it->second], 0));
}

void Pipe::fence_receives() {
  if (recording_ || in_.empty())
    return;
  AUTODDL_CUDA_CHECK(cudaEventRecord(fence_, compute_stream()));
  for (auto &[peer, l] : in_)
    AUTODDL_CUDA_CHECK(cudaStreamWaitEvent(l.stream, fence_, 0));
}

void Pipe::recv(void *buf, int64_t bytes, int peer, int tag) {
  if (recording_) {
    recorded_recv_[peer][tag] = {tag, buf, bytes};
    return;
  }
  Link &l = in_.at(peer);
  auto it = l.index.find(tag);
  if (it == l.index.end())
    throw std::logic_error("pipeline: device " + std::to_string(peer) +
                           " never sends tag " + std::to_string(tag));
  const size_t want = it->second;
  while (l.next <= want) {
    const Message &m = l.order[l.next];
    comm_count("recv", m.bytes);
    AUTODDL_NCCL_CHECK(ncclRecv(m.buf, size_t(m.bytes), ncclChar,
                                1 - l.comm.rank, l.comm.nccl, l.stream));
    AUTODDL_CUDA_CHECK(cudaEventRecord(l.events[l.next], l.stream));
    ++l.next;
  }
  AUTODDL_CUDA_CHECK(cudaStreamWaitEvent(compute_stream(), l.events[want], 0));
}

void Pipe::begin_step() {
  if (out_.empty() && in_.empty())
    return;
  // Every link stream starts the step after the compute stream's work so far
  // (inside a step graph's capture: the fork that brings the receives into
  // the graph; they are posted as early as before, at the step's start).
  AUTODDL_CUDA_CHECK(cudaEventRecord(fence_, compute_stream()));
  for (auto *links : {&out_, &in_})
    for (auto &[peer, l] : *links)
      AUTODDL_CUDA_CHECK(cudaStreamWaitEvent(l.stream, fence_, 0));
}

void Pipe::finish_step() {
  for (auto *links : {&out_, &in_})
    for (auto &[peer, l] : *links) {
      if (l.next != l.order.size())
        throw std::logic_error(
            "pipeline: " + std::to_string(l.order.size() - l.next) +
            " transfers with device " + std::to_string(peer) +
            " left in the step");
      // The join: compute (the next step's work, the optimizer) waits for
      // every transfer of this step, so no buffer is reused under one.
      AUTODDL_CUDA_CHECK(cudaEventRecord(l.done, l.stream));
      AUTODDL_CUDA_CHECK(cudaStreamWaitEvent(compute_stream(), l.done, 0));
      l.next = 0;
    }
}

void Pipe::end_recording() {
  recording_ = false;
  // 1. The receivers learn the senders' orders (over MPI, along the pp axis).
  std::vector<MPI_Request> reqs;
  std::vector<std::vector<int>> sent(static_cast<size_t>(devices_));
  std::vector<int> sizes(size_t(devices_), 0);
  for (auto &[peer, l] : out_) {
    for (const Message &m : l.order)
      sent[size_t(peer)].push_back(m.tag);
    sizes[size_t(peer)] = int(l.order.size());
  }
  for (int peer = 0; peer < devices_; ++peer) {
    if (peer == device_)
      continue;
    MPI_Request r;
    MPI_Isend(&sizes[size_t(peer)], 1, MPI_INT, peer, 7001, pp_, &r);
    reqs.push_back(r);
    if (sizes[size_t(peer)] > 0) {
      MPI_Isend(sent[size_t(peer)].data(), sizes[size_t(peer)], MPI_INT, peer,
                7002, pp_, &r);
      reqs.push_back(r);
    }
  }
  for (int peer = 0; peer < devices_; ++peer) {
    if (peer == device_)
      continue;
    int n = 0;
    MPI_Recv(&n, 1, MPI_INT, peer, 7001, pp_, MPI_STATUS_IGNORE);
    std::vector<int> tags(static_cast<size_t>(n));
    if (n > 0)
      MPI_Recv(tags.data(), n, MPI_INT, peer, 7002, pp_, MPI_STATUS_IGNORE);
    const auto &mine = recorded_recv_[peer];
    if (mine.size() != tags.size())
      throw std::runtime_error("pipeline: device " + std::to_string(peer) +
                               " sends " + std::to_string(tags.size()) +
                               " messages to device " +
                               std::to_string(device_) + ", which receives " +
                               std::to_string(mine.size()));
    if (n == 0)
      continue;
    Link &l = in_[peer];
    for (int t : tags) {
      auto it = mine.find(t);
      if (it == mine.end())
        throw std::runtime_error("pipeline: device " + std::to_string(peer) +
                                 " sends tag " + std::to_string(t) +
                                 " that device " + std::to_string(device_) +
                                 " never receives");
      l.index[t] = l.order.size();
      l.order.push_back(it->second);
    }
  }
  MPI_Waitall(int(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
  // 2. One two-rank communicator per used link (a -> b), made in the same
  // order on every rank (ncclCommSplit is collective over the world).
  std::vector<int> used(size_t(devices_ * devices_), 0);
  for (auto &[peer, l] : out_)
    if (!l.order.empty())
      used[size_t(device_ * devices_ + peer)] = 1;
  MPI_Allreduce(MPI_IN_PLACE, used.data(), int(used.size()), MPI_INT, MPI_MAX,
                MPI_COMM_WORLD);
  for (int a = 0; a < devices_; ++a)
    for (int b = 0; b < devices_; ++b) {
      const int link = a * devices_ + b;
      if (!used[size_t(link)])
        continue;
      const bool member = device_ == a || device_ == b;
      Comm c = comm_split(member ? link * groups_ + color_base_ : -1,
                          device_ == a ? 0 : 1);
      if (!member)
        continue;
      Link &l = device_ == a ? out_[b] : in_[a];
      l.comm = c;
      AUTODDL_CUDA_CHECK(
          cudaStreamCreateWithFlags(&l.stream, cudaStreamNonBlocking));
      l.events.resize(l.order.size());
      for (auto &e : l.events)
        AUTODDL_CUDA_CHECK(
            cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      AUTODDL_CUDA_CHECK(
          cudaEventCreateWithFlags(&l.done, cudaEventDisableTiming));
    }
  // Links this rank does not use in practice (no messages) are dropped.
  for (auto *links : {&out_, &in_})
    for (auto it = links->begin(); it != links->end();)
      it = it->second.order.empty() ? links->erase(it) : std::next(it);
  // 3. Connect every link now, with one tiny transfer each way, grouped, so
  // that no connection is set up lazily in the middle of a step.
  DeviceBuffer<char> probe(int64_t(out_.size() + in_.size()) + 1);
  AUTODDL_NCCL_CHECK(ncclGroupStart());
  int64_t k = 0;
  for (auto &[peer, l] : out_)
    AUTODDL_NCCL_CHECK(
        ncclSend(probe.data() + k++, 1, ncclChar, 1, l.comm.nccl, l.stream));
  for (auto &[peer, l] : in_)
    AUTODDL_NCCL_CHECK(
        ncclRecv(probe.data() + k++, 1, ncclChar, 0, l.comm.nccl, l.stream));
  AUTODDL_NCCL_CHECK(ncclGroupEnd());
  for (auto *links : {&out_, &in_})
    for (auto &[peer, l] : *links)
      AUTODDL_CUDA_CHECK(cudaStreamSynchronize(l.stream));
  recorded_recv_.clear();
}

} // namespace autoddl::rt
