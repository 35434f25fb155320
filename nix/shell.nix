# Development and experiment shell: network tools, BPF toolchain, RTL simulator, LaTeX.
{ pkgs, python-env, tex }:
pkgs.mkShell {
  packages = with pkgs; [
    python-env tex
    clang llvm bpftools libbpf elfutils zlib pkg-config
    iperf3 iproute2 ethtool openssh
    iverilog
    gnumake git
  ];
  shellHook = ''
    export PYTHONPATH=$PWD/src''${PYTHONPATH:+:$PYTHONPATH}
    echo "tcpeval shell: make test | make paper CAMPAIGN=smoke"
  '';
}
