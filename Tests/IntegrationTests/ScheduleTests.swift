import Foundation
import Glibc
import NetsEasy
import PaypipeCore
import PhonePe
import Sandbox
import StageRuntime
import Supervision
import TestSupport
import Testing

@testable import NetsEasyEmulation
@testable import PhonePeEmulation

#if canImport(Glibc)
#endif

/// Charging on schedule through real processes (docs/protocol.md, "Schedules"): Nets and
/// PhonePe subscriptions charged monthly for a year against the sandbox, on a clock the test
/// moves (the sandbox's, which the ledger's schedules follow through `schedules.clockOffsetFile`).
/// The sandbox counts every request and every charge by its idempotency reference (the Nets
/// `Idempotency-Key`, the PhonePe `transactionId`): each cycle must be charged exactly once.
@Suite("Schedules through real processes", .serialized)
struct ScheduleTests {
    static let day: Int64 = 86_400_000

    /// One run: subscriptions created, then the clock moved month by month, each cycle's steps
    /// waited for; `between` runs while a step's orders are under way (the kill test kills there).
    struct Year {
        let h: PipelineHarness
        let nets: Int
        let phonePe: Int
        let months: Int64
        /// Subscriptions whose given cycle's first attempt is declined.
        let declines: Set<Int64>
        var offset: Int64 = 0
        var references: [(provider: Provider, reference: String)] = []
        /// Every final outcome of a scheduled order, by order id.
        var finals: [String: String] = [:]
        /// Declines that took: the attempts a decline ended `failed` (a kill can lose one).
        var declinesTaken = 0
        var events: [JSONValue] = []
        var firstDate = CivilDate(daysSinceEpoch: 0)

        init(_ h: PipelineHarness, nets: Int, phonePe: Int, months: Int64, declines: Set<Int64> = []) {
            self.h = h
            self.nets = nets
            self.phonePe = phonePe
            self.months = months
            self.declines = declines
        }

        var sandboxNow: Int64 { Timestamp.nowMilliseconds() + offset }

        mutating func advance(to target: Int64) async throws {
            let step = target - sandboxNow
            guard step > 0 else { return }
            let answer = await h.sandboxPost("/_sandbox/clock", ["advanceMs": .integer(step)])
            try #require(answer?.0 == 200, "the sandbox clock moved")
            offset += step
        }

        func attempt(_ index: Int, cycle: Int64, attempt: Int64) -> ScheduledAttempt {
            let (provider, reference) = references[index]
            return ScheduledAttempt(merchant: "default", provider: provider, subscription: reference, cycle: cycle, attempt: attempt)
        }

        /// Creates the subscriptions with a monthly schedule of `months` cycles from the day after
        /// tomorrow (sandbox time), and waits until each is open.
        mutating func create() async throws {
            firstDate = CivilDate(daysSinceEpoch: sandboxNow / ScheduleTests.day + 2)
            let schedule = #"{"interval":"P1M","firstChargeDate":"\#(firstDate.iso8601)","count":\#(months)}"#
            let endDate = firstDate.addingMonths(Int(months) + 12).iso8601 + "T00:00:00Z"
            var ids: [String] = []
            for index in 0..<nets {
                let id = "nets-sched-\(index)"
                ids.append(id)
                try await h.send(
                    #"{"v":1,"orderId":"\#(id)","provider":"nets","operation":"createSubscription","amount":9900,"currency":"SEK","params":{"endDate":"\#(endDate)","interval":0,"reference":"r\#(index)","schedule":\#(schedule)}}"#
                )
            }
            for index in 0..<phonePe {
                let id = "pp-sched-\(index)"
                ids.append(id)
                try await h.send(
                    #"{"v":1,"orderId":"\#(id)","provider":"phonepe","operation":"authInit","amount":39900,"currency":"INR","params":{"merchantUserId":"U-\#(id)","subscriptionId":"SUB-\#(id)","schedule":\#(schedule)}}"#
                )
            }
            let wanted = Set(ids)
            // An `unknown` (a request that timed out on a busy machine) is resolved by a status
            // call: each order's word is its terminal outcome, or review.
            let created = try await h.collect(timeout: .seconds(120)) { outcomes in
                wanted.isSubset(
                    of: Set(outcomes.filter { $0.status.isTerminal || $0.error?.code == Outcome.ErrorInfo.needsReviewCode }.map(\.orderId)))
            }
            for id in ids {
                let outcome = try #require(
                    created.first { $0.orderId == id && $0.status == .succeeded },
                    "\(id) succeeded: \(created.filter { $0.orderId == id }.map(\.serialized))")
                if id.hasPrefix("nets") {
                    references.append((.nets, try #require(outcome.result?["subscriptionId"]?.stringValue)))
                } else {
                    references.append((.phonepe, "SUB-\(id)"))
                }
            }
        }

        /// Reads the live stream until every order in `wanted` has a final outcome.
        mutating func waitFor(_ wanted: Set<String>, timeout: Duration = .seconds(180)) async throws {
            var missing = wanted.subtracting(finals.keys)
            guard !missing.isEmpty else { return }
            var collected: [JSONValue] = []
            _ = try await h.collectMessages(timeout: timeout) { messages in
                collected = messages
                for message in messages {
                    if let id = message["orderId"]?.stringValue, ["succeeded", "failed", "rejected"].contains(message["status"]?.stringValue) {
                        missing.remove(id)
                    }
                }
                return missing.isEmpty
            }
            for message in collected {
                if message["kind"] == "event" {
                    events.append(message)
                } else if let id = message["orderId"]?.stringValue, ScheduledAttempt.step(ofOrderId: id) != nil,
                    let status = message["status"]?.stringValue, ["succeeded", "failed", "rejected"].contains(status)
                {
                    #expect(finals[id] == nil || finals[id] == status, "\(id) ended twice differently")
                    finals[id] = status
                }
            }
            // What was seen of each (a review, a pending outcome) is the clue to why it did not end.
            let seen = missing.sorted().prefix(5).map { id in
                "\(id): \(collected.filter { $0["orderId"]?.stringValue == id }.map { $0.serialized.prefix(300) })"
            }
            try #require(missing.isEmpty, "orders without an outcome: \(seen)")
        }

        /// Every month: the clock to a day before the cycle's date (PhonePe's notifications go),
        /// then to its date (the charges and debits); a declined first attempt is retried a day
        /// later. `between` runs after each move of the clock.
        mutating func run(between: (Int) async throws -> Void = { _ in }) async throws {
            var step = 0
            let indices = 0..<(nets + phonePe)
            for cycle in 1...months {
                let due = firstDate.addingMonths(Int(cycle - 1)).daysSinceEpoch * ScheduleTests.day
                for index in indices where declines.contains(cycle) && (index == 0 || index == nets) {
                    let subscription: JSONValue = ["subscription": .string(references[index].reference)]
                    let provider = references[index].provider.rawValue
                    #expect(await h.sandboxPost("/_sandbox/subscriptions/\(provider)/declineNext", subscription)?.0 == 200)
                }
                // A notification a day ahead, within its window.
                try await advance(to: due - ScheduleTests.day + 3_600_000)
                try await between(step)
                step += 1
                try await waitFor(Set(indices.filter { $0 >= nets }.map { attempt($0, cycle: cycle, attempt: 1).orderId(step: 0) }))
                try await advance(to: due + 3_600_000)
                try await between(step)
                step += 1
                try await waitFor(Set(indices.map { attempt($0, cycle: cycle, attempt: 1).orderId(step: $0 >= nets ? 1 : 0) }))
                guard declines.contains(cycle) else { continue }
                // The declined ones: tried again a day later (PhonePe notifies again first). A
                // kill can lose the declined answer; the redelivered charge, read by its key and
                // found not taken, is then sent again and taken: that cycle has no retry.
                let retried = [0, nets].filter { $0 < nets + phonePe }.filter { index in
                    finals[attempt(index, cycle: cycle, attempt: 1).orderId(step: index >= nets ? 1 : 0)] == "failed"
                }
                declinesTaken += retried.count
                guard !retried.isEmpty else { continue }
                try await advance(to: due + ScheduleTests.day + 2 * 3_600_000)
                try await between(step)
                step += 1
                try await waitFor(Set(retried.map { attempt($0, cycle: cycle, attempt: 2).orderId(step: 0) }))
                if retried.contains(nets) {
                    try await advance(to: due + 2 * ScheduleTests.day + 3 * 3_600_000)
                    try await between(step)
                    step += 1
                    try await waitFor([attempt(nets, cycle: cycle, attempt: 2).orderId(step: 1)])
                }
            }
        }

        /// Reads what is still coming (the events that follow the last outcomes).
        mutating func drain() async throws {
            events += try await h.collectMessages(timeout: .seconds(3)) { _ in false }.filter { $0["kind"] == "event" }
        }

        /// What the sandbox counted, checked cycle by cycle: one charge per cycle per
        /// subscription, under the reference of the attempt that succeeded, and nothing else.
        /// Returns how many status calls resolved what a killed role left undecided (the requests
        /// the sandbox got under no idempotency reference, less the Nets checkouts' reads), and
        /// the cycles charged twice and never charged.
        @discardableResult
        func checkCharges() async throws -> (resolved: Int, twice: Int, skipped: Int) {
            // The sandbox shares this loaded test process: its answer may take a while.
            var answer: (Int, String)?
            for _ in 0..<3 where answer?.0 != 200 {
                answer = await h.sandboxGet("/_sandbox/ledger")
            }
            let text = try #require(answer.flatMap { $0.0 == 200 ? $0.1 : nil }, "the sandbox's ledger")
            let ledger = try JSONValue.parse(Array(text.utf8))
            let effects = Set(ledger["effects"]?.objectValue?.keys.filter { $0.hasPrefix("nets:") || $0.hasPrefix("phonepe:debit:") } ?? [])
            var expected: Set<String> = []
            var twice = 0, skipped = 0
            for index in 0..<(nets + phonePe) {
                for cycle in 1...months {
                    let charged = (1...3).map { attempt(index, cycle: cycle, attempt: $0) }.filter { effects.contains(key(for: $0)) }
                    if charged.count > 1 { twice += 1 }
                    if charged.isEmpty { skipped += 1 }
                    expected.formUnion(charged.map(key(for:)))
                }
            }
            let createdKeys = effects.filter { key in !expected.contains(key) && !key.hasPrefix("phonepe:") }
            #expect(twice == 0, "cycles charged twice")
            #expect(skipped == 0, "cycles never charged")
            // The only other Nets effects are the subscriptions' own creation and first charge.
            #expect(createdKeys.count == 2 * nets, "other Nets effects: \(createdKeys.count)")
            #expect(effects.filter { $0.hasPrefix("phonepe:debit:") }.count == phonePe * Int(months))
            let requests = ledger["requests"]?.objectValue ?? [:]
            let keyed = requests.values.reduce(0) { $0 + Int($1.integerValue ?? 0) }
            // A Nets subscription's creation reads its payment once.
            return (Int(ledger["total"]?.integerValue ?? 0) - keyed - nets, twice, skipped)
        }

        func key(for attempt: ScheduledAttempt) -> String {
            attempt.provider == .nets
                ? "nets:" + NetsPayments.idempotencyKey(for: OrderKey(merchant: "default", orderId: attempt.orderId(step: 0)))
                : "phonepe:debit:" + attempt.attemptReference
        }
    }

    /// Short leases and waits, so that what a killed role held goes out again within seconds.
    /// `latency`: the sandbox's answer time (ms), so that a kill finds requests in flight.
    static func harness(store: String? = nil, latency: Int = 0) async throws -> PipelineHarness {
        try await PipelineHarness(
            sandboxConfiguration: SandboxConfiguration(port: 0, latencyMilliseconds: latency, outboundAttempts: 12).with {
                $0.phonePe.callbackDelayMilliseconds = 100
                $0.nets.completeCheckoutAfterMilliseconds = 50
            },
            timers: ["phonepeCallbackWaitMs": 3000, "httpRequestTimeoutMs": 2000, "leaseMs": 4000],
            redeliverAfterMilliseconds: 3000, store: store, schedules: ["retryAfterDays": [1, 3]])
    }

    @Test func aYearOfMonthlyCyclesIsChargedOnceEachAndADeclineIsRetried() async throws {
        let h = try await Self.harness()
        defer { Task { await h.shutdown() } }
        try h.startSigner()
        try h.startSubmitter()
        try h.startCallbacks()
        var year = Year(h, nets: 24, phonePe: 12, months: 12, declines: [3])
        try await year.create()
        try await year.run()
        try await year.checkCharges()

        // Upstream: the declined cycle's retry, and each subscription's end after its last cycle.
        try await year.drain()
        let retrying = year.events.filter { $0["type"] == "renewal.retrying" }
        #expect(retrying.count == 2 && retrying.allSatisfy { $0["cycle"] == 3 && $0["dueAt"]?.stringValue != nil })
        let ended = year.events.filter { $0["type"] == "subscription.ended" }.compactMap { $0["subscription"]?["reference"]?.stringValue }
        #expect(Set(ended).count == 36)
        #expect(year.declinesTaken == 2 && year.finals.values.filter { $0 == "failed" }.count == 2, "the two declined attempts")
        let steps: Int = 24 * 12 + 1 + 12 * 12 * 2 + 2
        #expect(year.finals.count == steps, "every step of every attempt once")
        let record = try #require(try await SubscriptionEventsTests.subscriptionRecord(h, provider: "nets", reference: year.references[0].reference))
        #expect(record["schedule"]?["state"] == "completed" && record["state"] == "ended")

        // `paypipe schedules` lists them all, through the replay endpoint.
        let listing = try await Self.paypipe(["schedules", "--replay", h.ledgerEndpoints["outcomesReplay"]!, "--json", "--limit", "1000"])
        let listed = listing.split(separator: "\n").compactMap { try? JSONValue.parse(Array($0.utf8)) }
        #expect(listed.count == 36 && listed.allSatisfy { $0["state"] == "completed" && $0["cycle"] == 13 }, "\(listing.prefix(400))")
        let table = try await Self.paypipe(["schedules", "--replay", h.ledgerEndpoints["outcomesReplay"]!, "--provider", "phonepe"])
        #expect(table.split(separator: "\n").count == 13 && table.contains("39900 INR every P1M from \(year.firstDate.iso8601), 12 cycles"))
        await h.shutdown()
    }

    /// Runs the `paypipe` command and returns what it printed.
    static func paypipe(_ arguments: [String]) async throws -> String {
        try await runCapturing(PipelineHarness.buildDirectory().appendingPathComponent("paypipe").path, arguments).output
    }

    enum Role: String, CaseIterable {
        case ledger, signer, submitter, callbacks, postgres
    }

    /// Every time the clock moves and cycles come due, one role is killed with -9 a moment
    /// later (in turn: the ledger, the signer, the submitter, the callback validator and, on
    /// PostgreSQL, the database server) and started again. No cycle may be charged twice or
    /// skipped, and no step may end twice differently.
    @Test func killingEveryRoleWhileCyclesComeDueChargesEachCycleOnce() async throws {
        let server = try await PostgresServer.start()
        defer { server?.stop() }
        let h = try await Self.harness(store: server.map { $0.url + "&schema=schedules" }, latency: 700)
        defer { Task { await h.shutdown() } }
        var running: [Role: ChildProcess] = [.signer: try h.startSigner(), .submitter: try h.startSubmitter(), .callbacks: try h.startCallbacks()]
        let roles = Role.allCases.filter { $0 != .postgres || server != nil }
        var kills: [Role: Int] = [:]
        var year = Year(h, nets: 12, phonePe: 6, months: 6, declines: [2])
        try await year.create()
        var random = SystemRandomNumberGenerator()
        try await year.run { step in
            // Each role in turn, over notification steps and charge steps alike.
            let role = roles[(step + step / 2) % roles.count]
            // Not a wait for anything: the kill lands at a random moment while the tick that
            // follows the clock makes the cycle's orders, or while they are under way.
            try await Task.sleep(for: .milliseconds(Int.random(in: 300...1200, using: &random)))
            switch role {
            case .postgres:
                try await server?.kill()
                // The outage itself: the ledger must ride out a database that is down a while.
                try await Task.sleep(for: .seconds(1))
                try await server?.restart()
            case .ledger:
                let process = h.ledgerProcess
                process.signal(SIGKILL)
                _ = await eventually(within: .seconds(10)) { !process.isRunning }
                try await h.restartLedger()
            case .signer, .submitter, .callbacks:
                let process = try #require(running[role])
                process.signal(SIGKILL)
                _ = await eventually(within: .seconds(10)) { !process.isRunning }
                running[role] =
                    switch role {
                    case .signer: try h.startSigner()
                    case .submitter: try h.startSubmitter()
                    default: try h.startCallbacks()
                    }
            }
            kills[role, default: 0] += 1
        }
        let charges = try await year.checkCharges()
        print(
            "schedule kill test: kills \(kills.map { "\($0.key.rawValue):\($0.value)" }.sorted().joined(separator: ",")) stepsEnded=\(year.finals.count) failed=\(year.finals.values.filter { $0 == "failed" }.count) declinesTaken=\(year.declinesTaken) chargedTwice=\(charges.twice) neverCharged=\(charges.skipped) resolvedByStatusCalls=\(charges.resolved)"
        )
        #expect(year.finals.values.filter { $0 == "failed" }.count == year.declinesTaken, "only the declined attempts failed")
        #expect(roles.allSatisfy { kills[$0, default: 0] >= 2 }, "kills \(kills)")
        await h.shutdown()
    }
}
