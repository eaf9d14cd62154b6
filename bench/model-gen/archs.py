"""Architectures and sizes: the hyperparameter keys and tensors of each model,
as llama.cpp v0.4.0 loads them (src/models/{llama,qwen3,kimi-linear}.cpp) and
convert_hf_to_gguf.py writes them.

A model is (arch, preset, overrides).  Presets:
  tiny   runs in seconds on one CPU core per rank (the README's first command)
  small  a CPU run of a minute or so
  h200   real shapes: Llama-3.1-8B, Qwen3-8B, and Kimi-Linear-48B-A3B's layers,
         widths and heads with 32 experts instead of 256 (about 16 GB of f16
         each: two ranks sharing one H200 plus a local run of the same model)
"""

import math

# Shapes in ggml order (ne[0] = the row length = a weight's input width).
PRESETS = {
    "llama": {
        "tiny":  dict(n_vocab=8192, n_embd=512, n_layer=8, n_head=8, n_head_kv=4, n_ff=1536, n_ctx=16384),
        "small": dict(n_vocab=32000, n_embd=1024, n_layer=16, n_head=16, n_head_kv=4, n_ff=2816, n_ctx=16384),
        "h200":  dict(n_vocab=128256, n_embd=4096, n_layer=32, n_head=32, n_head_kv=8, n_ff=14336, n_ctx=131072),
    },
    "qwen3": {
        "tiny":  dict(n_vocab=8192, n_embd=512, n_layer=8, n_head=8, n_head_kv=2, head_dim=64, n_ff=1536, n_ctx=16384),
        "small": dict(n_vocab=32000, n_embd=1024, n_layer=16, n_head=16, n_head_kv=8, head_dim=128, n_ff=3072, n_ctx=16384),
        "h200":  dict(n_vocab=151936, n_embd=4096, n_layer=36, n_head=32, n_head_kv=8, head_dim=128, n_ff=12288, n_ctx=40960),
    },
    "kimi-linear": {
        "tiny":  dict(n_vocab=8192, n_embd=512, n_layer=8, n_head=4, kda_head_dim=128, n_ff=1024,
                      kv_lora=128, qk_nope=64, qk_rope=32, v_mla=64,
                      n_expert=8, n_expert_used=2, n_expert_shared=1, n_ff_exp=256, n_dense_lead=1, n_ctx=16384),
        "small": dict(n_vocab=32000, n_embd=1024, n_layer=12, n_head=8, kda_head_dim=128, n_ff=2816,
                      kv_lora=256, qk_nope=64, qk_rope=64, v_mla=64,
                      n_expert=16, n_expert_used=4, n_expert_shared=1, n_ff_exp=512, n_dense_lead=1, n_ctx=16384),
        "h200":  dict(n_vocab=163840, n_embd=2304, n_layer=27, n_head=32, kda_head_dim=128, n_ff=9216,
                      kv_lora=512, qk_nope=128, qk_rope=64, v_mla=128,
                      n_expert=32, n_expert_used=8, n_expert_shared=1, n_ff_exp=1024, n_dense_lead=1, n_ctx=131072),
    },
}

DEFAULTS = dict(rms_eps=1e-5, d_conv=4, expert_weights_scale=2.446, full_attn_every=4, logit_std=3.0)


def hparams(arch, preset, overrides):
    if arch not in PRESETS:
        raise ValueError("unknown arch %r (have: %s)" % (arch, ", ".join(PRESETS)))
    if preset not in PRESETS[arch]:
        raise ValueError("unknown preset %r for %s (have: %s)" % (preset, arch, ", ".join(PRESETS[arch])))
    hp = dict(DEFAULTS)
    hp.update(PRESETS[arch][preset])
    for k, v in overrides.items():
        if k not in hp:
            raise ValueError("%s has no hyperparameter %r (have: %s)" % (arch, k, ", ".join(sorted(hp))))
        hp[k] = type(hp[k])(v)
    if arch == "llama":
        hp["head_dim"] = hp["n_embd"] // hp["n_head"]
        if hp["head_dim"] * hp["n_head"] != hp["n_embd"]:
            raise ValueError("llama: n_embd must be a multiple of n_head (n_rot = n_embd / n_head)")
    if arch in ("llama", "qwen3") and hp["n_head"] % hp["n_head_kv"]:
        raise ValueError("n_head must be a multiple of n_head_kv")
    if arch == "kimi-linear":
        if hp["n_expert"] and not 0 < hp["n_expert_used"] <= hp["n_expert"]:
            raise ValueError("kimi-linear: need 0 < n_expert_used <= n_expert")
        if not hp["n_expert"]:
            hp["n_dense_lead"] = hp["n_layer"]
            hp["n_expert_used"] = 0
    return hp


def is_full_attn(hp, il):
    """Kimi-Linear's full_attn_layers (1-based 4, 8, ..., and the last layer)."""
    return (il + 1) % hp["full_attn_every"] == 0 or il == hp["n_layer"] - 1


class T:
    """One tensor: name, ne (ggml order), dtype ('F16' | 'F32'), init (kind, params)."""
    __slots__ = ("name", "ne", "dtype", "init")

    def __init__(self, name, ne, dtype, init):
        self.name, self.ne, self.dtype, self.init = name, tuple(ne), dtype, init

    @property
    def n(self):
        return math.prod(self.ne)


def W(name, ne, gain=1.0):
    """A projection: f16, RMS gain / sqrt(input width)."""
    return T(name, ne, "F16", ("normal", gain / math.sqrt(ne[0])))


def NORM(name, ne):
    return T(name, ne, "F32", ("uniform", 0.9, 1.1))


def _common_head(hp):
    return [
        T("token_embd.weight", (hp["n_embd"], hp["n_vocab"]), "F16", ("normal", 1.0)),
        NORM("output_norm.weight", (hp["n_embd"],)),
        W("output.weight", (hp["n_embd"], hp["n_vocab"]), hp["logit_std"]),
    ]


def _swiglu(p, n_embd, n_ff):
    return [W(p + "ffn_gate.weight", (n_embd, n_ff)), W(p + "ffn_up.weight", (n_embd, n_ff)),
            W(p + "ffn_down.weight", (n_ff, n_embd))]


def tensors(arch, hp):
    out = _common_head(hp)
    E = hp["n_embd"]
    for il in range(hp["n_layer"]):
        p = "blk.%d." % il
        out.append(NORM(p + "attn_norm.weight", (E,)))
        if arch in ("llama", "qwen3"):
            hd, nh, nkv = hp["head_dim"], hp["n_head"], hp["n_head_kv"]
            out += [W(p + "attn_q.weight", (E, nh * hd)), W(p + "attn_k.weight", (E, nkv * hd)),
                    W(p + "attn_v.weight", (E, nkv * hd)), W(p + "attn_output.weight", (nh * hd, E))]
            if arch == "qwen3":
                out += [NORM(p + "attn_q_norm.weight", (hd,)), NORM(p + "attn_k_norm.weight", (hd,))]
            out.append(NORM(p + "ffn_norm.weight", (E,)))
            out += _swiglu(p, E, hp["n_ff"])
            continue
        # kimi-linear
        nh, hd = hp["n_head"], hp["kda_head_dim"]
        di = nh * hd
        if not is_full_attn(hp, il):
            # KDA: short convs, q/k/v, the decay and gate low-rank pairs, beta, A, dt bias, o_norm
            for x in "qkv":
                out.append(T(p + "ssm_conv1d_%s.weight" % x, (hp["d_conv"], 1, di, 1), "F32", ("uniform", -0.5, 0.5)))
            out += [W(p + "attn_q.weight", (E, di)), W(p + "attn_k.weight", (E, di)), W(p + "attn_v.weight", (E, di)),
                    W(p + "ssm_f_a.weight", (E, hd)), W(p + "ssm_f_b.weight", (hd, di)),
                    W(p + "ssm_beta.weight", (E, nh)),
                    T(p + "ssm_a", (1, nh, 1, 1), "F32", ("uniform", -16.0, -1.0)),   # -exp(A_log)
                    T(p + "ssm_dt.bias", (di,), "F32", ("dt_bias", 0.001, 0.1)),
                    W(p + "ssm_g_a.weight", (E, hd)), W(p + "ssm_g_b.weight", (hd, di)),
                    NORM(p + "ssm_norm.weight", (hd,)),
                    W(p + "attn_output.weight", (di, E))]
        else:
            # MLA with the absorbed (MQA) KV cache: kv_a_mqa, k_b and v_b split as convert does
            kl, nope, rope, v = hp["kv_lora"], hp["qk_nope"], hp["qk_rope"], hp["v_mla"]
            out += [NORM(p + "attn_kv_a_norm.weight", (kl,)),
                    W(p + "attn_q.weight", (E, nh * (nope + rope))),
                    W(p + "attn_kv_a_mqa.weight", (E, kl + rope)),
                    W(p + "attn_k_b.weight", (nope, kl, nh)),
                    W(p + "attn_v_b.weight", (kl, v, nh)),
                    W(p + "attn_output.weight", (nh * v, E))]
        out.append(NORM(p + "ffn_norm.weight", (E,)))
        if il < hp["n_dense_lead"]:
            out += _swiglu(p, E, hp["n_ff"])
        else:
            ne, ff, fs = hp["n_expert"], hp["n_ff_exp"], hp["n_ff_exp"] * max(1, hp["n_expert_shared"])
            out += [T(p + "ffn_gate_inp.weight", (E, ne), "F32", ("uniform", -math.sqrt(3.0 / E), math.sqrt(3.0 / E))),
                    W(p + "ffn_gate_exps.weight", (E, ff, ne)), W(p + "ffn_up_exps.weight", (E, ff, ne)),
                    W(p + "ffn_down_exps.weight", (ff, E, ne)),
                    W(p + "ffn_gate_shexp.weight", (E, fs)), W(p + "ffn_up_shexp.weight", (E, fs)),
                    W(p + "ffn_down_shexp.weight", (fs, E)),
                    T(p + "exp_probs_b.bias", (ne,), "F32", ("uniform", 0.0, 0.0))]
    return out


def keys(w, arch, hp):
    """Hyperparameter keys, as the converter writes them for this architecture."""
    K = w.C.Keys
    w.u32(K.LLM.VOCAB_SIZE, hp["n_vocab"])
    w.u32(K.LLM.CONTEXT_LENGTH, hp["n_ctx"])
    w.u32(K.LLM.EMBEDDING_LENGTH, hp["n_embd"])
    w.u32(K.LLM.FEED_FORWARD_LENGTH, hp["n_ff"])
    w.u32(K.LLM.BLOCK_COUNT, hp["n_layer"])
    w.u32(K.Attention.HEAD_COUNT, hp["n_head"])
    w.f32(K.Attention.LAYERNORM_RMS_EPS, hp["rms_eps"])
    if arch == "llama":
        w.u32(K.Attention.HEAD_COUNT_KV, hp["n_head_kv"])
        w.u32(K.Rope.DIMENSION_COUNT, hp["head_dim"])
        w.f32(K.Rope.FREQ_BASE, 500000.0)
    elif arch == "qwen3":
        w.u32(K.Attention.HEAD_COUNT_KV, hp["n_head_kv"])
        w.u32(K.Attention.KEY_LENGTH, hp["head_dim"])
        w.u32(K.Attention.VALUE_LENGTH, hp["head_dim"])
        w.f32(K.Rope.FREQ_BASE, 1000000.0)
    else:
        w.add_array(K.Attention.HEAD_COUNT_KV, w.C.GGUFValueType.UINT32,
                    [1 if is_full_attn(hp, il) else 0 for il in range(hp["n_layer"])])
        w.u32(K.SSM.CONV_KERNEL, hp["d_conv"])
        w.u32(K.KDA.HEAD_DIM, hp["kda_head_dim"])
        w.u32(K.Attention.KV_LORA_RANK, hp["kv_lora"])
        w.u32(K.Rope.DIMENSION_COUNT, hp["qk_rope"])
        w.u32(K.Attention.KEY_LENGTH, hp["kv_lora"] + hp["qk_rope"])
        w.u32(K.Attention.VALUE_LENGTH, hp["kv_lora"])
        w.u32(K.Attention.KEY_LENGTH_MLA, hp["qk_nope"] + hp["qk_rope"])
        w.u32(K.Attention.VALUE_LENGTH_MLA, hp["v_mla"])
        w.u32(K.LLM.EXPERT_COUNT, hp["n_expert"])
        w.u32(K.LLM.EXPERT_USED_COUNT, hp["n_expert_used"])
        w.u32(K.LLM.EXPERT_FEED_FORWARD_LENGTH, hp["n_ff_exp"])
        w.u32(K.LLM.EXPERT_SHARED_COUNT, hp["n_expert_shared"])
        w.u32(K.LLM.LEADING_DENSE_BLOCK_COUNT, hp["n_dense_lead"])
        w.f32(K.LLM.EXPERT_WEIGHTS_SCALE, hp["expert_weights_scale"])
        w.u32(K.LLM.EXPERT_GATING_FUNC, int(w.C.ExpertGatingFuncType.SIGMOID))
