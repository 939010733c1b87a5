// cuda/nccl_transport.cpp - expert parallelism's transport over NCCL, loaded at run time (built with CUDA only).
//
// libnccl.so.2 is opened with dlopen on first use, so nothing of NCCL is needed to build Seedling and a machine
// without it fails only when --devices asks for it, naming the library. The handful of entry points and types used
// are declared here from NCCL's stable C API (nccl.h, unchanged since 2.7: the unique id of 128 bytes, the result
// and data type enums, point-to-point send/recv in groups). An all-to-all-v is one group of sends and receives on
// the forward's stream, enqueued, not waited for: the data is there for the work that follows on that stream.
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "cuda/device.h"

namespace seedling {

namespace {

// From nccl.h (NCCL 2.x).
using ncclComm_t = struct ncclComm*;
constexpr size_t kUniqueIdBytes = 128;  // NCCL_UNIQUE_ID_BYTES
struct ncclUniqueId {
  char internal[kUniqueIdBytes];
};
using ncclResult_t = int;  // ncclSuccess = 0
using ncclDataType_t = int;
constexpr ncclDataType_t ncclUint8 = 1;
constexpr const char* kLibrary = "libnccl.so.2";

struct Nccl {
  void* handle = nullptr;
  ncclResult_t (*GetVersion)(int*) = nullptr;
  ncclResult_t (*GetUniqueId)(ncclUniqueId*) = nullptr;
  ncclResult_t (*CommInitRank)(ncclComm_t*, int, ncclUniqueId, int) = nullptr;
  ncclResult_t (*CommDestroy)(ncclComm_t) = nullptr;
  ncclResult_t (*GroupStart)() = nullptr;
  ncclResult_t (*GroupEnd)() = nullptr;
  ncclResult_t (*Send)(const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*Recv)(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) = nullptr;
  const char* (*GetErrorString)(ncclResult_t) = nullptr;
  std::string version;

  void check(ncclResult_t r, const char* what) const {
    if (r != 0) fail("NCCL ({}): {} failed: {}", version, what, GetErrorString(r));
  }
};

template <typename F>
void bind(void* handle, F*& fn, const char* name) {
  fn = reinterpret_cast<F*>(dlsym(handle, name));
  if (fn == nullptr) fail("{} has no {}: not an NCCL 2 library", kLibrary, name);
}

// The library, opened once per process.
const Nccl& nccl() {
  static const Nccl lib = [] {
    Nccl n;
    n.handle = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
    if (n.handle == nullptr) {
      const char* why = dlerror();
      fail(
          "--devices needs NCCL: {} could not be loaded ({}); install NCCL 2 (Debian/Ubuntu: libnccl2) or put its "
          "folder in LD_LIBRARY_PATH",
          kLibrary, why != nullptr ? why : "not found");
    }
    bind(n.handle, n.GetVersion, "ncclGetVersion");
    bind(n.handle, n.GetUniqueId, "ncclGetUniqueId");
    bind(n.handle, n.CommInitRank, "ncclCommInitRank");
    bind(n.handle, n.CommDestroy, "ncclCommDestroy");
    bind(n.handle, n.GroupStart, "ncclGroupStart");
    bind(n.handle, n.GroupEnd, "ncclGroupEnd");
    bind(n.handle, n.Send, "ncclSend");
    bind(n.handle, n.Recv, "ncclRecv");
    bind(n.handle, n.GetErrorString, "ncclGetErrorString");
    int v = 0;
    if (n.GetVersion(&v) != 0 || v < 20700)
      fail("{}: version code {}; expert parallelism needs NCCL 2.7 or later", kLibrary, v);
    n.version = fmt::format("nccl {}.{}.{}", v / 10000, v / 100 % 100, v % 100);  // NCCL_VERSION(X, Y, Z) from 2.9
    return n;
  }();
  return lib;
}

// NVLink multicast (NVLS) stays off: the GPU machines' notes require it (their fabric setup does not support it).
// Set before NCCL reads its environment, overriding any value inherited.
void nvls_off() {
  setenv("NCCL_NVLS_ENABLE", "0", 1);
}

void must(cudaError_t e, const char* what) {
  if (e != cudaSuccess) fail("CUDA: {} failed: {}", what, cudaGetErrorString(e));
}

class NcclTransport final : public Transport {
 public:
  NcclTransport(int device, int rank, int ranks, std::span<const uint8_t> id, cudaStream_t stream)
      : rank_(rank), ranks_(ranks), stream_(stream) {
    const Nccl& n = nccl();
    if (id.size() != kUniqueIdBytes) fail("NCCL: a unique id of {} bytes, expected {}", id.size(), kUniqueIdBytes);
    ncclUniqueId uid;
    std::memcpy(uid.internal, id.data(), kUniqueIdBytes);
    nvls_off();
    must(cudaSetDevice(device), "selecting the rank's device");
    // Blocks until every rank has joined with the same id.
    n.check(n.CommInitRank(&comm_, ranks, uid, rank), "joining the ranks (ncclCommInitRank)");
    must(cudaMalloc(&counts_, size_t(2 * ranks) * sizeof(int64_t)), "allocating the count buffer");
    name_ = n.version;
  }
  ~NcclTransport() override {
    if (counts_ != nullptr) cudaFree(counts_);
    if (comm_ != nullptr) nccl().CommDestroy(comm_);
  }
  int rank() const override { return rank_; }
  int ranks() const override { return ranks_; }
  const char* name() const override { return name_.c_str(); }
  void set_stream(void* stream) override { stream_ = static_cast<cudaStream_t>(stream); }

  // Through a small device buffer (NCCL moves device memory), then back to the host: the one place it waits.
  void exchange_counts(std::span<const int64_t> send, std::span<int64_t> recv) override {
    if (send.size() != size_t(ranks_) || recv.size() != size_t(ranks_)) fail("NCCL transport: counts for other ranks");
    const size_t bytes = size_t(ranks_) * sizeof(int64_t);
    must(cudaMemcpyAsync(counts_, send.data(), bytes, cudaMemcpyHostToDevice, stream_), "copying counts");
    const std::vector<int64_t> ones(size_t(ranks_), 1), offsets = [&] {
      std::vector<int64_t> o(static_cast<size_t>(ranks_));
      for (int r = 0; r < ranks_; ++r) o[size_t(r)] = r;
      return o;
    }();
    all_to_all_v({.send = counts_,
                  .send_count = ones,
                  .send_offset = offsets,
                  .recv = counts_ + ranks_,
                  .recv_count = ones,
                  .recv_offset = offsets,
                  .item_bytes = sizeof(int64_t)});
    must(cudaMemcpyAsync(recv.data(), counts_ + ranks_, bytes, cudaMemcpyDeviceToHost, stream_), "copying counts");
    must(cudaStreamSynchronize(stream_), "exchanging counts");
  }

  void all_to_all_v(const AllToAllV& a) override {
    const Nccl& n = nccl();
    n.check(n.GroupStart(), "ncclGroupStart");
    for (int p = 0; p < ranks_; ++p) {
      const size_t send_bytes = size_t(a.send_count[size_t(p)]) * a.item_bytes;
      const size_t recv_bytes = size_t(a.recv_count[size_t(p)]) * a.item_bytes;
      if (send_bytes > 0) {
        const char* src = static_cast<const char*>(a.send) + size_t(a.send_offset[size_t(p)]) * a.item_bytes;
        n.check(n.Send(src, send_bytes, ncclUint8, p, comm_, stream_), "ncclSend");
      }
      if (recv_bytes > 0) {
        char* dst = static_cast<char*>(a.recv) + size_t(a.recv_offset[size_t(p)]) * a.item_bytes;
        n.check(n.Recv(dst, recv_bytes, ncclUint8, p, comm_, stream_), "ncclRecv");
      }
    }
    n.check(n.GroupEnd(), "ncclGroupEnd");
  }

  // An exchange of counts waits for every rank.
  void barrier() override {
    const std::vector<int64_t> none(static_cast<size_t>(ranks_), 0);
    std::vector<int64_t> got(static_cast<size_t>(ranks_));
    exchange_counts(none, got);
  }

 private:
  int rank_, ranks_;
  cudaStream_t stream_;
  ncclComm_t comm_ = nullptr;
  int64_t* counts_ = nullptr;  // device: ranks to send, ranks received
  std::string name_;
};

}  // namespace

std::vector<uint8_t> nccl_unique_id() {
  const Nccl& n = nccl();
  nvls_off();  // the ranks inherit the environment too
  ncclUniqueId id;
  n.check(n.GetUniqueId(&id), "making the ranks' unique id (ncclGetUniqueId)");
  return std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(id.internal),
                              reinterpret_cast<const uint8_t*>(id.internal) + kUniqueIdBytes);
}

size_t nccl_unique_id_bytes() {
  return kUniqueIdBytes;
}

std::unique_ptr<Transport> nccl_transport(int device, int rank, int ranks, std::span<const uint8_t> id, void* stream) {
  return std::make_unique<NcclTransport>(device, rank, ranks, id, static_cast<cudaStream_t>(stream));
}

}  // namespace seedling
