import Foundation
import PaypipeCore
import StageWire
import TestSupport
import Testing

@testable import LedgerStage

/// On PostgreSQL every statement is a round trip to a server that may be on another host, and
/// the ledger waits for each: a pass's round trips must not grow with the orders in it. Counted
/// through `commit`, the way the ledger's loop runs its passes.
@Suite("A pass's round trips to PostgreSQL")
struct RoundTripTests {
    struct Trips: Equatable, CustomStringConvertible {
        var intake = 0, claims = 0, results = 0
        var description: String { "intake \(intake), claims \(claims), results \(results)" }
    }

    /// One intake, claim and result pass of `count` Viva sales and `count` PhonePe mandates
    /// (whose references are indexed at intake), every outcome its claim holder's.
    static func pass(_ core: inout LedgerCore, _ database: PostgresDatabase, count: Int, tag: String, now: Int64) throws -> Trips {
        let sales = (0..<count).map { vivaSale("sale-\(tag)-\($0)") }
        let mandates = (0..<count).map { i in
            Array(
                phonePeOrder.replacingOccurrences(of: "pp-1", with: "pp-\(tag)-\(i)").replacingOccurrences(of: "SUB1", with: "SUB-\(tag)-\(i)").utf8)
        }
        var trips = Trips()
        var before = database.roundTrips
        let intake = try core.commit([.intake(core.decoder.intake(sales + mandates))], now: now)
        #expect(intake.flatMap(\.effects).filter { if case .dispatch = $0 { true } else { false } }.count == 2 * count)
        trips.intake = database.roundTrips - before

        let orders = try (sales + mandates).map { try order(String(decoding: $0, as: UTF8.self)) }
        before = database.roundTrips
        let claims = try core.commit([.request(.claim(orders.map { core.lease($0.key) }))], now: now + 10)
        #expect(claims.first?.reply == .claimed(Array(repeating: true, count: 2 * count)))
        trips.claims = database.roundTrips - before

        let frames = orders.map { order in
            core.frame(
                order.provider == .phonepe
                    ? Outcome(order: order, status: .pending, result: ["state": "PENDING"]) : Outcome(order: order, status: .succeeded, result: [:]))
        }
        before = database.roundTrips
        let results = try core.commit([.results(core.decoder.results(frames.map { ($0, .submitter) }))], now: now + 20)
        #expect(emitted(results.flatMap(\.effects)).count == 2 * count)
        trips.results = database.roundTrips - before
        return trips
    }

    @Test func aPassTakesAsManyRoundTripsForManyOrdersAsForTwo() async throws {
        let store = try temporaryStore()
        guard let database = store.db as? PostgresDatabase else { return }
        var core = LedgerCore(store: store, registry: await testRegistry())
        let small = try Self.pass(&core, database, count: 2, tag: "a", now: 1000)
        let large = try Self.pass(&core, database, count: 64, tag: "b", now: 2000)
        #expect(small == large, "2 orders of each: \(small); 64 of each: \(large)")
        // BEGIN and COMMIT are one each; an intake is one statement, orders and references
        // together; results take the log's lock first (`LedgerStore.lockLog`), then move the
        // orders, then write outcomes, log, references and the log's head in one.
        #expect(large.intake <= 3 && large.claims <= 3 && large.results <= 5, "\(large)")
    }
}
