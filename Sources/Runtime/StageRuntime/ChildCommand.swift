#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A short-lived command (a database's tools, a script), spawned with `posix_spawn` and reaped
/// with `waitpid` here: Foundation's `Process` does not always see the exit of a child spawned
/// from a concurrency thread.
package struct ChildCommand: Sendable {
    package let pid: pid_t

    /// Starts `argv[0]` with `argv`; its standard output and error go to `output` (appended),
    /// or stay this process's, and its standard input is /dev/null. Throws the `posix_spawn`
    /// error number.
    package init(_ argv: [String], output: String? = nil) throws(ChildCommandError) {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let output {
            posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_APPEND, 0o644)
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
        }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        // Nothing else this process has open: a descriptor another thread opened without
        // O_CLOEXEC (a script being written, a socket) would otherwise live on in the child and
        // whatever it starts, a database server for one: a file held open for writing cannot be
        // executed ("Text file busy").
        Self.closeInherited(&actions)
        let pointers = argv.map { strdup($0) } + [nil]
        defer { for pointer in pointers { free(pointer) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, argv[0], &actions, nil, pointers, environ)
        guard spawned == 0 else { throw ChildCommandError(command: argv[0], reason: String(cString: strerror(spawned))) }
        self.pid = pid
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

    /// Its exit status once it has ended (128 + the signal when a signal ended it); nil while it
    /// runs, when `blocking` is false.
    package func exitStatus(blocking: Bool) -> Int32? {
        var status: Int32 = 0
        while true {
            let reaped = waitpid(pid, &status, blocking ? 0 : WNOHANG)
            if reaped == pid { break }
            if reaped == 0 || errno != EINTR { return nil }
        }
        return status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    }
}

package struct ChildCommandError: Error, CustomStringConvertible {
    let command: String
    let reason: String
    package var description: String { "cannot run \(command): \(reason)" }
}
