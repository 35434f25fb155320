"""tcpeval: the reproducible artifact for 'TCP congestion control algorithms in 10G networks'."""

__version__ = "0.1.0"
