import Foundation
import NetsEasy
import PaypipeCore
import StageRuntime
import StageWire
import TestSupport
import Testing

/// The restore drill of docs/operations.md ("Backups and restore"), through real processes, on
/// the suite's store: SQLite (`paypipe store backup` / `restore`) or PostgreSQL (`pg_dump` of
/// the store's schema / `pg_restore`). Orders flow while the copy is taken and after it; the
/// ledger is stopped and its store put back to the copy; upstream's replay from its mark is
/// answered `diverged`; the documented recovery brings every order upstream had an outcome for
/// back into the log with that outcome, and no charge is made twice at the provider.
@Suite("Backup and restore drill", .serialized)
struct BackupDrillTests {
    /// What the order system keeps: the first terminal outcome of each order, and the epoch and
    /// seq of the last outcome it replayed.
    final class Upstream: @unchecked Sendable {
        var ended: [String: [UInt8]] = [:]
        var mark: (epoch: String, seq: Int64) = ("", 0)

        func take(_ bytes: [UInt8]) {
            guard let outcome = try? Outcome.parse(bytes), outcome.status.isTerminal, ended[outcome.orderId] == nil else { return }
            ended[outcome.orderId] = bytes
        }

        /// Replays from the mark, with its epoch, to the end of the log.
        func catchUp(_ client: OutcomeReplayClient) async throws {
            while true {
                let (outcomes, trailer) = try await client.fetch(since: mark.seq, limit: 1000, epoch: mark.epoch.isEmpty ? nil : mark.epoch)
                for bytes in outcomes {
                    take(bytes)
                    if let value = try? JSONValue.parse(bytes), let seq = value["seq"]?.integerValue, let epoch = value["epoch"]?.stringValue {
                        mark = (epoch, seq)
                    }
                }
                if !trailer.more { return }
            }
        }
    }

    static func charge(_ id: String, subscriptionId: String) -> String {
        #"{"v":1,"orderId":"\#(id)","provider":"nets","operation":"chargeSubscription","amount":9900,"currency":"SEK","params":{"subscriptionId":"\#(subscriptionId)","reference":"\#(id)"}}"#
    }

    /// Sends `ids` (charges, and rejected orders for ids starting with "r"), at least once each.
    static func send(_ ids: [String], _ h: PipelineHarness, subscriptionId: String) async throws {
        for id in ids { try await h.send(id.hasPrefix("r") ? rejectedOrder(id) : charge(id, subscriptionId: subscriptionId)) }
    }

    /// Until upstream holds a terminal outcome for every one of `ids`, reading live and replaying.
    static func waitUntilEnded(_ ids: [String], _ h: PipelineHarness, _ upstream: Upstream, _ client: OutcomeReplayClient) async throws {
        let ended = await eventually(within: .seconds(90)) {
            for message in (try? await h.receiver.nextBatch(timeoutMilliseconds: 50)) ?? [] { upstream.take(message.body) }
            try? await upstream.catchUp(client)
            return ids.allSatisfy { upstream.ended[$0] != nil }
        }
        #expect(ended, "no outcome for \(ids.filter { upstream.ended[$0] == nil })")
    }

    /// The store's copy and its restore, as an operator makes them on this store.
    struct Copier {
        let h: PipelineHarness
        let copy: String

        var postgres: (arguments: [String], schema: String, environment: [String: String])? {
            guard let settings = TestStores.postgres else { return nil }
            var environment = ProcessInfo.processInfo.environment
            if let password = settings.password { environment["PGPASSWORD"] = password.reveal() }
            return (
                ["-h", settings.socketDirectory ?? settings.host, "-p", String(settings.port), "-U", settings.user, "-d", settings.database],
                TestStores.schema(of: h.directory), environment
            )
        }

        func backup() async throws {
            let run: (status: Int32, output: String, errors: String)
            if let postgres {
                // The server's backups, not paypipe's.
                let refused = try await runCapturing(paypipe, ["store", "backup", "--store", h.storeArgument, "--to", copy])
                #expect(refused.status == 2 && refused.errors.contains("the store is PostgreSQL: its backups are the server's"), "\(refused)")
                run = try await runCapturing(
                    "/usr/bin/env", ["pg_dump"] + postgres.arguments + ["--schema", postgres.schema, "--format", "custom", "--file", copy],
                    environment: postgres.environment)
            } else {
                run = try await runCapturing(paypipe, ["store", "backup", "--store", h.storeArgument, "--to", copy])
                #expect(run.output.hasPrefix("backed up \(h.storeArgument) to \(copy): "), "\(run.output)")
            }
            #expect(run.status == 0, "\(run.errors)")
        }

        func restore() async throws {
            if let postgres {
                let dropped = try await runCapturing(
                    "/usr/bin/env", ["psql"] + postgres.arguments + ["-v", "ON_ERROR_STOP=1", "-c", "DROP SCHEMA \(postgres.schema) CASCADE"],
                    environment: postgres.environment)
                #expect(dropped.status == 0, "\(dropped.errors)")
                let restored = try await runCapturing(
                    "/usr/bin/env", ["pg_restore"] + postgres.arguments + ["--exit-on-error", copy], environment: postgres.environment)
                #expect(restored.status == 0, "\(restored.errors)")
                return
            }
            let run = try await runCapturing(paypipe, ["store", "restore", "--store", h.storeArgument, "--from", copy])
            #expect(run.status == 0, "\(run.errors)")
            #expect(run.output.contains("the replaced store is kept at \(h.storeArgument).replaced-"), "\(run.output)")
        }

        var paypipe: String { PipelineHarness.buildDirectory().appendingPathComponent("paypipe").path }
    }

    @Test func aStoreRestoredFromAnOlderCopyIsToldToUpstreamAndTheRecoveryLosesNothingUpstreamHad() async throws {
        // In-flight orders of the copy are redelivered (their charge read by its key) soon.
        let h = try await PipelineHarness(redeliverAfterMilliseconds: 3000)
        try await h.stopping { h in
            try h.startSigner()
            try h.startSubmitter()
            try h.startCallbacks()
            let subscriptionId = try await netsSubscription(h, orderId: "drill-sub")
            let upstream = Upstream()
            var client = try OutcomeReplayClient(context: h.context, endpoint: h.ledgerEndpoints["outcomesReplay"]!)
            let copier = Copier(h: h, copy: h.directory.appendingPathComponent("store.backup").path)

            let before = (0..<6).flatMap { ["c-before-\($0)", "r-before-\($0)"] }
            try await Self.send(before, h, subscriptionId: subscriptionId)
            try await Self.waitUntilEnded(before, h, upstream, client)
            // The copy is taken while orders flow.
            let during = (0..<10).flatMap { ["c-during-\($0)", "r-during-\($0)"] }
            try await Self.send(during, h, subscriptionId: subscriptionId)
            try await copier.backup()
            try await Self.waitUntilEnded(during, h, upstream, client)
            let after = (0..<6).flatMap { ["c-after-\($0)", "r-after-\($0)"] }
            try await Self.send(after, h, subscriptionId: subscriptionId)
            try await Self.waitUntilEnded(after, h, upstream, client)
            let mark = upstream.mark
            let all = before + during + after

            // The store is lost; the ledger is stopped and its store put back to the copy.
            await client.close()
            _ = await h.ledgerProcess.stop()
            try await copier.restore()
            try await h.restartLedger()
            client = try OutcomeReplayClient(context: h.context, endpoint: h.ledgerEndpoints["outcomesReplay"]!)

            // Upstream's replay from its mark is told, not answered with the copy's new seqs.
            var diverged: OutcomeReplayClient.Diverged?
            do {
                _ = try await client.fetch(since: mark.seq, limit: 1000, epoch: mark.epoch)
            } catch let error as OutcomeReplayClient.Diverged {
                diverged = error
            }
            let current = try #require(diverged, "the replay from \(mark) was not answered diverged").epoch
            #expect(current != mark.epoch)

            // The recovery: replay the whole restored log, reconcile by order key, and send
            // again every order upstream has an outcome for that the log lacks.
            let restored = Upstream()
            restored.mark = (current, 0)
            try await restored.catchUp(client)
            let missing = all.filter { restored.ended[$0] == nil }
            #expect(missing.contains("c-after-0") && !missing.contains("c-before-0"))
            try await Self.send(missing, h, subscriptionId: subscriptionId)
            try await Self.waitUntilEnded(all, h, restored, client)

            for id in all {
                let had = try Outcome.parse(try #require(upstream.ended[id]))
                let now = try Outcome.parse(try #require(restored.ended[id]))
                #expect(now.status == had.status && now.result == had.result && now.error?.code == had.error?.code, "\(id)")
                // What the copy held comes back byte for byte, its seq and epoch included.
                if !missing.contains(id) { #expect(restored.ended[id] == upstream.ended[id], "\(id)") }
            }
            // Every charge took effect once at the provider: a charge sent again carried the
            // order's Idempotency-Key, and Nets answered it with the first charge.
            func key(_ id: String) -> String { "nets:" + NetsPayments.idempotencyKey(for: OrderKey(merchant: "default", orderId: id)) }
            for id in all where id.hasPrefix("c-") { #expect(h.sandbox.ledger.effects(key(id)) == 1, "\(id)") }
            // The charges sent after the copy was taken were unknown to the restored store: each
            // reached Nets a second time, and was answered with its first charge.
            for id in after where id.hasPrefix("c-") { #expect(h.sandbox.ledger.requests(key(id)) == 2, "\(id)") }
            await client.close()
        }
    }
}
