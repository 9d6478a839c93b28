"""Cycles of a directed graph: its strongly connected components of more than one node
(Tarjan's algorithm, iterative so a long chain cannot exhaust the recursion limit). The DSL
validator refuses a workflow with one; the structure test refuses an import cycle with it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping


def cycles(succ: Mapping[str, Iterable[str]], nodes: Iterable[str] | None = None) -> list[list[str]]:
    """Each component of two or more nodes that reach one another, its members in the order the
    search closed them; `nodes` (default: the keys of `succ`) sets the order roots are tried."""
    index_of: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in nodes if nodes is not None else succ:
        if root in index_of:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(succ.get(root, ())))]
        index_of[root] = low[root] = len(index_of)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index_of:
                    index_of[child] = low[child] = len(index_of)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(succ.get(child, ()))))
                elif child in on_stack:
                    low[node] = min(low[node], index_of[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index_of[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(component)
    return components
