# One of every instruction, with valid operands, for round-trip tests.
.target trn2
.tensor x float32 [128,512] input
.tensor idx int32 [4,1] input
.tensor y bfloat16 [128,512] output
.tensor w float32 [2,2] constant data=0000803f000000000000000000000040
.tensor tmp float32 [64,64] scratch

sp dma_copy dst=sbuf.fp32[0:128]+0[[1,512]] src=hbm.fp32(x)+0[[512,128],[1,512]] signal=S[0]+=1
act dma_copy dst=sbuf.bf16[0:128]+4096[[1,512]] src=hbm.fp32(x)+0[[512,128],[1,512]] queue=3
pool dma_copy dst=sbuf.fp32[0:4]+8192[[1,512]] src=hbm.fp32(x)+0[[512,128],[1,512]] index=sbuf.i32[0:4]+12288[[1,1]] queue=15
sp dma_copy dst=hbm.bf16(y)+0[[1024,64],[2,2],[1,256]] src=sbuf.bf16[0:64]+4096[[1,512]]
pe matmul dst=psum.fp32[0:128]+0[[1,512]] stationary=sbuf.bf16[0:128]+0[[1,128]] moving=sbuf.bf16[0:128]+256[[1,512]] accumulate=true wait=S[0]>=1
pe matmul dst=psum.fp32[0:64]+2048[[1,256]] stationary=sbuf.fp8e4[0:64]+0[[1,64]] moving=sbuf.fp8e4[0:64]+64[[1,256]] row=64 col=32
pe matmul dst=psum.bf16[0:128]+4096[[1,128]] stationary=sbuf.bf16[0:128]+0[[1,128]] moving=sbuf.bf16[0:128]+1024[[1,128]] transpose=true
pe transpose dst=psum.fp32[0:32]+0[[1,128]] src=sbuf.fp32[0:128]+0[[1,32]]
dve transpose dst=sbuf.fp16[0:32]+0[[1,16]] src=sbuf.fp16[96:16]+64[[1,32]]
act activation dst=sbuf.fp32[0:128]+0[[1,512]] src=psum.fp32[0:128]+0[[1,512]] func=gelu_tanh scale=0.125 bias=sbuf.fp32[0:128]+2048[[1,1]] reduce_dst=sbuf.fp32[0:128]+2052[[1,1]] reduce=max signal=S[7]=3
act activation dst=sbuf.bf16[0:64]+0[[1,64]] src=sbuf.bf16[64:64]+0[[2,32],[1,2]] func=exp scale=sbuf.fp32[64:64]+512[[1,1]]
dve tensor_tensor dst=sbuf.fp32[0:128]+0[[1,512]] in0=sbuf.fp32[0:128]+0[[1,512]] in1=psum.fp32[0:128]+0[[1,512]] op=bitwise_xor
pool tensor_tensor dst=sbuf.u8[32:32]+0[[1,8]] in0=sbuf.u8[32:32]+8[[1,8]] in1=sbuf.u8[32:32]+16[[1,8]] op=is_ge
act tensor_scalar dst=sbuf.fp32[0:128]+0[[1,512]] src=sbuf.fp32[0:128]+0[[1,512]] op0=multiply imm0=-1.5 op1=add imm1=3e-07 reverse1=true
dve tensor_scalar dst=sbuf.fp32[0:128]+0[[1,512]] src=sbuf.fp32[0:128]+0[[1,512]] op0=subtract operand0=sbuf.fp32[0:128]+4000[[1,1]] reverse0=true
dve tensor_reduce dst=sbuf.fp32[0:128]+0[[1,4]] src=sbuf.fp32[0:128]+0[[128,4],[1,128]] op=max axes=0x2 negate=true
pool tensor_reduce dst=sbuf.fp32[0:128]+0[[1,1],[1,1]] src=sbuf.fp32[0:128]+0[[128,4],[1,128]] op=add axes=0x3 keepdims=true
dve tensor_copy dst=sbuf.fp8e5[0:128]+0[[1,512]] src=sbuf.fp32[0:128]+0[[1,512]] wait=S[3]==2
dve memset dst=sbuf.i16[0:128]+0[[1,512]] value=7
pool memset dst=psum.fp32[0:128]+8192[[1,512]]
dve select dst=sbuf.fp32[0:128]+0[[1,8]] predicate=sbuf.u8[0:128]+64[[1,8]] on_true=sbuf.fp32[0:128]+128[[1,8]] on_false=sbuf.fp32[0:128]+256[[1,8]]
dve copy_predicated dst=sbuf.fp32[0:128]+0[[1,8]] src=sbuf.fp32[0:128]+128[[1,8]] predicate=sbuf.u8[0:128]+64[[1,8]] reverse=true
dve bn_stats dst=sbuf.fp32[0:128]+0[[1,6]] src=sbuf.fp32[0:128]+1024[[1,512]]
dve bn_aggr dst=sbuf.fp32[0:128]+0[[1,2]] src=sbuf.fp32[0:128]+1024[[1,12]]
dve tensor_tensor_scan dst=sbuf.fp32[0:128]+0[[1,16]] in0=sbuf.fp32[0:128]+64[[1,16]] in1=sbuf.fp32[0:128]+128[[1,16]] op0=multiply op1=add initial=1
dve tensor_tensor_scan dst=sbuf.fp32[0:128]+0[[1,16]] in0=sbuf.fp32[0:128]+64[[1,16]] in1=sbuf.fp32[0:128]+128[[1,16]] op0=max op1=add initial=sbuf.fp32[0:128]+512[[1,1]]
pool iota dst=sbuf.i32[0:128]+0[[1,64]] pattern=pattern[[8,8],[1,8]] offset=-3 channel_multiplier=64
pool affine_select dst=sbuf.fp32[0:128]+0[[1,128]] on_true=sbuf.fp32[0:128]+512[[1,128]] pattern=pattern[[-1,128]] channel_multiplier=1 cmp=is_ge on_false=-inf
pool partition_reduce dst=sbuf.fp32[0:1]+0[[1,64]] src=sbuf.fp32[0:128]+0[[1,64]] op=min
pool partition_shuffle dst=sbuf.fp32[0:4]+0[[1,64]] src=sbuf.fp32[32:4]+0[[1,64]] mask=[3,2,1]
pool local_gather dst=sbuf.fp32[0:32]+0[[1,8]] src=sbuf.fp32[0:32]+64[[1,64]] index=sbuf.u16[0:32]+512[[1,4]] elems_per_index=2 num_indices=4
sp sem_wait wait=S[9]>=100
act sem_signal signal=S[4]+=2
pool sem_set signal=S[5]=0
sp all_reduce dst=sbuf.fp32[0:128]+0[[1,512]] src=sbuf.fp32[0:128]+0[[1,512]] group=1 op=add
pool all_gather dst=hbm.fp32(tmp)+0[[64,64],[1,64]] src=sbuf.fp32[0:64]+0[[1,8]] group=2
sp reduce_scatter dst=sbuf.fp32[0:128]+0[[1,64]] src=sbuf.fp32[0:128]+0[[1,512]] op=max
sp all_to_all dst=sbuf.fp32[0:128]+0[[1,512]] src=sbuf.fp32[0:128]+2048[[1,512]] group=1
sp send src=sbuf.fp32[0:128]+0[[1,512]] peer=1
sp recv dst=sbuf.fp32[0:128]+0[[1,512]] peer=0 wait=S[11]>=1
pool rng dst=sbuf.u16[0:128]+0[[1,64]]
dve rand_set_state src=sbuf.u32[0:128]+0[[1,6]]
dve max8 dst=sbuf.fp32[0:128]+0[[1,8]] src=sbuf.fp32[0:128]+64[[1,512]]
dve find_index8 dst=sbuf.u32[0:128]+0[[1,8]] src=sbuf.fp32[0:128]+64[[1,512]] vals=sbuf.fp32[0:128]+32[[1,8]]
dve match_replace8 dst=sbuf.fp32[0:128]+64[[1,512]] src=sbuf.fp32[0:128]+64[[1,512]] vals=sbuf.fp32[0:128]+32[[1,8]] dst_index=sbuf.u32[0:128]+0[[1,8]] imm=-1
dve tensor_scalar dst=sbuf.fp32[0:128]+0[[1,512]] src=sbuf.fp32[0:128]+0[[1,512]] op0=multiply imm0=2 reduce_dst=sbuf.fp32[0:128]+4096[[1,1]] initial=sbuf.fp32[0:128]+4100[[1,1]] reduce=max reduce_cmd=4
dve select dst=sbuf.fp32[0:128]+0[[1,8]] predicate=sbuf.u8[0:128]+64[[1,8]] on_true=sbuf.fp32[0:128]+128[[1,8]] on_false=-3 reverse=true reduce=max reduce_cmd=3
dve scalar_tensor_tensor dst=sbuf.bf16[0:128]+0[[1,512]] in0=sbuf.bf16[0:128]+1024[[1,512]] operand0=sbuf.fp32[0:128]+4000[[1,1]] in1=sbuf.bf16[0:128]+2048[[1,512]] op0=subtract op1=multiply reduce_dst=sbuf.fp32[0:128]+4096[[1,1]] reduce=add reduce_cmd=3
dve range_select dst=sbuf.fp32[0:128]+0[[1,512]] on_true=sbuf.fp32[0:128]+2048[[1,512]] operand0=sbuf.fp32[0:128]+4000[[1,1]] operand1=sbuf.fp32[0:128]+4004[[1,1]] cmp0=is_ge cmp1=is_lt range_start=128 on_false=-3.4028235e+38 reduce_dst=sbuf.fp32[0:128]+4096[[1,1]] reduce=max reduce_cmd=2
sp dma_copy dst=sbuf.bf16[0:128]+4096[[1,64]] src=hbm.bf16(y)+0[[512,64],[1,128]] transpose=true
sp dma_copy dst=sbuf.fp32[0:128]+8192[[1,512]] src=sbuf.fp32[3:128:0]+64[[1,512]] queue=2
