# tcpeval in a container, for hosts without Nix. The experiments need the host's kernel
# features, so run it privileged with the host's BTF visible:
#   docker build -t tcpeval .
#   docker run --rm -it --privileged --pid=host -v /sys/kernel/btf:/sys/kernel/btf:ro \
#       -v "$PWD":/work/tcpeval tcpeval make paper
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
