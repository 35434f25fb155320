# The six Linux-3.16 congestion-control ports as BPF objects (the struct_ops target).
# vmlinux.h must come from the kernel the objects will run on, so it is generated from
# /sys/kernel/btf/vmlinux at load time by tcpeval; here the build uses the BTF passed in.
{ pkgs, src, btf ? "/sys/kernel/btf/vmlinux" }:
pkgs.stdenv.mkDerivation {
  pname = "tcpeval-cc";
  version = "0.1.0";
  inherit src;
  nativeBuildInputs = with pkgs; [ clang llvm bpftools libbpf elfutils zlib pkg-config ];
  hardeningDisable = [ "all" ];
  buildPhase = ''
    make -C cc bpf BTF=${btf}
  '';
  installPhase = ''
    mkdir -p $out/lib/tcpeval
    cp build/cc/*.bpf.o $out/lib/tcpeval/ 2>/dev/null || cp cc/build/*.bpf.o $out/lib/tcpeval/
  '';
}
