import PaypipeCore
import StageWire
import TestSupport
import Testing

@testable import SubmitterStage

/// Work as a signer frames it and a submitter reads it.
private func work(_ orderId: String, purpose: DispatchPurpose = .submit, generation: Int64 = 1) throws -> SubmitWork {
    guard case .order(let order) = Order.decode(frame: vivaSale(orderId), catalog: testCatalog) else {
        throw HarnessError("the test order did not decode")
    }
    return SubmitWork(
        order: order, request: HTTPRequestSpec(method: .POST, url: "http://127.0.0.1:1/x"), purpose: purpose,
        pending: purpose.isStatusCheck ? [:] : nil, acceptedAt: 1, generation: generation)
}

/// The ledger's reply to `request`, as the ledger writes it.
private func reply(to request: LeaseBook.Request, _ reply: LedgerReply) -> [[UInt8]] {
    [request.frames[0], reply.json.bytes]
}

@Suite("The submitter's leases: claims, replies, resends, give-ups and renewals")
struct LeaseBookTests {
    @Test func aBatchIsClaimedInOneRequestAndEachPieceGetsTheLedgersVerdict() throws {
        var book = LeaseBook(leaseMilliseconds: 30_000, now: 0)
        let batch = [try work("a"), try work("b"), try work("c", purpose: .statusCheck)]
        let (ready, requests) = book.claim(batch, now: 0)
        #expect(ready.map(\.order.orderId) == ["c"], "a status check sends only a read and needs no lease")
        #expect(requests.count == 1)
        let request = try #require(requests.first)
        #expect(try LedgerRequest.parse(request.body) == .claim(batch.prefix(2).compactMap(\.lease)))
        #expect(book.waitingCount == 2)

        let (decided, lost) = book.reply(reply(to: request, .claimed([true, false])))
        #expect(decided.map(\.work.order.orderId) == ["a", "b"])
        #expect(decided.map(\.verdict) == [.granted, .stale])
        #expect(lost.isEmpty)
        #expect(book.held == [try #require(batch[0].lease)])
        #expect(book.reply(reply(to: request, .claimed([true, true]))).decided.isEmpty, "a late copy of the reply decides nothing")
    }

    @Test func anUnansweredClaimIsSentAgainAndGivenUpAfterTheTimeout() throws {
        var book = LeaseBook(leaseMilliseconds: 300_000, now: 0, timeoutMilliseconds: 5000, resendAfterMilliseconds: 2000)
        let (_, requests) = book.claim([try work("slow")], now: 0)
        #expect(book.tick(now: 1999).send.isEmpty)
        #expect(book.nextDeadline == 2000)
        #expect(book.tick(now: 2000).send == requests, "the same id and body: whichever reply comes first answers")
        #expect(book.tick(now: 4000).send == requests)
        let due = book.tick(now: 5000)
        #expect(due.unclaimed.map(\.order.orderId) == ["slow"])
        #expect(book.waitingCount == 0)
        #expect(book.held.isEmpty)
    }

    @Test func aFailedOrUnreadableReplyLeavesTheWorkUnclaimed() throws {
        var book = LeaseBook(leaseMilliseconds: 30_000, now: 0)
        let (_, first) = book.claim([try work("failed")], now: 0)
        #expect(book.reply(reply(to: first[0], .failure("the ledger store failed"))).decided.map(\.verdict) == [.unclaimed])
        let (_, second) = book.claim([try work("short")], now: 0)
        #expect(book.reply(reply(to: second[0], .claimed([]))).decided.map(\.verdict) == [.unclaimed], "an answer for fewer claims")
        let (_, third) = book.claim([try work("garbled")], now: 0)
        #expect(book.reply([third[0].frames[0], Array("{".utf8)]).decided.map(\.verdict) == [.unclaimed])
        #expect(book.held.isEmpty)
    }

    @Test func heldLeasesAreRenewedAndTheOnesRefusedAreForgotten() throws {
        var book = LeaseBook(leaseMilliseconds: 3000, now: 0)
        let batch = [try work("kept"), try work("ended")]
        let (_, requests) = book.claim(batch, now: 0)
        _ = book.reply(reply(to: requests[0], .claimed([true, true])))
        #expect(book.tick(now: 999).send.isEmpty)
        let renewal = try #require(book.tick(now: 1000).send.first)
        guard case .claim(let claims) = try LedgerRequest.parse(renewal.body) else {
            Issue.record("the renewal is not a claim")
            return
        }
        #expect(Set(claims) == book.held)
        let granted = claims.map { $0.key.orderId == "kept" }
        let (decided, lost) = book.reply(reply(to: renewal, .claimed(granted)))
        #expect(decided.isEmpty)
        #expect(lost.map(\.key.orderId) == ["ended"])
        #expect(book.held.map(\.key.orderId) == ["kept"])
        book.release(try #require(batch[0].lease))
        #expect(book.held.isEmpty)
        #expect(book.tick(now: 2000).send.isEmpty, "nothing held, nothing renewed")
    }
}
