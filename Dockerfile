# syntax=docker/dockerfile:1
# kilnd image: built with the same script and Makefile as a developer machine, shipped with
# runtime libraries only.  docker build -t kiln/kilnd:latest .

# ---- build -------------------------------------------------------------------------------
FROM debian:bookworm AS build
WORKDIR /src
# Dependencies first, so a source change does not reinstall them.
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN bash scripts/install-deps.sh && rm -rf /var/lib/apt/lists/*
COPY . .
ENV CCACHE_DIR=/ccache
RUN --mount=type=cache,target=/ccache make build
# Debug info stays in the build stage; symbols stay for readable backtraces.
RUN mkdir -p /out \
 && objcopy --strip-debug build/server/kilnd /out/kilnd \
 && objcopy --strip-debug build/client/kiln /out/kiln

# ---- runtime -----------------------------------------------------------------------------
FROM debian:bookworm
# Runtime halves of the -dev packages in scripts/install-deps.sh. lld-19 provides
# /usr/lib/llvm-19/bin/ld.lld, which kilnd runs to link artifacts. OpenBLAS and oneDNN: the
# tuner runs candidates of targets with libraries=openblas,dnnl, which load them. libpq5:
# the fleet tier (--postgres).
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libgrpc++1.51 libgrpc29 libprotobuf32 libabsl20220623 \
      libsqlite3-0 libspdlog1.10 libfmt9 libssl3 \
      libllvm19 lld-19 libonnx1 libopenblas0-pthread libdnnl2 libpq5 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/kilnd /out/kiln /usr/local/bin/
# Fail the image build, not the first request, if a library or the linker is missing.
RUN ! ldd /usr/local/bin/kilnd /usr/local/bin/kiln | grep 'not found' \
 && test -x /usr/lib/llvm-19/bin/ld.lld

RUN groupadd --system --gid 10001 kiln \
 && useradd --system --uid 10001 --gid kiln --home-dir /var/lib/kiln --shell /usr/sbin/nologin kiln \
 && mkdir -p /var/lib/kiln \
 && chown kiln:kiln /var/lib/kiln
VOLUME /var/lib/kiln
# Numeric, so Kubernetes' runAsNonRoot can verify it.
USER 10001:10001
EXPOSE 50051
ENTRYPOINT ["/usr/local/bin/kilnd", "--listen", "0.0.0.0:50051", "--data-dir", "/var/lib/kiln"]
