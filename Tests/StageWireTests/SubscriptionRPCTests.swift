import PaypipeCore
import StageWire
import Testing

/// The ledger RPC's subscription requests and replies read back as they were written, and the
/// reader refuses what no stage writes.
@Suite struct SubscriptionRPCTests {
    static let event = SubscriptionEvent(
        merchant: "default", provider: Provider("phonepe"), subscription: "SUB1", dedupeKey: "DEBIT|T1|COMPLETED", kind: .renewalSucceeded,
        amount: 39900, currency: "INR", providerReference: "P1", cycle: 2, expiresAt: 1_800_000_000_000, reason: nil)

    @Test func requestsAndRepliesRoundTrip() throws {
        let check = DueEntitlementCheck(
            merchant: "default", provider: Provider("cleeng"), reference: "S1@o1", state: .active, expiresAt: 5, check: ["customerToken": "t"],
            ticket: 42)
        let result = EntitlementCheckResult(
            merchant: "default", provider: Provider("cleeng"), reference: "S1@o1", ticket: 42,
            reading: EntitlementReading(granted: true, expiresAt: 9))
        let requests: [LedgerRequest] = [
            .subscriptionEvents([Self.event]), .dueChecks(limit: 10), .checked([result]),
            .subscription(merchant: "default", provider: Provider("nets"), reference: "s1"),
        ]
        for request in requests { #expect(try LedgerRequest.parse(request.json.bytes) == request) }
        let replies: [(LedgerReply, LedgerRequest)] = [
            (.eventsRecorded(recorded: 1, duplicates: 2), requests[0]), (.unknownSubscription("SUB1"), requests[0]),
            (.dueChecks([check]), requests[1]), (.subscription(["state": "active"]), requests[3]), (.subscription(nil), requests[3]),
        ]
        for (reply, request) in replies { #expect(try LedgerReply.parse(reply.json.bytes, for: request) == reply, "\(reply)") }
    }

    @Test func malformedRequestsAreRefused() {
        for body in [
            #"{"op":"subscriptionEvents","events":[]}"#, #"{"op":"subscriptionEvents","events":[{"merchant":"m"}]}"#,
            #"{"op":"dueChecks","limit":0}"#, #"{"op":"dueChecks","limit":100000}"#, #"{"op":"checked"}"#, #"{"op":"subscription","merchant":"m"}"#,
        ] {
            #expect(throws: EnvelopeError.self, "\(body)") { _ = try LedgerRequest.parse(Array(body.utf8)) }
        }
    }

    @Test func theEventIdIsTheSameForTheSameFactAndDiffersOtherwise() {
        var other = Self.event
        other.amount = 1
        #expect(other.eventId == Self.event.eventId, "the provider's key decides, not the report's other fields")
        other.dedupeKey = "DEBIT|T2|COMPLETED"
        #expect(other.eventId != Self.event.eventId)
        other = Self.event
        other.merchant = "another"
        #expect(other.eventId != Self.event.eventId)
    }
}
