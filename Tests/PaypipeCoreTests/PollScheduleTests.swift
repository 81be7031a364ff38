import PaypipeCore
import Testing

/// The poll schedule every polled provider follows, with Cleeng's timings.
@Suite struct PollScheduleTests {
    let t0: Int64 = 1_700_000_000_000
    let policy = PollingPolicy(intervalMs: 5000, deadlineMs: 60000, giveUpCode: "ACCESS_NOT_GRANTED", giveUpReason: "access not granted")!
    let granted = ProviderVerdict.succeeded(["accessGranted": true])

    @Test func pollsEveryIntervalUntilGranted() {
        var poller = PollSchedule(startedAt: t0, policy: policy)
        #expect(poller.phase == .accepted)
        #expect(poller.tick(at: t0) == .wait(until: t0 + 5000))
        #expect(poller.tick(at: t0 + 5000) == .sendPoll(requestId: 1))
        #expect(poller.phase == .polling)
        #expect(poller.tick(at: t0 + 5100) == .wait(until: t0 + 60000 + 5000 + 1))
        #expect(poller.receive(.notYet, requestId: 1, at: t0 + 5200) == .wait(until: t0 + 10000))
        #expect(poller.tick(at: t0 + 10000) == .sendPoll(requestId: 2))
        #expect(poller.receive(.ended(granted), requestId: 2, at: t0 + 10300) == .emit(granted))
        #expect(poller.phase == .ended)
        #expect(poller.tick(at: t0 + 15000) == .stop)
    }

    @Test func anEndingAnswerEndsAtOnce() {
        var poller = PollSchedule(startedAt: t0, policy: policy)
        _ = poller.tick(at: t0 + 5000)
        let failure = ProviderVerdict.failed(code: "CLEENG_OFFER_NOT_FOUND", message: "Offer not found")
        #expect(poller.receive(.ended(failure), requestId: 1, at: t0 + 5100) == .emit(failure))
        #expect(poller.phase == .ended)
    }

    @Test func unansweredPollsNeverShortenTheScheduleAndExpiryFollowsTheLastPoll() {
        var poller = PollSchedule(startedAt: t0, policy: policy)
        var now = t0
        var sent: [Int64] = []
        var final: PollSchedule.Action?
        while final == nil, now <= t0 + 120_000 {
            switch poller.tick(at: now) {
            case .sendPoll(let id):
                sent.append(now - t0)
                let status: PollAnswer = id % 2 == 0 ? .unanswered(reason: "HTTP 503") : .notYet
                if case .emit(let verdict) = poller.receive(status, requestId: id, at: now + 50) { final = .emit(verdict) }
            case .emit(let verdict): final = .emit(verdict)
            case .wait, .stop: break
            }
            now += 50
        }
        #expect(sent == stride(from: Int64(5000), through: 60000, by: 5000).map { $0 })
        #expect(final == .emit(.failed(code: "ACCESS_NOT_GRANTED", message: "access not granted within 60 s")))
        #expect(poller.phase == .expired)
        #expect(poller.lastUnansweredReason != nil)
    }

    @Test func staleResultsAreIgnoredAndLateTicksSkipMissedSlots() {
        var poller = PollSchedule(startedAt: t0, policy: policy)
        #expect(poller.tick(at: t0 + 17_000) == .sendPoll(requestId: 1))
        #expect(poller.nextPollAt == t0 + 20_000)
        #expect(poller.receive(.ended(granted), requestId: 7, at: t0 + 17_100) == .wait(until: t0 + 65_001))
        #expect(poller.phase == .polling)
        #expect(poller.receive(.notYet, requestId: 1, at: t0 + 17_200) == .wait(until: t0 + 20_000))
    }

    @Test func aPollInFlightAtTheDeadlineIsAwaitedThenGivenUp() {
        var poller = PollSchedule(startedAt: t0, policy: policy)
        #expect(poller.tick(at: t0 + 60_000) == .sendPoll(requestId: 1))
        #expect(poller.tick(at: t0 + 62_000) == .wait(until: t0 + 65_001))
        #expect(poller.receive(.ended(granted), requestId: 1, at: t0 + 62_500) == .emit(granted))

        var silent = PollSchedule(startedAt: t0, policy: policy)
        _ = silent.tick(at: t0 + 60_000)
        guard case .emit(.failed("ACCESS_NOT_GRANTED", _)) = silent.tick(at: t0 + 65_001) else {
            Issue.record("a lost poll must not hold the receipt forever")
            return
        }
    }

    @Test func noPollAfterTheDeadline() {
        var poller = PollSchedule(startedAt: t0, policy: policy)
        guard case .emit(.failed("ACCESS_NOT_GRANTED", _)) = poller.tick(at: t0 + 60_001) else {
            Issue.record("expected expiry")
            return
        }
        #expect(poller.pollsSent == 0)
    }
}
