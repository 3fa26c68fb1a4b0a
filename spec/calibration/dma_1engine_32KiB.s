# One DMA transfer on one engine: a [4, 4096] bf16 tensor (32 KiB) from HBM to SBUF. Rows 0-3
# are one DMA engine's partitions, so the copy is a single transfer (nki-dma-overview.rst's
# profiled example).
.target trn2
.tensor x bfloat16 [4,4096] input
.tensor out bfloat16 [4,4] output

sp dma_copy dst=sbuf.bf16[0:4]+0[[1,4096]] src=hbm.bf16(x)+0[[4096,4],[1,4096]] queue=0 signal=S[0]+=1
sp dma_copy dst=hbm.bf16(out)+0[[4,4],[1,4]] src=sbuf.bf16[0:4]+0[[1,4]] queue=1 wait=S[0]>=1
