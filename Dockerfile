# syntax=docker/dockerfile:1
# The controller-manager image: `docker build -t controller-manager:0.1.0 .`
# Stage 1 builds wheels (the project's and every dependency's); stage 2 installs them into a clean
# slim Python with no compiler, no build tools and no wheel files left behind, and runs as non-root.

ARG PYTHON_IMAGE=python:3.12-slim

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
WORKDIR /src
# Only what the wheel is built from (.dockerignore keeps everything else out of the context).
COPY pyproject.toml README.md ./
COPY controller_manager ./controller_manager
RUN python -m pip wheel --wheel-dir /wheels .

FROM ${PYTHON_IMAGE} AS runtime
# Re-declared: a global ARG is visible to FROM lines only.
ARG PYTHON_IMAGE
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=unknown
LABEL org.opencontainers.image.title="controller-manager" \
      org.opencontainers.image.description="An asyncio-native replacement for kube-controller-manager's workload controllers" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${PYTHON_IMAGE}"
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
# The wheels are bind-mounted from the builder, never copied: no layer of this image holds them.
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    python -m pip install --no-index --find-links=/wheels controller-manager \
    && python -m pip uninstall --yes pip \
    && groupadd --gid 65532 nonroot \
    && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin nonroot
# Numeric, so the kubelet can verify runAsNonRoot without reading /etc/passwd.
USER 65532:65532
WORKDIR /
# --secure-port: /metrics, /healthz, /readyz over HTTPS.
EXPOSE 10257
ENTRYPOINT ["controller-manager"]
