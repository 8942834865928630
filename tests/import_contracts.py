"""An import-linter contract type of this repository (pyproject.toml `[tool.importlinter]`, run by scripts/lint.sh):
`no_cycles`, no two modules of the given packages importing each other, directly or through others.

import-linter's own `acyclic_siblings` finds a cycle between the modules or subpackages of each package, at every
depth, but not one through a package's `__init__`: a module importing its own package, whose `__init__` imports
it back (`kafka/cluster.py` doing `from cdcwatch.kafka import KafkaCollector`). This contract looks at the modules
themselves, so it finds that one too. Like every contract it reads every import of a module: at its top, inside a
function, under TYPE_CHECKING.
"""

from __future__ import annotations

from grimp import DetailedImport, ImportGraph
from importlinter.application import output
from importlinter.domain import fields
from importlinter.domain.contract import Contract, ContractCheck

__all__ = ["NoCyclesContract"]


class NoCyclesContract(Contract):
    """Options: `packages`, the packages whose modules (and subpackages') must not import each other in a circle."""

    type_name = "no_cycles"

    packages = fields.ListField(subfield=fields.StringField())

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        roots: list[str] = self.packages  # type: ignore[assignment]
        modules = {m for m in graph.modules if any(m == root or m.startswith(root + ".") for root in roots)}
        cycles = [(sorted(component), _one_cycle(graph, component)) for component in _components(graph, modules)]
        return ContractCheck(kept=not cycles, metadata={"cycles": cycles})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for component, cycle in check.metadata["cycles"]:
            output.print_error(f"{len(component)} modules import each other ({', '.join(component)}); one cycle:")
            for hop in cycle:
                output.print_error(f"- {hop['importer']} -> {hop['imported']} (l.{hop['line_number']}: "
                                   f"{hop['line_contents']})", bold=False)
            output.new_line()


def _components(graph: ImportGraph, modules: set[str]) -> list[set[str]]:
    """The strongly connected components of the imports among `modules` that hold a cycle (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for root in sorted(modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root) & modules)))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, imported = work[-1]
            following = next(imported, None)
            if following is not None:
                if following not in index:
                    index[following] = low[following] = len(index)
                    stack.append(following)
                    on_stack.add(following)
                    work.append((following, iter(sorted(graph.find_modules_directly_imported_by(following) & modules))))
                elif following in on_stack:
                    low[module] = min(low[module], index[following])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[module])
            if low[module] == index[module]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == module:
                        break
                if len(component) > 1 or graph.direct_import_exists(importer=module, imported=module):
                    found.append(component)
    return found


def _one_cycle(graph: ImportGraph, component: set[str]) -> list[DetailedImport]:
    """A shortest cycle through the component's first module, as its imports (each with its line)."""
    start = min(component)
    if len(component) == 1:  # a module importing itself
        return graph.get_import_details(importer=start, imported=start)[:1]
    chains = [(start, *chain) for following in sorted(graph.find_modules_directly_imported_by(start) & component)
              if (chain := graph.find_shortest_chain(importer=following, imported=start)) is not None]
    modules = min(chains, key=len)
    return [graph.get_import_details(importer=importer, imported=imported)[0]
            for importer, imported in zip(modules, modules[1:], strict=False)]
