# The model diagram's module-to-module edges against torch.fx's (issue 27, point 2). Builds the
# model samples/python/model_forward.py traced, traces it with torch.fx.symbolic_trace (the truth),
# reads `tracedot model --expand -T dot` output, contracts the non-module nodes of both graphs
# (functional ops; the input and output) and compares the module-call edge sets. A module called k
# times is k nodes: (target, i) in fx's graph order, "path (i)" in tracedot's labels.
#   model_fx_edges.py MODEL DIAGRAM.dot   -> exit 0 when equal, else the differences and exit 1
import re
import sys
from collections import defaultdict

import torch.fx

sys.path.insert(0, sys.argv[3] if len(sys.argv) > 3 else ".")
from model_forward import build_model  # noqa: E402


def contract(nodes, succ, is_module):
    """Edges between module nodes, through any chain of non-module nodes."""
    edges = set()
    for a in nodes:
        if not is_module(a):
            continue
        seen, work = set(), list(succ[a])
        while work:
            b = work.pop()
            if b in seen:
                continue
            seen.add(b)
            if is_module(b):
                edges.add((a, b))
            else:
                work.extend(succ[b])
    return edges


def fx_graph(model):
    graph = torch.fx.symbolic_trace(model).graph
    calls, name_of, succ = defaultdict(int), {}, defaultdict(list)
    for n in graph.nodes:
        if n.op == "call_module":
            calls[n.target] += 1
            name_of[n] = (n.target, calls[n.target])
        else:
            name_of[n] = ("%" + n.name, 0)
    for n in graph.nodes:
        for u in n.users:
            succ[name_of[n]].append(name_of[u])
    nodes = list(name_of.values())
    return nodes, succ


def dot_attrs(text, at):
    """key=value pairs of the attribute list starting at text[at] == '['; returns (dict, end)."""
    attrs, i = {}, at + 1
    while i < len(text) and text[i] != "]":
        m = re.compile(r"\s*,?\s*([A-Za-z_]+)=").match(text, i)
        if not m:
            i += 1
            continue
        key, i = m.group(1), m.end()
        if text[i] == '"':
            j = i + 1
            while text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            attrs[key], i = text[i + 1:j], j + 1
        elif text[i] == "<":
            depth, j = 0, i
            while True:
                depth += {"<": 1, ">": -1}.get(text[j], 0)
                j += 1
                if depth == 0:
                    break
            attrs[key], i = text[i + 1:j - 1], j
        else:
            m2 = re.compile(r"[^,\]\s]+").match(text, i)
            attrs[key], i = m2.group(0), m2.end()
    return attrs, i


def dot_graph(path):
    text = open(path, encoding="utf-8").read()
    name_of, succ = {}, defaultdict(list)
    for m in re.finditer(r"^\s*(n\d+)\s*\[", text, re.M):
        attrs, _ = dot_attrs(text, m.end() - 1)
        ident = attrs.get("id", "")
        first = re.sub(r"<[^>]*>", "\n", attrs.get("label", "")).strip().split("\n")[0]
        if ident.startswith("module/"):
            c = re.fullmatch(r"(.*) \((\d+)\)", first)
            name_of[m.group(1)] = (c.group(1), int(c.group(2))) if c else (first, 1)
        else:
            name_of[m.group(1)] = ("%" + ident, 0)
    for m in re.finditer(r"^\s*(n\d+) -> (n\d+)", text, re.M):
        succ[name_of[m.group(1)]].append(name_of[m.group(2)])
    return list(name_of.values()), succ


def main():
    model, diagram = sys.argv[1], sys.argv[2]
    is_module = lambda n: n[1] > 0  # noqa: E731
    fx_nodes, fx_succ = fx_graph(build_model(model))
    tr_nodes, tr_succ = dot_graph(diagram)
    fx_edges = contract(fx_nodes, fx_succ, is_module)
    tr_edges = contract(tr_nodes, tr_succ, is_module)
    fx_mods = {n for n in fx_nodes if is_module(n)}
    tr_mods = {n for n in tr_nodes if is_module(n)}
    # tracedot also draws what ran outside the model (none here) and containers as clusters.
    ok = fx_mods == tr_mods and fx_edges == tr_edges
    print("%s: fx %d module calls, %d edges; tracedot %d module calls, %d edges" %
          (model, len(fx_mods), len(fx_edges), len(tr_mods), len(tr_edges)))
    for what, a, b in (("calls", fx_mods, tr_mods), ("edges", fx_edges, tr_edges)):
        for x in sorted(a - b)[:10]:
            print("  %s only in fx: %s" % (what, x))
        for x in sorted(b - a)[:10]:
            print("  %s only in tracedot: %s" % (what, x))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
