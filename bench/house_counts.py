"""The house's figures (issue 14): bare `Any` annotations, `type: ignore`, function-local imports, the longest functions.

Run: `.venv/bin/python bench/house_counts.py [kimitui]` (any tree: point it at an old checkout to compare).
Goal (issue 14): no function in `kimitui/` over 80 lines; PASS/FAIL, exit 1 on FAIL.
"""
import ast, pathlib, re, sys
root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "kimitui")
bare = ignores = local = 0
funcs = []
BARE = {"Any", "Any | None", "None | Any", "Optional[Any]", "'Any'", '"Any"'}
for p in sorted(root.rglob("*.py")):
    src = p.read_text()
    ignores += len(re.findall(r"type:\s*ignore", src))
    tree = ast.parse(src)
    for node in ast.walk(tree):
        anns = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            funcs.append((node.end_lineno - node.lineno + 1, f"{p}:{node.lineno} {node.name}"))
            a = node.args
            anns += [x.annotation for x in a.args + a.kwonlyargs + a.posonlyargs + [a.vararg, a.kwarg] if x is not None and x.annotation is not None]
            if node.returns is not None: anns.append(node.returns)
            for sub in ast.walk(node):
                if sub is not node and isinstance(sub, (ast.Import, ast.ImportFrom)) and not (isinstance(sub, ast.ImportFrom) and sub.module == "__future__"):
                    local += 1
        elif isinstance(node, ast.AnnAssign):
            anns.append(node.annotation)
        bare += sum(1 for x in anns if ast.unparse(x) in BARE)
print(f"bare Any annotations={bare}  type: ignore={ignores}  function-local imports={local}  functions={len(funcs)}  over 80 lines={sum(1 for n, _ in funcs if n > 80)}")
for n, name in sorted(funcs, reverse=True)[:10]: print(f"  {n:4d}  {name}")
from benchutil import verdict  # bench/ is on sys.path (the script's own folder)
over = sum(1 for n, _ in funcs if n > 80)
if not verdict("functions over 80 lines", f"{over} (longest {max(funcs)[0] if funcs else 0})", "0", over == 0):
    sys.exit(1)
