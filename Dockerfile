# syntax=docker/dockerfile:1
# The baccarat-live server image: `docker build -t baccarat-live .`
#
# Two stages: `build` installs the package and its dependencies (binary wheels: websockets,
# hiredis, msgpack, uvloop) into a virtualenv; `runtime` copies only that virtualenv and the
# browser client onto a clean slim base, so no pip cache, compiler or source tree ships.
# Runs as an unprivileged user; the healthcheck asks the node's own /healthz.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# Metadata first: the dependency layer is rebuilt only when pyproject.toml changes.
COPY pyproject.toml README.md LICENSE ./
COPY server ./server
RUN python -m venv /opt/venv \
 && /opt/venv/bin/pip install --upgrade pip \
 && /opt/venv/bin/pip install . \
 && /opt/venv/bin/python -c "import server.app, uvloop, hiredis, prometheus_client"

FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="baccarat-live" \
      org.opencontainers.image.description="Real-time multiplayer Live Baccarat server" \
      org.opencontainers.image.licenses="MIT"
# A fixed, unprivileged uid/gid (no home, no shell): file ownership is predictable on volumes
# and Kubernetes can check runAsNonRoot.
RUN groupadd --system --gid 10001 baccarat \
 && useradd --system --uid 10001 --gid baccarat --no-create-home --shell /usr/sbin/nologin baccarat \
 && mkdir /data && chown 10001:10001 /data  # `wallet-demo --db /data/...` (compose: a volume)
COPY --from=build /opt/venv /opt/venv
# The browser client, served at / by every node (nginx serves its own copy in compose).
COPY client_demo /app/client_demo
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    BACCARAT_HOST=0.0.0.0 \
    BACCARAT_PORT=8765 \
    BACCARAT_LOG_FORMAT=json \
    BACCARAT_STATIC_DIR=/app/client_demo
WORKDIR /app
USER 10001:10001
EXPOSE 8765
# slim has no curl: the standard library fetches /healthz (urlopen raises on a non-2xx answer).
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('BACCARAT_PORT', '8765'), timeout=2)"]
# SIGTERM is the graceful stop: tables are handed over and clients closed with 1001.
STOPSIGNAL SIGTERM
ENTRYPOINT ["baccarat"]
CMD ["serve"]
