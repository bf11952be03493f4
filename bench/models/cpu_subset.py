"""The model suite's CPU subset (issue 49): what Debian's PyTorch 1.13 and
torchvision 0.14 allow, through tensorc.torch.compile(..., frontend="aten",
target="cpu"), against eager in f32: torchvision's classifiers (random
weights, a small image), plus their training step's gradients for
--train. One line a model (pass/FAIL, the ops that ran in PyTorch, compile
seconds), then "N/M pass".

    python3 cpu_subset.py TENSORC CACHE_DIR [--models a,b] [--train] [--size 64]"""
import argparse
import sys
import time
import warnings

import torch

import tensorc.torch as tt

MODELS = ["resnet18", "resnet50", "resnext50_32x4d", "wide_resnet50_2", "mobilenet_v2", "mobilenet_v3_small",
          "mobilenet_v3_large", "efficientnet_b0", "convnext_tiny", "regnet_y_400mf", "shufflenet_v2_x1_0",
          "squeezenet1_1", "densenet121", "vgg11_bn", "alexnet", "googlenet", "mnasnet1_0", "vit_b_16", "swin_t"]
# Models that need a larger image than --size (their strides or patches).
MIN_SIZE = {"alexnet": 64, "vit_b_16": 224, "swin_t": 224, "googlenet": 64}


def randomized(model):
    """Parameters that torchvision initializes to one value (ViT's zero
    head) made random, so that the outputs depend on every layer."""
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            if p.numel() > 1 and (p == p.flatten()[0]).all():
                p.copy_(torch.randn(p.shape, generator=g) * 0.02 + p)
    return model


def relative_error(got, want):
    return ((got.double() - want.double()).abs().max() / want.double().abs().max().clamp_min(1e-6)).item()


def build(name):
    import torchvision
    torch.manual_seed(0)
    kwargs = {"num_classes": 10}
    if name == "googlenet":
        kwargs.update(aux_logits=False, init_weights=True)
    return randomized(getattr(torchvision.models, name)(**kwargs))


def training_step(call, model, image):
    """Output and every parameter's gradient of mean(out^2), dropout's masks
    drawn from one seed."""
    model.zero_grad()
    torch.manual_seed(7)
    out = call(image)
    out.square().mean().backward()
    return [out.detach()] + [p.grad.clone() for p in model.parameters()]


def error_against(got, ref):
    """The largest error of any result relative to that result's largest
    reference value."""
    return max(relative_error(g, r) for g, r in zip(got, ref))


def check(name, tensorc, cache, size, train):
    import copy
    model = build(name)
    model = model.train() if train else model.eval()
    s = max(size, MIN_SIZE.get(name, 0))
    torch.manual_seed(1)
    image = torch.randn(2, 3, s, s)
    reference = copy.deepcopy(model).double()
    eager_model = copy.deepcopy(model)
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # Training: random ops (dropout, stochastic depth) draw from PyTorch's
        # generator, so the seeded step reproduces eager's masks (Inductor's
        # accuracy check does the same with fallback_random).
        fast = tt.compile(model, (image,), frontend="aten", cache_dir=cache, tensorc_path=tensorc,
                          fallback_random=train)
        if train:
            got = training_step(fast, model, image)
        else:
            with torch.no_grad():
                got = [fast(image)]
    seconds = time.perf_counter() - start
    fallbacks = sorted({f["op"] for f in fast.explain()["fallbacks"]})
    problems = [str(w.message)[:200] for w in caught if "did not compile" in str(w.message)]
    if train:
        # Against an f64 reference, with eager's own error (f32, another
        # summation order) as the scale: training-mode batch norm over a
        # small batch cancels most of a gradient, leaving float noise.
        ref = training_step(reference, reference, image.double())
        want = training_step(eager_model, eager_model, image)
        err, eager_err = error_against(got, ref), error_against(want, ref)
        ok = err <= 3 * eager_err + 1e-4
    else:
        with torch.no_grad():
            err = relative_error(got[0], reference(image.double()))
        ok = err < 1e-4
    return ok and not problems, err, fallbacks, seconds, problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tensorc")
    ap.add_argument("cache")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--train", action="store_true")
    ap.add_argument("--size", type=int, default=32)
    args = ap.parse_args()
    names = args.models.split(",")
    passed = 0
    for name in names:
        try:
            ok, err, fallbacks, seconds, problems = check(name, args.tensorc, args.cache, args.size, args.train)
            line = f"{'pass' if ok else 'FAIL'} {name}: error {err:.1e}, {seconds:.1f} s"
            if fallbacks:
                line += f", in PyTorch: {' '.join(fallbacks)}"
            if problems:
                line += f"; {problems[0]}"
        except Exception as ex:  # the error as the user sees it
            ok, line = False, f"FAIL {name}: {type(ex).__name__}: {str(ex).splitlines()[0][:300]}"
        passed += ok
        print(line, flush=True)
    print(f"{passed}/{len(names)} pass")
    sys.exit(0 if passed == len(names) else 1)


if __name__ == "__main__":
    main()
