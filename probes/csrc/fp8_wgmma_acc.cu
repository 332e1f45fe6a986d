// FP8 (e4m3) P.V product with switchable accumulation, for probes/fp8_accumulation.py.
//
// out[m, n] = sum_k P[m, k] * VT[n, k]        (P: M x N keys, VT: D x N keys, both e4m3, row-major)
//
// Two tensor-core instructions, each in two builds:
//   wgmma_inplace / wgmma_promote : wgmma.mma_async m64n8k32 (sm_90a), A from registers, B from shared memory
//   mma_inplace   / mma_promote   : mma.sync m16n8k32 (sm_89+)
// "inplace": the tensor-core accumulator is carried across every 32-key step, as FA-3's FP8 P.V does
//            without two-level accumulation. The kernel has no CUDA-core add of the accumulator at all.
// "promote": every `interval` steps the tensor-core partial sum is added into a separate FP32 register
//            on the CUDA cores and the tensor-core accumulator restarts from zero (two-level accumulation).
// Simple on purpose (one 32-key step per barrier, no pipelining): the probe measures numbers, not speed.
// Build: nvcc -cubin -gencode=arch=compute_90a,code=sm_90a fp8_wgmma_acc.cu
#include <stdint.h>

__device__ __forceinline__ uint32_t ld32(const uint8_t* p) { return *reinterpret_cast<const uint32_t*>(p); }

template <bool PROMOTE>
__device__ __forceinline__ void wgmma_body(const uint8_t* __restrict__ P, const uint8_t* __restrict__ VT,
                                           float* __restrict__ out, int N, int D, int interval) {
  __shared__ __align__(128) uint8_t sB[256];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane >> 2, t = lane & 3;
  const int n0 = blockIdx.x * 8, m0 = blockIdx.y * 64 + warp * 16;
  float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
  float f0 = 0.f, f1 = 0.f, f2 = 0.f, f3 = 0.f;
  const uint32_t sbase = static_cast<uint32_t>(__cvta_generic_to_shared(sB));
  // K-major, no swizzle: two 8x16-byte core matrices along K, 128 bytes apart (LBO = SBO = 128).
  const uint64_t desc = static_cast<uint64_t>((sbase & 0x3FFFF) >> 4) | (static_cast<uint64_t>(128 >> 4) << 16) |
                        (static_cast<uint64_t>(128 >> 4) << 32);
  const int steps = N / 32;
  const uint8_t* pr0 = P + static_cast<size_t>(m0 + g) * N;
  const uint8_t* pr1 = P + static_cast<size_t>(m0 + g + 8) * N;
  for (int s = 0; s < steps; ++s) {
    const int k0 = s * 32;
    if (tid < 64) {
      const int n = tid / 8, kk = (tid % 8) * 4;
      const uint32_t w = ld32(VT + static_cast<size_t>(n0 + n) * N + k0 + kk);
      *reinterpret_cast<uint32_t*>(sB + (kk / 16) * 128 + n * 16 + (kk % 16)) = w;
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    const uint32_t a0 = ld32(pr0 + k0 + t * 4), a1 = ld32(pr1 + k0 + t * 4);
    const uint32_t a2 = ld32(pr0 + k0 + 16 + t * 4), a3 = ld32(pr1 + k0 + 16 + t * 4);
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, p, 1, 1;\n}\n"
        : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc), "r"(1));
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    if constexpr (PROMOTE) {
      if ((s + 1) % interval == 0 || s + 1 == steps) {
        f0 += d0; f1 += d1; f2 += d2; f3 += d3;
        d0 = 0.f; d1 = 0.f; d2 = 0.f; d3 = 0.f;
      }
    }
    __syncthreads();
  }
  if constexpr (PROMOTE) { d0 = f0; d1 = f1; d2 = f2; d3 = f3; }
  float* o0 = out + static_cast<size_t>(m0 + g) * D + n0 + 2 * t;
  float* o1 = out + static_cast<size_t>(m0 + g + 8) * D + n0 + 2 * t;
  o0[0] = d0; o0[1] = d1; o1[0] = d2; o1[1] = d3;
}

template <bool PROMOTE>
__device__ __forceinline__ void mma_body(const uint8_t* __restrict__ P, const uint8_t* __restrict__ VT,
                                         float* __restrict__ out, int N, int D, int interval) {
  const int lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  const int n0 = blockIdx.x * 8, m0 = blockIdx.y * 16;
  float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
  float f0 = 0.f, f1 = 0.f, f2 = 0.f, f3 = 0.f;
  const int steps = N / 32;
  const uint8_t* pr0 = P + static_cast<size_t>(m0 + g) * N;
  const uint8_t* pr1 = P + static_cast<size_t>(m0 + g + 8) * N;
  const uint8_t* vr = VT + static_cast<size_t>(n0 + g) * N;
  for (int s = 0; s < steps; ++s) {
    const int k0 = s * 32;
    const uint32_t a0 = ld32(pr0 + k0 + t * 4), a1 = ld32(pr1 + k0 + t * 4);
    const uint32_t a2 = ld32(pr0 + k0 + 16 + t * 4), a3 = ld32(pr1 + k0 + 16 + t * 4);
    const uint32_t b0 = ld32(vr + k0 + t * 4), b1 = ld32(vr + k0 + 16 + t * 4);
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    if constexpr (PROMOTE) {
      if ((s + 1) % interval == 0 || s + 1 == steps) {
        f0 += d0; f1 += d1; f2 += d2; f3 += d3;
        d0 = 0.f; d1 = 0.f; d2 = 0.f; d3 = 0.f;
      }
    }
  }
  if constexpr (PROMOTE) { d0 = f0; d1 = f1; d2 = f2; d3 = f3; }
  float* o0 = out + static_cast<size_t>(m0 + g) * D + n0 + 2 * t;
  float* o1 = out + static_cast<size_t>(m0 + g + 8) * D + n0 + 2 * t;
  o0[0] = d0; o0[1] = d1; o1[0] = d2; o1[1] = d3;
}

// Launch: wgmma_*: grid (D/8, M/64), block 128.   mma_*: grid (D/8, M/16), block 32.   N % 32 == 0.
extern "C" __global__ void __launch_bounds__(128) wgmma_inplace(const uint8_t* P, const uint8_t* VT, float* out,
                                                                int N, int D, int interval) {
  wgmma_body<false>(P, VT, out, N, D, interval);
}
extern "C" __global__ void __launch_bounds__(128) wgmma_promote(const uint8_t* P, const uint8_t* VT, float* out,
                                                                int N, int D, int interval) {
  wgmma_body<true>(P, VT, out, N, D, interval);
}
extern "C" __global__ void __launch_bounds__(32) mma_inplace(const uint8_t* P, const uint8_t* VT, float* out,
                                                             int N, int D, int interval) {
  mma_body<false>(P, VT, out, N, D, interval);
}
extern "C" __global__ void __launch_bounds__(32) mma_promote(const uint8_t* P, const uint8_t* VT, float* out,
                                                             int N, int D, int interval) {
  mma_body<true>(P, VT, out, N, D, interval);
}
