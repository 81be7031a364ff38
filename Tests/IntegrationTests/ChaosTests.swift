import Foundation
import HTTPTransport
import HTTPTypes
import Hummingbird
import NIOCore
import PaypipeCore
import Sandbox
import StageRuntime
import StageWire
import Supervision
import Synchronization
import TestSupport
import Testing
import ZeroMQ

@testable import NetsEasyEmulation
@testable import PhonePeEmulation

/// Stands in front of the sandbox and counts, per order, every request that takes effect at a
/// real provider (a Nets POST by its Idempotency-Key, a Trust Payments TRANSACTIONUPDATE by its
/// requestreference, a PhonePe auth/init by its authRequestId). Where the provider replays its
/// first answer to a repeated request (Nets' Idempotency-Key), so does the sandbox, which would
/// hide a second submission; here every arrival is counted before it is passed on. Status and
/// query calls are passed on uncounted.
final class EffectCountingFront: Sendable {
    let target: String
    let http = ProviderHTTPClient(connectTimeoutMilliseconds: 2000, requestTimeoutMilliseconds: 30_000, maxIdleConnectionsPerHost: 256)
    let arrivals = Mutex<[String: Int]>([:])

    init(target: String) { self.target = target }

    /// `provider:key` when `request` is one that takes effect, else nil.
    static func effectKey(method: String, path: String, headers: [HTTPHeader], body: [UInt8]) -> String? {
        guard method == "POST" else { return nil }
        if path.hasPrefix("/nets/"), let key = headers.first(where: { $0.name.lowercased() == "idempotency-key" })?.value {
            return "nets:" + key
        }
        if path.hasPrefix("/trustpayments/"), case .object(let document)? = try? JSONValue.parse(body),
            let entries = document["request"]?.arrayValue,
            let update = entries.first(where: { $0["requesttypedescriptions"]?.arrayValue?.contains(.string("TRANSACTIONUPDATE")) == true }),
            let reference = update["requestreference"]?.stringValue
        {
            return "trustpayments:" + reference
        }
        if path.hasPrefix("/phonepe/"), path.hasSuffix("/auth/init"), let encoded = (try? JSONValue.parse(body))?["request"]?.stringValue,
            let decoded = Data(base64Encoded: encoded), let id = (try? JSONValue.parse(Array(decoded)))?["authRequestId"]?.stringValue
        {
            return "phonepe:" + id
        }
        return nil
    }

    struct Responder: HTTPResponder {
        typealias Context = BasicRequestContext
        let front: EffectCountingFront

        func respond(to request: Request, context: Context) async throws -> Response {
            var request = request
            let body = Array(try await request.collectBody(upTo: 1 << 20).readableBytesView)
            var headers: [HTTPHeader] = []
            for field in request.headers where field.name != .contentLength {
                headers.append(HTTPHeader(field.name.rawName, field.value))
            }
            let path = request.uri.path
            if let key = EffectCountingFront.effectKey(method: request.method.rawValue, path: path, headers: headers, body: body) {
                front.arrivals.withLock { $0[key, default: 0] += 1 }
            }
            let url = front.target + path + (request.uri.query.map { "?" + $0 } ?? "")
            guard let method = HTTPRequestSpec.Method(rawValue: request.method.rawValue) else { return Response(status: .methodNotAllowed) }
            switch await front.http.execute(HTTPRequestSpec(method: method, url: url, headers: headers, body: body)) {
            case .success(let reply):
                var fields = HTTPFields()
                for header in reply.headers where header.name.lowercased() != "content-length" && header.name.lowercased() != "transfer-encoding" {
                    if let name = HTTPField.Name(header.name) { fields.append(HTTPField(name: name, value: header.value)) }
                }
                return Response(status: .init(code: reply.status), headers: fields, body: .init(byteBuffer: ByteBuffer(bytes: reply.body)))
            case .failure:
                return Response(status: .badGateway)
            }
        }
    }

    /// Serves until cancelled; returns the base URL once listening.
    func start(host: String = "127.0.0.1") async throws -> (url: String, task: Task<Void, any Error>) {
        let port = Mutex<Int?>(nil)
        let app = Application(
            responder: Responder(front: self), configuration: .init(address: .hostname(host, port: 0)),
            onServerRunning: { channel in port.withLock { $0 = channel.localAddress?.port } })
        let task = Task { try await app.runService() }
        for _ in 0..<500 where port.withLock({ $0 }) == nil { try await Task.sleep(for: .milliseconds(10)) }
        guard let bound = port.withLock({ $0 }) else { throw HarnessError("the counting front did not start") }
        return ("http://\(host):\(bound)", task)
    }
}

extension EffectCountingFront {
    /// A pipeline whose providers are the sandbox (answering the chaos tests' orders quickly)
    /// behind a counting front; with the front's server task, to cancel.
    static func pipeline(
        timers: [String: Int64], redeliverAfterMilliseconds: Int64, store: String? = nil
    ) async throws -> (
        PipelineHarness, EffectCountingFront, Task<Void, any Error>
    ) {
        let front = Mutex<(EffectCountingFront, Task<Void, any Error>)?>(nil)
        let h = try await PipelineHarness(
            sandboxConfiguration: SandboxConfiguration(  // Providers deliver callbacks until they are taken (Nets until HTTP 200, Trust
                // Payments for 48 hours): a subscription event sent while the callback validator or
                // the ledger is down, or behind a backlog, must still arrive. With its back-off
                // capped at 30 s, the sandbox keeps trying for hours, longer than any run: one it
                // gave up on is counted (`sandboxDroppedDeliveries`), not taken for a loss.
                port: 0, outboundAttempts: 1000
            ).with {
                $0.phonePe.callbackDelayMilliseconds = 300
                $0.nets.completeCheckoutAfterMilliseconds = 50
            },
            timers: timers,
            providerFront: { sandboxURL in
                let counting = EffectCountingFront(target: sandboxURL)
                let (url, task) = try await counting.start()
                front.withLock { $0 = (counting, task) }
                return url
            },
            redeliverAfterMilliseconds: redeliverAfterMilliseconds, store: store)
        let (counting, task) = try #require(front.withLock { $0 })
        return (h, counting, task)
    }
}

/// Every outcome of the log from seq 1 on, with its seq, replayed by pages from `endpoint`.
func replayWholeLog(
    context: ZMQContext, endpoint: String, pageTimeoutMilliseconds: Int64 = 10_000
) async throws -> [(
    seq: Int64, bytes: [UInt8]
)] {
    let replay = try OutcomeReplayClient(context: context, endpoint: endpoint)
    var log: [(seq: Int64, bytes: [UInt8])] = []
    var since: Int64 = 0
    for _ in 0..<10_000 {
        let (outcomes, trailer) = try await replay.fetch(since: since, limit: 1000, timeoutMilliseconds: pageTimeoutMilliseconds)
        log += outcomes.compactMap { bytes in seq(of: bytes).map { ($0, bytes) } }
        since = trailer.next
        if !trailer.more { break }
    }
    await replay.close()
    return log
}

/// Money safety under kill -9: orders flow from an at-least-once upstream while every
/// role is killed and restarted; every order must end once, with one effect at the provider.
/// Size from the environment for the full run (bench/chaos): PAYPIPE_CHAOS_ORDERS,
/// PAYPIPE_CHAOS_KILLS, PAYPIPE_CHAOS_RATE (orders per second), PAYPIPE_CHAOS_TAIL_S (after the last
/// send, how long the run goes on without any order ending or event arriving, default 120);
/// PAYPIPE_CHAOS_KEEP=<dir> keeps a failed run's files.
@Suite("Kill -9 chaos through real processes")
struct ChaosTests {
    struct Size {
        var orders = 500
        var kills = 4
        var ratePerSecond = 100
        /// After the last send, how long the run waits for the next order to end or event to
        /// arrive: a run ends once everything has, or once nothing more does. A fixed time for
        /// everything to end would measure the machine (a backlog drains at its pace), not the
        /// pipeline: a stall fails the run, a slow drain does not.
        var tailSeconds = 120
        /// The longest a run may take, whatever still drains.
        var maxSeconds = 3600

        static func fromEnvironment() -> Size {
            let environment = ProcessInfo.processInfo.environment
            var size = Size()
            if let v = environment["PAYPIPE_CHAOS_ORDERS"].flatMap(Int.init), v > 0 { size.orders = v }
            if let v = environment["PAYPIPE_CHAOS_KILLS"].flatMap(Int.init), v >= 0 { size.kills = v }
            if let v = environment["PAYPIPE_CHAOS_RATE"].flatMap(Int.init), v > 0 { size.ratePerSecond = v }
            if let v = environment["PAYPIPE_CHAOS_TAIL_S"].flatMap(Int.init), v > 0 { size.tailSeconds = v }
            return size
        }
    }

    enum Role: String, CaseIterable {
        case ledger, signer, submitter, callbacks
        /// The PostgreSQL server itself, when the suite runs on one it may kill
        /// (`PAYPIPE_TEST_POSTGRES_DIR`, the cluster `.ci/postgres` started there).
        case postgres
    }

    /// The roles killed in turn: the PostgreSQL server first, when there is one.
    static func roles(_ server: PostgresServer?) -> [Role] {
        let stages: [Role] = [.ledger, .signer, .submitter, .callbacks]
        return server == nil ? stages : [.postgres] + stages
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    /// The order with index `i`: Nets charges, Trust Payments updates and PhonePe mandates in turn.
    static func order(_ i: Int, subscriptionId: String) -> String {
        switch i % 3 {
        case 0:
            #"{"v":1,"orderId":"chaos-\#(i)","provider":"nets","operation":"chargeSubscription","amount":9900,"currency":"SEK","params":{"subscriptionId":"\#(subscriptionId)","reference":"chaos-\#(i)"}}"#
        case 1:
            #"{"v":1,"orderId":"chaos-\#(i)","provider":"trustpayments","operation":"transactionUpdate","params":{"transactionReference":"56-9-1234","updates":{"subscriptionfinalnumber":6}}}"#
        default:
            #"{"v":1,"orderId":"chaos-\#(i)","provider":"phonepe","operation":"authInit","amount":39900,"currency":"INR","params":{"merchantUserId":"U\#(i)","subscriptionId":"SUB\#(i)"}}"#
        }
    }

    /// What upstream saw: every copy of every ended outcome, by order, and every copy of every
    /// subscription event, by event id.
    final class Upstream: @unchecked Sendable {
        var ended: [String: [[UInt8]]] = [:]
        var endedAt: [String: ContinuousClock.Instant] = [:]
        var events: [String: Set<[UInt8]>] = [:]
        var lastSeq: Int64 = 0
        var replays = 0

        func take(_ bytes: [UInt8], now: ContinuousClock.Instant) {
            // Outcomes are nearly every message: only an event is parsed as one.
            if Self.isEvent(bytes) {
                if let id = (try? JSONValue.parse(bytes))?["eventId"]?.stringValue { events[id, default: []].insert(bytes) }
                return
            }
            guard let outcome = try? Outcome.parse(bytes), outcome.orderId.hasPrefix("chaos-"), Int(outcome.orderId.dropFirst(6)) != nil else {
                return
            }
            guard outcome.status.isTerminal || outcome.error?.needsReview == true else { return }
            if ended[outcome.orderId] == nil { endedAt[outcome.orderId] = now }
            ended[outcome.orderId, default: []].append(bytes)
        }

        static let eventMark = Array(#""kind":"event""#.utf8)

        static func isEvent(_ bytes: [UInt8]) -> Bool {
            guard bytes.count >= eventMark.count else { return false }
            for start in 0...(bytes.count - eventMark.count) where bytes[start] == eventMark[0] {
                if eventMark.indices.allSatisfy({ bytes[start + $0] == eventMark[$0] }) { return true }
            }
            return false
        }
    }

    @Test func everyOrderEndsOnceWithOneEffectWhileEveryRoleIsKilled() async throws {
        let size = Size.fromEnvironment()
        // On PostgreSQL, a server of the test's own: the other suites' stay up while it is killed.
        let server = try await PostgresServer.start()
        defer { server?.stop() }
        let (h, counting, frontTask) = try await EffectCountingFront.pipeline(
            timers: ["phonepeCallbackWaitMs": 3000], redeliverAfterMilliseconds: 5000, store: server.map { $0.url + "&schema=chaos" })
        // The HTTP client must be shut down on every path, a failed expectation included.
        let result: Result<Void, any Error>
        do {
            try await run(h, counting: counting, size: size, server: server)
            result = .success(())
        } catch {
            result = .failure(error)
        }
        if case .failure = result, let keep = ProcessInfo.processInfo.environment["PAYPIPE_CHAOS_KEEP"] {
            // The ledger's store and every stage's stderr, for a post-mortem of a failed run.
            try? FileManager.default.copyItem(at: h.directory, to: URL(fileURLWithPath: keep))
        }
        await h.shutdown()
        frontTask.cancel()
        await counting.http.shutdown()
        try result.get()
    }

    func run(_ h: PipelineHarness, counting: EffectCountingFront, size: Size, server: PostgresServer?) async throws {

        var running: [Role: ChildProcess] = [
            .ledger: h.ledgerProcess, .signer: try h.startSigner(), .submitter: try h.startSubmitter(),
            .callbacks: try h.startCallbacks(),
        ]
        func restart(_ role: Role) async throws {
            switch role {
            case .ledger:
                try await h.restartLedger()
                running[.ledger] = h.ledgerProcess
            case .signer: running[.signer] = try h.startSigner()
            case .submitter: running[.submitter] = try h.startSubmitter()
            case .callbacks: running[.callbacks] = try h.startCallbacks()
            case .postgres: try await server?.restart()
            }
        }

        // The subscription every Nets charge draws on, made through the pipeline before the chaos.
        let subscriptionId = try await netsSubscription(h, orderId: "chaos-sub")
        // A daily Trust Payments subscription, whose engine payments (one per sandbox day, moved
        // on every 2 s while orders are sent) are subscription events, as every Nets charge's
        // webhook is: each must reach upstream once, however the roles are killed meanwhile.
        try await h.send(
            #"{"v":1,"orderId":"chaos-tp-sub","provider":"trustpayments","operation":"subscriptionJwt","amount":1050,"currency":"GBP","params":{"subscriptionType":"RECURRING","unit":"DAY","frequency":1,"finalNumber":0}}"#
        )
        let tpPending = try await h.collect { $0.contains { $0.orderId == "chaos-tp-sub" } }
        let jwt = try #require(tpPending.first { $0.orderId == "chaos-tp-sub" }?.result?["jwt"]?.stringValue)
        let paid = try #require(await h.sandboxPost("/trustpayments/sdk/payment", ["jwt": .string(jwt)]))
        let form = try #require(try JSONValue.parse(Array(paid.1.utf8))["notification"]?.stringValue)
        #expect(
            await h.postCallback(
                "/callbacks/trustpayments/notification", headers: [("Content-Type", "application/x-www-form-urlencoded")], body: Array(form.utf8))?.0
                == 200)
        _ = try await h.collect { $0.contains { $0.orderId == "chaos-tp-sub" && $0.status == .succeeded } }

        let upstream = Upstream()
        let clock = ContinuousClock()
        let started = clock.now
        let sendWindow = Duration.milliseconds(1000 * size.orders / size.ratePerSecond)
        // Kills spread over the send window, every role in turn.
        let killTimes = (0..<size.kills).map { k in sendWindow * Double(k + 1) / Double(size.kills + 1) }
        var kills: [Role: Int] = [:]
        var lastKill = started
        var nextKill = 0
        var sent = 0
        var lastSent: [Int: ContinuousClock.Instant] = [:]
        var resends: [Int: Int] = [:]
        var replay = try OutcomeReplayClient(context: h.context, endpoint: h.ledgerEndpoints["outcomesReplay"]!)
        var lastReplay = started
        let deadline = started + sendWindow + .seconds(size.maxSeconds)
        var lastProgressAt = started
        var progressCount = 0
        // The sandbox's days, each delivered in full (its notifications retried until taken)
        // before the next.
        let days = SandboxDays()
        let windowEnd = started + sendWindow
        let advancing = Task { [h] in
            while ContinuousClock.now < windowEnd, !Task.isCancelled {
                // The load's pace, not a wait: a sandbox day every 2 s while orders are sent.
                try? await Task.sleep(for: .seconds(2))
                if await h.sandboxPost("/_sandbox/clock", ["advanceDays": 1])?.0 == 200 { days.count.withLock { $0 += 1 } }
            }
            days.finished.withLock { $0 = true }
        }
        defer { advancing.cancel() }
        /// Every event the sandbox's days and the Nets charges so far make.
        func expectedEvents() -> Int {
            let netsCharges = (0..<size.orders).filter { $0 % 3 == 0 }.filter { i in
                upstream.ended["chaos-\(i)"]?.first.flatMap { try? Outcome.parse($0) }?.status == .succeeded
            }.count
            return 1 + 2 * days.count.withLock { $0 } + netsCharges
        }

        var lastProgress = started
        while clock.now < deadline {
            let now = clock.now
            if upstream.ended.count + upstream.events.count != progressCount {
                progressCount = upstream.ended.count + upstream.events.count
                lastProgressAt = now
            }
            if now - started > sendWindow, now - lastProgressAt > .seconds(size.tailSeconds) { break }
            // A full-size run says how it goes, so a stall shows when it began.
            if size.orders > 1000, now - lastProgress >= .seconds(15) {
                lastProgress = now
                print(
                    "chaos progress: at=\(Int(Self.seconds(now - started)))s sent=\(sent) ended=\(upstream.ended.count) events=\(upstream.events.count) kills=\(nextKill) lastSeq=\(upstream.lastSeq) sandboxDropped=\(h.sandbox.droppedDeliveries) exited=\(running.filter { !$0.value.isRunning }.map { "\($0.key.rawValue):\($0.value.exitStatus ?? -1)" }.sorted())"
                )
            }
            // Upstream sends at the configured rate...
            let due = min(size.orders, Int(Double(size.ratePerSecond) * Self.seconds(now - started)) + 1)
            while sent < due {
                try await h.send(Self.order(sent, subscriptionId: subscriptionId))
                lastSent[sent] = now
                sent += 1
            }
            // ...re-sends what has not ended after a while (at-least-once)...
            var resent = 0
            // (each order again after 8 s, then twice as long each time, at most 2 minutes: an
            // upstream that re-sent a whole backlog every few seconds would only deepen it)...
            for (i, at) in lastSent where resent < 1000 && upstream.ended["chaos-\(i)"] == nil {
                let count = resends[i, default: 0]
                guard now - at > .seconds(min(120, 8 << count)) else { continue }
                try await h.send(Self.order(i, subscriptionId: subscriptionId))
                lastSent[i] = now
                resends[i] = count + 1
                resent += 1
            }
            lastSent = lastSent.filter { upstream.ended["chaos-\($0.key)"] == nil }
            // ...and reads the live outcomes, then replays from the last seq it holds.
            for message in try await h.receiver.nextBatch(timeoutMilliseconds: 50) ?? [] {
                upstream.take(message.body, now: clock.now)
            }
            if now - lastReplay > .milliseconds(500) {
                lastReplay = now
                do {
                    var more = true
                    var pages = 0
                    // A few pages at a time, so that sending and the kills keep their pace.
                    while more, pages < 5 {
                        let (outcomes, trailer) = try await replay.fetch(since: upstream.lastSeq, limit: 1000, timeoutMilliseconds: 2000)
                        for bytes in outcomes { upstream.take(bytes, now: clock.now) }
                        upstream.lastSeq = trailer.next
                        more = trailer.more
                        pages += 1
                        upstream.replays += outcomes.count
                    }
                } catch {
                    // The ledger is down or restarting: a fresh client, so no late answer is taken for the next one.
                    await replay.close()
                    replay = try OutcomeReplayClient(context: h.context, endpoint: h.ledgerEndpoints["outcomesReplay"]!)
                }
            }
            if nextKill < killTimes.count, now - started >= killTimes[nextKill] {
                let role = Self.roles(server)[nextKill % Self.roles(server).count]
                if role == .postgres {
                    try await server?.kill()
                } else if let process = running[role] {
                    process.signal(SIGKILL)
                    // A process in fsync dies only once the write completes, and until then it
                    // holds its ports: its replacement would fail to bind them.
                    _ = await eventually(within: .seconds(10)) { !process.isRunning }
                }
                kills[role, default: 0] += 1
                // The outage itself: the others must ride out a role that is down a while.
                try await Task.sleep(for: .seconds(1))
                try await restart(role)
                lastKill = clock.now
                nextKill += 1
            }
            if sent == size.orders, nextKill == killTimes.count, upstream.ended.count == size.orders, days.finished.withLock({ $0 }),
                upstream.events.count >= expectedEvents()
            {
                break
            }
        }
        await replay.close()
        await advancing.value

        let ids = (0..<size.orders).map { "chaos-\($0)" }
        let unended = ids.filter { upstream.ended[$0] == nil }
        let differing = ids.filter { Set(upstream.ended[$0] ?? []).count > 1 }
        let reviewed = ids.filter { id in upstream.ended[id]?.first.flatMap { try? Outcome.parse($0) }?.error?.needsReview == true }
        // The sandbox declines none of these orders: a failed one ended wrongly.
        let wrong = ids.filter { id in upstream.ended[id]?.first.flatMap { try? Outcome.parse($0) }?.status == .failed }
        let arrivals = counting.arrivals.withLock { $0 }
        let repeatedEffects = arrivals.filter { !$0.key.hasPrefix("nets:") && $0.value > 1 }
        let repeatedNetsRequests = arrivals.filter { $0.key.hasPrefix("nets:") && $0.value > 1 }.count
        let netsEffectsTwice = arrivals.keys.filter { $0.hasPrefix("nets:") && h.sandbox.ledger.effects($0) > 1 }
        // Events: each id once (every copy identical), one per Nets charge (its chargeId), and
        // the Trust Payments series in full.
        let eventsDiffering = upstream.events.filter { $0.value.count > 1 }.count
        let events = upstream.events.values.compactMap { $0.first.flatMap { try? JSONValue.parse($0) } }
        let chargeIds = Set(
            ids.compactMap { id in upstream.ended[id]?.first.flatMap { try? Outcome.parse($0) } }.filter {
                $0.provider == "nets" && $0.status == .succeeded
            }
            .compactMap { $0.result?["chargeId"]?.stringValue })
        let renewals = events.filter { $0["provider"] == "nets" && $0["type"] == "renewal.succeeded" }.compactMap {
            $0["providerReference"]?.stringValue
        }
        let tpEvents = events.filter { $0["provider"] == "trustpayments" }
        let daysRun = days.count.withLock { $0 }
        let eventsMissing = chargeIds.subtracting(renewals).count + max(0, 1 + 2 * daysRun - tpEvents.count)
        let eventsExtra = max(0, renewals.count - chargeIds.count) + max(0, tpEvents.count - (1 + 2 * daysRun))
        if !(unended.isEmpty && eventsMissing == 0), let keep = ProcessInfo.processInfo.environment["PAYPIPE_CHAOS_KEEP"] {
            // The ledger's store and every stage's stderr, for a post-mortem.
            try? FileManager.default.copyItem(at: h.directory, to: URL(fileURLWithPath: keep))
        }
        let lastEnd = upstream.endedAt.values.max() ?? clock.now
        let recovery = lastEnd > lastKill ? lastEnd - lastKill : .zero
        print(
            """
            chaos: orders=\(size.orders) kills=\(kills.map { "\($0.key.rawValue):\($0.value)" }.sorted().joined(separator: ",")) \
            unended=\(unended.count) review=\(reviewed.count) wrong=\(wrong.count) differingCopies=\(differing.count) \
            effectsTwice(tp,phonepe)=\(repeatedEffects.count) netsEffectsTwice=\(netsEffectsTwice.count) \
            netsRequestsRepeated=\(repeatedNetsRequests) replayed=\(upstream.replays) \
            events=\(upstream.events.count) eventDays=\(daysRun) eventsMissing=\(eventsMissing) eventsExtra=\(eventsExtra) \
            eventsDiffering=\(eventsDiffering) sandboxDroppedDeliveries=\(h.sandbox.droppedDeliveries) \
            lastKillToLastEnd=\(recovery) total=\(clock.now - started)
            """)
        #expect(unended.isEmpty, "orders without an end: \(unended.prefix(10))")
        #expect(differing.isEmpty, "orders whose copies differ: \(differing.prefix(10))")
        #expect(repeatedEffects.isEmpty, "effects requested twice: \(repeatedEffects.prefix(10))")
        #expect(netsEffectsTwice.isEmpty)
        #expect(eventsMissing == 0 && eventsExtra == 0 && eventsDiffering == 0, "subscription events lost, doubled or differing")
        #expect(Set(renewals).count == renewals.count, "a Nets charge reported twice")
        #expect(
            wrong.isEmpty, "orders ended failed: \(wrong.prefix(3).map { upstream.ended[$0].map { String(decoding: $0[0], as: UTF8.self) } ?? "" })")
    }
}

/// How many days the chaos test moved the sandbox's clock on.
final class SandboxDays: Sendable {
    let count = Mutex(0)
    /// The last day has been delivered.
    let finished = Mutex(false)
}

/// The chaos test's own PostgreSQL server (`.ci/postgres`), killed with -9 and started again.
struct PostgresServer {
    let directory: String
    var url: String { "postgres://paypipe@:5432/paypipe?host=\(directory)" }

    static var script: String {
        var root = URL(fileURLWithPath: #filePath)
        while root.path != "/", !FileManager.default.fileExists(atPath: root.appendingPathComponent(".ci/postgres").path) {
            root.deleteLastPathComponent()
        }
        return root.appendingPathComponent(".ci/postgres").path
    }

    /// A new server when the suite runs on PostgreSQL, else nil.
    static func start() async throws -> PostgresServer? {
        guard TestStores.postgres != nil else { return nil }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("paypipe-chaos-pg-\(UUID().uuidString.prefix(8))").path
        let status = await runToEnd(script, ["start", directory], within: .seconds(120))
        try #require(status == 0, "could not start a PostgreSQL server in \(directory)")
        return PostgresServer(directory: directory)
    }

    /// Kills the postmaster (its backends follow once they notice) and waits until it is gone.
    func kill() async throws {
        let text = try String(contentsOfFile: directory + "/data/postmaster.pid", encoding: .utf8)
        let pid = try #require(text.split(separator: "\n").first.flatMap { pid_t($0) })
        Glibc.kill(pid, SIGKILL)
        #expect(await eventually(within: .seconds(10)) { Glibc.kill(pid, 0) != 0 })
    }

    /// Starts it again with `.ci/postgres restart`, which waits for it to take connections.
    func restart() async throws {
        let status = await runToEnd(Self.script, ["restart", directory], within: .seconds(60))
        #expect(status == 0, "the PostgreSQL server did not start again")
    }

    /// Bounded: `pg_ctl -w stop` gives up after its own timeout.
    func stop() {
        _ = runToEndBlocking(Self.script, ["stop", directory])
        try? FileManager.default.removeItem(atPath: directory)
    }
}
