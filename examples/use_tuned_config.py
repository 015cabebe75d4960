"""Production use of tuned configs, without the service's database: read an exported file and
launch the kernel with its tuned config.

    tuner tune matmul --shape M=256,N=256,K=256 --dtype fp16 --trials 10
    tuner export --out best.json
    TRITON_INTERPRET=1 python examples/use_tuned_config.py best.json   # no GPU: interpreter

Shows both ways in: the ``tuned`` decorator (the config is looked up at call time) and
``triton_configs`` (the stored configs as ``@triton.autotune`` candidates).
"""

from __future__ import annotations

import sys

import torch

from tuner.kernels.matmul import launch as launch_matmul
from tuner.serving.production import triton_configs
from tuner.serving.production import tuned

SOURCE = sys.argv[1] if len(sys.argv) > 1 else "best.json"


@tuned("matmul", problem=lambda a, b, c: {"M": a.shape[0], "N": b.shape[1], "K": a.shape[1]},
       dtype="fp16", source=SOURCE)
def matmul(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, *, config: dict) -> None:
    problem = {"M": a.shape[0], "N": b.shape[1], "K": a.shape[1]}
    # config is a TunedConfig: a dict of parameters that also says where it came from
    tuned_for = ",".join(f"{k}={v}" for k, v in (config.problem or {}).items())
    print(f"matmul {problem} fp16: tier {config.tier} (tuned for {tuned_for} on "
          f"{config.device_kind}): {_text(config)}")
    launch_matmul({"a": a, "b": b, "c": c}, problem, config)


def _text(config: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in config.items() if v is not None)


def main() -> None:
    a = torch.randn(256, 256).half()
    b = torch.randn(256, 256).half()
    c = torch.empty(256, 256).half()
    matmul(a, b, c)
    error = (c.float() - a.float() @ b.float()).norm() / (a.float() @ b.float()).norm()
    print(f"launched with the tuned config; relative error {error:.1e}")
    print("as @triton.autotune candidates:")
    for candidate in triton_configs("matmul", "fp16", source=SOURCE):
        print(f"  {_text(candidate.all_kwargs())}")


if __name__ == "__main__":
    main()
