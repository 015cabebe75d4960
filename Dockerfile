# One image for every service of docker-compose.yml (migrate, scheduler, workers, dashboard).
# Needs BuildKit (Docker 23+ builds with it by default; on older engines install buildx).
#
# Build arguments (all optional):
#   BASE_IMAGE         the base; default python:3.12-slim. A plain Debian or Ubuntu image works
#                      too: without a Python that has venv and its headers, Debian's python3,
#                      python3-venv and python3-dev are installed (scripts/compose_check.sh
#                      builds on a debootstrapped bookworm).
#   TORCH_REQUIREMENT  installed before the project, e.g. torch==2.13.0+cpu for a host without
#                      a GPU; empty (the default): torch from the project's requirements,
#                      PyPI's CUDA build, for GPU hosts.
#   TORCH_INDEX_URL    an extra index for TORCH_REQUIREMENT (https://download.pytorch.org/whl/cpu).
# Build secrets (optional; never written to a layer: mounted only while pip runs):
#   pip_conf  a pip configuration file (index URLs, find-links, timeouts), as PIP_CONFIG_FILE;
#   pip_ca    a CA bundle for the package index (PIP_CERT, SSL_CERT_FILE).
#   docker build --secret id=pip_conf,src=pip.conf --secret id=pip_ca,src=ca.pem .
#
# Triton compiles a small C stub for the CUDA driver at first use, so the image carries a C
# compiler (gcc) and the Python headers. The GPU driver comes from the NVIDIA container
# toolkit at run time.
ARG BASE_IMAGE=python:3.12-slim
FROM ${BASE_IMAGE}
ARG TORCH_REQUIREMENT=""
ARG TORCH_INDEX_URL=""
ENV PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/venv PATH=/opt/venv/bin:$PATH \
    TUNER_CACHE_DIR=/cache TUNER_KERNEL_ROOTS=/kernels TUNER_ARTIFACT_DIR=/artifacts \
    TRITON_CACHE_DIR=/cache/triton
# gcc and libc headers always; Debian's Python only where the base has none with venv and
# Python.h (python:3.12-slim has both, in /usr/local).
RUN set -eu; \
    pkgs="gcc libc6-dev ca-certificates"; \
    if ! python3 -c 'import ensurepip, os, sysconfig, venv; \
os.stat(os.path.join(sysconfig.get_paths()["include"], "Python.h"))' 2>/dev/null; then \
        pkgs="$pkgs python3 python3-venv python3-dev"; \
    fi; \
    apt-get update; \
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $pkgs; \
    rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml README.md constraints.txt ./
COPY tuner ./tuner
COPY search_spaces ./search_spaces
COPY workers ./workers
COPY db ./db
# A virtual environment: works on a base whose Python belongs to Debian (PEP 668) as on
# python:*-slim. The pip settings arrive as secrets, used by this step only; pip's download
# cache is a cache mount (kept by the builder for the next build, in no layer).
RUN --mount=type=secret,id=pip_conf --mount=type=secret,id=pip_ca \
    --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    set -eu; \
    if [ -s /run/secrets/pip_conf ]; then export PIP_CONFIG_FILE=/run/secrets/pip_conf; fi; \
    if [ -s /run/secrets/pip_ca ]; then \
        export PIP_CERT=/run/secrets/pip_ca SSL_CERT_FILE=/run/secrets/pip_ca; fi; \
    python3 -m venv /opt/venv; \
    if [ -n "$TORCH_REQUIREMENT" ]; then \
        if [ -n "$TORCH_INDEX_URL" ]; then \
            pip install --extra-index-url "$TORCH_INDEX_URL" "$TORCH_REQUIREMENT"; \
        else pip install "$TORCH_REQUIREMENT"; fi; \
    fi; \
    pip install -c constraints.txt .
# The volumes mount over these folders; created here, owned by the service user, so a fresh
# named volume starts writable by it.
RUN useradd --create-home --uid 1000 tuner \
    && mkdir -p /cache/triton /kernels /artifacts && chown -R tuner /cache /kernels /artifacts \
    && python -c "import shutil, sys; sys.exit(shutil.which('gcc') is None)"
USER tuner
ENTRYPOINT ["tuner"]
CMD ["--help"]
