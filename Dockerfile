# denormd container image.
#
#   docker build -t denormd .
#   docker run --rm -v "$PWD/my-config.yaml:/etc/denormd/config.yaml:ro" \
#     -e DENORMD_POSTGRES=postgresql://user:pass@host:5432/db -p 9464:9464 denormd
#
# The default command runs the daemon with the configuration mounted at
# /etc/denormd/config.yaml (none is baked in) and serves Prometheus /metrics and
# /healthz on 0.0.0.0:9464. Any other command works too, e.g.
#   docker run ... denormd status -c /etc/denormd/config.yaml
# docker-compose.yml at the repository root runs it with Kafka and PostgreSQL.

# ---- build stage: compile the daemon against Debian bookworm's libraries ----
# (GoogleTest and python3 only because configuring the project registers its tests.)
FROM debian:bookworm AS build

RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      g++ cmake ninja-build pkg-config python3 \
      libpqxx-dev librdkafka-dev rapidjson-dev libyaml-cpp-dev libgtest-dev \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /src
COPY . .
RUN cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
 && cmake --build build --target denormd \
 && strip build/denormd

# ---- runtime stage: the binary and the shared libraries it links ----
FROM debian:bookworm-slim

# Runtime counterparts of the -dev packages above (libpq5 comes with libpqxx-6.4).
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libpqxx-6.4 librdkafka++1 librdkafka1 libyaml-cpp0.7 ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 denormd \
 && useradd --system --uid 10001 --gid denormd --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin denormd \
 && mkdir -p /etc/denormd

COPY --from=build /src/build/denormd /usr/local/bin/denormd

USER 10001:10001
EXPOSE 9464

# No curl in slim: ask /healthz over bash's /dev/tcp. Only meaningful for the
# default `run` command, which serves it on port 9464.
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
  CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/9464 && printf 'GET /healthz HTTP/1.0\\r\\nHost: localhost\\r\\n\\r\\n' >&3 && head -n 1 <&3 | grep -q ' 200'"]

# `run` finishes the current batch, commits and exits 0 on SIGTERM.
STOPSIGNAL SIGTERM
ENTRYPOINT ["denormd"]
CMD ["run", "-c", "/etc/denormd/config.yaml", "--metrics-port", "9464", "--metrics-address", "0.0.0.0"]
