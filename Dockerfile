# tcpeval in a container, for hosts without Nix. The experiments use the host's kernel
# (network namespaces, BPF struct_ops, qdiscs), so run it privileged on the host's network
# stack (README, "Container image"):
#   docker build -t tcpeval .
#   docker run --rm --privileged --network host tcpeval make test PYTEST_ARGS=--require-root
# Without a Docker engine, `make image` builds this file with podman (tools/container-image.sh).
FROM debian:12
ENV DEBIAN_FRONTEND=noninteractive
WORKDIR /work/tcpeval
# What `make bootstrap` does on a fresh machine, nothing else: the Debian packages of
# tools/apt-packages.txt (without Recommends) and the pinned .venv.
COPY tools/bootstrap.sh tools/apt-packages.txt tools/
COPY requirements.txt requirements.lock pyproject.toml ./
COPY src src
RUN tools/bootstrap.sh && rm -rf /var/lib/apt/lists/*
COPY . .
CMD ["make", "test"]
