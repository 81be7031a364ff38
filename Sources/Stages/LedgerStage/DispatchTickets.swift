import PaypipeCore
import StageWire

/// The ledger's tokens for dispatches (`DispatchTicket`): SipHash-2-4 under a key the store
/// creates once and keeps, over the order key and the generation. Every stage that was sent a
/// dispatch holds its token; nobody else can compute one, so a claim or an outcome pushed by a
/// process that was never sent the dispatch names no valid ticket and changes nothing. The key
/// lives in the store, so every ledger over one store, and a restarted one, issues and checks
/// the same tokens; a store restored from an old backup keeps its key too.
package struct DispatchTickets: Sendable {
    let k0: UInt64
    let k1: UInt64

    package init(key: (UInt64, UInt64)) {
        (k0, k1) = key
    }

    /// A fresh key from the system's random source.
    static func newKey() -> (UInt64, UInt64) {
        var random = SystemRandomNumberGenerator()
        return (random.next(), random.next())
    }

    package func token(for key: OrderKey, generation: Int64) -> UInt64 {
        var message: [UInt8] = []
        message.reserveCapacity(key.merchant.utf8.count + key.orderId.utf8.count + 10)
        message.append(contentsOf: key.merchant.utf8)
        message.append(0)
        message.append(contentsOf: key.orderId.utf8)
        message.append(0)
        withUnsafeBytes(of: generation.littleEndian) { message.append(contentsOf: $0) }
        return SipHash24.hash(message, k0: k0, k1: k1)
    }

    package func ticket(for key: OrderKey, generation: Int64) -> DispatchTicket {
        DispatchTicket(generation: generation, token: token(for: key, generation: generation))
    }

    /// Whether the ledger issued `ticket` for `key` (constant time in the token).
    package func isValid(_ ticket: DispatchTicket, for key: OrderKey) -> Bool {
        ticket.generation >= 1 && token(for: key, generation: ticket.generation) ^ ticket.token == 0
    }
}

/// SipHash-2-4 (Aumasson and Bernstein), a keyed function with a 64-bit output.
enum SipHash24 {
    static func hash(_ message: [UInt8], k0: UInt64, k1: UInt64) -> UInt64 {
        var v0: UInt64 = 0x736f_6d65_7073_6575 ^ k0
        var v1: UInt64 = 0x646f_7261_6e64_6f6d ^ k1
        var v2: UInt64 = 0x6c79_6765_6e65_7261 ^ k0
        var v3: UInt64 = 0x7465_6462_7974_6573 ^ k1

        func round() {
            v0 &+= v1
            v1 = v1.rotatedLeft(13) ^ v0
            v0 = v0.rotatedLeft(32)
            v2 &+= v3
            v3 = v3.rotatedLeft(16) ^ v2
            v0 &+= v3
            v3 = v3.rotatedLeft(21) ^ v0
            v2 &+= v1
            v1 = v1.rotatedLeft(17) ^ v2
            v2 = v2.rotatedLeft(32)
        }

        let whole = message.count & ~7
        var index = 0
        while index < whole {
            var m: UInt64 = 0
            for byte in 0..<8 { m |= UInt64(message[index + byte]) << (8 * UInt64(byte)) }
            v3 ^= m
            round()
            round()
            v0 ^= m
            index += 8
        }
        var last = UInt64(truncatingIfNeeded: message.count) << 56
        for byte in 0..<(message.count - whole) { last |= UInt64(message[whole + byte]) << (8 * UInt64(byte)) }
        v3 ^= last
        round()
        round()
        v0 ^= last
        v2 ^= 0xff
        round()
        round()
        round()
        round()
        return v0 ^ v1 ^ v2 ^ v3
    }
}

extension UInt64 {
    fileprivate func rotatedLeft(_ count: UInt64) -> UInt64 { (self << count) | (self >> (64 - count)) }
}
