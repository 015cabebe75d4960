# One image for every service of docker-compose.yml (scheduler, workers, dashboard).
# torch comes from PyPI with its CUDA runtime; the NVIDIA container toolkit provides the driver.
FROM python:3.12-slim
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 TUNER_CACHE_DIR=/cache TUNER_KERNEL_ROOTS=/kernels
WORKDIR /app
COPY pyproject.toml README.md ./
COPY tuner ./tuner
COPY search_spaces ./search_spaces
COPY workers ./workers
COPY db ./db
RUN pip install . && useradd --create-home --uid 1000 tuner && mkdir -p /cache /kernels \
    && chown tuner /cache /kernels
USER tuner
ENTRYPOINT ["tuner"]
CMD ["--help"]
