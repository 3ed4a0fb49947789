"""A tiny recurrent (Mamba) GGUF with random weights, for the "speculation on a recurrent
model" incompatibility: llama.cpp loads and runs it (llama_model_is_recurrent is true), so
the check runs against the real library. F32 throughout, about 200 KB; runtime.models.synth's
tokenizer; marked synthetic like runtime.models.synth's files."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def write_tiny_mamba(
    path: Path | str,
    *,
    n_vocab: int = 512,
    n_embd: int = 64,
    n_layer: int = 2,
    d_inner: int = 128,
    d_state: int = 16,
    d_conv: int = 4,
    dt_rank: int = 4,
    seed: int = 0,
) -> Path:
    import gguf

    from runtime.models.synth import make_vocab

    path = Path(path)
    w = gguf.GGUFWriter(str(path), "mamba")
    w.add_name("tiny-mamba")
    w.add_context_length(1024)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(0)
    w.add_head_count(0)
    w.add_ssm_conv_kernel(d_conv)
    w.add_ssm_inner_size(d_inner)
    w.add_ssm_state_size(d_state)
    w.add_ssm_time_step_rank(dt_rank)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(0)
    tokens, scores, types = make_vocab(n_vocab)
    w.add_tokenizer_model("llama")
    w.add_token_list(list(tokens))
    w.add_token_scores(list(scores))
    w.add_token_types(list(types))
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_bool("almanac.synthetic", True)
    w.add_string("almanac.shape", "tiny-mamba")
    rng = np.random.default_rng(seed)

    def rand(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.05).astype(np.float32)

    # numpy shapes are (out, in): llama.cpp's {ne0, ne1} reversed
    w.add_tensor("token_embd.weight", rand(n_vocab, n_embd))
    w.add_tensor("output_norm.weight", np.ones(n_embd, np.float32))
    for i in range(n_layer):
        b = f"blk.{i}."
        w.add_tensor(b + "attn_norm.weight", np.ones(n_embd, np.float32))
        w.add_tensor(b + "ssm_in.weight", rand(2 * d_inner, n_embd))
        w.add_tensor(b + "ssm_conv1d.weight", rand(d_inner, d_conv))
        w.add_tensor(b + "ssm_conv1d.bias", rand(d_inner))
        w.add_tensor(b + "ssm_x.weight", rand(dt_rank + 2 * d_state, d_inner))
        w.add_tensor(b + "ssm_dt.weight", rand(d_inner, dt_rank))
        w.add_tensor(b + "ssm_dt.bias", rand(d_inner))
        w.add_tensor(b + "ssm_a", -np.abs(rand(d_inner, d_state)) - 0.5)
        w.add_tensor(b + "ssm_d", np.ones(d_inner, np.float32))
        w.add_tensor(b + "ssm_out.weight", rand(n_embd, d_inner))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
