"""`tcpeval cc list|build|params`."""
from __future__ import annotations

import json

from tcpeval.errors import UserError

from . import (
    VARIANTS,
    CCError,
    available_algorithms,
    build,
    build_modules,
    host_status,
    kernel_headers,
    kernel_name,
    parameters,
)
from ._build import _out, bpf_object
from ._common import SUFFIX


def _user_error(err: Exception):
    return UserError(str(err))


def _cmd_list(args) -> int:
    status = host_status()
    loadable = status["privileges"] and status["btf"] and status["struct_ops"]
    try:
        native = set(available_algorithms())
    except CCError:
        native = set()
    out = _out(None)
    params = parameters()
    rows = []
    for v in VARIANTS:
        rows.append({
            "variant": v,
            "implementations": {"port": kernel_name(v), "native": v},
            "port_loadable_here": loadable,
            "port_built": bpf_object(v, out).exists(),
            "native_available": v in native,
            "module_built": (out / "kmod" / f"{v}{SUFFIX}.ko").exists(),
            "parameters": {k: p["value"] for k, p in params[v].items()},
        })
    if args.json:
        print(json.dumps({"host": status, "variants": rows}, indent=2))
        return 0
    missing = [k for k, ok in status.items() if not ok]
    print(f"host: ports {'loadable' if loadable else 'NOT loadable'}"
          + (f" (missing: {', '.join(missing)})" if missing else ""))
    for r in rows:
        yn = lambda b: "yes" if b else "no"  # noqa: E731
        print(f"{r['variant']:<10} port={r['implementations']['port']:<13} "
              f"port-loadable={yn(r['port_loadable_here'])} port-built={yn(r['port_built'])} "
              f"native={yn(r['native_available'])} module-built={yn(r['module_built'])}")
        print("           " + ", ".join(f"{k}={val}" for k, val in r["parameters"].items()))
    return 0


def _cmd_build(args) -> int:
    try:
        out = build(args.out)
        print(f"BPF objects: {out / 'bpf'}")
        if args.modules:
            kos = build_modules(args.out, args.kdir)
            print(f"kernel modules: {kos[0].parent} (against {args.kdir or kernel_headers()})")
    except CCError as err:
        raise _user_error(err) from err
    return 0


def _cmd_params(args) -> int:
    params = parameters()
    if args.variant:
        if args.variant not in VARIANTS:
            raise _user_error(ValueError(
                f"unknown variant {args.variant!r}; allowed: {', '.join(VARIANTS)}"))
        params = {args.variant: params[args.variant]}
    if args.json:
        print(json.dumps(params, indent=2))
        return 0
    for v, ps in params.items():
        print(v)
        for k, p in ps.items():
            print(f"  {k:<22} {str(p['value']):<8} {p['description']}")
    return 0


def add_parsers(subparsers) -> None:
    p = subparsers.add_parser("cc", help="the Linux 3.16 congestion-control ports")
    sub = p.add_subparsers(dest="cc_command", required=True, metavar="SUBCOMMAND")

    pl = sub.add_parser("list", help="variants, implementations, parameters, host support")
    pl.add_argument("--json", action="store_true", help="machine-readable output")
    pl.set_defaults(func=_cmd_list)

    pb = sub.add_parser("build", help="compile the BPF struct_ops objects (and modules)")
    pb.add_argument("--out", help="build directory (default build/cc or $TCPEVAL_BUILD/cc)")
    pb.add_argument("--modules", action="store_true", help="also build the kernel modules")
    pb.add_argument("--kdir", help="kernel headers for --modules (default linux-headers-*-amd64)")
    pb.set_defaults(func=_cmd_build)

    pp = sub.add_parser("params", help="Table I parameters as declared in the C sources")
    pp.add_argument("--json", action="store_true", help="JSON output")
    pp.add_argument("--variant", help="only this variant")
    pp.set_defaults(func=_cmd_params)
