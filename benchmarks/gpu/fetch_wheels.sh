#!/usr/bin/env bash
# Download, for CPython 3.12 on x86-64 Linux, the wheels the acceptance run needs that the GPU
# machines lack (they have torch and Triton, but no package registry), into .whl/ at the
# repository root; benchmarks/gpu/acceptance.sh installs them there. Run it here, then carry .whl.
set -euo pipefail
cd "$(dirname "$0")/../.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo /.whl/ >> .git/info/exclude
PLATFORMS=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
           --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
           --platform manylinux1_x86_64 --platform any)
# The versions this project is tested with here (pip freeze of .venv).
PACKAGES=(optuna==5.1.0 alembic==1.20.1 sqlalchemy==2.1.9 greenlet mako==1.4.3 colorlog==6.12.0
          tqdm==4.70.1 pyyaml==6.0.4 typer==0.29.2 click==8.5.1 rich==15.0.0
          markdown-it-py==4.3.0 mdurl==0.1.2 pygments==2.21.0 shellingham==1.5.4
          nvidia-ml-py==13.615.71 packaging==26.3
          optuna-dashboard==0.21.0 bottle==0.13.4)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp "${PLATFORMS[@]}" -d .whl "${PACKAGES[@]}"
ls .whl
