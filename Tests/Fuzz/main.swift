import FuzzTargets
import Glibc
import PaypipeCore

// paypipe-fuzz list
// paypipe-fuzz seeds TARGET DIR          writes the target's seed inputs into DIR
// paypipe-fuzz replay TARGET [PATH...]   runs its seed inputs, then every file (or every file in a directory), once each
// paypipe-fuzz answers TARGET            what each seed came to (authentic-callbacks: the validator's answer; poll-answers: the outcome)
// paypipe-fuzz fuzz TARGET [libFuzzer flags] [CORPUS_DIR...]   only in the build Tests/Fuzz/run makes

let usage = "usage: paypipe-fuzz list | seeds TARGET DIR | replay TARGET [PATH...] | answers TARGET | fuzz TARGET [libFuzzer arguments]"

func fail(_ message: String) -> Never {
    say(message)
    exit(2)
}

/// Written at once, unbuffered: a crash right after must not lose it.
func say(_ line: String) {
    let bytes = Array((line + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
}

func target(_ name: String) -> FuzzTarget {
    guard let target = FuzzTarget(rawValue: name) else {
        fail("no fuzz target \(name): \(FuzzTarget.allCases.map(\.rawValue).joined(separator: ", "))")
    }
    return target
}

/// The files at `path`: itself, or those directly inside it, in name order.
func files(at path: String) -> [String] {
    guard let names = directoryEntries(path) else { return [path] }
    return names.filter { !$0.hasPrefix(".") }.sorted().map { path + "/" + $0 }
}

var arguments = CommandLine.arguments
// libFuzzer starts copies of this program for -merge, -fork and -jobs with its own arguments
// only: the target comes to them in the environment.
if let inherited = getenv("PAYPIPE_FUZZ_TARGET").map({ String(cString: $0) }),
    arguments.count < 2 || !["list", "seeds", "replay", "answers", "fuzz"].contains(arguments[1])
{
    arguments.insert(contentsOf: ["fuzz", inherited], at: 1)
}
guard arguments.count >= 2 else { fail(usage) }
switch arguments[1] {
case "list":
    for target in FuzzTarget.allCases { print(target.rawValue) }
case "seeds":
    guard arguments.count == 4 else { fail(usage) }
    let (selected, directory) = (target(arguments[2]), arguments[3])
    mkdir(directory, 0o755)
    for (index, seed) in selected.seeds.enumerated() {
        let path = "\(directory)/seed-\(index)"
        guard let file = fopen(path, "wb") else { fail("cannot write \(path)") }
        _ = seed.withUnsafeBufferPointer { fwrite($0.baseAddress, 1, $0.count, file) }
        fclose(file)
    }
    print("\(selected.seeds.count) seeds in \(directory)")
case "replay":
    guard arguments.count >= 3 else { fail(usage) }
    let selected = target(arguments[2])
    for seed in selected.seeds { selected.run(seed) }
    let paths = arguments[3...].flatMap(files(at:))
    for path in paths {
        // Named first, so that a crash's output says which input it was.
        say("replaying \(path)")
        guard let input = readWholeFile(path) else { fail("cannot read \(path)") }
        selected.run(input)
    }
    print("\(selected.rawValue): \(selected.seeds.count) seeds and \(paths.count) inputs, none crashed")
case "answers":
    guard arguments.count == 3 else { fail(usage) }
    for line in target(arguments[2]).seedAnswers() { print(line) }
case "fuzz":
    runLibFuzzer(arguments)
default:
    fail(usage)
}

#if PAYPIPE_FUZZ
@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt

/// The target libFuzzer's callback runs: a C callback cannot capture it.
nonisolated(unsafe) var selectedTarget = FuzzTarget.json

/// libFuzzer's runtime refers to this name even when the driver is started by hand.
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    selectedTarget.run(size == 0 ? [] : Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}

func runLibFuzzer(_ arguments: [String]) -> Never {
    guard arguments.count >= 3 else { fail(usage) }
    selectedTarget = target(arguments[2])
    setenv("PAYPIPE_FUZZ_TARGET", arguments[2], 1)
    // libFuzzer reads its own flags and corpus directories from argv; the program name stays first.
    var argv: [UnsafeMutablePointer<CChar>?] = ([arguments[0]] + arguments[3...]).map { strdup($0) } + [nil]
    var argc = CInt(argv.count - 1)
    let status = argv.withUnsafeMutableBufferPointer { buffer -> CInt in
        var base: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = buffer.baseAddress
        return LLVMFuzzerRunDriver(&argc, &base, fuzzOneInput)
    }
    exit(status)
}
#else
func runLibFuzzer(_ arguments: [String]) -> Never {
    fail("this build has no libFuzzer: run Tests/Fuzz/run TARGET [SECONDS]")
}
#endif
