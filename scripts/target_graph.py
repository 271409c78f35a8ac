#!/usr/bin/env python3
"""collwatch's target graph, from CMake, drawn into docs/architecture.md.

Configures the source tree into a scratch folder with `cmake --graphviz` (tests and
benchmarks off: they may link anything), keeps collwatch's own libraries and its two
programs, places each in the layer of the folder that defines it, and checks that every
dependency points down the layers (or stays inside one folder). --write puts the drawing
between the markers in docs/architecture.md; --check fails when a dependency points up
or the drawing there is out of date. Run by ctest (architecture_graph).
"""
import argparse
import pathlib
import re
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
BEGIN = "<!-- target-graph:begin (scripts/target_graph.py --write) -->"
END = "<!-- target-graph:end -->"

# Bottom to top: a target may depend on its own folder's targets and on lower layers.
LAYERS = [
    ("files", "collwatch's own inputs and outputs: no blocking, no links followed"),
    ("ring", "the ring format, its reader, names, hash, clocks"),
    ("process", "a process apart from its calls: identity, /proc looks, ranks it holds"),
    ("cpython", "CPython's layouts and code objects, read from memory"),
    ("cpu_nccl", "the CPU NCCL backend (libnccl.so.2)"),
    ("interposer", "the preload that writes rings"),
    ("stacks", "what a stuck process's threads are doing: native and Python stacks"),
    ("proto", "the wire: schema and client channel"),
    ("store", "trace store, ring record <-> wire event"),
    ("flight_recorder", "PyTorch Flight Recorder dumps: reader, import"),
    ("analyzer", "job model, detection, words, schedules"),
    ("agent", "node agent"),
    ("collector", "collector service, online analysis"),
    ("dashboard", "collwatch top"),
    ("cli", "the collwatch commands"),
    ("trainer", "the bundled ZeRO-3 trainer"),
]
# Programs drawn with the libraries (every other executable is a test, tool or benchmark).
PROGRAMS = {"collwatch", "collwatch_trainer"}


def defining_folders():
    """Maps each target name to the top-level folder whose CMake files define it."""
    folders = {}
    pattern = re.compile(r"add_(?:library|executable)\(\s*([A-Za-z0-9_]+)")
    for layer, _ in LAYERS:
        for cmake_file in list((ROOT / layer).glob("CMakeLists.txt")) + list((ROOT / layer).glob("*.cmake")):
            for name in pattern.findall(cmake_file.read_text()):
                folders[name] = layer
    return folders


def read_graph(cmake, build_dir):
    dot = pathlib.Path(build_dir) / "targets.dot"
    subprocess.run([cmake, "-S", str(ROOT), "-B", str(build_dir), "-DCOLLWATCH_BUILD_TESTS=OFF",
                    "-DCOLLWATCH_BUILD_BENCHMARKS=OFF", f"--graphviz={dot}"],
                   check=True, stdout=subprocess.DEVNULL)
    names, shapes, edges = {}, {}, []
    for line in dot.read_text().splitlines():
        node = re.match(r'\s*"(node\d+)" \[ label = "((?:[^"\\]|\\.)*)", shape = (\w+)', line)
        if node:
            name = node.group(2).split("\\n")[0]  # "collwatch_agent\n(collwatch::agent)"
            names[node.group(1)] = name
            shapes[name] = node.group(3)
            continue
        edge = re.match(r'\s*"(node\d+)" -> "(node\d+)"', line)
        if edge:
            edges.append((edge.group(1), edge.group(2)))
    return [(names[a], names[b]) for a, b in edges], shapes


def drawing(targets, edges, folders):
    lines = ["```mermaid", "flowchart TB"]
    for layer, role in reversed(LAYERS):
        members = sorted(t for t in targets if folders[t] == layer)
        if not members:
            continue
        lines.append(f'  subgraph {layer}["{layer}/: {role}"]')
        lines.extend(f"    {t}" for t in members)
        lines.append("  end")
    lines.extend(f"  {a} --> {b}" for a, b in sorted(set(edges)))
    lines.append("```")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="fail on an upward arrow or a stale drawing")
    mode.add_argument("--write", action="store_true", help="write the drawing into docs/architecture.md")
    parser.add_argument("--cmake", default="cmake", help="the cmake to configure with")
    args = parser.parse_args()

    folders = defining_folders()
    with tempfile.TemporaryDirectory(prefix="collwatch-graph-") as build_dir:
        all_edges, shapes = read_graph(args.cmake, build_dir)
    ours = {t for t in folders if (shapes.get(t) != "egg" or t in PROGRAMS) and t in shapes}
    edges = [(a, b) for a, b in all_edges if a in ours and b in ours]
    order = {layer: i for i, (layer, _) in enumerate(LAYERS)}
    upward = [(a, b) for a, b in edges
              if folders[a] != folders[b] and order[folders[b]] > order[folders[a]]]
    for a, b in upward:
        print(f"target_graph: {a} ({folders[a]}/) depends on {b} ({folders[b]}/), a layer above it",
              file=sys.stderr)

    text = DOC.read_text()
    if BEGIN not in text or END not in text:
        print(f"target_graph: {DOC} lacks the markers {BEGIN} ... {END}", file=sys.stderr)
        return 1
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    updated = f"{head}{BEGIN}\n{drawing(ours, edges, folders)}\n{END}{tail}"
    if args.write:
        DOC.write_text(updated)
    elif updated != text:
        print("target_graph: docs/architecture.md's target graph is out of date: "
              "run scripts/target_graph.py --write", file=sys.stderr)
        return 1
    return 1 if upward else 0


if __name__ == "__main__":
    sys.exit(main())
