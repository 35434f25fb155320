"""The Linux 3.16 congestion-control ports (the paper's six, then the other 3.16
modules): build, load, parameters, verification.

One C source per algorithm (cc/src/<variant>316.c) builds as a BPF struct_ops
object (loaded here), a kernel module (build_modules) and a userspace library for
the unit harness (build_host). EXTRA_VARIANTS are algorithms beyond Linux 3.16 written
the same way (dctcp: cc/src/dctcp_tev.c, kernel name dctcp_tev; nv: cc/src/nv_tev.c,
kernel name nv_tev): built and loaded like the ports (a design names `variant: dctcp`),
but outside VARIANTS, so outside the paper's matrix, Table I and `tcpeval cc list`.
"""
from ._build import (
                      build,
                      build_host,
                      build_modules,
                      check_host,
                      host_status,
                      kernel_headers,
)
from ._common import (
                      ECN_RESPONSES,
                      EXTRA_VARIANTS,
                      IMPLS,
                      VARIANTS,
                      CCError,
                      HostError,
                      UnknownVariantError,
                      available_algorithms,
                      ecn_response,
                      kernel_name,
                      source_sha256,
                      struct_ops_map_ids,
)
from ._guard import GUARD_MAXIMA, guard_stats, parse_bss_dump
from ._kmod import missing as kmod_missing
from ._load import LOADED_AS, CCHandle, loaded, loaded_object
from ._params import parameters
from ._verify import (
                      parse_ss,
                      set_socket_algorithm,
                      socket_algorithm,
                      ss_algorithms,
                      verify_flows,
                      verify_socket_algorithm,
)

__all__ = [
    "VARIANTS", "EXTRA_VARIANTS", "ECN_RESPONSES", "ecn_response", "IMPLS", "CCError", "HostError", "UnknownVariantError", "CCHandle",
    "build", "build_host", "build_modules", "check_host", "host_status", "kernel_headers",
    "loaded", "loaded_object", "LOADED_AS", "kmod_missing", "guard_stats", "GUARD_MAXIMA", "parse_bss_dump", "parameters", "kernel_name", "source_sha256", "available_algorithms",
    "struct_ops_map_ids",
    "socket_algorithm", "set_socket_algorithm", "verify_socket_algorithm",
    "ss_algorithms", "parse_ss", "verify_flows",
]
