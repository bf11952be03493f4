"""The model suite (issue 49): real models through torch.compile(backend="tensorc")
beside eager and torch.compile's default, on one GPU.

The lists are PyTorch's own benchmark lists (pytorch/pytorch
benchmarks/dynamo/huggingface_models_list.txt and timm_models_list.txt,
with their batch sizes) plus torchvision's classifiers. Every model is
built from its configuration with random weights (no downloads). Modes:
inference (eval, bf16 weights and inputs, no_grad) and training (f32
weights, torch.autocast(bfloat16), forward + loss + backward).

Each case runs in its own process (a crash or an out-of-memory fails that
case alone) and prints one JSON object: pass/fail with the error as the user
sees it; accuracy as Inductor checks it (the compiled result's RMS error
against an f64 eager reference at most 3x eager's own error plus 1e-3,
outputs and, in training, the loss and every gradient; a training step that
draws random numbers, dropout, is checked as PyTorch's runner does: a second
compile with random ops left to PyTorch, Inductor's and tensorc's
fallback_random, every run from one seed); eager, torch.compile
and tensorc ms per call (CUDA events, 3 warm-up calls, median of 10); cold
compile seconds on both sides (empty caches: a fresh Inductor cache folder
and a fresh tensorc cache folder per case); first-call and steady peak
memory (torch.cuda.max_memory_allocated).

    python3 suite.py --list hf,timm,torchvision --modes infer,train --json out.json --markdown out.md
    python3 suite.py --case hf:BertForMaskedLM:infer     # one case, its JSON on stdout
    python3 suite.py --table results/a.json results/b.json   # one table of several runs (latest per case)
    SUITE_TENSORC_FRONTEND=aten python3 suite.py ...     # the backend's frontend (default: its own choice)
    SUITE_PROFILE=DIR python3 suite.py ...               # per case and backend: its kernels' device time
    SUITE_KEEP_GRAPHS=DIR python3 suite.py ...           # the graph files tensorc compiled
    SUITE_HF_CONFIG='{"num_layers": 2}' python3 suite.py --case ...   # config fields over a model's

Batch sizes are the lists' divided by --batch-divisor (default 4: the lists'
sizes are for training throughput on 80 GB; the table says the size used);
sequence length 512 for Hugging Face models (--seq)."""
import argparse
import json
import logging
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

HF = [
    ("AlbertForMaskedLM", 8), ("AlbertForQuestionAnswering", 8), ("AllenaiLongformerBase", 8),
    ("BartForCausalLM", 8), ("BartForConditionalGeneration", 4), ("BertForMaskedLM", 32),
    ("BertForQuestionAnswering", 32), ("BlenderbotForCausalLM", 32), ("BlenderbotForConditionalGeneration", 16),
    ("BlenderbotSmallForCausalLM", 256), ("BlenderbotSmallForConditionalGeneration", 128), ("CamemBert", 32),
    ("DebertaV2ForMaskedLM", 8), ("DebertaV2ForQuestionAnswering", 8), ("DistilBertForMaskedLM", 256),
    ("DistilBertForQuestionAnswering", 512), ("DistillGPT2", 32), ("ElectraForCausalLM", 64),
    ("ElectraForQuestionAnswering", 128), ("GPT2ForSequenceClassification", 8), ("GPTJForCausalLM", 1),
    ("GPTJForQuestionAnswering", 1), ("GPTNeoForCausalLM", 32), ("GPTNeoForSequenceClassification", 32),
    ("GoogleFnet", 32), ("LayoutLMForMaskedLM", 32), ("LayoutLMForSequenceClassification", 32),
    ("M2M100ForConditionalGeneration", 64), ("MBartForCausalLM", 8), ("MBartForConditionalGeneration", 4),
    ("MT5ForConditionalGeneration", 32), ("MegatronBertForCausalLM", 16), ("MegatronBertForQuestionAnswering", 16),
    ("MobileBertForMaskedLM", 256), ("MobileBertForQuestionAnswering", 256), ("OPTForCausalLM", 4),
    ("PLBartForCausalLM", 16), ("PLBartForConditionalGeneration", 8), ("PegasusForCausalLM", 128),
    ("PegasusForConditionalGeneration", 64), ("RobertaForCausalLM", 32), ("RobertaForQuestionAnswering", 32),
    ("T5ForConditionalGeneration", 8), ("T5Small", 8), ("TrOCRForCausalLM", 64), ("XGLMForCausalLM", 32),
    ("XLNetLMHeadModel", 16), ("YituTechConvBert", 32), ("meta-llama/Llama-3.2-1B", 8), ("google/gemma-2-2b", 8),
    ("Qwen/Qwen3-0.6B", 8), ("mistralai/Mistral-7B-Instruct-v0.3", 8),
]
TIMM = [
    ("adv_inception_v3", 128), ("beit_base_patch16_224", 128), ("convnextv2_nano.fcmae_ft_in22k_in1k", 128),
    ("deit_base_distilled_patch16_224", 128), ("deit_tiny_patch16_224.fb_in1k", 128), ("dm_nfnet_f0", 128),
    ("ghostnet_100", 512), ("inception_v3", 128), ("mobilenetv2_100", 128), ("mobilenetv3_large_100", 512),
    ("mobilevit_s", 128), ("nfnet_l0", 128), ("repvgg_a2", 128), ("swin_base_patch4_window7_224", 128),
    ("tf_efficientnet_b0", 128), ("visformer_small", 128), ("vit_base_patch16_siglip_256", 128),
]
TORCHVISION = [
    ("resnet18", 128), ("resnet50", 128), ("resnext50_32x4d", 64), ("wide_resnet50_2", 64), ("mobilenet_v2", 128),
    ("mobilenet_v3_large", 128), ("efficientnet_b0", 128), ("convnext_tiny", 64), ("regnet_y_400mf", 128),
    ("shufflenet_v2_x1_0", 128), ("squeezenet1_1", 128), ("densenet121", 64), ("vgg11_bn", 64), ("alexnet", 128),
    ("googlenet", 128), ("mnasnet1_0", 128), ("vit_b_16", 64), ("swin_t", 64),
]
LISTS = {"hf": HF, "timm": TIMM, "torchvision": TORCHVISION}

# Hugging Face names whose transformers class differs from the name, and
# the configuration changes the PyTorch runner makes (hub models shrunk to
# a few layers: the lists' full sizes do not train on one GPU here).
HF_CLASSES = {"CamemBert": "CamembertForMaskedLM", "DistillGPT2": "GPT2LMHeadModel", "GoogleFnet": "FNetForMaskedLM",
              "AllenaiLongformerBase": "LongformerForMaskedLM", "YituTechConvBert": "ConvBertForMaskedLM",
              "T5Small": "T5ForConditionalGeneration", "meta-llama/Llama-3.2-1B": "LlamaForCausalLM",
              "google/gemma-2-2b": "Gemma2ForCausalLM", "Qwen/Qwen3-0.6B": "Qwen3ForCausalLM",
              "mistralai/Mistral-7B-Instruct-v0.3": "MistralForCausalLM"}
HF_CONFIG = {"DistillGPT2": {"n_layer": 6}, "T5Small": {"d_model": 512, "num_layers": 6, "num_heads": 8},
             "meta-llama/Llama-3.2-1B": {"num_hidden_layers": 4, "hidden_size": 2048, "intermediate_size": 8192,
                                         "num_attention_heads": 32, "num_key_value_heads": 8},
             "google/gemma-2-2b": {"num_hidden_layers": 4, "hidden_size": 2304, "intermediate_size": 9216,
                                   "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256},
             "Qwen/Qwen3-0.6B": {"num_hidden_layers": 4, "hidden_size": 1024, "intermediate_size": 3072,
                                 "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128},
             "mistralai/Mistral-7B-Instruct-v0.3": {"num_hidden_layers": 2, "hidden_size": 4096,
                                                    "intermediate_size": 14336, "num_attention_heads": 32,
                                                    "num_key_value_heads": 8}}


def build_hf(name, batch, seq, device):
    import torch
    import transformers
    cls_name = HF_CLASSES.get(name, name)
    cls = getattr(transformers, cls_name)
    config_cls = cls.config_class
    # SUITE_HF_CONFIG (debugging): JSON fields over the config, e.g. a
    # two-layer model that still shows a failure, small enough to dump.
    config = config_cls(**{**HF_CONFIG.get(name, {}), **json.loads(os.environ.get("SUITE_HF_CONFIG", "{}"))})
    # RoBERTa-style position ids start after the padding index: the released
    # checkpoints have 514 positions for 512 tokens, the default configs 512
    # (an out-of-range embedding index in eager at 512 tokens).
    if getattr(config, "model_type", "") in ("roberta", "camembert", "xlm-roberta", "longformer"):
        config.max_position_embeddings = max(config.max_position_embeddings, seq + config.pad_token_id + 1)
    # (XLNet's config answers -1: no limit.)
    if 0 < getattr(config, "max_position_embeddings", seq) < seq:
        seq = config.max_position_embeddings
    model = cls(config).to(device)
    vocab = getattr(config, "vocab_size", 30522)
    ids = torch.randint(0, vocab, (batch, seq), device=device)
    inputs = {"input_ids": ids}
    if config.is_encoder_decoder:
        inputs["decoder_input_ids"] = torch.randint(0, vocab, (batch, seq), device=device)
    labels = {}
    if "QuestionAnswering" in cls_name:
        labels = {"start_positions": torch.randint(0, seq, (batch,), device=device),
                  "end_positions": torch.randint(0, seq, (batch,), device=device)}
    elif "SequenceClassification" in cls_name:
        labels = {"labels": torch.randint(0, config.num_labels, (batch,), device=device)}
        if getattr(config, "pad_token_id", None) is None:
            config.pad_token_id = 0
    else:
        labels = {"labels": inputs.get("decoder_input_ids", ids)}
    return model, inputs, labels, seq


def build_vision(kind, name, batch, device):
    import torch
    if kind == "timm":
        import timm
        model = timm.create_model(name, pretrained=False)
        size = model.pretrained_cfg.get("input_size", (3, 224, 224))
    else:
        import torchvision
        model = getattr(torchvision.models, name)(weights=None)
        size = (3, 299, 299) if name == "inception_v3" else (3, 224, 224)
    model = model.to(device)
    images = torch.randn(batch, *size, device=device)
    # A model without a classifier (timm's SigLIP towers: num_classes 0)
    # returns features; its loss is theirs (loss_of).
    classes = getattr(model, "num_classes", 1000)
    target = torch.randint(0, classes, (batch,), device=device) if classes > 0 else None
    return model, {"x": images}, {"target": target}, None


def first_tensor(out):
    import torch
    if isinstance(out, torch.Tensor):
        return out
    if hasattr(out, "logits") and out.logits is not None:
        return out.logits
    if hasattr(out, "to_tuple"):
        out = out.to_tuple()
    if isinstance(out, (tuple, list)):
        for o in out:
            t = first_tensor(o)
            if t is not None:
                return t
    return None


def loss_of(model_out, labels, vision):
    import torch.nn.functional as F
    if vision and labels["target"] is not None:
        logits = first_tensor(model_out)
        return F.cross_entropy(logits.float(), labels["target"])
    if vision:
        return first_tensor(model_out).float().square().mean()
    loss = getattr(model_out, "loss", None)
    if loss is None:
        loss = first_tensor(model_out).float().square().mean()
    return loss


def stochastic(model):
    """Whether a training step draws random numbers (dropout modules, or a
    transformers config's dropout probabilities: attention dropout is
    functional)."""
    import torch
    if any(isinstance(m, torch.nn.modules.dropout._DropoutNd) and m.p > 0 for m in model.modules()):
        return True
    config = getattr(model, "config", None)
    items = config.to_dict().items() if hasattr(config, "to_dict") else ()
    return any("dropout" in k and isinstance(v, float) and v > 0 for k, v in items)


SEED = 1234


def reseed():
    """The RNG state every accuracy run starts from: with random ops left
    to PyTorch (fallback_random), eager, the f64 reference and the compiled
    run draw the same dropout masks."""
    import torch
    torch.manual_seed(SEED)


def rng_after_seed():
    """The CUDA generator's state right after reseed()."""
    import torch
    saved = torch.cuda.get_rng_state()
    reseed()
    state = torch.cuda.get_rng_state()
    torch.cuda.set_rng_state(saved)
    return state


def rms(a, b):
    return ((a.double() - b.double()).square().mean().sqrt()).item()


def accurate(res, eager, ref, what, problems, low_precision):
    """Inductor's check: the result's RMS error against the f64 reference at
    most 3x eager's own plus a tolerance (relative to the reference's RMS):
    1e-2 where the computation is bf16 (inference in bf16, AMP training), as
    Inductor's runner tolerates for reduced precision, else 1e-3."""
    scale = max(ref.double().square().mean().sqrt().item(), 1e-12)
    e_res, e_eager = rms(res, ref) / scale, rms(eager, ref) / scale
    if not math.isfinite(e_res) or e_res > 3 * e_eager + (1e-2 if low_precision else 1e-3):
        problems.append(f"{what}: error {e_res:.2e} vs eager's {e_eager:.2e}")
    if res.dtype != eager.dtype:
        problems.append(f"{what}: dtype {res.dtype}, eager {eager.dtype}")


class CompileTimes(logging.Handler):
    """The tensorc bridge's debug lines of one case: seconds in the compiler
    processes ("compiled ... in S s") and in loading artifacts (NVRTC and
    module load: "loaded ... in S s"), summed, and the longest load."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.compiler_s = self.load_s = self.longest_load_s = 0.0

    def emit(self, record):
        import re
        m = re.match(r"tensorc\.torch: (compiled|loaded) .* in ([0-9.]+) s", record.getMessage())
        if not m:
            return
        seconds = float(m.group(2))
        if m.group(1) == "compiled":
            self.compiler_s += seconds
        else:
            self.load_s += seconds
            self.longest_load_s = max(self.longest_load_s, seconds)


def time_ms(fn, warmup=3, iters=10):
    import torch
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def profile_kernels(fn, path, steps=3):
    """SUITE_PROFILE=DIR: where `steps` warm calls spend device time, kernel
    by kernel (CUPTI through torch.profiler), summed per kernel name, largest
    first, as JSON in `path`; and the calls' span between CUDA events."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        start.record()
        for _ in range(steps):
            fn()
        end.record()
        torch.cuda.synchronize()
    kernels = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            k = kernels.setdefault(e.name[:160], [0, 0.0])
            k[0] += 1
            k[1] += e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total
    rows = sorted(([n, c / steps, t / steps / 1000] for n, (c, t) in kernels.items()), key=lambda r: -r[2])
    with open(path, "w") as f:
        json.dump({"step_ms": start.elapsed_time(end) / steps, "device_ms": sum(r[2] for r in rows),
                   "launches": sum(r[1] for r in rows), "kernels_per_step_ms": rows[:60]}, f, indent=1)


def run_case(spec, seq, divisor, backends=("inductor", "tensorc"), timing=True):
    import copy
    import torch
    kind, name, mode = spec.split(":")
    full = dict(LISTS[kind])[name]
    batch = max(1, full // divisor)
    device = "cuda"
    torch.manual_seed(0)
    vision = kind != "hf"
    if vision:
        model, inputs, labels, seq = build_vision(kind, name, batch, device)
    else:
        model, inputs, labels, seq = build_hf(name, batch, seq, device)
    result = {"case": spec, "list": kind, "model": name, "mode": mode, "batch": batch, "seq": seq,
              "gpu": torch.cuda.get_device_name()}
    train = mode == "train"
    if train:
        model.train()
        call_inputs = {**inputs, **({} if vision else labels)}
    else:
        model = model.eval().to(torch.bfloat16)
        call_inputs = {k: (v.to(torch.bfloat16) if v.is_floating_point() else v) for k, v in inputs.items()}

    def step(m, use_amp=True, inputs_=None):
        inputs_ = inputs_ or call_inputs
        if not train:
            with torch.no_grad():
                return first_tensor(m(*inputs_.values()) if vision else m(**inputs_)), None
        for p in model.parameters():
            p.grad = None
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=use_amp):
            out = m(*inputs_.values()) if vision else m(**inputs_)
            loss = loss_of(out, labels, vision)
        loss.backward()
        return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    def reference_run(dtype):
        """The model and inputs in `dtype`, without autocast: its output (the
        loss in training) and its own gradients, from the seeded RNG state."""
        reference = copy.deepcopy(model).to(dtype)
        for p in reference.parameters():
            p.grad = None  # the copy carries eager's
        ref_inputs = {k: (v.to(dtype) if v.is_floating_point() else v) for k, v in call_inputs.items()}
        reseed()
        try:
            if not train:
                with torch.no_grad():
                    return first_tensor(reference(*ref_inputs.values()) if vision else reference(**ref_inputs)), None
            with torch.autocast("cuda", enabled=False):
                out = reference(*ref_inputs.values()) if vision else reference(**ref_inputs)
                ref_loss = loss_of(out, labels, vision)
            ref_loss.backward()
            return ref_loss.detach(), {n: p.grad for n, p in reference.named_parameters() if p.grad is not None}
        finally:
            del reference
            torch.cuda.empty_cache()

    # eager, then the f64 reference (its own gradients, not the model's),
    # from one RNG state (dropout masks alike where random ops run in PyTorch)
    reseed()
    try:
        eager_out, eager_grads = step(model)
    except Exception as ex:
        # The model does not run in eager as the suite asks (FNet's FFT has
        # no bf16 kernel): no case for a compiler to pass or fail.
        result["eager_error"] = f"{type(ex).__name__}: {ex}".splitlines()[0][:400]
        return result
    # Random ops a config does not name (torchvision's StochasticDepth, timm's
    # DropPath: bernoulli_ on an empty tensor) show as the generator's state
    # having moved during the eager step.
    drew = not torch.equal(torch.cuda.get_rng_state(), rng_after_seed())
    random_ops = train and (stochastic(model) or drew)
    result["accuracy_rng"] = "fallback_random" if random_ops else "none drawn"
    try:
        ref_out, ref_grads = reference_run(torch.float64)
        result["reference"] = "f64"
    except Exception:
        # As PyTorch's runner: where the model cannot run in f64 (XGLM fills
        # a mask with f64's minimum in a default-dtype tensor), f32.
        ref_out, ref_grads = reference_run(torch.float32)
        result["reference"] = "f32"
    if timing:
        result["eager_ms"] = time_ms(lambda: step(model))

    for backend in backends:
        import torch._dynamo
        torch._dynamo.reset()
        cache = tempfile.mkdtemp(prefix=f"suite-{backend}-")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
        os.environ["TENSORC_CACHE_DIR"] = cache + "/kernels"
        graphs = []  # what the tensorc backend made of each Dynamo graph
        times = CompileTimes()
        if backend == "tensorc":
            import tensorc.torch
            logging.getLogger("tensorc").addHandler(times)
            logging.getLogger("tensorc").setLevel(logging.DEBUG)
            if os.environ.get("SUITE_KEEP_GRAPHS"):  # the compiler's command lines and times, beside the graphs
                os.makedirs(os.environ["SUITE_KEEP_GRAPHS"], exist_ok=True)
                handler = logging.FileHandler(os.path.join(os.environ["SUITE_KEEP_GRAPHS"],
                                                           f"{name.replace('/', '_')}-{mode}.log"))
                logging.getLogger("tensorc").addHandler(handler)
                logging.getLogger("tensorc").setLevel(logging.DEBUG)

            capture_s = [0.0]

            def recording_backend(gm, example_inputs, **more):
                t0 = time.perf_counter()
                # SUITE_TENSORC_FRONTEND=aten|fx: the backend's frontend
                # (default: its own choice, the ATen frontend).
                frontend = os.environ.get("SUITE_TENSORC_FRONTEND")
                extra = {"frontend": frontend} if frontend else {}
                call = tensorc.torch.tensorc_backend(gm, example_inputs, cache_dir=cache, **extra, **more)
                capture_s[0] += time.perf_counter() - t0
                graphs.append(call)
                return call
            compiled = torch.compile(model, backend=recording_backend)
        else:
            compiled = torch.compile(model)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        used_before = torch.cuda.mem_get_info()[1] - torch.cuda.mem_get_info()[0]
        caught = []
        try:
            import warnings
            start = time.perf_counter()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                out, grads = step(compiled)
            torch.cuda.synchronize()
            result[f"{backend}_compile_s"] = time.perf_counter() - start
            if backend == "tensorc":
                # Where the first call's time went (the timed compile only;
                # fallback_random's second compile comes later).
                result["tensorc_compiler_s"] = round(times.compiler_s, 2)
                result["tensorc_load_s"] = round(times.load_s, 2)
                result["tensorc_longest_load_s"] = round(times.longest_load_s, 2)
                logging.getLogger("tensorc").removeHandler(times)
                result["tensorc_warnings"] = sorted({str(w.message)[:300] for w in caught
                                                     if "tensorc" in str(w.message)})[:6]
                programs = [g.program for g in graphs if getattr(g, "program", None) is not None]
                result["tensorc_graphs"] = len(graphs)
                result["tensorc_capture_s"] = capture_s[0]
                result["tensorc_partitions"] = sum(len(getattr(p, "partitions", ())) for p in programs)
                result["tensorc_fallback_ops"] = sorted({f["op"] for p in programs if hasattr(p, "explain")
                                                         for f in p.explain()["fallbacks"]})
            result[f"{backend}_first_peak_mib"] = (torch.cuda.max_memory_allocated() - base) / 2**20
            # The device's used memory after the first call (tensorc's own
            # buffers are outside torch's allocator; torch's cached blocks in).
            free, total = torch.cuda.mem_get_info()
            result[f"{backend}_device_used_mib"] = (total - free - used_before) / 2**20
            if random_ops:
                # As PyTorch's runner checks accuracy: random ops left to
                # PyTorch's generator (Inductor's fallback_random, tensorc's
                # option of that name), every run from one seed. A second
                # compile, after the timed one (whose masks are the
                # backend's own draw).
                if timing:
                    torch.cuda.reset_peak_memory_stats()
                    result[f"{backend}_ms"] = time_ms(lambda: step(compiled))
                    result[f"{backend}_steady_peak_mib"] = (torch.cuda.max_memory_allocated() - base) / 2**20
                torch._dynamo.reset()
                if backend == "tensorc":
                    checked = torch.compile(model, backend=lambda gm, ex: recording_backend(gm, ex,
                                                                                            fallback_random=True))
                else:
                    import torch._inductor.config as inductor_config
                    inductor_config.fallback_random = True
                    checked = torch.compile(model)
                try:
                    reseed()
                    out, grads = step(checked)
                finally:
                    if backend != "tensorc":
                        inductor_config.fallback_random = False
                del checked
            problems = []
            accurate(out, eager_out, ref_out, "output" if not train else "loss", problems, True)
            if train:
                missing = sorted(set(eager_grads) - set(grads))
                if missing:
                    problems.append(f"no gradient for {missing[:3]}")
                for n in eager_grads:
                    if n in grads:
                        accurate(grads[n], eager_grads[n], ref_grads[n].to(eager_grads[n].dtype), f"grad {n}",
                                 problems, True)
            result[f"{backend}_accuracy"] = "pass" if not problems else "; ".join(problems[:3])
            if timing and not random_ops:
                torch.cuda.reset_peak_memory_stats()
                result[f"{backend}_ms"] = time_ms(lambda: step(compiled))
                result[f"{backend}_steady_peak_mib"] = (torch.cuda.max_memory_allocated() - base) / 2**20
            result[f"{backend}_pass"] = not problems
            if os.environ.get("SUITE_PROFILE"):
                os.makedirs(os.environ["SUITE_PROFILE"], exist_ok=True)
                profile_kernels(lambda: step(compiled), os.path.join(
                    os.environ["SUITE_PROFILE"], f"{name.replace('/', '_')}-{mode}-{backend}.json"))
        except Exception as ex:  # the error as the user sees it
            if backend == "tensorc":
                result["tensorc_warnings"] = sorted({str(w.message)[:300] for w in caught
                                                     if "tensorc" in str(w.message)})[:6]
            msg = f"{type(ex).__name__}: {ex}"
            import traceback
            result[f"{backend}_traceback"] = traceback.format_exc().splitlines()[-40:]
            result[f"{backend}_pass"] = False
            result[f"{backend}_error"] = msg.strip().splitlines()[0][:400] if msg.strip() else type(ex).__name__
        if backend == "tensorc" and os.environ.get("SUITE_KEEP_GRAPHS"):
            # The graph files tensorc compiled, to study the compile offline.
            import shutil
            keep = os.path.join(os.environ["SUITE_KEEP_GRAPHS"], name.replace("/", "_") + "-" + mode)
            os.makedirs(keep, exist_ok=True)
            for f in os.listdir(cache):
                if f.endswith(".json"):
                    shutil.copy(os.path.join(cache, f), keep)
        del compiled
        torch.cuda.empty_cache()
    return result


def markdown(results):
    lines = ["| model | mode | batch | tensorc | eager ms | compile ms | tensorc ms | vs compile | "
             "compile s (inductor / tensorc) | first-call MiB (inductor / tensorc) | error |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        if r.get("eager_error"):
            lines.append(f"| {r['model']} | {r['mode']} | {r.get('batch', '-')} | eager fails | - | - | - | - | - | - | "
                         f"{r['eager_error'][:160]} |")
            continue
        ok = r.get("tensorc_pass")
        ratio = (r["inductor_ms"] / r["tensorc_ms"]) if ok and r.get("inductor_ms") else None
        f = lambda k: f"{r[k]:.2f}" if isinstance(r.get(k), (int, float)) else "-"
        lines.append(f"| {r['model']} | {r['mode']} | {r.get('batch', '-')} | {'pass' if ok else 'FAIL'} | "
                     f"{f('eager_ms')} | {f('inductor_ms')} | {f('tensorc_ms')} | "
                     f"{f'{ratio:.2f}x' if ratio else '-'} | {f('inductor_compile_s')} / {f('tensorc_compile_s')} | "
                     f"{f('inductor_first_peak_mib')} / {f('tensorc_first_peak_mib')} | "
                     f"{(r.get('tensorc_error') or ('' if ok else r.get('tensorc_accuracy', '')))[:160]} |")
    summary = []
    for mode in ("infer", "train"):
        rs = [r for r in results if r["mode"] == mode and not r.get("eager_error")]
        skipped = sum(1 for r in results if r["mode"] == mode and r.get("eager_error"))
        if not rs:
            continue
        passed = [r for r in rs if r.get("tensorc_pass")]
        ratios = [r["inductor_ms"] / r["tensorc_ms"] for r in passed if r.get("inductor_ms") and r.get("tensorc_ms")]
        geo = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else float("nan")
        summary.append(f"{mode}: {len(passed)}/{len(rs)} pass; geomean vs torch.compile {geo:.2f}x over "
                       f"{len(ratios)} models" + (f" ({skipped} where eager itself fails, not counted)" if skipped else ""))
    return "\n".join(lines) + "\n\n" + "\n".join(summary) + "\n"


def table_of(paths):
    """The markdown table of several runs' results (a later file's case
    replaces an earlier one's), in the lists' order."""
    latest = {}
    for path in paths:
        with open(path) as f:
            for r in json.load(f):
                latest[r["case"]] = r
    order = {f"{kind}:{name}:{mode}": i for i, (kind, name, mode) in enumerate(
        (kind, name, mode) for kind in LISTS for name, _ in LISTS[kind] for mode in ("infer", "train"))}
    return markdown(sorted(latest.values(), key=lambda r: order.get(r["case"], len(order))))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", default="hf,timm,torchvision")
    ap.add_argument("--models", default="", help="comma-separated names (default: every model of the lists)")
    ap.add_argument("--modes", default="infer,train")
    ap.add_argument("--cases", default="", help="comma-separated KIND:NAME:MODE cases instead of the lists")
    ap.add_argument("--case", help="run one case KIND:NAME:MODE in this process; its JSON on stdout")
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--batch-divisor", type=int, default=4)
    ap.add_argument("--timeout", type=int, default=600, help="seconds per case")
    ap.add_argument("--jobs", type=int, default=1,
                    help="cases at a time, on the GPUs in turn (more jobs than GPUs only with --no-timing)")
    ap.add_argument("--backends", default="inductor,tensorc",
                    help="which compiled runs beside eager (tensorc alone: a pass-rate sweep without Inductor's compiles)")
    ap.add_argument("--no-timing", action="store_true",
                    help="pass/fail and accuracy only: no timed runs, so cases may share a GPU")
    ap.add_argument("--json")
    ap.add_argument("--markdown")
    ap.add_argument("--table", nargs="+", metavar="JSON",
                    help="print the table of earlier runs' --json files (the latest of each case), run nothing")
    args = ap.parse_args()
    if args.table:
        print(table_of(args.table), end="")
        return
    if args.case:
        print("SUITE-RESULT " + json.dumps(run_case(args.case, args.seq, args.batch_divisor,
                                                     tuple(args.backends.split(",")), not args.no_timing)), flush=True)
        return
    wanted = set(filter(None, args.models.split(",")))
    cases = [f"{kind}:{name}:{mode}" for kind in args.list.split(",") for name, _ in LISTS[kind]
             if not wanted or name in wanted for mode in args.modes.split(",")]
    if args.cases:
        cases = args.cases.split(",")
    # --jobs N: N cases at a time, each on its own GPU (CUDA_VISIBLE_DEVICES):
    # a case's timings then share the host's CPUs with the others, not its GPU.
    import concurrent.futures
    import queue
    import torch
    count = max(1, torch.cuda.device_count())
    if args.jobs > count and not args.no_timing:
        sys.exit(f"suite: --jobs {args.jobs} on {count} GPU(s) would time cases sharing a GPU (add --no-timing)")
    gpus = queue.Queue()
    for i in range(args.jobs):
        gpus.put(i % count)

    def run_one(case):
        gpu = gpus.get()
        start = time.perf_counter()
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(gpu)) if args.jobs > 1 else None
        try:
            p = subprocess.run([sys.executable, __file__, "--case", case, "--seq", str(args.seq),
                                "--batch-divisor", str(args.batch_divisor), "--backends", args.backends]
                               + (["--no-timing"] if args.no_timing else []), capture_output=True, text=True,
                               timeout=args.timeout, env=env)
            lines = [ln for ln in p.stdout.splitlines() if ln.startswith("SUITE-RESULT ")]
            if lines:
                r = json.loads(lines[-1][len("SUITE-RESULT "):])
            else:
                lines = p.stderr.strip().splitlines() or ["no output"]
                r = {"case": case, "tensorc_pass": False, "tensorc_error": f"the case process failed: {lines[-1]}",
                     "stderr_tail": lines[-30:]}
        except subprocess.TimeoutExpired:
            r = {"case": case, "tensorc_pass": False, "tensorc_error": f"over {args.timeout} s"}
        finally:
            gpus.put(gpu)
        kind, name, mode = case.split(":")
        r.update({"list": kind, "model": name, "mode": mode, "wall_s": time.perf_counter() - start,
                  "parallel_jobs": args.jobs})
        return r

    results = []
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        # Written as each case ends: a run stopped early keeps what finished.
        for done in concurrent.futures.as_completed([pool.submit(run_one, c) for c in cases]):
            r = done.result()
            results.append(r)
            print(json.dumps(r), flush=True)
            if args.json:
                with open(args.json, "w") as f:
                    json.dump(results, f, indent=1)
    if args.jobs > count:
        # Cases that shared a GPU and ran out of its memory: again, alone.
        crowded = [r["case"] for r in results if "out of memory" in r.get("tensorc_error", "").lower()]
        gpus = queue.Queue()
        gpus.put(0)
        for case in crowded:
            r = run_one(case)
            r["parallel_jobs"] = 1
            results = [x for x in results if x["case"] != case] + [r]
            print(json.dumps(r), flush=True)
            if args.json:
                with open(args.json, "w") as f:
                    json.dump(results, f, indent=1)
    order = {c: i for i, c in enumerate(cases)}
    results.sort(key=lambda r: order[r["case"]])
    table = markdown(results)
    print(table)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(table)


if __name__ == "__main__":
    main()
