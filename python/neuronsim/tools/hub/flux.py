"""The Flux stand-in: DIFFUSION_ID as a tiny FluxPipeline (CLIP and T5 text encoders, a
Flux transformer, a VAE)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from .cache import (
    CachePaths,
    already_there,
    cache_paths,
    model_card,
    publish,
    size_text,
    snapshot_folder,
)
from .tokenizer import CLIP_MAX_LENGTH, clip_tokenizer, t5_tokenizer

DIFFUSION_ID = "neuronsim/tiny-flux"
DIFFUSION_SEED = 2


def flux_components() -> dict:
    """A FluxPipeline's parts at the smallest sizes that keep its structure, all from
    DIFFUSION_SEED. A 32x32 image is 16x16 latents of 4 channels (the VAE halves the side
    once), packed by Flux into 8x8 tokens of 16 channels."""
    import torch
    from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler, FluxTransformer2DModel
    from transformers import CLIPTextConfig, CLIPTextModel, T5Config, T5EncoderModel

    clip, t5 = clip_tokenizer(), t5_tokenizer()
    torch.manual_seed(DIFFUSION_SEED)
    text_encoder = CLIPTextModel(
        CLIPTextConfig(
            vocab_size=len(clip),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            max_position_embeddings=CLIP_MAX_LENGTH,
            projection_dim=32,
            # The pooled output is read at the first eos, found by its id.
            bos_token_id=clip.bos_token_id,
            eos_token_id=clip.eos_token_id,
            pad_token_id=clip.pad_token_id,
        )
    )
    text_encoder_2 = T5EncoderModel(
        T5Config(
            vocab_size=len(t5),
            d_model=32,
            d_kv=8,
            d_ff=64,
            num_layers=2,
            num_heads=4,
            relative_attention_num_buckets=8,
            feed_forward_proj="gated-gelu",  # T5 v1.1's, as in Flux's text encoder
            pad_token_id=t5.pad_token_id,
            eos_token_id=t5.eos_token_id,
            decoder_start_token_id=t5.pad_token_id,
        )
    )
    vae = AutoencoderKL(
        in_channels=3,
        out_channels=3,
        down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"),
        up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D"),
        block_out_channels=(16, 32),
        layers_per_block=1,
        latent_channels=4,
        norm_num_groups=8,
        sample_size=32,
        # Random weights have no latent statistics to normalise: identity scaling.
        scaling_factor=1.0,
        shift_factor=0.0,
        use_quant_conv=False,
        use_post_quant_conv=False,
    )
    transformer = FluxTransformer2DModel(
        patch_size=1,
        in_channels=16,  # 4 latent channels x a 2x2 patch
        num_layers=1,
        num_single_layers=2,
        # 4 heads of 16 (inner 64, MLP 256): every sharded dimension splits over 2 ranks.
        attention_head_dim=16,
        num_attention_heads=4,
        joint_attention_dim=32,  # the T5 width
        pooled_projection_dim=32,  # the CLIP width
        guidance_embeds=False,  # like FLUX.1-schnell: no guidance scale input
        axes_dims_rope=(4, 6, 6),  # sums to the head dim
    )
    # FLUX.1-schnell's scheduler: a fixed shift, no resolution-dependent one.
    scheduler = FlowMatchEulerDiscreteScheduler(shift=1.0, use_dynamic_shifting=False)
    return {
        "scheduler": scheduler,
        "vae": vae,
        "text_encoder": text_encoder,
        "tokenizer": clip,
        "text_encoder_2": text_encoder_2,
        "tokenizer_2": t5,
        "transformer": transformer,
        "image_encoder": None,
        "feature_extractor": None,
    }


def write_diffusion_pipeline(*, paths: CachePaths | None = None, force: bool = False) -> Path:
    """Write DIFFUSION_ID as a tiny FluxPipeline, in float32: Diffusers loads in float32
    unless told a dtype, so the stored weights are exactly the ones used, and at these
    sizes the whole pipeline is still about 2 MB. Returns its snapshot folder."""
    paths = paths or cache_paths()
    if already_there(paths, "model", DIFFUSION_ID, force):
        return snapshot_folder(paths, "model", DIFFUSION_ID)
    from diffusers import FluxPipeline

    pipeline = FluxPipeline(**flux_components())
    what = (
        "A FluxPipeline: CLIP and T5 text encoders of 2 layers, a Flux transformer of 1 "
        "double-stream and 2 single-stream blocks (4 heads of 16) and a 2-level VAE. "
        "Call it with height=32, width=32 and a few steps."
    )
    with tempfile.TemporaryDirectory() as tmp:
        pipeline.save_pretrained(tmp, safe_serialization=True)
        Path(tmp, "README.md").write_text(model_card(DIFFUSION_ID, "diffusers", what))
        snapshot, _ = publish(paths, "model", DIFFUSION_ID, Path(tmp))
    print(f"hub: wrote {DIFFUSION_ID} (FluxPipeline, {size_text(snapshot)})")
    return snapshot
