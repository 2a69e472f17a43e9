// semroute fused attention, CUDA forward kernel.
//
// STATUS: compiled during development with NVRTC to PTX and with ptxas to
// sm_90 SASS (no register spills), but NOT YET RUN ON A GPU.
// `validate_sdpa.py` next to this file checks it against PyTorch SDPA on a
// GPU machine; until that has run, treat this kernel as unvalidated.
//
// Contract (same as the CPU op `com.semroute::FlashAttention`):
//   Q, O: [batch, heads, seq_q, head_dim]; K, V: [batch, heads, seq_kv, head_dim]
//   (dense, row-major), element type fp16, bf16, or fp32 (computed in fp16);
//   key_bias: optional fp32 [batch or 1, 1, 1, seq_kv], added to the scaled
//   scores (0 for tokens, large negative or -inf for padding);
//   query i sees key j iff i - window_left <= j <= i + window_right
//   (a negative window side = unbounded).
//   O = softmax(scale * Q K^T + key_bias, restricted to the window) V.
//   Rows whose visible keys are all -inf produce zeros.
//
// Algorithm: FlashAttention (Dao et al., 2022) with the online softmax of
// Milakov & Gimelshein (2018). A CTA of 4 warps owns 64 query rows
// (16 per warp); it walks the key axis in tiles of 64 keys, computing
// S = Q K^T on tensor cores (WMMA 16x16x16, fp32 accumulation), the running
// row maximum / sum and P = exp(S - m) in fp32, and O += P V on tensor cores
// with the fp32 O tile kept in shared memory so that rows can be rescaled.
// Memory beyond inputs and output: shared memory only, O(seq) overall.
// Key tiles entirely outside a query tile's window are never visited, so a
// sliding-window layer costs O(seq x window).
//
// Shared memory per CTA: 51 KB (head_dim 32), 71 KB (64), 111 KB (128), so
// sm_80 or newer (bf16 tensor cores also need sm_80).
//
// Build: `build.sh` (nvcc, shared library with the host launcher), or NVRTC
// on the kernels only (the host launcher is skipped under __CUDACC_RTC__);
// the kernels have C names: semroute_fa_fwd_{f16,bf16,f32}_d{32,64,128}.

#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <mma.h>

#ifndef __CUDACC_RTC__
#include <cuda_runtime.h>
#include <stdint.h>
#endif

namespace semroute {

using namespace nvcuda;

constexpr int kBlockM = 64;   // query rows per CTA
constexpr int kBlockN = 64;   // keys per tile
constexpr int kWarps = 4;     // 16 query rows per warp
constexpr int kThreads = kWarps * 32;
constexpr int kPadT = 8;      // padding (elements) of 16-bit rows: keeps 32-byte fragment alignment
constexpr int kPadF = 4;      // padding (elements) of fp32 rows

template <typename T> struct Cvt;
template <> struct Cvt<__half> {
  static __device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
  static __device__ __forceinline__ __half from_float(float x) { return __float2half_rn(x); }
};
template <> struct Cvt<__nv_bfloat16> {
  static __device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
  static __device__ __forceinline__ __nv_bfloat16 from_float(float x) { return __float2bfloat16_rn(x); }
};
template <> struct Cvt<float> {
  static __device__ __forceinline__ float to_float(float x) { return x; }
  static __device__ __forceinline__ float from_float(float x) { return x; }
};

// Element type of global memory -> element type of the tensor-core operands.
template <typename In> struct Compute { using type = In; };
template <> struct Compute<float> { using type = __half; };

// -inf without relying on INFINITY (not defined under NVRTC).
__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }

__device__ __forceinline__ float warp_max(float x) {
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}

__device__ __forceinline__ float warp_sum(float x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

template <int D> struct Layout {
  static constexpr int ldt = D + kPadT;         // Q, K, V rows (compute type)
  static constexpr int ldp = kBlockN + kPadT;   // P rows (compute type)
  static constexpr int lds = kBlockN + kPadF;   // S rows (fp32)
  static constexpr int ldo = D + kPadF;         // O rows (fp32)
  static constexpr size_t q_off = 0;
  static constexpr size_t k_off = q_off + size_t(kBlockM) * ldt * 2;
  static constexpr size_t v_off = k_off + size_t(kBlockN) * ldt * 2;
  static constexpr size_t p_off = v_off + size_t(kBlockN) * ldt * 2;
  static constexpr size_t s_off = p_off + size_t(kBlockM) * ldp * 2;
  static constexpr size_t o_off = s_off + size_t(kBlockM) * lds * 4;
  static constexpr size_t m_off = o_off + size_t(kBlockM) * ldo * 4;
  static constexpr size_t bytes = m_off + size_t(3) * kBlockM * 4;
};

template <typename In, int D>
__device__ __forceinline__ void flash_fwd(const In* __restrict__ q, const In* __restrict__ k,
                                          const In* __restrict__ v, const float* __restrict__ bias,
                                          long long bias_batch_stride, In* __restrict__ out,
                                          int heads, int seq_q, int seq_kv, float scale,
                                          int window_left, int window_right) {
  using T = typename Compute<In>::type;
  using L = Layout<D>;
  static_assert(D % 16 == 0, "head_dim must be a multiple of 16");
  extern __shared__ __align__(128) unsigned char smem[];
  T* qs = reinterpret_cast<T*>(smem + L::q_off);
  T* ks = reinterpret_cast<T*>(smem + L::k_off);
  T* vs = reinterpret_cast<T*>(smem + L::v_off);
  T* ps = reinterpret_cast<T*>(smem + L::p_off);
  float* ss = reinterpret_cast<float*>(smem + L::s_off);
  float* os = reinterpret_cast<float*>(smem + L::o_off);
  float* row_m = reinterpret_cast<float*>(smem + L::m_off);
  float* row_l = row_m + kBlockM;
  float* row_c = row_l + kBlockM;

  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int bh = blockIdx.y;
  const int b = bh / heads;
  const int m0 = blockIdx.x * kBlockM;
  const In* qb = q + (size_t)bh * seq_q * D;
  const In* kb = k + (size_t)bh * seq_kv * D;
  const In* vb = v + (size_t)bh * seq_kv * D;
  const float* bb = bias ? bias + (size_t)b * bias_batch_stride : nullptr;

  const T zero = Cvt<T>::from_float(0.f);
  for (int idx = tid; idx < kBlockM * D; idx += kThreads) {
    const int r = idx / D, c = idx % D;
    const int i = m0 + r;
    qs[r * L::ldt + c] = i < seq_q ? Cvt<T>::from_float(Cvt<In>::to_float(qb[(size_t)i * D + c])) : zero;
    os[r * L::ldo + c] = 0.f;
  }
  for (int r = tid; r < kBlockM; r += kThreads) {
    row_m[r] = neg_inf();
    row_l[r] = 0.f;
    row_c[r] = 1.f;
  }
  __syncthreads();

  const int last = min(m0 + kBlockM, seq_q) - 1;
  int j_lo = window_left >= 0 ? max(0, m0 - window_left) : 0;
  const int j_hi = window_right >= 0 ? min(seq_kv, last + window_right + 1) : seq_kv;
  j_lo -= j_lo % kBlockN;

  for (int n0 = j_lo; n0 < j_hi; n0 += kBlockN) {
    for (int idx = tid; idx < kBlockN * D; idx += kThreads) {
      const int r = idx / D, c = idx % D;
      const int j = n0 + r;
      const bool in = j < seq_kv;
      ks[r * L::ldt + c] = in ? Cvt<T>::from_float(Cvt<In>::to_float(kb[(size_t)j * D + c])) : zero;
      vs[r * L::ldt + c] = in ? Cvt<T>::from_float(Cvt<In>::to_float(vb[(size_t)j * D + c])) : zero;
    }
    __syncthreads();

    // S[warp rows] = Q K^T on tensor cores.
    const int wr = warp * 16;
#pragma unroll
    for (int nf = 0; nf < kBlockN / 16; ++nf) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.f);
#pragma unroll
      for (int kf = 0; kf < D / 16; ++kf) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> bt;
        wmma::load_matrix_sync(a, qs + wr * L::ldt + kf * 16, L::ldt);
        // K rows read column-major are K^T.
        wmma::load_matrix_sync(bt, ks + nf * 16 * L::ldt + kf * 16, L::ldt);
        wmma::mma_sync(acc, a, bt, acc);
      }
      wmma::store_matrix_sync(ss + wr * L::lds + nf * 16, acc, L::lds, wmma::mem_row_major);
    }
    __syncwarp();

    // Online softmax on the warp's 16 rows; each lane owns 2 of the 64 columns.
    for (int rr = 0; rr < 16; ++rr) {
      const int r = wr + rr;
      const int i = m0 + r;
      float s[2];
      float mx = neg_inf();
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int c = lane + 32 * e;
        const int j = n0 + c;
        const bool visible = i < seq_q && j < seq_kv &&
                             (window_left < 0 || j >= i - window_left) &&
                             (window_right < 0 || j <= i + window_right);
        const float x = visible ? ss[r * L::lds + c] * scale + (bb ? bb[j] : 0.f) : neg_inf();
        s[e] = x;
        mx = fmaxf(mx, x);
      }
      mx = warp_max(mx);
      const float m_old = row_m[r];
      const float m_new = fmaxf(m_old, mx);
      float p0 = 0.f, p1 = 0.f, corr = 1.f;
      if (m_new != neg_inf()) {
        p0 = __expf(s[0] - m_new);
        p1 = __expf(s[1] - m_new);
        corr = __expf(m_old - m_new);
      }
      ps[r * L::ldp + lane] = Cvt<T>::from_float(p0);
      ps[r * L::ldp + lane + 32] = Cvt<T>::from_float(p1);
      const float sum = warp_sum(p0 + p1);
      if (lane == 0) {
        row_l[r] = row_l[r] * corr + sum;
        row_m[r] = m_new;
        row_c[r] = corr;
      }
    }
    __syncwarp();

    // Rescale the warp's O rows, then O += P V on tensor cores.
    for (int idx = lane; idx < 16 * D; idx += 32) {
      const int r = wr + idx / D, c = idx % D;
      os[r * L::ldo + c] *= row_c[r];
    }
    __syncwarp();
#pragma unroll
    for (int df = 0; df < D / 16; ++df) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> o;
      wmma::load_matrix_sync(o, os + wr * L::ldo + df * 16, L::ldo, wmma::mem_row_major);
#pragma unroll
      for (int kf = 0; kf < kBlockN / 16; ++kf) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> pa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> vbf;
        wmma::load_matrix_sync(pa, ps + wr * L::ldp + kf * 16, L::ldp);
        wmma::load_matrix_sync(vbf, vs + kf * 16 * L::ldt + df * 16, L::ldt);
        wmma::mma_sync(o, pa, vbf, o);
      }
      wmma::store_matrix_sync(os + wr * L::ldo + df * 16, o, L::ldo, wmma::mem_row_major);
    }
    __syncthreads();  // K/V tiles are overwritten next
  }

  for (int idx = tid; idx < kBlockM * D; idx += kThreads) {
    const int r = idx / D, c = idx % D;
    const int i = m0 + r;
    if (i < seq_q) {
      const float l = row_l[r];
      const float y = l > 0.f ? os[r * L::ldo + c] / l : 0.f;
      out[((size_t)bh * seq_q + i) * D + c] = Cvt<In>::from_float(y);
    }
  }
}

}  // namespace semroute

// Kernels with C names (for NVRTC / driver-API users and the launcher below).
#define SEMROUTE_FA_KERNEL(NAME, IN, D)                                                        \
  extern "C" __global__ void __launch_bounds__(semroute::kThreads)                             \
      NAME(const IN* q, const IN* k, const IN* v, const float* bias, long long bias_stride,   \
           IN* out, int heads, int seq_q, int seq_kv, float scale, int window_left,           \
           int window_right) {                                                                  \
    semroute::flash_fwd<IN, D>(q, k, v, bias, bias_stride, out, heads, seq_q, seq_kv, scale,   \
                               window_left, window_right);                                     \
  }

SEMROUTE_FA_KERNEL(semroute_fa_fwd_f16_d32, __half, 32)
SEMROUTE_FA_KERNEL(semroute_fa_fwd_f16_d64, __half, 64)
SEMROUTE_FA_KERNEL(semroute_fa_fwd_f16_d128, __half, 128)
SEMROUTE_FA_KERNEL(semroute_fa_fwd_bf16_d32, __nv_bfloat16, 32)
SEMROUTE_FA_KERNEL(semroute_fa_fwd_bf16_d64, __nv_bfloat16, 64)
SEMROUTE_FA_KERNEL(semroute_fa_fwd_bf16_d128, __nv_bfloat16, 128)
SEMROUTE_FA_KERNEL(semroute_fa_fwd_f32_d32, float, 32)
SEMROUTE_FA_KERNEL(semroute_fa_fwd_f32_d64, float, 64)
SEMROUTE_FA_KERNEL(semroute_fa_fwd_f32_d128, float, 128)

#ifndef __CUDACC_RTC__

namespace {

template <typename In, int D, typename Kernel>
cudaError_t launch(Kernel kernel, const void* q, const void* k, const void* v, const float* bias,
                   long long bias_stride, void* out, int batch, int heads, int seq_q, int seq_kv,
                   float scale, int window_left, int window_right, cudaStream_t stream) {
  const size_t bytes = semroute::Layout<D>::bytes;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(bytes));
  if (err != cudaSuccess) return err;
  const dim3 grid((seq_q + semroute::kBlockM - 1) / semroute::kBlockM, batch * heads);
  kernel<<<grid, semroute::kThreads, bytes, stream>>>(
      static_cast<const In*>(q), static_cast<const In*>(k), static_cast<const In*>(v), bias,
      bias_stride, static_cast<In*>(out), heads, seq_q, seq_kv, scale, window_left, window_right);
  return cudaGetLastError();
}

}  // namespace

// Host entry point. dtype: 0 = fp16, 1 = bf16, 2 = fp32 (fp16 tensor-core
// compute). bias may be null; bias_batch_stride is seq_kv, or 0 to share one
// row across the batch. Returns a cudaError_t (0 on success);
// cudaErrorInvalidValue for unsupported head_dim (32, 64, 128) or dtype.
extern "C" int semroute_flash_attention_fwd(int dtype, const void* q, const void* k,
                                            const void* v, const float* bias,
                                            long long bias_batch_stride, void* out, int batch,
                                            int heads, int seq_q, int seq_kv, int head_dim,
                                            float scale, int window_left, int window_right,
                                            void* stream) {
  if (batch == 0 || heads == 0 || seq_q == 0) return cudaSuccess;
  auto s = static_cast<cudaStream_t>(stream);
#define SEMROUTE_CASE(DT, IN, D, NAME)                                                         \
  if (dtype == DT && head_dim == D)                                                            \
    return launch<IN, D>(NAME, q, k, v, bias, bias_batch_stride, out, batch, heads, seq_q,     \
                         seq_kv, scale, window_left, window_right, s);
  SEMROUTE_CASE(0, __half, 32, semroute_fa_fwd_f16_d32)
  SEMROUTE_CASE(0, __half, 64, semroute_fa_fwd_f16_d64)
  SEMROUTE_CASE(0, __half, 128, semroute_fa_fwd_f16_d128)
  SEMROUTE_CASE(1, __nv_bfloat16, 32, semroute_fa_fwd_bf16_d32)
  SEMROUTE_CASE(1, __nv_bfloat16, 64, semroute_fa_fwd_bf16_d64)
  SEMROUTE_CASE(1, __nv_bfloat16, 128, semroute_fa_fwd_bf16_d128)
  SEMROUTE_CASE(2, float, 32, semroute_fa_fwd_f32_d32)
  SEMROUTE_CASE(2, float, 64, semroute_fa_fwd_f32_d64)
  SEMROUTE_CASE(2, float, 128, semroute_fa_fwd_f32_d128)
#undef SEMROUTE_CASE
  return cudaErrorInvalidValue;
}

// Dynamic shared memory a launch needs, in bytes (0 for unsupported head_dim).
extern "C" size_t semroute_flash_attention_smem_bytes(int head_dim) {
  switch (head_dim) {
    case 32: return semroute::Layout<32>::bytes;
    case 64: return semroute::Layout<64>::bytes;
    case 128: return semroute::Layout<128>::bytes;
    default: return 0;
  }
}

#endif  // __CUDACC_RTC__
