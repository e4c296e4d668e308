#!/usr/bin/env python3
"""Checks the layout rule of doc/design.md ("The layout: N parts, arrows down only") against
the `#include "..."` lines of src/ and include/.

The table in design.md is the only statement of the rule: its rows give each part its files
(`ops/` and `policy/` are every file there) and the parts it may use (the part names of its
"may use" cell before the first ';', what follows being the why); a part may always use itself.
A header belongs to the part the table gives it, else to the part of the .c file of its name
(include/quota.h to quota.c, include/policy.h to policy/policy.c). A file with no part is an
error: every source file must have a place.

Findings, one line each:
  FILE -> HEADER: PART may not use PART   an include the table forbids
  circle: MODULE (PART) <-> MODULE (PART)  a circle between modules, where a module is a .c
                                           file with its header (src/x.c and include/x.h are
                                           "x"; a private header x_int.h belongs to "x"):
                                           x -> y when a file of x includes a header of y
Every circle between parts needs an arrow going up, so it is found as a forbidden arrow; the
rule itself is checked to have no circle.

test/arrows-debts.txt lists the findings still to be removed (issue 30). The check passes
when every finding is listed, and fails on a finding that is not and on a listed one that no
longer occurs (the debt is paid: its line must go), so the list can only shrink.

usage: test/arrows.py [--report]   (--report first prints the parts, their files and the
                                    number of includes between parts)
Exit 0 when the tree keeps the rule but for the listed debts, 1 otherwise. Run by meson test
as `arrows` (the unit phase of test/run).
"""
import posixpath
import re
import sys
import textwrap
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DESIGN = "doc/design.md"
DEBTS = "test/arrows-debts.txt"
SECTION = re.compile(r"^## The layout: \w+ parts, arrows down only$", re.M)
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.M)


class LayoutError(Exception):
    """The check cannot be made (the table or a file is not what it must be): never a debt."""


def read_table():
    """The layout table as {part: (names, parts it may use)}, in the table's order."""
    text = (REPO / DESIGN).read_text()
    heading = SECTION.search(text)
    if not heading:
        raise LayoutError(f"{DESIGN} has no section '{SECTION.pattern}'")
    rows = []
    for line in text[heading.end():].splitlines()[1:]:
        if line.startswith("|"):
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif rows:  # the first line after the table ends it
            break
    if len(rows) < 3 or rows[0] != ["part", "files", "may use"]:
        raise LayoutError(f"{DESIGN}: no table '| part | files | may use |' under "
                          f"'{heading.group()}'")
    body = rows[2:]
    parts = [row[0] for row in body]
    table = {}
    for part, files, may_use in body:
        # a parenthesis in the files cell says what a file is or names what a directory holds
        names = re.findall(r"`([^`]+)`", re.sub(r"\([^)]*\)", "", files))
        rule = may_use.split(";")[0]
        uses = {p for p in parts if re.search(rf"\b{re.escape(p)}\b", rule)}
        table[part] = (names, uses | {part})
    return table


def check_rule_goes_down(table):
    """The table itself must not let parts use each other in a circle: then a circle between
    parts in the code always has a forbidden arrow in it, and is reported by that arrow."""
    graph = {part: uses - {part} for part, (_, uses) in table.items()}
    for part in graph:
        if part in reachable(graph, part):
            raise LayoutError(f"{DESIGN}: the table lets {part} use itself through other parts")


def source_files():
    """Every C file the rule is about, as paths from the top of the tree."""
    found = [*(REPO / "src").rglob("*.[ch]"), *(REPO / "include").glob("*.h")]
    return sorted(p.relative_to(REPO).as_posix() for p in found)


def implementation(header, files):
    """The .c file of a header's name: src/x.c, else the one src/DIR/x.c (include/policy.h
    is policy/policy.c's); None for a header with no .c."""
    stem = posixpath.basename(header)[:-2]
    if f"src/{stem}.c" in files:
        return f"src/{stem}.c"
    found = [f for f in files if f.endswith(f"/{stem}.c") and f.count("/") == 2]
    return found[0] if len(found) == 1 else None


def place_files(table, files):
    """{file: part}: the files the table names, then each other header by its .c file."""
    part_of = {}
    for part, (names, _) in table.items():
        for name in names:
            if name.endswith("/"):
                named = [f for f in files if f.startswith(f"src/{name}")]
            else:
                named = [f for f in (f"src/{name}", f"include/{name}") if f in files][:1]
            if not named:
                raise LayoutError(f"{DESIGN} gives {part} `{name}`, which is not in the tree")
            for f in named:
                if part_of.setdefault(f, part) != part:
                    raise LayoutError(f"{DESIGN} gives {f} to {part_of[f]} and to {part}")
    for f in files:
        if f.endswith(".h") and f not in part_of and implementation(f, files) in part_of:
            part_of[f] = part_of[implementation(f, files)]
    homeless = [f for f in files if f not in part_of]
    if homeless:
        raise LayoutError("\n".join(f"{f}: the table of {DESIGN} gives it no part"
                                    for f in homeless))
    return part_of


def read_arrows(files):
    """Every `#include "..."` as (file, header), the header found where the compiler looks:
    beside the file, then in include/ (the one include directory of meson.build)."""
    arrows = set()
    for f in files:
        for name in INCLUDE.findall((REPO / f).read_text()):
            paths = [posixpath.normpath(f"{d}/{name}") for d in (posixpath.dirname(f), "include")]
            header = next((p for p in paths if p in files), None)
            if header is None:
                raise LayoutError(f'{f}: #include "{name}" is neither beside it nor in include/')
            arrows.add((f, header))
    return sorted(arrows)


def module(f, files):
    """The node of the circle graph: a header is one with its .c file, and a private header
    x_int.h, shared by x's files, is x's (else including it would make a circle with x)."""
    if f.endswith(".h"):
        f = implementation(f, files) or f
    name = f.split("/", 1)[1][:-2]
    return name[:-4] if name.endswith("_int") else name


def reachable(graph, start):
    """The nodes reached from start by one arrow or more."""
    seen, todo = set(), list(graph.get(start, ()))
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(graph.get(node, ()))
    return seen


def forbidden_arrows(arrows, part_of, table):
    """The includes from a part to one its "may use" cell does not name."""
    return [f"{f} -> {h}: {part_of[f]} may not use {part_of[h]}"
            for f, h in arrows if part_of[h] not in table[part_of[f]][1]]


def circles(arrows, part_of, files):
    """{finding: the arrows that make it}, one per strongly connected set of two or more
    modules."""
    mod = {f: module(f, files) for f in files}
    inner = [(f, h) for f, h in arrows if mod[f] != mod[h]]
    graph = defaultdict(set)
    for f, h in inner:
        graph[mod[f]].add(mod[h])
    reach = {node: reachable(graph, node) for node in list(graph)}
    found, done = {}, set()
    for node in sorted(reach):
        circle = sorted(m for m in reach[node] if node in reach.get(m, ()))
        if node in done or len(circle) < 2:
            continue
        done.update(circle)
        parts = {m: "/".join(sorted({part_of[f] for f in files if mod[f] == m})) for m in circle}
        line = "circle: " + " <-> ".join(f"{m} ({parts[m]})" for m in circle)
        found[line] = [f"{f} -> {h}" for f, h in inner if mod[f] in circle and mod[h] in circle]
    return found


def read_debts():
    """The findings test/arrows-debts.txt lists: its lines but comments and blank ones."""
    lines = (REPO / DEBTS).read_text().splitlines()
    return [line for line in lines if line.strip() and not line.startswith("#")]


def report(table, part_of, arrows):
    """--report: each part's files, then how many includes go from one part to another."""
    for part in table:
        files = [f for f in sorted(part_of) if part_of[f] == part]
        print(f"{part} ({len(files)} files):")
        print(textwrap.fill(" ".join(files), 100, initial_indent="  ", subsequent_indent="  "))
    print("includes between parts:")
    counts = Counter((part_of[f], part_of[h]) for f, h in arrows if part_of[f] != part_of[h])
    for a in table:  # in the table's order, top down
        for b in table:
            if counts[a, b]:
                forbidden = "" if b in table[a][1] else "  (forbidden)"
                print(f"  {a} -> {b}: {counts[a, b]}{forbidden}")
    print()


def main(argv):
    if argv not in ([], ["--report"]):
        print("usage: " + __doc__.split("usage: ")[1].strip(), file=sys.stderr)
        return 2
    try:
        table = read_table()
        check_rule_goes_down(table)
        files = source_files()
        part_of = place_files(table, files)
        arrows = read_arrows(files)
    except LayoutError as e:
        print(f"arrows: {e}")
        return 1
    if argv:
        report(table, part_of, arrows)
    found = dict.fromkeys(forbidden_arrows(arrows, part_of, table), [])
    found.update(circles(arrows, part_of, files))
    debts = read_debts()
    new = [line for line in found if line not in debts]
    paid = [line for line in debts if line not in found]
    for line in new:
        print(line)
        for why in found[line]:
            print(f"    {why}")
    for line in paid:
        print(f"{line}\n    the debt is paid: remove this line from {DEBTS}")
    if new or paid:
        print(f"arrows: {len(new)} finding(s) not in {DEBTS}, {len(paid)} debt(s) paid")
        return 1
    print(f"arrows: the layout of {DESIGN} holds but for the {len(debts)} debts of {DEBTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
