# The default run's tensor-core rows (one representative of each file), for the GPU scripts
# that compare them (experiments/gpu_session.sh, experiments/wave61.sh): sourced.
TC_ROWS="11_mma_sync_bf16:m128n256k64s4c1 11_mma_sync_fp16:m128n256k32s4
  12_mma_tma_bf16:m256n128e 12_mma_tma_fp16:m256n128e 13_mma_persist_bf16:m256n128l3g8e
  13_mma_persist_fp16:m256n128l3g8 14_mma_cluster_bf16:m256n128e 14_mma_cluster_fp16:m256n128e
  15_wgmma_tma_bf16:m128n256 15_wgmma_tma_fp16:m128n256 16_wgmma_ws_bf16:m128n256
  16_wgmma_ws_fp16:m128n256 17_wgmma_persist_bf16:g16 17_wgmma_persist_fp16:g16
  18_wgmma_cluster_bf16:c2g8 18_wgmma_cluster_fp16:c2g8 19_wgmma_epi_bf16:s4e64
  19_wgmma_epi_fp16:s4e64 20_wgmma_fp8:s4e64"
