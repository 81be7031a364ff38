import PaypipeCore
import Synchronization

/// The sandbox's own time: real time plus however far a test or the demo has moved it on, so
/// that a month of a subscription's life (renewals, expiries) passes in seconds.
public final class SandboxClock: Sendable {
    private let offsetMilliseconds = Mutex<Int64>(0)

    public init() {}

    /// Epoch milliseconds in the sandbox's time.
    public var nowMilliseconds: Int64 { Timestamp.nowMilliseconds() + offsetMilliseconds.withLock { $0 } }

    /// How far the clock runs ahead of the wall clock.
    public var offset: Int64 { offsetMilliseconds.withLock { $0 } }

    /// Moves the clock on by `milliseconds`; returns the time before and after.
    package func advance(by milliseconds: Int64) -> (from: Int64, to: Int64) {
        let real = Timestamp.nowMilliseconds()
        return offsetMilliseconds.withLock { offset in
            let from = real + offset
            offset += max(0, milliseconds)
            return (from, real + offset)
        }
    }
}

/// An emulator whose provider does things to subscriptions on its own, after their first
/// payment (Trust Payments' subscription engine charging, Cleeng renewing or letting access
/// lapse), or on a customer's action (a PhonePe mandate revoked, a Nets card declined). The
/// sandbox drives them through `/_sandbox/clock` and `/_sandbox/subscriptions/<provider>/<action>`;
/// what they send, they sign with the sandbox's own code.
public protocol SubscriptionEmulator: ProviderEmulator {
    /// What the provider does by itself between two instants of the sandbox's clock (epoch
    /// ms), its callbacks delivered in order before it returns; returns how many it sent.
    func advance(from: Int64, to: Int64, context: SandboxContext) async -> Int
    /// One action on one subscription, named by the request body (`{"subscription": …}` and
    /// what else the action needs); answers what happened, or 404/400.
    func act(_ action: String, body: JSONValue, context: SandboxContext) async -> HTTPResponseSpec
}

extension SubscriptionEmulator {
    public func advance(from: Int64, to: Int64, context: SandboxContext) async -> Int { 0 }
}

extension SandboxRouter {
    /// `POST /_sandbox/clock` `{"advanceDays": N}` (or `"advanceMs"`): moves the sandbox's clock
    /// on a day at a time, letting every provider do what falls in each day, in order.
    package func advanceClock(_ body: [UInt8]) async -> HTTPResponseSpec {
        guard let request = try? JSONValue.parse(body) else { return SandboxContext.json(400, ["error": "body must be a JSON object"]) }
        let day: Int64 = 86_400_000
        let total: Int64
        if let days = request["advanceDays"]?.integerValue, (0...3660).contains(days) {
            total = days * day
        } else if let milliseconds = request["advanceMs"]?.integerValue, (0...(3660 * day)).contains(milliseconds) {
            total = milliseconds
        } else {
            return SandboxContext.json(400, ["error": "advanceDays (0-3660) or advanceMs is required"])
        }
        var sent = 0
        var remaining = total
        repeat {
            let step = min(day, remaining)
            remaining -= step
            let (from, to) = context.clock.advance(by: step)
            for emulator in emulators.values.sorted(by: { type(of: $0).provider.rawValue < type(of: $1).provider.rawValue }) {
                if let subscriptions = emulator as? any SubscriptionEmulator {
                    sent += await subscriptions.advance(from: from, to: to, context: context)
                }
            }
        } while remaining > 0
        if let file = context.configuration.clockOffsetFile {
            // Written whole, then renamed: a ledger reading it never sees half a number.
            try? String(context.clock.offset).write(toFile: file, atomically: true, encoding: .utf8)
        }
        return SandboxContext.json(
            200, ["now": .string(Timestamp.iso8601(milliseconds: context.clock.nowMilliseconds)), "sent": .integer(Int64(sent))])
    }

    /// `POST /_sandbox/subscriptions/<provider>/<action>`.
    package func act(path: String, body: [UInt8]) async -> HTTPResponseSpec {
        let parts = path.split(separator: "/").map(String.init)
        guard parts.count == 4, let emulator = emulators[Provider(parts[2])] as? any SubscriptionEmulator else {
            return SandboxContext.json(404, ["error": "no such provider with subscriptions"])
        }
        guard let request = try? JSONValue.parse(body), request.objectValue != nil else {
            return SandboxContext.json(400, ["error": "body must be a JSON object"])
        }
        return await emulator.act(parts[3], body: request, context: context)
    }
}
