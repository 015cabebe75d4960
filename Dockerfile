# One image for every service of docker-compose.yml (migrate, scheduler, workers, dashboard).
# torch comes from PyPI with its CUDA runtime; the NVIDIA container toolkit provides the driver.
# Triton compiles a small C stub for the CUDA driver at first use, so the image carries a C
# compiler (gcc) and the Python headers (part of this base image).
FROM python:3.12-slim
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 TUNER_CACHE_DIR=/cache TUNER_KERNEL_ROOTS=/kernels \
    TUNER_ARTIFACT_DIR=/artifacts TRITON_CACHE_DIR=/cache/triton
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml README.md constraints.txt ./
COPY tuner ./tuner
COPY search_spaces ./search_spaces
COPY workers ./workers
COPY db ./db
# The volumes mount over these folders; created here, owned by the service user, so a fresh
# named volume starts writable by it.
RUN pip install -c constraints.txt . && useradd --create-home --uid 1000 tuner \
    && mkdir -p /cache/triton /kernels /artifacts && chown -R tuner /cache /kernels /artifacts \
    && python -c "import shutil, sys; sys.exit(shutil.which('gcc') is None)"
USER tuner
ENTRYPOINT ["tuner"]
CMD ["--help"]
