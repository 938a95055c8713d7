#!/usr/bin/env python3
"""Lists what a WebAssembly component imports and which custom sections it carries.

    python3 inspect.py path/to/tool.wasm [--section NAME]

Prints the component's top-level imports (what the host must provide: for a bb7 tool, WASI
interfaces only), then every custom section with where it sits (`component` for the top level,
`component/module[0]` for the first nested core module, ...) and its size. With --section NAME it
prints that section's contents (the first one found, at any level) instead and exits 1 if there is
none: `python3 inspect.py word_count.wasm --section bb7-manifest` shows the embedded manifest.

Standard library only; it understands just enough of the binary format to find these things.
"""

import sys


class Reader:
    def __init__(self, data, pos=0, end=None):
        self.data = data
        self.pos = pos
        self.end = len(data) if end is None else end

    def byte(self):
        if self.pos >= self.end:
            raise ValueError("unexpected end of data")
        b = self.data[self.pos]
        self.pos += 1
        return b

    def u32(self):
        result, shift = 0, 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return result

    def bytes(self, n):
        if self.pos + n > self.end:
            raise ValueError("unexpected end of data")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def name(self):
        return self.bytes(self.u32()).decode("utf-8", "replace")

    def done(self):
        return self.pos >= self.end


COMPONENT_EXTERN = {0x01: "func", 0x02: "value", 0x03: "type", 0x04: "component", 0x05: "instance"}


def component_imports(r):
    """Parses a component import section; returns [(name, kind)]."""
    out = []
    for _ in range(r.u32()):
        tag = r.byte()
        name = r.name()
        if tag == 0x01:  # name with a version suffix (newer encoders)
            r.name()
        elif tag != 0x00:
            raise ValueError(f"unknown import name tag {tag:#x}")
        kind = r.byte()
        if kind == 0x00:  # core module: 0x11 typeidx
            r.byte()
            r.u32()
            out.append((name, "core module"))
        elif kind in (0x01, 0x04, 0x05):
            r.u32()
            out.append((name, COMPONENT_EXTERN[kind]))
        elif kind in (0x02, 0x03):  # value / type bound: 0x00 idx | 0x01 (sub resource) or valtype
            bound = r.byte()
            if bound == 0x00 or kind == 0x02:
                r.u32()
            out.append((name, COMPONENT_EXTERN[kind]))
        else:
            raise ValueError(f"unknown extern kind {kind:#x}")
    return out


def walk(data, where, customs, imports, top):
    if data[:4] != b"\0asm":
        raise ValueError(f"{where}: not a WebAssembly binary")
    layer = data[6]
    r = Reader(data, 8)
    modules = components = 0
    while not r.done():
        sid = r.byte()
        size = r.u32()
        start = r.pos
        body = Reader(data, start, start + size)
        if sid == 0:
            name = body.name()
            customs.append((where, name, data[body.pos : start + size]))
        elif layer == 1 and sid == 1:  # nested core module
            walk(data[start : start + size], f"{where}/module[{modules}]", customs, imports, False)
            modules += 1
        elif layer == 1 and sid == 4:  # nested component
            walk(data[start : start + size], f"{where}/component[{components}]", customs, imports, False)
            components += 1
        elif layer == 1 and sid == 10 and top:
            imports.extend(component_imports(body))
        r.pos = start + size


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 2
    data = open(argv[1], "rb").read()
    if data[:4] != b"\0asm":
        print(f"{argv[1]}: not a WebAssembly binary", file=sys.stderr)
        return 2
    is_component = data[6] == 1
    customs, imports = [], []
    walk(data, "component" if is_component else "module", customs, imports, True)
    if len(argv) >= 4 and argv[2] == "--section":
        for where, name, payload in customs:
            if name == argv[3]:
                sys.stdout.write(payload.decode("utf-8", "replace"))
                return 0
        print(f"no custom section named {argv[3]!r}", file=sys.stderr)
        return 1
    if not is_component:
        print("note: a core module, not a component (bb7 runs components only)")
    print(f"{argv[1]}: {len(data)} bytes")
    print("imports:")
    for name, kind in imports:
        print(f"  {name} ({kind})")
    print("custom sections:")
    for where, name, payload in customs:
        print(f"  {name} in {where}, {len(payload)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
