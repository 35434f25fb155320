# tcpeval in a container, for hosts without Nix. The experiments use the host's kernel
# (network namespaces, BPF struct_ops, qdiscs), so run it privileged on the host's network
# stack (README, "Container image"):
#   docker build -t tcpeval .
#   docker run --rm --privileged --network host tcpeval make test PYTEST_ARGS=--require-root
# Without a Docker engine, `make image` builds this file with podman (tools/container-image.sh).
FROM debian:12
ENV DEBIAN_FRONTEND=noninteractive
WORKDIR /work/tcpeval
# What `make bootstrap` does on a fresh machine, nothing else, in three layers that change
# at different paces: the Debian packages of tools/apt-packages.txt (without Recommends),
# the pinned Python packages, then the source. A change under src/ redoes only the last.
# The package lists stay: the dependency-closure test asks apt about the listed packages.
COPY tools/bootstrap.sh tools/apt-packages.txt tools/
RUN tools/bootstrap.sh packages && rm -rf /var/cache/apt/archives/*.deb
COPY requirements.txt requirements.lock ./
RUN tools/bootstrap.sh python-deps && rm -rf /root/.cache/pip
COPY . .
RUN tools/bootstrap.sh
CMD ["make", "test"]
