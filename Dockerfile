# syntax=docker/dockerfile:1
# mrtr-proxy image: the proxy in a venv on python:3.11-slim, run as uid 10001, nothing written at run time
# (bytecode is compiled at build time, so a read-only root filesystem works).
#   docker build -t mrtr-proxy:0.1.0 .
# As a sidecar: the proxy joins the legacy server's network namespace, so config/sidecar.yaml's upstream
# (http://127.0.0.1:8000/mcp) is that server, not the proxy's own container; publish 8080 on the server's:
#   docker run -d --name legacy -p 8080:8080 my-legacy-mcp-server        # listens on 127.0.0.1:8000
#   docker run --rm --network container:legacy \
#     -v "$PWD/config/sidecar.yaml:/etc/mrtr-proxy/config.yaml:ro" mrtr-proxy:0.1.0
# (or, on a network of its own: -e MRTR_PROXY_UPSTREAM=http://<server host>:8000/mcp)
# The Helm chart (helm/mrtr-proxy) mounts its config at /etc/mrtr-proxy/config/config.yaml and passes it
# in args; keys are mounted at /etc/mrtr-proxy/keys.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN python -m venv /opt/mrtr-proxy
# README.md is the package's long description (pyproject.toml: readme).
COPY pyproject.toml README.md ./
COPY proxy ./proxy
# pip compiles every module to bytecode here, so the runtime never needs to write any.
RUN /opt/mrtr-proxy/bin/pip install ".[otel]" \
    && /opt/mrtr-proxy/bin/mrtr-proxy --help >/dev/null

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="mrtr-proxy" \
      org.opencontainers.image.description="Makes legacy MCP servers speak MCP 2026-07-28 (multi round-trip requests)" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN groupadd --system --gid 10001 mrtr \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin mrtr
COPY --from=build /opt/mrtr-proxy /opt/mrtr-proxy
ENV PATH=/opt/mrtr-proxy/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 10001:10001
EXPOSE 8080 8081
ENTRYPOINT ["mrtr-proxy"]
CMD ["serve", "--config", "/etc/mrtr-proxy/config.yaml"]
