import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Monotonic clock in nanoseconds (CLOCK_MONOTONIC).
public func monotonicNanoseconds() -> UInt64 {
    var t = timespec()
    clock_gettime(CLOCK_MONOTONIC, &t)
    return UInt64(t.tv_sec) * 1_000_000_000 + UInt64(t.tv_nsec)
}

/// The word after `name` on the command line, if any.
public func argument(_ name: String) -> String? {
    guard let index = CommandLine.arguments.firstIndex(of: name), index + 1 < CommandLine.arguments.count else { return nil }
    return CommandLine.arguments[index + 1]
}

/// The integer after `name` on the command line, or `fallback`.
public func argument(_ name: String, _ fallback: Int) -> Int {
    argument(name).flatMap { Int($0) } ?? fallback
}

public func log(_ text: String) {
    let program = (CommandLine.arguments.first.map { ($0 as NSString).lastPathComponent }) ?? "bench"
    FileHandle.standardError.write(Data("\(program): \(text)\n".utf8))
}

public struct BenchError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// One child process of a scenario: a pipeline stage or the sandbox.
public struct Child: Sendable {
    public let role: String
    public let name: String
    public let pid: pid_t
    public let stdoutPath: String
    public let stderrPath: String
}

/// Every child process the driver started and has not yet reaped, so that an error or a signal
/// can stop them all. Stops only these PIDs, never anything found by name.
public final class ChildRegistry: Sendable {
    public static let shared = ChildRegistry()

    private struct State {
        public var running: [Child] = []
        var exitStatus: [pid_t: Int32] = [:]
    }
    private let state = Mutex(State())

    public func add(_ child: Child) { state.withLock { $0.running.append(child) } }

    /// Reaps `pid` without blocking; returns its wait status once it has exited.
    public func poll(_ pid: pid_t) -> Int32? {
        if let status = state.withLock({ $0.exitStatus[pid] }) { return status }
        var status: Int32 = 0
        let result = waitpid(pid, &status, WNOHANG)
        if result == pid || (result < 0 && errno == ECHILD) {
            let code = result == pid ? status : -1
            state.withLock { s in
                s.exitStatus[pid] = code
                s.running.removeAll { $0.pid == pid }
            }
            return code
        }
        return nil
    }

    public var running: [Child] { state.withLock { $0.running } }

    /// Stops `children` role by role in the given order: SIGTERM to every copy of a role, wait up
    /// to `timeout` seconds, then SIGKILL what is left and reap it.
    public func stop(_ children: [Child], timeout: Double = 10) {
        var roles: [[Child]] = []
        for child in children {
            if let last = roles.last?.last, last.role == child.role {
                roles[roles.count - 1].append(child)
            } else {
                roles.append([child])
            }
        }
        for role in roles {
            for child in role where poll(child.pid) == nil { kill(child.pid, SIGTERM) }
            let deadline = monotonicNanoseconds() + UInt64(timeout * 1e9)
            while role.contains(where: { poll($0.pid) == nil }) && monotonicNanoseconds() < deadline { usleep(20_000) }
            for child in role where poll(child.pid) == nil {
                log("\(child.name) (pid \(child.pid)) did not stop within \(Int(timeout)) s; SIGKILL")
                kill(child.pid, SIGKILL)
            }
            let killDeadline = monotonicNanoseconds() + 5_000_000_000
            while role.contains(where: { poll($0.pid) == nil }) && monotonicNanoseconds() < killDeadline { usleep(20_000) }
        }
    }

    /// Stops every child still running, newest first.
    public func stopAll(timeout: Double = 10) { stop(running.reversed(), timeout: timeout) }
}

/// Starts `executable` with stdin from /dev/null and stdout/stderr into files. Through
/// `setpriv --pdeathsig TERM` when available, so a child also stops if the driver is killed
/// outright (the death signal follows the spawning thread: call this from the main thread).
/// `nice`: how far below the driver's its priority is, as `paypipe up --worker-nice` sets it,
/// through `nice(1)`, which like `setpriv` execs the executable in place: the PID is the stage's.
public func spawnChild(
    role: String, name: String, executable: String, arguments: [String], environment: [String: String], logDirectory: String,
    nice: Int = 0
) throws -> Child {
    guard FileManager.default.isExecutableFile(atPath: executable) else {
        throw BenchError("no executable at \(executable) (build first, or pass --bin-dir)")
    }
    let stdoutPath = "\(logDirectory)/\(name).out"
    let stderrPath = "\(logDirectory)/\(name).err"
    var argv = [executable] + arguments
    var program = executable
    if nice > 0 {
        program = "/usr/bin/nice"
        guard FileManager.default.isExecutableFile(atPath: program) else {
            throw BenchError("\(program) is missing (coreutils): needed to start \(name) at nice \(nice)")
        }
        argv = [program, "-n", String(nice)] + argv
    }
    let setpriv = "/usr/bin/setpriv"
    if FileManager.default.isExecutableFile(atPath: setpriv) {
        program = setpriv
        argv = [setpriv, "--pdeathsig", "TERM", "--"] + argv
    }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, stdoutPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    posix_spawn_file_actions_addopen(&actions, 2, stderrPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    let envp = environment.map { "\($0.key)=\($0.value)" }
    let cArgs = argv.map { strdup($0) } + [nil]
    let cEnv = envp.map { strdup($0) } + [nil]
    defer {
        for p in cArgs { free(p) }
        for p in cEnv { free(p) }
    }
    var pid: pid_t = 0
    let result = posix_spawn(&pid, program, &actions, nil, cArgs, cEnv)
    guard result == 0 else { throw BenchError("cannot start \(executable): \(String(cString: strerror(result)))") }
    let child = Child(role: role, name: name, pid: pid, stdoutPath: stdoutPath, stderrPath: stderrPath)
    ChildRegistry.shared.add(child)
    return child
}

/// The environment for children: ours, without the variables that would override the generated
/// config's endpoints.
public func childEnvironment(logLevel: String?) -> [String: String] {
    var environment = ProcessInfo.processInfo.environment
    for key in ["PAYPIPE_INTAKE", "PAYPIPE_OUTCOMES", "PAYPIPE_CALLBACK_ADDR", "PAYPIPE_CONFIG"] { environment[key] = nil }
    if let logLevel { environment["PAYPIPE_LOG_LEVEL"] = logLevel }
    return environment
}

public func lastLines(_ path: String, _ count: Int = 5) -> String {
    guard let data = FileManager.default.contents(atPath: path) else { return "" }
    return String(decoding: data, as: UTF8.self).split(separator: "\n").suffix(count).joined(separator: "\n")
}

/// Waits until `marker` appears in one of the child's output files; fails if the child exits
/// or `timeout` seconds pass.
@discardableResult
public func waitForMarker(_ child: Child, _ marker: String, timeout: Double = 30) throws -> String {
    let deadline = monotonicNanoseconds() + UInt64(timeout * 1e9)
    while true {
        for path in [child.stdoutPath, child.stderrPath] {
            guard let data = FileManager.default.contents(atPath: path) else { continue }
            if let line = String(decoding: data, as: UTF8.self).split(separator: "\n").first(where: { $0.contains(marker) }) { return String(line) }
        }
        if let status = ChildRegistry.shared.poll(child.pid) {
            throw BenchError("\(child.name) exited (wait status \(status)) before printing \"\(marker)\":\n\(lastLines(child.stderrPath))")
        }
        if monotonicNanoseconds() > deadline {
            throw BenchError("\(child.name) did not print \"\(marker)\" within \(Int(timeout)) s:\n\(lastLines(child.stderrPath))")
        }
        usleep(20_000)
    }
}

/// `count` distinct free TCP ports on 127.0.0.1 (bound to port 0 together, then released).
public func freePorts(_ count: Int) throws -> [Int] {
    var sockets: [Int32] = []
    defer { for s in sockets { close(s) } }
    var ports: [Int] = []
    for _ in 0..<count {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw BenchError("socket: \(String(cString: strerror(errno)))") }
        sockets.append(fd)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else { throw BenchError("bind: \(String(cString: strerror(errno)))") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        ports.append(Int(UInt16(bigEndian: address.sin_port)))
    }
    return ports
}

// MARK: - /proc

public let clockTicksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))

/// utime + stime of a process in seconds (all its threads), from /proc/PID/stat.
public func cpuSeconds(_ pid: pid_t) -> Double? {
    guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/stat") else { return nil }
    let text = String(decoding: data, as: UTF8.self)
    guard let close = text.lastIndex(of: ")") else { return nil }
    // Fields after the command name, starting with field 3 (state): utime is field 14, stime 15.
    let fields = text[text.index(after: close)...].split(separator: " ")
    guard fields.count > 12, let utime = Double(fields[11]), let stime = Double(fields[12]) else { return nil }
    return (utime + stime) / clockTicksPerSecond
}

/// CPU seconds of every process of a PostgreSQL server, by PID: the postmaster (the first line
/// of `DATA/postmaster.pid`) and its children, the backends and background workers. A backend
/// that ends between two samples takes its CPU time with it; the ledger's connection lasts the
/// whole run.
public func postgresCPUSeconds(dataDirectory: String) -> [pid_t: Double] {
    guard let text = try? String(contentsOfFile: dataDirectory + "/postmaster.pid", encoding: .utf8),
        let postmaster = text.split(separator: "\n").first.flatMap({ pid_t($0) })
    else { return [:] }
    var seconds: [pid_t: Double] = [:]
    seconds[postmaster] = cpuSeconds(postmaster)
    for name in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
        guard let pid = pid_t(name), let data = FileManager.default.contents(atPath: "/proc/\(pid)/stat") else { continue }
        let stat = String(decoding: data, as: UTF8.self)
        guard let close = stat.lastIndex(of: ")") else { continue }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        if fields.count > 1, pid_t(fields[1]) == postmaster { seconds[pid] = cpuSeconds(pid) }
    }
    return seconds
}

/// A field of /proc/PID/status in kB (e.g. VmHWM, the peak resident set size).
public func statusKilobytes(_ pid: pid_t, _ field: String) -> Int? {
    guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/status") else { return nil }
    for line in String(decoding: data, as: UTF8.self).split(separator: "\n") where line.hasPrefix(field + ":") {
        return Int(line.dropFirst(field.count + 1).split(whereSeparator: { $0 == " " || $0 == "\t" }).first ?? "")
    }
    return nil
}

/// Busy and total CPU seconds of the whole machine since boot, from /proc/stat.
public func machineCPU() -> (busy: Double, total: Double)? {
    guard let data = FileManager.default.contents(atPath: "/proc/stat") else { return nil }
    guard let line = String(decoding: data, as: UTF8.self).split(separator: "\n").first(where: { $0.hasPrefix("cpu ") }) else { return nil }
    let values = line.split(separator: " ").dropFirst().compactMap { Double($0) }
    guard values.count >= 5 else { return nil }
    // user nice system idle iowait irq softirq steal (guest is already in user).
    let total = values.prefix(8).reduce(0, +)
    let idle = values[3] + values[4]
    return ((total - idle) / clockTicksPerSecond, total / clockTicksPerSecond)
}
