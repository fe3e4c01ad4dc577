// The gemm kernel (tiling in gemm.h; gemm_trace.h replays its shared-memory accesses).
//
// Per k tile of kGemmBK: every thread stages one 16-byte vector of each operand (register
// modes load it while the previous tiles are computed and store it after; cp.async writes
// straight to shared memory, kGemmStages tiles ahead), then reads BK rows of its A and B
// fragments as LDS.128 and does QM*QN*VEC*VEC FMAs per row.
#include <cuda_runtime.h>

#include "launch.h"
#include "numeric.cuh"

namespace bankops {
namespace {

// A 16-byte vector of accumulators or elements: one LDS.128 / STS.128 / LDG.128 / STG.128.
template <class E>
struct alignas(16) Vec16 {
  E v[16 / sizeof(E)];
};

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, int src_bytes) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  // Bytes past src_bytes are zero-filled and not read: tails never read past an operand.
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

// LDG.128 through the read-only path (float and double: the vector modes need T == Acc).
__device__ __forceinline__ Vec16<float> load16(const float* p) {
  const float4 v = __ldg(reinterpret_cast<const float4*>(p));
  return Vec16<float>{{v.x, v.y, v.z, v.w}};
}
__device__ __forceinline__ Vec16<double> load16(const double* p) {
  const double2 v = __ldg(reinterpret_cast<const double2*>(p));
  return Vec16<double>{{v.x, v.y}};
}

// One operand tile stream of one thread: the thread's vector (tile row kr, column xc) of the
// next k tile starts at p; element e of the vector is e strides further along k (k-major
// modes) or x. State is kept small: 64 accumulators leave little room under 128 registers.
template <class S, class Tile, class T, class Acc>
struct Stager {
  static constexpr int V = S::kVec;
  static constexpr bool kVector = sizeof(T) == sizeof(Acc);  // 16-bit inputs widen in registers
  static_assert(S::kLoads == 1, "one staged vector per thread and operand");

  const T* p;
  int64_t sk, se;  // k stride; stride between a vector's elements
  int x_rest;      // valid elements of the vector along x (0..V; k-major: 0 or V)
  int kr, xc;      // tile row and column of the vector
  GemmStage mode;
  Acc r[V];

  // base: the operand at (k 0, x 0) of the block; x_end: its columns from there.
  __device__ __forceinline__ Stager(const T* base, int64_t k_stride, int64_t x_stride, int64_t x_end, GemmStage m)
      : sk(k_stride), mode(m) {
    const bool k_major = gemm_k_major(m);
    const TileCoord c = k_major ? gemm_stage_k<S>(threadIdx.x, 0) : gemm_stage_x<S>(threadIdx.x, 0);
    kr = c.r;
    xc = c.c;
    p = base + kr * k_stride + xc * x_stride;
    se = k_major ? k_stride : x_stride;
    const int64_t xl = x_end - xc;
    // A k-major vector lies in one column: all of it is in range along x, or none.
    x_rest = xl <= 0 ? 0 : k_major || xl >= V ? V : static_cast<int>(xl);
  }

  // Issues the global reads of the next k tile, whose first k_rows rows are inside the operand
  // (cp.async goes straight to `dst`; `safe` is an address cp.async may name for no bytes).
  __device__ __forceinline__ void issue(Acc* dst, const void* safe, int k_rows) {
    const int k_rest = k_rows - kr;
    if constexpr (kVector) {
      if (mode == GemmStage::KVec) {
        // Partial vectors at the k tail fall back to predicated scalar reads.
        if (x_rest > 0 && k_rest >= V) {
          const Vec16<T> v = load16(p);
#pragma unroll
          for (int e = 0; e < V; ++e) r[e] = v.v[e];
        } else {
#pragma unroll
          for (int e = 0; e < V; ++e) r[e] = x_rest > 0 && e < k_rest ? p[e] : T(0);
        }
        return advance();
      }
      if (mode == GemmStage::XAsync) {
        const int n = k_rest > 0 ? x_rest : 0;
        cp_async16(dst + Tile::offset(kr, xc), n > 0 ? static_cast<const void*>(p) : safe, n * static_cast<int>(sizeof(T)));
        return advance();
      }
    }
    if (gemm_k_major(mode)) {
#pragma unroll
      for (int e = 0; e < V; ++e) r[e] = x_rest > 0 && e < k_rest ? to_acc<Acc>(p[e * se]) : Acc(0);
    } else {
#pragma unroll
      for (int e = 0; e < V; ++e) r[e] = k_rest > 0 && e < x_rest ? to_acc<Acc>(p[e * se]) : Acc(0);
    }
    advance();
  }

  __device__ __forceinline__ void advance() { p += S::kBK * sk; }

  // Stores what issue() loaded into registers (nothing for cp.async).
  __device__ __forceinline__ void store(Acc* dst) const {
    if (kVector && mode == GemmStage::XAsync) return;
    if (gemm_k_major(mode)) {
      // The transposed store: VEC tile rows of one column.
#pragma unroll
      for (int e = 0; e < V; ++e) dst[Tile::offset(kr + e, xc)] = r[e];
    } else {
      Vec16<Acc> v;
#pragma unroll
      for (int e = 0; e < V; ++e) v.v[e] = r[e];
      *reinterpret_cast<Vec16<Acc>*>(dst + Tile::offset(kr, xc)) = v;
    }
  }
};

template <class S, class Tile, class T, class Acc>
__global__ void __launch_bounds__(S::kThreads, S::kMinBlocks)
    gemm_kernel(const GemmArgs g, const GemmStage mode_a, const GemmStage mode_b) {
  constexpr int V = S::kVec, kStages = kGemmStages, kStage = Tile::kSize;
  static_assert(kStage % V == 0, "stages start on 16-byte boundaries");
  __shared__ Vec16<Acc> smem_a[kStages * kStage / V];
  __shared__ Vec16<Acc> smem_b[kStages * kStage / V];
  Acc* const sa0 = &smem_a[0].v[0];
  Acc* const sb0 = &smem_b[0].v[0];
  const int t = threadIdx.x;
  const int64_t n0 = int64_t(blockIdx.x) * S::kBN;
  const int64_t tiles_m = ceil_div(g.m, S::kBM);
  const int tiles_k = static_cast<int>(ceil_div(g.k, S::kBK));  // K < 2^34: see launch_gemm
  // Rows of k tile kt inside the operands.
  const auto k_rows = [&](int kt) {
    const int64_t left = g.k - int64_t(kt) * S::kBK;
    return static_cast<int>(left < S::kBK ? left : S::kBK);
  };
  const int am = gemm_frag_m<S>(t, 0), bn = gemm_frag_n<S>(t, 0);

  for (int64_t bz = blockIdx.z; bz < g.batch; bz += gridDim.z) {
    for (int64_t tm = blockIdx.y; tm < tiles_m; tm += gridDim.y) {
      const int64_t m0 = tm * S::kBM;
      Stager<S, Tile, T, Acc> sa(static_cast<const T*>(g.a) + bz * g.a_sb + m0 * g.a_sm, g.a_sk, g.a_sm,
                                 g.m - m0, mode_a);
      Stager<S, Tile, T, Acc> sb(static_cast<const T*>(g.b) + bz * g.b_sb + n0 * g.b_sn, g.b_sk, g.b_sn,
                                 g.n - n0, mode_b);
      Acc acc[S::kTM][S::kTN];
#pragma unroll
      for (int i = 0; i < S::kTM; ++i)
#pragma unroll
        for (int j = 0; j < S::kTN; ++j) acc[i][j] = Acc(0);

      // Prologue: tiles 0 .. kStages-2 in flight, one cp.async group each.
#pragma unroll
      for (int s = 0; s < kStages - 1; ++s) {
        if (s < tiles_k) {
          sa.issue(sa0 + s * kStage, g.a, k_rows(s));
          sb.issue(sb0 + s * kStage, g.b, k_rows(s));
          sa.store(sa0 + s * kStage);
          sb.store(sb0 + s * kStage);
        }
        cp_async_commit();
      }

      int read = 0;  // the stage of tile kt; tile kt + kStages - 1 goes to the one before it
      for (int kt = 0; kt < tiles_k; ++kt) {
        cp_async_wait<kStages - 2>();
        __syncthreads();  // tile kt is in shared memory; every thread is done with tile kt-1's stage
        const bool more = kt + kStages - 1 < tiles_k;
        const int write = (read + kStages - 1) % kStages;
        if (more) {
          sa.issue(sa0 + write * kStage, g.a, k_rows(kt + kStages - 1));
          sb.issue(sb0 + write * kStage, g.b, k_rows(kt + kStages - 1));
        }
        cp_async_commit();

        const Acc* as = sa0 + read * kStage;
        const Acc* bs = sb0 + read * kStage;
#pragma unroll
        for (int kk = 0; kk < S::kBK; ++kk) {
          Vec16<Acc> fa[S::kQM], fb[S::kQN];
#pragma unroll
          for (int q = 0; q < S::kQM; ++q)
            fa[q] = *reinterpret_cast<const Vec16<Acc>*>(as + Tile::offset(kk, am + q * S::kLanesM * V));
#pragma unroll
          for (int q = 0; q < S::kQN; ++q)
            fb[q] = *reinterpret_cast<const Vec16<Acc>*>(bs + Tile::offset(kk, bn + q * S::kLanesN * V));
#pragma unroll
          for (int i = 0; i < S::kTM; ++i)
#pragma unroll
            for (int j = 0; j < S::kTN; ++j) acc[i][j] = fma(fa[i / V].v[i % V], fb[j / V].v[j % V], acc[i][j]);
        }

        if (more) {
          sa.store(sa0 + write * kStage);
          sb.store(sb0 + write * kStage);
        }
        read = (read + 1) % kStages;
      }
      cp_async_wait<0>();
      __syncthreads();  // the next tile's prologue overwrites the stages

      // Each row of the micro-tile: QN vectors of VEC columns (one STG.128 each when aligned).
      const bool vec_out = sizeof(T) == sizeof(Acc) && g.n % V == 0;
      const int64_t n_first = n0 + bn;
      T* row = static_cast<T*>(g.c) + (bz * g.m + m0 + am) * g.n + n_first;
#pragma unroll
      for (int i = 0; i < S::kTM; ++i) {
        const int dm = (i / V) * (S::kLanesM * V) + i % V;
        if (m0 + am + dm < g.m) {
#pragma unroll
          for (int q = 0; q < S::kQN; ++q) {
            T* dst = row + dm * g.n + q * (S::kLanesN * V);
            const int64_t left = g.n - n_first - q * (S::kLanesN * V);
            if (vec_out && left >= V) {
              Vec16<T> v;
#pragma unroll
              for (int e = 0; e < V; ++e) v.v[e] = from_acc<T>(acc[i][q * V + e]);
              *reinterpret_cast<Vec16<T>*>(dst) = v;
            } else {
#pragma unroll
              for (int e = 0; e < V; ++e)
                if (e < left) dst[e] = from_acc<T>(acc[i][q * V + e]);
            }
          }
        }
      }
    }
  }
}

template <class S, Layout L, class T, class Acc>
cudaError_t run(const GemmArgs& g, cudaStream_t stream) {
  const auto clamp = [](int64_t v) { return static_cast<unsigned>(v < 65535 ? v : 65535); };
  const dim3 grid(static_cast<unsigned>(ceil_div(g.n, S::kBN)), clamp(ceil_div(g.m, S::kBM)), clamp(g.batch));
  const int eb = sizeof(T), ab = sizeof(Acc);
  const GemmStage mode_a = gemm_stage_mode(g.a, eb, ab, g.batch, g.a_sb, g.k, g.a_sk, g.m, g.a_sm);
  const GemmStage mode_b = gemm_stage_mode(g.b, eb, ab, g.batch, g.b_sb, g.k, g.b_sk, g.n, g.b_sn);
  gemm_kernel<S, GemmTileOf<L, S>, T, Acc><<<grid, S::kThreads, 0, stream>>>(g, mode_a, mode_b);
  return cudaGetLastError();
}

int num_sms() {
  static const int n = [] {
    int dev = 0, v = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
      return 132;
    return v;
  }();
  return n;
}

template <Layout L, class T>
cudaError_t run_float_acc(const GemmArgs& g, cudaStream_t stream) {
  if (gemm_config(4, g.batch, g.m, g.n, num_sms()) == GemmConfig::Big) return run<GemmBig<4>, L, T, float>(g, stream);
  return run<GemmSmall, L, T, float>(g, stream);
}

}  // namespace

cudaError_t launch_gemm(Layout layout, DType dtype, const GemmArgs& g, cudaStream_t stream) {
  if (g.batch == 0 || g.m == 0 || g.n == 0) return cudaSuccess;
  return with_layout(layout, [&](auto tag) {
    constexpr Layout L = decltype(tag)::value;
    switch (dtype) {
      case DType::F16: return run_float_acc<L, __half>(g, stream);
      case DType::BF16: return run_float_acc<L, __nv_bfloat16>(g, stream);
      case DType::F64: return run<GemmBig<8>, L, double, double>(g, stream);
      case DType::F32:
      default: return run_float_acc<L, float>(g, stream);  // ops/ admits only these four
    }
  });
}

}  // namespace bankops
