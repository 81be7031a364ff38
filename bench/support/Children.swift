import Foundation
import Supervision
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
    package let process: ChildProcess
    public let stdoutPath: String
    public let stderrPath: String
    public var pid: pid_t { process.pid }
}

/// Every child process the driver started and has not yet stopped, so that an error or a signal
/// can stop them all. Stops only these children, never anything found by name.
public final class ChildRegistry: Sendable {
    public static let shared = ChildRegistry()

    private let children = Mutex<[Child]>([])

    public func add(_ child: Child) { children.withLock { $0.append(child) } }

    /// The exit status of `pid` once it has ended (128 + the signal that ended it), else nil.
    public func poll(_ pid: pid_t) -> Int32? {
        guard let child = children.withLock({ $0.first { $0.pid == pid } }) else { return -1 }
        return child.process.exitStatus
    }

    public var running: [Child] { children.withLock { $0.filter(\.process.isRunning) } }

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
            let late = role.filter(\.process.isRunning)
            ChildProcess.stopBlocking(role.map(\.process), grace: .milliseconds(Int64(timeout * 1000)))
            for child in late where child.process.exitStatus == 128 + SIGKILL {
                log("\(child.name) (pid \(child.pid)) did not stop within \(Int(timeout)) s; SIGKILL")
            }
        }
        let stopped = Set(children.map(\.pid))
        self.children.withLock { $0.removeAll { stopped.contains($0.pid) } }
    }

    /// Stops every child still running, newest first.
    public func stopAll(timeout: Double = 10) { stop(running.reversed(), timeout: timeout) }
}

/// Starts `executable` with stdin from /dev/null and stdout/stderr into files. Through
/// `setpriv --pdeathsig TERM` when available, so a child also stops if the driver is killed
/// outright (the death signal follows the spawning thread: call this from the main thread).
/// `nice`: how far below the driver's its priority is, as `paypipe up --worker-nice` sets it.
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
    if nice > 0 {
        argv = ["/usr/bin/nice", "-n", String(nice)] + argv
    }
    let setpriv = "/usr/bin/setpriv"
    if FileManager.default.isExecutableFile(atPath: setpriv) {
        argv = [setpriv, "--pdeathsig", "TERM", "--"] + argv
    }
    let process: ChildProcess
    do {
        process = try ChildProcess(
            argv, name: name, environment: environment, stdout: .file(stdoutPath, append: false), stderr: .file(stderrPath, append: false))
    } catch {
        throw BenchError("cannot start \(executable): \(error.reason)")
    }
    let child = Child(role: role, name: name, process: process, stdoutPath: stdoutPath, stderrPath: stderrPath)
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
            throw BenchError("\(child.name) exited (status \(status)) before printing \"\(marker)\":\n\(lastLines(child.stderrPath))")
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
