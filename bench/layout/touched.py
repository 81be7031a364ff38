#!/usr/bin/env python3
"""The input sections of .text that each stage process has resident, for bench/layout/run.

    touched.py OUT BIN_DIR MAP_DIR name=pid...

Samples every process's page table (/proc/PID/pagemap, the present bit) once a second until every
process is gone or 120 s have passed, keeps the union of the pages of its executable's code it
ever had resident, and appends to OUT the name of every input section (from the linker's map,
MAP_DIR/<executable>.map) that lies on one of those pages. Run with read-ahead off, a page is
resident only if some process executed or read it.
"""
import re
import struct
import sys
import time

EXECUTABLES = {"ledger": "paypipe-ledger", "signer": "paypipe-signer", "submitter": "paypipe-submitter"}


def text_sections(map_path):
    """(address, size, name) of every input section gold placed in the output .text."""
    sections, inside, pending = [], False, None
    for line in open(map_path):
        if line.startswith(".text "):
            inside = True
            continue
        if not inside:
            continue
        if line.strip() and not line[0].isspace():
            break
        one_line = re.match(r"^ (\.text\S*)\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s", line)
        if one_line:
            sections.append((int(one_line.group(2), 16), int(one_line.group(3), 16), one_line.group(1)))
            pending = None
            continue
        name_only = re.match(r"^ (\.text\S*)\s*$", line)
        if name_only:
            pending = name_only.group(1)
            continue
        continuation = re.match(r"^\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s", line)
        if continuation and pending:
            sections.append((int(continuation.group(1), 16), int(continuation.group(2), 16), pending))
            pending = None
    return sections


def resident_code_pages(pid, executable):
    """Page numbers of the executable's code that the process has resident. Gold puts the code in
    the first segment, where file offsets and link addresses coincide, so they index the map."""
    pages = set()
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/pagemap", "rb") as pagemap:
        for line in maps:
            fields = line.split()
            if len(fields) < 6 or not fields[5].endswith("/" + executable) or "x" not in fields[1]:
                continue
            low, high = (int(value, 16) for value in fields[0].split("-"))
            offset = int(fields[2], 16)
            for page in range(low >> 12, high >> 12):
                pagemap.seek(page * 8)
                if struct.unpack("<Q", pagemap.read(8))[0] >> 63:
                    pages.add((offset + (page << 12) - low) >> 12)
    return pages


def main():
    out, bin_dir, map_dir = sys.argv[1:4]
    processes = []
    for pair in sys.argv[4:]:
        name, pid = pair.split("=", 1)
        executable = EXECUTABLES.get(name.split("-")[0])
        if executable:
            processes.append((name, pid, executable))
    seen = {name: set() for name, _, _ in processes}
    deadline = time.time() + 120
    while time.time() < deadline:
        alive = 0
        for name, pid, executable in processes:
            try:
                seen[name] |= resident_code_pages(pid, executable)
                alive += 1
            except OSError:
                continue
        if alive == 0:
            break
        time.sleep(1)
    names = set()
    for name, _, executable in processes:
        on_pages = [(size, section) for address, size, section in text_sections(f"{map_dir}/{executable}.map")
                    if size and any(page in seen[name] for page in range(address >> 12, (address + size + 4095) >> 12))]
        names.update(section for _, section in on_pages)
        print(f"{name}: {len(seen[name]) * 4 / 1024:.2f} MiB of code resident, "
              f"{len(on_pages)} sections ({sum(size for size, _ in on_pages) / 2**20:.2f} MiB) on it", file=sys.stderr)
    with open(out, "a") as handle:
        for section in sorted(names):
            handle.write(section + "\n")


if __name__ == "__main__":
    main()
