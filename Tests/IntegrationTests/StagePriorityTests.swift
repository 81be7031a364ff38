import Foundation
import TestSupport
import Testing

/// `paypipe up --worker-nice` starts every stage but the ledger below normal priority, so that
/// the one stage that does not scale out goes first when the cores are busy. That holds only if
/// every busy thread of a stage runs at the nice value the stage was started at, through real
/// processes: libdispatch resets the threads it starts (and so the libzmq and NIO threads they
/// start) to their QoS's nice value when it may, as it may as root, which is how CI runs.
@Suite("A stage started below normal priority keeps its busy threads there", .serialized)
struct StagePriorityTests {
    @Test func theSignersAndSubmittersLoopZeroMQAndNIOThreadsRunAtTheNiceTheyWereStartedAt() async throws {
        let h = try await PipelineHarness()
        defer { Task { await h.shutdown() } }
        let signer = try h.startSigner(nice: 5)
        let submitter = try h.startSubmitter(nice: 5)
        try await h.send(CurveLinkTests.phonePeOrder("nice-1"))
        // The order ended: both stages' loops have run, and the submitter has used NIO.
        #expect(try await CurveLinkTests.outcome(h, "nice-1", .pending) != nil)

        let base = try #require(ProcessThread.all(of: getpid()).first { $0.id == getpid() }?.nice)
        for (process, loop) in [(signer, "signer-loop"), (submitter, "submitter-loop")] {
            let pid = process.pid
            let threads = ProcessThread.all(of: pid)
            let started = min(base + 5, 19)
            #expect(threads.first { $0.id == pid }?.nice == started, "\(threads)")
            let busy = threads.filter { $0.name == loop || $0.name.hasPrefix("ZMQbg/IO") || $0.name.hasPrefix("NIO-") }
            #expect(busy.contains { $0.name == loop }, "no thread named \(loop): \(threads)")
            #expect(busy.contains { $0.name.hasPrefix("ZMQbg/IO") }, "\(threads)")
            #expect(!busy.isEmpty && busy.allSatisfy { $0.nice == started }, "\(threads)")
        }
    }
}

/// One thread of a process as `/proc/PID/task/TID/stat` shows it (the name is the second field,
/// in parentheses; nice is the nineteenth).
struct ProcessThread: CustomStringConvertible {
    var id: Int32
    var name: String
    var nice: Int
    var description: String { "\(id) \(name) nice \(nice)" }

    /// Every thread of `pid`; none once it is gone.
    static func all(of pid: Int32) -> [ProcessThread] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return tasks.compactMap { task -> ProcessThread? in
            guard let id = Int32(task), let stat = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/stat", encoding: .utf8),
                let open = stat.firstIndex(of: "("), let close = stat.range(of: ") ", options: .backwards)
            else { return nil }
            let fields = stat[close.upperBound...].split(separator: " ")
            guard fields.count > 16, let nice = Int(fields[16]) else { return nil }
            return ProcessThread(id: id, name: String(stat[stat.index(after: open)..<close.lowerBound]), nice: nice)
        }
    }
}
