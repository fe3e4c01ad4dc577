#!/usr/bin/env bash
# compute-sanitizer (the tools named as arguments: memcheck, racecheck, synccheck, initcheck)
# over a subset of the GPU tests that launches every kernel under every layout: odd sizes,
# tails, splits, the gather and the batched paths; the Hopper kernel, its copies, stream-K and
# the strip; the decode routes (rows, split-K across a cluster); the fallback without tensor
# maps; two threads at once. Torch's caching allocator is off so memcheck sees each tensor's
# bounds (and so CUDA graphs, which capture from the allocator's pools, are left out).
# SANITIZE_K, if set, narrows the subset further (a pytest -k expression).
set -euo pipefail
source "$(dirname "$0")/prepare.sh"
install_missing pytest
build
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
subset='(test_cuda_matches_reference and (torch.float32- or torch.int8- or torch.bfloat16- or torch.complex128-)
  and (33x65 or 257- or 100003 or 5000x40 or 7x40000 or 63x65x31 or 3x33x17x65 or 2x3x4x5-1-3 or 3x33x65-0-1
  or 272x528 or 3x48x80)) or (test_cuda_views and (sliced or strided or unaligned))
  or (test_unaligned_planes and unaligned-output-rows)
  or (test_cuda_matches_float64 and (2x128x264x40 or 128x256x32)) or (test_cuda_large_tiles and Nonex2040x4096x72)
  or (test_cuda_mid_tiles and (Nonex1032x2056x72-small or 3x130x264x200-narrow))
  or (test_cuda_float32_relative_error and (1536x1536x72 or 2048x129x4099))
  or (test_cuda_wide_tile and (2048x2048x40 or 2000x2000x44 or 2000x2000x1028-contiguous-transposed))
  or (test_cuda_strip and 2048x2049x40) or (test_cuda_stream_k and 2048x2048x264)
  or (test_cuda_async4_staging and 1536x1536x72)
  or (test_cuda_realign and (130x131x33 or 3x65x130x73) and float16) or (test_cuda_realign_offsets and 256x392x40)
  or (test_cuda_realign_exact_allocations and swizzle and float16)
  or (test_cuda_realigned_output_chunks_have_one_owner and pad) or (test_cuda_realigned_base_offsets and 3-)
  or (test_cuda_wgmma and float16 and (2040x2056x200 or 200x1x8x8 or 4x512x2048x520 or 1024x2048x456 or 64x3x136x24)) or test_cuda_wgmma_expanded_batch
  or (test_cuda_wgmma_realign and float16 and (2047x4095x130 or 250x1x9x9 or 4x512x2048x519 or 1407x1535x519))
  or (test_cuda_wgmma_realign_exact_allocations and float16)
  or (test_cuda_wgmma_repacked_views and float16)
  or (test_cuda_wgmma_narrow and float16 and (1000x1032x1032 or 64x3x72x520 or 1040x1000x24))
  or (test_cuda_wgmma_back_to_back and 128x64) or (test_cuda_tma_refused_falls_back and float16)
  or (test_cuda_shapes_and_bits and (7-33-1032 or 16-640-14336 or 32-640-14336)) or test_cuda_batched_views_and_bias
  or (test_cuda_majors_odd_k and (7-640-4095 or 33-1000-3001)) or test_cuda_batched_and_bias
  or (test_cuda_two_threads_two_streams and repack+split_k)'
subset=$(echo $subset)  # one line for pytest -k
[[ -n "${SANITIZE_K:-}" ]] && subset="($subset) and ($SANITIZE_K)"
for tool in "$@"; do
  echo "== compute-sanitizer --tool $tool"
  compute-sanitizer --tool "$tool" --error-exitcode 1 --print-limit 20 \
    "$PY" -m pytest tests -q -x -p no:cacheprovider -k "$subset" 2>&1 | tail -n 40
done
