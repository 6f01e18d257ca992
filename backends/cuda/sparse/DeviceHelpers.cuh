// Device-side helpers of the W8 kernels: element traits, mma.sync wrappers,
// chunk loads. Fragment layouts are those of the PTX ISA for mma.m16n8k8 /
// m16n8k16 (g = lane / 4, t = lane % 4): see docs/sparse-kernels.md for how the
// kernels map features onto them.
#ifndef AUTODDL_BACKENDS_CUDA_SPARSE_DEVICEHELPERS_CUH
#define AUTODDL_BACKENDS_CUDA_SPARSE_DEVICEHELPERS_CUH

#include "backends/cuda/sparse/WindowFormat.h" // DataType

#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace autoddl::sparse::cuda::detail {

template <typename T> __host__ __device__ constexpr T minOf(T a, T b) {
  return a < b ? a : b;
}
template <typename T> __host__ __device__ constexpr T maxOf(T a, T b) {
  return a < b ? b : a;
}

template <typename T> struct Elem;
template <> struct Elem<float> {
  static __device__ __forceinline__ float toFloat(float v) { return v; }
  static __device__ __forceinline__ float fromFloat(float v) { return v; }
};
template <> struct Elem<__half> {
  static __device__ __forceinline__ float toFloat(__half v) {
    return __half2float(v);
  }
  static __device__ __forceinline__ __half fromFloat(float v) {
    return __float2half_rn(v);
  }
};
template <> struct Elem<__nv_bfloat16> {
  static __device__ __forceinline__ float toFloat(__nv_bfloat16 v) {
    return __bfloat162float(v);
  }
  static __device__ __forceinline__ __nv_bfloat16 fromFloat(float v) {
    return __float2bfloat16_rn(v);
  }
};

/// Element i of a buffer of `t` as a float.
__device__ __forceinline__ float loadAsFloat(DataType t, const void *p,
                                             int64_t i) {
  if (t == DataType::F32)
    return static_cast<const float *>(p)[i];
  if (t == DataType::F16)
    return Elem<__half>::toFloat(static_cast<const __half *>(p)[i]);
  return Elem<__nv_bfloat16>::toFloat(static_cast<const __nv_bfloat16 *>(p)[i]);
}

/// v stored as element i of a buffer of `t` (rounded to nearest).
__device__ __forceinline__ void storeFromFloat(DataType t, void *p, int64_t i,
                                               float v) {
  if (t == DataType::F32)
    static_cast<float *>(p)[i] = v;
  else if (t == DataType::F16)
    static_cast<__half *>(p)[i] = Elem<__half>::fromFloat(v);
  else
    static_cast<__nv_bfloat16 *>(p)[i] = Elem<__nv_bfloat16>::fromFloat(v);
}

/// The matrix row held by window slot s (window * 8 + row-in-window): through
/// the format's row order when rows were clustered, else s itself.
__device__ __forceinline__ int32_t
slotRow(const int32_t *__restrict__ rowOfSlot, int32_t s) {
  return rowOfSlot ? __ldg(rowOfSlot + s) : s;
}

__device__ __forceinline__ uint32_t toTf32(float v) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(v));
  return r;
}

/// D += A * B, m16n8k8, TF32 inputs, fp32 accumulators.
__device__ __forceinline__ void mmaTf32(float (&d)[4], uint32_t a0, uint32_t a1,
                                        uint32_t a2, uint32_t a3, uint32_t b0,
                                        uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/// D += A * B, m16n8k8, fp16 or bf16 inputs (two per register), fp32
/// accumulators.
template <typename T>
__device__ __forceinline__ void mmaK8(float (&d)[4], uint32_t a0, uint32_t a1,
                                      uint32_t b0) {
  if constexpr (std::is_same_v<T, __half>)
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(b0));
  else
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(b0));
}

/// D += A * B, m16n8k16, fp16 or bf16 inputs, fp32 accumulators.
template <typename T>
__device__ __forceinline__ void mmaK16(float (&d)[4], uint32_t a0, uint32_t a1,
                                       uint32_t a2, uint32_t a3, uint32_t b0,
                                       uint32_t b1) {
  if constexpr (std::is_same_v<T, __half>)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/// Loads kElems consecutive elements at p into 32-bit words (read-only path).
/// kAligned: p is aligned to the chunk's size (up to 16 bytes) and all elements
/// are in range; otherwise only the first `valid` elements are read and the
/// rest are zero. A null p gives zeros.
template <typename T, int kElems, bool kAligned>
__device__ __forceinline__ void
loadChunk(const T *__restrict__ p, int valid,
          uint32_t (&w)[kElems * sizeof(T) / 4]) {
  constexpr int kBytes = kElems * sizeof(T);
  constexpr int kWords = kBytes / 4;
  if (p == nullptr) {
#pragma unroll
    for (int i = 0; i < kWords; ++i)
      w[i] = 0;
    return;
  }
  if constexpr (kAligned) {
    if constexpr (kBytes % 16 == 0) {
#pragma unroll
      for (int i = 0; i < kWords / 4; ++i) {
        uint4 v = __ldg(reinterpret_cast<const uint4 *>(p) + i);
        w[4 * i] = v.x, w[4 * i + 1] = v.y, w[4 * i + 2] = v.z,
              w[4 * i + 3] = v.w;
      }
    } else if constexpr (kBytes == 8) {
      uint2 v = __ldg(reinterpret_cast<const uint2 *>(p));
      w[0] = v.x, w[1] = v.y;
    } else {
      static_assert(kBytes == 4, "unsupported chunk size");
      w[0] = __ldg(reinterpret_cast<const unsigned int *>(p));
    }
  } else {
    if constexpr (sizeof(T) == 4) {
#pragma unroll
      for (int e = 0; e < kElems; ++e)
        w[e] = e < valid ? __float_as_uint(p[e]) : 0u;
    } else {
      const uint16_t *q = reinterpret_cast<const uint16_t *>(p);
#pragma unroll
      for (int i = 0; i < kWords; ++i) {
        const uint32_t lo = 2 * i < valid ? q[2 * i] : 0u;
        const uint32_t hi = 2 * i + 1 < valid ? q[2 * i + 1] : 0u;
        w[i] = lo | (hi << 16);
      }
    }
  }
}

/// Element e of a chunk loaded by loadChunk, as float.
template <typename T, int kWords>
__device__ __forceinline__ float chunkElem(const uint32_t (&w)[kWords], int e) {
  if constexpr (std::is_same_v<T, float>) {
    return __uint_as_float(w[e]);
  } else {
    const uint16_t bits = e % 2 ? uint16_t(w[e / 2] >> 16) : uint16_t(w[e / 2]);
    if constexpr (std::is_same_v<T, __half>)
      return __half2float(__ushort_as_half(bits));
    else
      return __bfloat162float(__ushort_as_bfloat16(bits));
  }
}

} // namespace autoddl::sparse::cuda::detail

#endif // AUTODDL_BACKENDS_CUDA_SPARSE_DEVICEHELPERS_CUH
