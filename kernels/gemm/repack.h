// Operands whose rows start off 16-byte boundaries (odd K or N, offset views), copied once
// into scratch rows that start on 128-byte boundaries: the Hopper gemm kernel's Tensor Memory
// Accelerator maps only rows 16 bytes apart (tma.cuh), and realigning them in its producers
// on every read of a tile runs at L2's request rate instead (wgmma_realign.cuh). Rows a whole
// number of 128-byte lines apart make each 128-byte row of a TMA box one L2 line; 16 bytes
// apart, most span two. The copy reads each row as the aligned 16-byte granules under it and
// cuts every 16 bytes it writes out of two neighbouring lanes' granules (shift.cuh), so it
// moves whole 16-byte vectors both ways.
#pragma once
#include <cstdint>

namespace bankops {

constexpr int kRepackPitch = 128;  // bytes: copied rows start a whole number of these apart
constexpr int64_t kRepackMinMN = 256;  // m and n of matrices whose operands are worth a copy

// One operand: batch x rows x cols elements, cols contiguous (unit stride), rows s_row and
// batches s_batch elements apart (any values, views included); dst gets rows of d_row
// elements (repack_pitch: the tail of each row holds zeros), batches rows * d_row apart.
struct RepackJob {
  const void* src;
  void* dst;
  int64_t batch, rows, cols, s_batch, s_row, d_row;
};

// Elements per copied row: cols rounded up to a whole number of 128-byte lines.
inline int64_t repack_pitch(int64_t cols, int elem_bytes) {
  const int64_t per = kRepackPitch / elem_bytes;
  return (cols + per - 1) / per * per;
}

}  // namespace bankops
