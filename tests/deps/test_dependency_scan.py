"""The readers behind the closure check: commands from Python, shell and Makefiles, TeX
files from LaTeX, and apt's Depends graph resolved as apt-get resolves it."""
from __future__ import annotations

import textwrap
from pathlib import Path

import deps_commands
import deps_debian
import deps_latex

PY = textwrap.dedent('''
    import shutil, subprocess
    REQUIRED = ("tc", "gcc")
    NAMES = ["reno", "cubic"]

    def _compile():
        return ["clang", "-O2"]

    def go(ns, args):
        subprocess.run(["iperf3", "-c", "x"])
        host.run(["ip", "netns", "exec", ns, "ethtool", "-K"])
        sh("nft", "-f", "-")
        cmd = ["latexmk", "-pdf"]
        subprocess.run(cmd, cwd=".")
        subprocess.run(_compile())
        subprocess.run([*SNAKEMAKE, "-n", *args])
        missing = [t for t in REQUIRED if shutil.which(t) is None]
        return shutil.which("sshd"), NAMES
''')


def test_python_commands_are_found_in_every_form_the_code_runs_them():
    found = {c for c, _ in deps_commands.python_commands(Path("x.py"), PY)}
    assert found == {"iperf3", "ip", "ethtool", "nft", "latexmk", "clang", "tc", "gcc", "sshd"}


def test_shell_commands_skip_builtins_functions_quotes_and_assignments():
    script = textwrap.dedent('''
        count() { if command -v bpftool >/dev/null; then bpftool struct_ops list | wc -l; fi; }
        before=$(count)
        echo "make a|b; not-a-command"
        LC_ALL=C pdfinfo x.pdf | grep -E "^Pages:" && test -z "$x"
        ! grep -q 316 /proc/x
    ''')
    found = [c for c, _ in deps_commands.shell_commands(Path("run"), script)]
    assert sorted(set(found)) == ["bpftool", "grep", "pdfinfo", "wc"]


def test_shell_heredocs_awk_programs_and_case_labels_are_not_commands():
    """What the line-by-line reader took for commands in tools/container-image.sh."""
    script = textwrap.dedent('''
        cat > "$conf" <<EOF
        [engine]
        runtime = "runc"
        EOF
        m=$(awk -v s="$suite" '/^URIs:/ { uri = $2 } { for (i = 2; i <= NF; i++) print $i }' "$f")
        build() { podman build "$@"; }
        case $cmd in
          build) build "$@" ;;
          help|-h) sed -n '2,8p' "$0" ;;
        esac
        hard() { local v; v=$(ulimit -H "$1"); echo "$v"; }
        x=$(hard -n 1024)
        echo 'a b' | xargs -r podman rmi
        timeout 40 apt-cache depends x
        runuser -u munge -- /usr/sbin/munged
        ip netns exec tev0 ethtool -K eth0 gro off
    ''')
    found = {c for c, _ in deps_commands.shell_commands(Path("x.sh"), script)}
    assert found == {"cat", "awk", "sed", "xargs", "podman", "timeout", "apt-cache", "runuser", "munged", "ip",
                     "ethtool"}


def test_a_shell_array_declaration_is_read_as_written():
    script = "set -e\nPACKAGES=(munge slurmd  # the daemon\n  slurm-client)\nOTHER=(x)\n"
    assert deps_commands.shell_array(Path("x.sh"), "PACKAGES", script) == ["munge", "slurmd", "slurm-client"]
    assert deps_commands.shell_array(Path("x.sh"), "MISSING", script) is None


def test_make_recipes_expand_one_word_variables_only():
    makefile = ("CLANG ?= clang\nVENV := .venv/bin\nx:\n\t$(CLANG) -c a.c\n\t@mkdir -p $(OUT)\n\t$(VENV)/tcpeval x\n"
                "\t$(MAKE) -C y\n%.o: %.c\n\t$(CLANG) -c $< -o $@.tmp && mv $@.tmp $@\n"
                "\t@for f in $(wildcard *.c); do \\\n\t  wc -l $$f; done\n")
    found = {c for c, _ in deps_commands.make_commands(Path("Makefile"), makefile)}
    assert found == {"clang", "mkdir", "make", "mv", "wc"}


def test_a_make_variable_continued_over_lines_is_read_as_the_shell_fragment_it_is():
    makefile = ("each = for one in $(1); do \\\n\t    [ \"$$(date +%s)\" -lt 9 ] || break; \\\n"
                "\t    touch $$one; \\\n\t  done\nx:\n\tset -e; $(call each,a b)\n")
    found = {c for c, _ in deps_commands.make_commands(Path("Makefile"), makefile)}
    assert found == {"date", "touch"}


def test_tex_files_of_classes_packages_and_font_encodings():
    tex = r"""\documentclass[10pt]{article}
    \usepackage[T1,OT1]{fontenc}
    \usepackage{lmodern, booktabs}% comment \usepackage{notloaded}
    % \usepackage{commented}
    \RequirePackage{xcolor}"""
    assert deps_latex.tex_files(tex) == ["article.cls", "fontenc.sty", "t1enc.def", "ot1enc.def",
                                         "lmodern.sty", "booktabs.sty", "xcolor.sty"]


APT = textwrap.dedent('''\
    tool
      Depends: libtool1
     |Depends: mta-first
      Depends: mta-listed
      Depends: <virt-one>
        only-provider
      Depends: <virt-many>
        prov-a
        prov-b
     |Depends: not-taken
      Depends: base-pkg
      PreDepends: early
    libtool1
      Depends: libc
    mta-listed
    only-provider
    early
    <virt-one>
''')


def test_closure_takes_depends_as_apt_get_would_without_recommends():
    graph = deps_debian.parse_depends(APT)
    closure = deps_debian.closure(["tool", "mta-listed"], graph, base={"base-pkg", "libc"})
    # alternatives: a listed or base member wins, else the first; a single provider of a
    # virtual package is taken; of several providers none is assumed
    assert closure.installs == {"tool", "libtool1", "libc", "mta-listed", "only-provider", "base-pkg",
                                "early"}
    assert closure.via["libtool1"] == "tool"
    assert closure.accounts_for("libc") and not closure.accounts_for("prov-a")
    assert not closure.accounts_for("mta-first") and not closure.accounts_for("not-taken")


def test_usr_merge_spellings_go_both_ways():
    assert deps_debian.spellings(Path("/usr/bin/ip")) == [Path("/usr/bin/ip"), Path("/bin/ip")]
    assert deps_debian.spellings(Path("/sbin/ip")) == [Path("/sbin/ip"), Path("/usr/sbin/ip")]
    assert deps_debian.spellings(Path("/usr/share/x")) == [Path("/usr/share/x")]
