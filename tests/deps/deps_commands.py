"""The executables the project runs, read from its code rather than listed by hand.

Python (ast): the argv of subprocess.run/Popen/check_output/check_call/call and of the
project's wrappers (host.run, SshHost.run/spawn, the tests' sh(...)) when it is a literal,
a name bound to a literal in the same function or module, or a same-module function that
returns literals; the command after `ip netns exec <ns>`; every shutil.which("x"), also
over a literal or module-level collection of names. Shell scripts and Makefiles' recipes:
parsed by shfmt, the command word of every simple command and the command a wrapper
(`command -v`, `xargs`, `timeout`, `ip netns exec` ...) hands on to; builtins and the
script's own functions are not commands (Make variables with a one-word default expanded).
Executables the project builds itself and paths into the repository are not commands
of the system. What a program runs in turn is declared in IMPLIED, with the reason.
"""
from __future__ import annotations

import ast
import functools
import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

RUN_NAMES = {"run", "Popen", "check_output", "check_call", "call", "sh", "spawn"}
COMMAND = re.compile(r"^[A-Za-z][A-Za-z0-9_.+-]*$")
# Shell builtins (a command word, but nothing to install).
SHELL_WORDS = {
    ".", ":", "[", "break", "cd", "command", "continue", "declare", "echo", "eval", "exec", "exit", "export",
    "false", "hash", "let", "local", "mapfile", "popd", "printf", "pushd", "read", "readonly", "return", "set",
    "shift", "shopt", "source", "test", "trap", "true", "type", "ulimit", "umask", "unset", "wait",
}
# Programs the project does not start itself, run by the ones it does.
IMPLIED = {
    "pdflatex": "latexmk -pdf runs it (src/tcpeval/report/latexmk.py)",
    "git": "dvc runs it for `make data-push` / `make data-pull`",
    "make": "the README's two commands are make targets",
}


@dataclass(frozen=True)
class Use:
    command: str
    where: str  # "path:line"


def _const(node) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _argv_consts(node) -> list[str | None] | None:
    """The elements of a literal argv (None for a non-constant element)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _argv_consts(node.left)
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_const(e) for e in node.elts]  # a *starred element is unknown: None
    return None


def commands_of_argv(argv: list[str | None]) -> list[str]:
    """argv[0], and the command `ip netns exec <ns>` runs."""
    out = [argv[0]] if argv and argv[0] else []
    if argv[:3] == ["ip", "netns", "exec"] and len(argv) > 4 and argv[4]:
        out.append(argv[4])
    return out


class _PyScanner(ast.NodeVisitor):
    def __init__(self, tree: ast.Module):
        self.found: list[tuple[str, int]] = []
        self.scopes: list[dict[str, list]] = [self._bindings(tree.body)]
        self.returns = {f.name: [r.value for r in ast.walk(f) if isinstance(r, ast.Return) and r.value]
                        for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)}

    @staticmethod
    def _bindings(body) -> dict[str, list]:
        """name -> the values assigned to it directly in this body (and nested blocks)."""
        names: dict[str, list] = {}
        for stmt in body:
            for node in ast.walk(stmt):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node is not stmt:
                    continue
                if isinstance(node, ast.Assign):
                    for target in node.targets:
                        if isinstance(target, ast.Name):
                            names.setdefault(target.id, []).append(node.value)
        return names

    def _values(self, name: str) -> list:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return []

    def visit_FunctionDef(self, node):
        self.scopes.append(self._bindings(node.body))
        self.generic_visit(node)
        self.scopes.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def _argv_nodes(self, node) -> list:
        if isinstance(node, ast.Name):
            return [v for v in self._values(node.id)]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in self.returns:
            return self.returns[node.func.id]
        return [node]

    def _names_in(self, node) -> list[str]:
        """String constants of a literal collection (dict: its keys), or of a name bound to one."""
        if isinstance(node, ast.Name):
            return [s for v in self._values(node.id) for s in self._names_in(v)]
        if isinstance(node, ast.Dict):
            return [k for k in map(_const, node.keys) if k]
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return [e for e in map(_const, node.elts) if e]
        return []

    def visit_Call(self, node):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if name == "which" and node.args:
            const = _const(node.args[0])
            if const:
                self.found.append((const, node.lineno))
        elif name in RUN_NAMES and node.args:
            if name == "sh" and _const(node.args[0]):
                argvs = [[_const(a) for a in node.args]]
            else:
                argvs = [a for n in self._argv_nodes(node.args[0]) if (a := _argv_consts(n))]
            for argv in argvs:
                self.found += [(c, node.lineno) for c in commands_of_argv(argv)]
        self.generic_visit(node)

    def _loop(self, target, iterable, body_nodes):
        """`for t in <names>: ... which(t)` and the comprehension forms."""
        if not isinstance(target, ast.Name):
            return
        uses_which = any(isinstance(n, ast.Call) and getattr(n.func, "attr", getattr(n.func, "id", None)) == "which"
                         and n.args and isinstance(n.args[0], ast.Name) and n.args[0].id == target.id
                         for b in body_nodes for n in ast.walk(b))
        if uses_which:
            self.found += [(s, iterable.lineno) for s in self._names_in(iterable)]

    def visit_For(self, node):
        self._loop(node.target, node.iter, node.body)
        self.generic_visit(node)

    def _comprehension(self, node):
        parts = [node.elt] if hasattr(node, "elt") else [node.key, node.value]
        for gen in node.generators:
            self._loop(gen.target, gen.iter, parts + gen.ifs)
        self.generic_visit(node)

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = _comprehension


def python_commands(path: Path, text: str | None = None) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text() if text is None else text, filename=str(path))
    scanner = _PyScanner(tree)
    scanner.visit(tree)
    return scanner.found


def _word(node) -> str | None:
    """A shell word's text when it is literal (plain, or in quotes without expansions)."""
    text = ""
    for part in node.get("Parts", []):
        kind = part.get("Type")
        if kind in ("Lit", "SglQuoted"):
            text += part.get("Value", "")
        elif kind == "DblQuoted" and all(p.get("Type") == "Lit" for p in part.get("Parts", [])):
            text += "".join(p.get("Value", "") for p in part.get("Parts", []))
        else:
            return None
    return text


# Commands that run the command given in their arguments: name -> the options that take a value.
WRAPPERS = {"command": set(), "exec": set(), "nohup": set(), "env": {"-u"}, "runuser": {"-u", "-g", "-G"},
            "xargs": {"-I", "-n", "-P", "-d", "-L", "-s", "-E", "-a"}, "timeout": {"-s", "-k"}}


def _commands_of_call(words: list[str | None]) -> list[str]:
    """The command a simple command runs, and the one it hands on to (`command -v x` names
    x; `xargs -r x`, `timeout 5 x`, `ip netns exec ns x` run x)."""
    found = []
    while words and words[0]:
        head, rest = words[0], words[1:]
        if head == "command" and rest[:1] == ["-v"]:
            return found + [w for w in rest[1:2] if w]
        if head == "ip" and rest[:2] == ["netns", "exec"]:
            found.append(head)
            words = rest[3:]
            continue
        if head not in WRAPPERS:
            return found + [head]
        if head not in SHELL_WORDS:
            found.append(head)
        takes_value, i = WRAPPERS[head], 0
        while i < len(rest) and rest[i] and (rest[i].startswith("-") or "=" in rest[i]):
            i += 2 if rest[i] in takes_value else 1
        if head == "timeout" and i < len(rest):
            i += 1  # the duration
        words = rest[i:]
    return found


@functools.lru_cache(maxsize=None)  # a script is read for its commands, functions and PACKAGES
def shell_tree(text: str, where: str) -> dict:
    """The syntax tree of a bash program, from shfmt (the parser behind the shfmt formatter):
    heredoc bodies, quoted awk programs and case patterns are words, not commands."""
    if shutil.which("shfmt") is None:
        raise RuntimeError("shfmt is not installed: it is in the Debian package 'shfmt' (tools/apt-packages.txt)")
    proc = subprocess.run(["shfmt", "--to-json", "-ln", "bash"], input=text, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ValueError(f"{where}: shfmt cannot parse it: {proc.stderr.strip()}")
    return json.loads(proc.stdout)


def _walk(node):
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


# a system program named by its path is the command of that name
SYSTEM_DIRS = ("/usr/bin/", "/usr/sbin/", "/bin/", "/sbin/")


def _functions(tree: dict) -> set[str]:
    return {n["Name"]["Value"] for n in _walk(tree) if n.get("Type") == "FuncDecl"}


def _tree_commands(tree: dict) -> list[tuple[str, int]]:
    functions = _functions(tree)
    found = []
    for node in _walk(tree):
        if node.get("Type") != "CallExpr" or not node.get("Args"):
            continue
        for command in _commands_of_call([_word(w) for w in node["Args"]]):
            if command.startswith(SYSTEM_DIRS):
                command = command.rsplit("/", 1)[1]
            if command not in SHELL_WORDS and command not in functions and COMMAND.match(command):
                found.append((command, node["Pos"]["Line"]))
    return found


def shell_functions(path: Path) -> set[str]:
    """The functions a shell file defines (a script may call those of a file it sources)."""
    return _functions(shell_tree(path.read_text(), str(path)))


def shell_commands(path: Path, text: str | None = None) -> list[tuple[str, int]]:
    return _tree_commands(shell_tree(path.read_text() if text is None else text, str(path)))


def shell_array(path: Path, name: str, text: str | None = None) -> list[str] | None:
    """The literal elements of the array `name=(...)` a shell script assigns (None: none)."""
    tree = shell_tree(path.read_text() if text is None else text, str(path))
    for node in _walk(tree):
        if node.get("Type") is None and node.get("Name", {}).get("Value") == name and "Array" in node:
            return [w for e in node["Array"].get("Elems") or [] if (w := _word(e["Value"]))]
    return None


def make_commands(path: Path, text: str | None = None) -> list[tuple[str, int]]:
    """The commands of every recipe line, parsed as one shell program whose line numbers are
    the Makefile's (one-word Make variables expanded, `$$` unescaped)."""
    text = path.read_text() if text is None else text
    variables = {"MAKE": "make"}
    for m in re.finditer(r"^([A-Za-z_]+)\s*[?:]?=\s*(\S+)\s*$", text, re.M):
        variables.setdefault(m.group(1), m.group(2))

    def expand(m: re.Match) -> str:
        value = variables.get(m.group(1), "")
        return value if COMMAND.match(value) else "$" + m.group(1)  # not a system command

    def shell_text(line: str) -> str:
        line = line.replace("$$", "\0")  # the shell's own $
        line = re.sub(r"\$\(([A-Za-z_]+)\)", expand, line)
        line = re.sub(r"\$(\([@<^*?][DF]\)|[@<^*?+|])", "make_auto", line)  # $@, $<, $(@D) ...
        line = re.sub(r"\$\(call [^)]*\)", ":", line)  # a fragment's commands are read where it is set
        line = re.sub(r"\$\([^)]*\)", "make_expr", line)  # $(wildcard ...) and other functions
        return line.strip().lstrip("@-").replace("\0", "$")

    # A recipe line, or a variable whose value goes on over continued lines: such a value is a
    # shell fragment that recipes `$(call ...)` (its own lines may start with a tab too).
    program, continued = [], False
    for line in text.splitlines():
        fragment = None if continued else re.match(r"[A-Za-z_]+\s*[?:]?=(.*\\)$", line)
        shell = continued or line.startswith("\t") or fragment is not None
        continued = shell and line.endswith("\\")
        program.append(shell_text(fragment.group(1) if fragment else line) if shell else "")
    return _tree_commands(shell_tree("\n".join(program) + "\n", str(path)))


SOURCES = {
    "python": ["src/**/*.py", "tests/**/*.py", "bench/*.py", "hw/**/*.py"],
    "shell": [".ci/run", "tools/*.sh"],
    "make": ["Makefile", "cc/Makefile", "hw/Makefile"],
}
SCANNERS = {"python": python_commands, "shell": shell_commands, "make": make_commands}


def project_commands(repo: Path) -> dict[str, list[str]]:
    """command -> where it is run ("path:line", or the reason for an implied one)."""
    uses: dict[str, list[str]] = {}
    files = {kind: [path for pattern in patterns for path in sorted(repo.glob(pattern)) if ".venv" not in path.parts]
             for kind, patterns in SOURCES.items()}
    functions = set().union(*map(shell_functions, files["shell"]))
    for kind, paths in files.items():
        for path in paths:
            for command, line in SCANNERS[kind](path):
                if kind == "python" or command not in functions:
                    uses.setdefault(command, []).append(f"{path.relative_to(repo)}:{line}")
    for command, reason in IMPLIED.items():
        uses.setdefault(command, []).append(reason)
    return uses
