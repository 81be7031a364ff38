import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A child process, started with `posix_spawn` and supervised here: its ready line, its stop
/// with a grace period, its reaping and exit status. `paypipe up`, the tests and the benchmarks
/// start every child through it.
///
/// Spawned with every descriptor above standard error closed, so a socket or a file another
/// thread opened without O_CLOEXEC never lives on in the child (a file held open for writing
/// cannot be executed: "Text file busy"); with no signal blocked and every signal at its default,
/// whichever thread spawns it (Swift's concurrency threads block nearly all signals, and a child
/// inherits its spawner's mask: a shell script would never see the SIGTERM that stops it).
/// One thread per child waits for it in `waitpid` and keeps its status, so the child is reaped
/// as soon as it ends, exactly once, and nothing else here calls `waitpid` for it.
package final class ChildProcess: Sendable {
    /// Where a standard stream goes.
    package enum Output: Sendable, Equatable {
        /// This process's own.
        case inherit
        /// /dev/null.
        case discard
        /// A file, created if missing; appended to, or truncated first.
        case file(String, append: Bool = true)
        /// A pipe this object reads: held until the ready line (`waitForLine`), then passed on
        /// to `afterReady`. Standard output only.
        indirect case readyLine(afterReady: Output = .discard)
        /// Standard error only: wherever standard output goes.
        case standardOutput
    }

    /// How the wait for a ready line ended.
    package enum Start: Sendable, Equatable {
        case ready(String)
        /// The child closed its output (usually: it exited) without printing the line.
        case ended
        case timedOut
    }

    package let pid: pid_t
    /// What it was started as, for messages.
    package let name: String

    private struct State {
        var status: Int32?
        var output: [UInt8] = []
        var start: Start?
        /// Its standard output has ended and all of it was passed on.
        var outputEnded = false
    }
    private let state = Mutex(State())
    private let marker: String?

    /// Starts `argv[0]` (a path) with `argv`. `environment`: the whole environment, or nil for
    /// this process's. `nice`: how far below this process's priority it runs, through
    /// `/usr/bin/nice`, which execs the program in place (the PID stays the child's).
    /// `readyMarker`: with `stdout: .readyLine`, the text the ready line contains. `onExit` runs
    /// once it has ended and been reaped, with its PID and exit status, on a thread of its own.
    package init(
        _ argv: [String], name: String? = nil, environment: [String: String]? = nil, stdin: String = "/dev/null",
        stdout: Output = .inherit, stderr: Output = .inherit, nice: Int = 0, readyMarker: String? = nil,
        onExit: (@Sendable (_ pid: pid_t, _ status: Int32) -> Void)? = nil
    ) throws(ChildProcessError) {
        let program = argv.first ?? ""
        self.name = name ?? String(program.split(separator: "/").last ?? "")
        var argv = argv
        if nice > 0 { argv = ["/usr/bin/nice", "-n", String(nice)] + argv }
        marker = readyMarker
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, stdin, O_RDONLY, 0)
        var readEnd: Int32 = -1, writeEnd: Int32 = -1
        // The child holds its own copy of the pipe's write end once spawned.
        defer { if writeEnd >= 0 { close(writeEnd) } }
        var afterReady = Output.discard
        if case .readyLine(let then) = stdout {
            var ends: [Int32] = [-1, -1]
            guard pipe(&ends) == 0 else { throw ChildProcessError(command: program, reason: String(cString: strerror(errno))) }
            // Neither end may leak into a child another thread spawns meanwhile.
            for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
            posix_spawn_file_actions_adddup2(&actions, ends[1], 1)
            (readEnd, writeEnd) = (ends[0], ends[1])
            afterReady = then
        } else {
            Self.redirect(&actions, 1, stdout)
        }
        Self.redirect(&actions, 2, stderr)
        Self.closeInherited(&actions)
        do {
            pid = try Self.spawn(argv, &actions, environment)
        } catch {
            if readEnd >= 0 { close(readEnd) }
            throw error
        }
        let pid = self.pid
        Self.onThread { [self] in
            // Waits without reaping, then reaps under the lock that `signal` takes: a signal
            // never reaches a PID the system has already given to another process.
            var info = siginfo_t()
            while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR {}
            let code = self.state.withLock { state in
                var status: Int32 = 0
                let reaped = waitpid(pid, &status, WNOHANG)
                state.status = reaped != pid ? -1 : status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
                return state.status ?? -1
            }
            onExit?(pid, code)
        }
        if readEnd >= 0 {
            let readEnd = readEnd
            let forward: Int32? =
                switch afterReady {
                case .inherit: 1
                case .file(let path, append: let append): open(path, O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC), 0o644)
                default: nil
                }
            Self.onThread { [self] in self.drain(readEnd, forwardTo: forward) }
        } else {
            state.withLock {
                $0.start = .ended
                $0.outputEnded = true
            }
        }
    }

    // MARK: Its state

    /// Its exit status once it has ended (128 + the signal when a signal ended it), else nil.
    package var exitStatus: Int32? { state.withLock { $0.status } }
    package var isRunning: Bool { exitStatus == nil }

    // MARK: Waiting

    /// Waits, at most `limit`, for the ready line (the first line that contains the marker).
    package func waitForLine(within limit: Duration) async -> Start {
        await poll(within: limit) { $0.start } ?? .timedOut
    }

    /// `waitForLine` on the calling thread, for callers outside Swift concurrency.
    package func waitForLineBlocking(within limit: Duration) -> Start {
        pollBlocking(within: limit) { $0.start } ?? .timedOut
    }

    /// Waits, at most `limit`, until its standard output has ended and all of it was passed on.
    package func waitForEndOfOutput(within limit: Duration) -> Bool {
        pollBlocking(within: limit) { $0.outputEnded ? true : nil } ?? false
    }

    /// What it printed on standard output before its ready line (or before it ended).
    package var printed: String { state.withLock { String(decoding: $0.output, as: UTF8.self) } }

    /// Waits, at most `limit`, for it to end; its status, or nil while it still runs.
    @discardableResult
    package func waitForExit(within limit: Duration) async -> Int32? {
        await poll(within: limit) { $0.status }
    }

    /// `waitForExit` on the calling thread.
    @discardableResult
    package func waitForExitBlocking(within limit: Duration = .seconds(365 * 86_400)) -> Int32? {
        pollBlocking(within: limit) { $0.status }
    }

    /// What `read` finds in its state, once it finds something, within `limit`; nil past it.
    /// The threads that wait for the child and read its output change the state; they have no
    /// way to wake a task, so a waiter looks again every few milliseconds.
    private func poll<T: Sendable>(within limit: Duration, _ read: (State) -> T?) async -> T? {
        let deadline = ContinuousClock.now + limit
        while true {
            if let found = state.withLock({ read($0) }) { return found }
            if ContinuousClock.now >= deadline { return nil }
            try? await Task.sleep(for: .milliseconds(5))
        }
    }

    /// `poll` on the calling thread.
    private func pollBlocking<T: Sendable>(within limit: Duration, _ read: (State) -> T?) -> T? {
        let deadline = ContinuousClock.now + limit
        while true {
            if let found = state.withLock({ read($0) }) { return found }
            if ContinuousClock.now >= deadline { return nil }
            usleep(5000)
        }
    }

    /// Runs `argv` to its end on the calling thread; its exit status and standard output.
    package static func run(_ argv: [String], stderr: Output = .discard) throws(ChildProcessError) -> (status: Int32, output: String) {
        let child = try ChildProcess(argv, stdout: .readyLine(), stderr: stderr)
        let status = child.waitForExitBlocking() ?? -1
        _ = child.waitForEndOfOutput(within: .seconds(10))
        return (status, child.printed)
    }

    // MARK: Signals and stopping

    /// Sends `signal` while it runs (never to a PID it no longer owns: it is reaped here only).
    package func signal(_ signal: Int32) {
        state.withLock { if $0.status == nil { _ = kill(pid, signal) } }
    }

    /// SIGTERM, then SIGKILL once `grace` has passed; returns its exit status.
    @discardableResult
    package func stop(grace: Duration = .seconds(10)) async -> Int32 {
        await Self.stop([self], grace: grace)
        return exitStatus ?? -1
    }

    /// Stops `children` together: SIGTERM to each, then SIGKILL to those still running once
    /// `grace` has passed, and waits until every one has been reaped.
    package static func stop(_ children: [ChildProcess], grace: Duration = .seconds(10)) async {
        for child in children { child.signal(SIGTERM) }
        let deadline = ContinuousClock.now + grace
        for child in children { await child.waitForExit(within: max(.zero, deadline - ContinuousClock.now)) }
        for child in children where child.isRunning { child.signal(SIGKILL) }
        for child in children { await child.waitForExit(within: .seconds(60)) }
    }

    /// `stop` on the calling thread.
    package static func stopBlocking(_ children: [ChildProcess], grace: Duration = .seconds(10)) {
        for child in children { child.signal(SIGTERM) }
        let deadline = ContinuousClock.now + grace
        for child in children { child.waitForExitBlocking(within: max(.zero, deadline - ContinuousClock.now)) }
        for child in children where child.isRunning { child.signal(SIGKILL) }
        for child in children { child.waitForExitBlocking(within: .seconds(60)) }
    }

    // MARK: Spawning

    private static func spawn(
        _ argv: [String], _ actions: inout posix_spawn_file_actions_t, _ environment: [String: String]?
    ) throws(ChildProcessError) -> pid_t {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var nothing = sigset_t()
        sigemptyset(&nothing)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &nothing)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let arguments = argv.map { strdup($0) } + [nil]
        defer { for pointer in arguments { free(pointer) } }
        let variables = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } + [nil] }
        defer { for pointer in variables ?? [] { free(pointer) } }
        var pid: pid_t = 0
        let spawned =
            if let variables {
                posix_spawn(&pid, argv[0], &actions, &attributes, arguments, variables)
            } else {
                posix_spawn(&pid, argv[0], &actions, &attributes, arguments, environ)
            }
        guard spawned == 0 else { throw ChildProcessError(command: argv[0], reason: String(cString: strerror(spawned))) }
        return pid
    }

    private static func redirect(_ actions: inout posix_spawn_file_actions_t, _ fd: Int32, _ output: Output) {
        switch output {
        case .inherit, .readyLine: break
        case .discard: posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", O_WRONLY, 0)
        case .file(let path, append: let append):
            posix_spawn_file_actions_addopen(&actions, fd, path, O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC), 0o644)
        case .standardOutput: posix_spawn_file_actions_adddup2(&actions, 1, fd)
        }
    }

    /// glibc's `posix_spawn_file_actions_addclosefrom_np`, which Swift's Glibc module leaves out.
    private typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    private static let closeFrom: CloseFrom? = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np")
        .map { unsafeBitCast($0, to: CloseFrom.self) }

    /// Closes every descriptor above standard error in the child: with glibc's close-from, or
    /// else each one open now.
    private static func closeInherited(_ actions: inout posix_spawn_file_actions_t) {
        if let closeFrom, closeFrom(&actions, 3) == 0 { return }
        guard let directory = opendir("/proc/self/fd") else { return }
        defer { closedir(directory) }
        let own = dirfd(directory)
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if let fd = Int32(name), fd > 2, fd != own { posix_spawn_file_actions_addclose(&actions, fd) }
        }
    }

    // MARK: Its output

    /// Reads standard output to its end: held until the ready line, then written to `forward`.
    private func drain(_ fd: Int32, forwardTo forward: Int32?) {
        defer {
            close(fd)
            if let forward, forward > 2 { close(forward) }
            state.withLock { $0.outputEnded = true }
        }
        var buffer = [UInt8](repeating: 0, count: 16_384)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 {
                state.withLock { if $0.start == nil { $0.start = .ended } }
                return
            }
            let chunk = buffer[..<count]
            let passOn = state.withLock { state -> ArraySlice<UInt8> in
                if state.start != nil { return chunk }
                state.output.append(contentsOf: chunk)
                guard let marker, let line = Self.line(containing: marker, in: state.output) else { return [] }
                state.start = .ready(line)
                return state.output[...]
            }
            if let forward, !passOn.isEmpty { Self.writeAll(forward, passOn) }
        }
    }

    /// The first whole line that contains `marker` (a line still being written may not hold
    /// all of what follows the marker yet).
    private static func line(containing marker: String, in output: [UInt8]) -> String? {
        guard let end = output.lastIndex(of: UInt8(ascii: "\n")) else { return nil }
        return String(decoding: output[..<end], as: UTF8.self).split(separator: "\n").first { $0.contains(marker) }.map(String.init)
    }

    private static func writeAll(_ fd: Int32, _ bytes: ArraySlice<UInt8>) {
        var rest = bytes
        while !rest.isEmpty {
            let written = rest.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if written < 0 && errno == EINTR { continue }
            if written <= 0 { return }
            rest = rest.dropFirst(written)
        }
    }

    /// A thread of its own: what runs there blocks (in `waitpid`, in `read`), and must hold none
    /// of the few threads Swift's concurrency shares.
    private static func onThread(_ body: @escaping @Sendable () -> Void) {
        final class Box {
            let body: @Sendable () -> Void
            init(_ body: @escaping @Sendable () -> Void) { self.body = body }
        }
        var thread = pthread_t()
        let box = Unmanaged.passRetained(Box(body)).toOpaque()
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        pthread_attr_setstacksize(&attributes, 256 * 1024)
        let created = pthread_create(
            &thread, &attributes,
            { raw in
                let box = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
                box.body()
                return nil
            }, box)
        precondition(created == 0, "cannot start a thread: \(created)")
    }
}

package struct ChildProcessError: Error, CustomStringConvertible {
    package let command: String
    package let reason: String
    package var description: String { "cannot run \(command): \(reason)" }
}
