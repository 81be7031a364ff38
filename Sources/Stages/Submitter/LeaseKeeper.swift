import StageRuntime
import StageWire
import Synchronization

/// The leases on the work this submitter holds (issue 11: leases instead of a fixed redelivery
/// timer). Work is claimed before anything is sent, in one ledger request per batch received,
/// and every held lease is renewed while the work waits or runs, so the ledger redelivers an
/// order only when its holder died.
final class LeaseKeeper: Sendable {
    private let directory: any OrderDirectory
    private let held = Mutex<Set<LeaseClaim>>([])

    init(directory: any OrderDirectory) {
        self.directory = directory
    }

    /// Whether the ledger granted each of `claims`, in order; nil where it did not answer. Work
    /// not granted is not sent: the ledger dispatches it again after its redelivery delay.
    func claim(_ claims: [LeaseClaim]) async -> [Bool?] {
        let granted = await ask(claims).flatMap { answer -> [Bool?] in
            answer.granted?.map { Optional($0) } ?? Array(repeating: nil, count: answer.claims.count)
        }
        held.withLock { held in
            for (claim, isGranted) in zip(claims, granted) where isGranted == true { held.insert(claim) }
        }
        return granted
    }

    /// The work has reported its outcome: its lease is no longer renewed.
    func release(_ claim: LeaseClaim) {
        _ = held.withLock { $0.remove(claim) }
    }

    /// Renews every held lease; returns how many the ledger refused (the order ended by a
    /// callback, or was redelivered after a lapse), which are forgotten. A ledger that does
    /// not answer is asked again at the next renewal.
    func renew() async -> Int {
        let lost = await ask(held.withLock { Array($0) }).flatMap { answer in
            zip(answer.claims, answer.granted ?? []).filter { !$0.1 }.map(\.0)
        }
        held.withLock { held in
            for claim in lost { held.remove(claim) }
        }
        return lost.count
    }

    /// One ledger request per `LeaseClaim.maxPerRequest` claims; `granted` is nil where the
    /// ledger did not answer.
    private func ask(_ claims: [LeaseClaim]) async -> [(claims: [LeaseClaim], granted: [Bool]?)] {
        var answers: [(claims: [LeaseClaim], granted: [Bool]?)] = []
        for start in stride(from: 0, to: claims.count, by: LeaseClaim.maxPerRequest) {
            let chunk = Array(claims[start..<min(start + LeaseClaim.maxPerRequest, claims.count)])
            if case .claimed(let granted)? = try? await directory.call(.claim(chunk)), granted.count == chunk.count {
                answers.append((chunk, granted))
            } else {
                answers.append((chunk, nil))
            }
        }
        return answers
    }

    var count: Int { held.withLock { $0.count } }
}

/// At most `limit` pieces of work held (claimed, waiting or running) at once: the reader waits
/// for room before it takes more from the socket.
final class WorkSlots: Sendable {
    private struct State {
        var used = 0
        var waiting: [CheckedContinuation<Void, Never>] = []
    }

    private let limit: Int
    private let state = Mutex(State())

    init(limit: Int) {
        self.limit = max(1, limit)
    }

    func acquire() async {
        if state.withLock({ take(&$0) }) { return }
        await withCheckedContinuation { (slot: CheckedContinuation<Void, Never>) in
            let free = state.withLock { state in
                if take(&state) { return true }
                state.waiting.append(slot)
                return false
            }
            if free { slot.resume() }
        }
    }

    /// Synchronous, so that work finishing on an event loop frees its slot where it finishes.
    func release() {
        // The slot is handed to the first waiter, so `used` stays as it is.
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.waiting.isEmpty {
                state.used -= 1
                return nil
            }
            return state.waiting.removeFirst()
        }
        next?.resume()
    }

    private func take(_ state: inout State) -> Bool {
        guard state.used < limit else { return false }
        state.used += 1
        return true
    }
}
