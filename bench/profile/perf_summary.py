#!/usr/bin/env python3
"""Summarises `perf script -F pid,tid,ip,sym,dso` output (recorded with -g) per process.

    perf_summary.py SCRIPT_FILE PID=name [PID=name ...]

For each process: its share of all samples; self time by kind (kernel, malloc/free,
retain/release, hashing, strings, sqlite, zmq, other user code); kernel self time by syscall;
self time attributed to the innermost frame of a known module (NIO, AsyncHTTPClient, the
project's own modules, SQLite, libzmq); the top self symbols; and the project's own functions
(plus SQLite) by inclusive time. Symbols are demangled with `swift demangle`.
"""
import collections
import re
import subprocess
import sys

# The project's own modules (Package.swift), by the prefix their symbols demangle with.
OWN_MODULES = ('PaypipeCore', 'StageWire', 'StageRuntime', 'HTTPTransport', 'ZeroMQ', 'Connectors', 'LedgerStage', 'SignerStage',
               'SubmitterStage', 'CallbacksStage', 'PollerStage', 'Sandbox', 'TrustPayments', 'NetsEasy',
               'PhonePe', 'Cleeng', 'Viva')
OWN = tuple(name + '.' for name in OWN_MODULES)
MODULE = re.compile(r'\b(NIOCore|NIOPosix|NIOHTTP1|NIOConcurrencyHelpers|AsyncHTTPClient|' + '|'.join(OWN_MODULES) + r'|'
                    r'Hummingbird\w*|HTTPTypes|Logging|Metrics|Prometheus|ServiceLifecycle|Crypto|JWTKit)\.')
PREFIXES = re.compile(r'^(specialized |partial apply for |closure #\d+ (\([^)]*\) )?in |generic specialization <[^>]*> of |merged |'
                      r'implicit closure #\d+ in |static |thunk for |outlined .* of )+')


def read_samples(path):
    samples, current = [], None
    for line in open(path, errors='replace'):
        if not line.strip():
            if current:
                samples.append(current)
            current = None
        elif re.match(r'^\s*\d+/\d+\s*$', line):
            current = (line.split('/')[0].strip(), [])
        else:
            m = re.match(r'\s*[0-9a-f]+ (.*) \((.*)\)$', line.rstrip())
            if m and current is not None:
                current[1].append((m.group(1), m.group(2).split('/')[-1]))
    if current:
        samples.append(current)
    return samples


def demangle(symbols, simplified):
    args = ['swift', 'demangle', '--compact'] + (['--simplified'] if simplified else [])
    out = subprocess.run(args, input='\n'.join(symbols), capture_output=True, text=True).stdout.split('\n')
    return dict(zip(symbols, out))


def main():
    path, names = sys.argv[1], dict(a.split('=', 1) for a in sys.argv[2:])
    samples = read_samples(path)
    symbols = sorted({s for _, frames in samples for s, _ in frames})
    full, simple = demangle(symbols, False), demangle(symbols, True)

    def short(s):
        d = simple.get(s, s)
        return (re.sub(r'\(.*', '', d) if len(d) > 100 else d)[:100]

    def module(s, dso):
        if 'sqlite' in dso:
            return 'SQLite'
        if 'zmq' in dso:
            return 'libzmq'
        m = MODULE.search(full.get(s, s))
        return m.group(1) if m else None

    def kind(s, dso):
        d = simple.get(s, s)
        if dso == '[kernel.kallsyms]':
            return 'kernel'
        if re.search(r'malloc|free|_int_|unlink_chunk|consolidate', s):
            return 'malloc/free'
        if re.search(r'swift_(retain|release|bridgeObject)|RefCount', s):
            return 'retain/release'
        if 'sqlite' in dso:
            return 'sqlite'
        if 'zmq' in dso:
            return 'libzmq'
        if 'Hasher' in d:
            return 'hashing'
        if 'String' in d:
            return 'strings'
        return 'other user code'

    total = len(samples)
    print(f'{total} samples')
    for pid, n in collections.Counter(p for p, _ in samples).most_common():
        kinds, syscalls, modules, selfsym, inclusive = (collections.Counter() for _ in range(5))
        for p, frames in samples:
            if p != pid or not frames:
                continue
            top, dso = frames[0]
            kinds[kind(top, dso)] += 1
            selfsym[(short(top), dso)] += 1
            if dso == '[kernel.kallsyms]':
                call = next((s for s, _ in frames if re.match(r'__(x64|do)_sys_', s)), None)
                syscalls[call.replace('__x64_sys_', '') if call else 'none (scheduler/irq)'] += 1
            mod = next((m for m in (module(s, d) for s, d in frames) if m), None)
            modules[mod or ('kernel only' if dso == '[kernel.kallsyms]' else 'runtime/threads only')] += 1
            seen = set()
            for s, d in frames:
                if PREFIXES.sub('', full.get(s, s)).startswith(OWN) or s.startswith('sqlite3'):
                    k = short(s)
                    if k not in seen:
                        seen.add(k)
                        inclusive[k] += 1
        pct = lambda c: f'{100 * c / n:.1f}%'
        print(f'\n===== {names.get(pid, pid)} (pid {pid}): {100 * n / total:.1f}% of all samples')
        print('  self by kind:   ' + ', '.join(f'{k} {pct(v)}' for k, v in kinds.most_common()))
        print('  kernel by call: ' + ', '.join(f'{k} {pct(v)}' for k, v in syscalls.most_common(8)))
        print('  by module:      ' + ', '.join(f'{k} {pct(v)}' for k, v in modules.most_common(10)))
        print('  top self symbols:')
        for (s, dso), c in selfsym.most_common(15):
            print(f'    {pct(c):>6}  {s}  [{dso}]')
        print('  project functions (and SQLite), inclusive:')
        for s, c in inclusive.most_common(20):
            print(f'    {pct(c):>6}  {s}')


if __name__ == '__main__':
    main()
