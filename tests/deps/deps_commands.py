"""The executables the project runs, read from its code rather than listed by hand.

Python (ast): the argv of subprocess.run/Popen/check_output/check_call/call and of the
project's wrappers (host.run, SshHost.run/spawn, the tests' sh(...)) when it is a literal,
a name bound to a literal in the same function or module, or a same-module function that
returns literals; the command after `ip netns exec <ns>`; every shutil.which("x"), also
over a literal or module-level collection of names. Shell scripts and Makefiles: the
first word of every simple command (Make variables with a one-word default expanded).
Executables the project builds itself and paths into the repository are not commands
of the system. What a program runs in turn is declared in IMPLIED, with the reason.
"""
from __future__ import annotations

import ast
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

RUN_NAMES = {"run", "Popen", "check_output", "check_call", "call", "sh", "spawn"}
COMMAND = re.compile(r"^[A-Za-z][A-Za-z0-9_.+-]*$")
KEYWORDS = {"!", "{", "}", "if", "then", "else", "elif", "while", "until", "do", "time"}
SHELL_WORDS = {
    "!", "[", "[[", "]]", "{", "}", "(", ")", ".", ":", "case", "cd", "command", "continue", "break", "declare", "do",
    "done", "echo", "elif", "else", "esac", "eval", "exec", "exit", "export", "false", "fi", "for",
    "function", "if", "in", "local", "printf", "read", "readonly", "return", "set", "shift", "source",
    "test", "then", "time", "trap", "true", "type", "unset", "wait", "while",
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


def _logical_lines(text: str) -> list[tuple[int, str]]:
    lines, buf, start = [], "", 0
    for number, line in enumerate(text.splitlines(), 1):
        if not buf:
            start = number
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        lines.append((start, buf + line))
        buf = ""
    return lines


def shell_words(line: str) -> list[str]:
    """The command word of every simple command on one shell line (quotes respected)."""
    words = re.findall(r"command -v ([A-Za-z0-9_.+-]+)", line)
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.commenters = "#"
    lexer.wordchars += "$[]{}!:=-./+*,%@~^"
    try:
        tokens = list(lexer)
    except ValueError:  # an unbalanced quote: a fragment, not a command line
        return words
    expect = True
    for token in tokens:
        if token and set(token) <= set(";&|()<>"):
            expect = token not in ("<", ">", ">>", "<<", ">&", "<&")
            continue
        if not expect:
            continue
        if token in KEYWORDS or re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", token):
            continue  # a keyword, or VAR=value before the command
        expect = False
        if token not in SHELL_WORDS and COMMAND.match(token):
            words.append(token)
    return words


def shell_commands(path: Path, text: str | None = None) -> list[tuple[str, int]]:
    text = path.read_text() if text is None else text
    functions = set(re.findall(r"^\s*([A-Za-z_][A-Za-z0-9_-]*)\s*\(\)", text, re.M))
    return [(w, n) for n, line in _logical_lines(text) for w in shell_words(line) if w not in functions]


def make_commands(path: Path, text: str | None = None) -> list[tuple[str, int]]:
    text = path.read_text() if text is None else text
    variables = {"MAKE": "make"}
    for m in re.finditer(r"^([A-Za-z_]+)\s*[?:]?=\s*(\S+)\s*$", text, re.M):
        variables.setdefault(m.group(1), m.group(2))

    def expand(m: re.Match) -> str:
        value = variables.get(m.group(1), "")
        return value if COMMAND.match(value) else "$" + m.group(1)  # not a system command

    found = []
    for n, line in _logical_lines(text):
        if not line.startswith("\t"):
            continue
        line = re.sub(r"\$\(([A-Za-z_]+)\)", expand, line)
        line = line.strip().lstrip("@-").replace("$$", "$")
        found += [(w, n) for w in shell_words(line)]
    return found


SOURCES = {
    "python": ["src/**/*.py", "tests/**/*.py", "bench/*.py", "hw/**/*.py"],
    "shell": [".ci/run", "tools/*.sh"],
    "make": ["Makefile", "cc/Makefile", "hw/Makefile"],
}
SCANNERS = {"python": python_commands, "shell": shell_commands, "make": make_commands}
# Not the pipeline: the host side of the container image (`make image`), which installs
# what it needs itself (podman, runc, debootstrap) and never runs inside the image.
NOT_THE_PIPELINE = {"tools/container-image.sh", "tests/test_container_image.py"}


def project_commands(repo: Path) -> dict[str, list[str]]:
    """command -> where it is run ("path:line", or the reason for an implied one)."""
    uses: dict[str, list[str]] = {}
    for kind, patterns in SOURCES.items():
        for pattern in patterns:
            for path in sorted(repo.glob(pattern)):
                if ".venv" in path.parts or str(path.relative_to(repo)) in NOT_THE_PIPELINE:
                    continue
                for command, line in SCANNERS[kind](path):
                    uses.setdefault(command, []).append(f"{path.relative_to(repo)}:{line}")
    for command, reason in IMPLIED.items():
        uses.setdefault(command, []).append(reason)
    return uses
