# tcpeval in a container, for hosts without Nix. The experiments need the host's kernel
# features, so run it privileged with the host's BTF visible:
#   docker build -t tcpeval .
#   docker run --rm -it --privileged --pid=host -v /sys/kernel/btf:/sys/kernel/btf:ro \
#       -v "$PWD":/work/tcpeval tcpeval make paper
FROM debian:12
ENV DEBIAN_FRONTEND=noninteractive
WORKDIR /work/tcpeval
COPY tools/apt-packages.txt tools/apt-packages.txt
RUN apt-get update \
 && grep -v '^#' tools/apt-packages.txt | xargs apt-get install -y --no-install-recommends \
        python3 python3-venv python3-pip make git ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY requirements.txt requirements.lock pyproject.toml ./
COPY src src
RUN python3 -m venv .venv \
 && .venv/bin/pip install -q -r requirements.txt -c requirements.lock \
 && .venv/bin/pip install -q --no-deps -e .
COPY . .
CMD ["make", "test"]
