import PaypipeCore

/// Names one dispatch of an order: its generation, and the ledger's token for that generation.
/// The token is the ledger's keyed digest of the order key and the generation, so a stage holds
/// it only when the ledger sent it that dispatch: a claim or an outcome that names a dispatch
/// without it changes nothing.
package struct DispatchTicket: Sendable, Hashable {
    package var generation: Int64
    package var token: UInt64

    package init(generation: Int64, token: UInt64) {
        self.generation = generation
        self.token = token
    }
}

/// A stage's outcome on its way to the ledger's results socket, with what it answers: the
/// dispatch it came from and why that dispatch was sent. The ledger records the outcome only if
/// that answer is one the sender may give (see the ledger's `ResultAuthority`).
package struct StageResult: Sendable, Equatable {
    package enum Answering: String, Sendable {
        /// A submission (first or redelivered), answered by its signer or its claim's holder.
        case submit
        /// A status check of a pending order.
        case statusCheck
        /// The last status check of a pending order.
        case expiryCheck
        /// A pending order a poller owns.
        case poll

        package init(_ purpose: DispatchPurpose) {
            switch purpose {
            case .submit: self = .submit
            case .statusCheck: self = .statusCheck
            case .expiryCheck: self = .expiryCheck
            }
        }
    }

    package var answering: Answering
    package var ticket: DispatchTicket
    package var outcome: Outcome
    /// The W3C `traceparent` of the span that produced the outcome, while tracing is on.
    package var trace: String?

    package init(answering: Answering, ticket: DispatchTicket, outcome: Outcome, trace: String? = nil) {
        self.answering = answering
        self.ticket = ticket
        self.outcome = outcome
        self.trace = trace
    }

    /// The first byte of a result frame; a bare outcome (an earlier stage's) starts with "{".
    static let binaryTag: UInt8 = 0x03

    /// The binary frame (`BinaryFrame.swift`): tag, generation, token, what it answers, then the
    /// outcome's JSON as the stage wrote it (the ledger stores those bytes as they are), and the
    /// trace when there is one.
    package var frame: [UInt8] {
        let outcomeBytes = outcome.bytes
        var writer = BinaryFrameWriter(tag: Self.binaryTag, capacity: 40 + outcomeBytes.count)
        writer.integer(ticket.generation)
        writer.integer(Int64(bitPattern: ticket.token))
        writer.string(answering.rawValue)
        writer.field(outcomeBytes)
        writer.trace(trace)
        return writer.bytes
    }

    /// A result frame's parts, the outcome left as its bytes; nil for any other frame.
    package static func decode(_ frame: [UInt8]) -> (answering: Answering, ticket: DispatchTicket, outcome: ArraySlice<UInt8>, trace: String?)? {
        try? parts(of: frame)
    }

    private static func parts(
        of frame: [UInt8]
    ) throws(EnvelopeError) -> (answering: Answering, ticket: DispatchTicket, outcome: ArraySlice<UInt8>, trace: String?) {
        var reader = try BinaryFrameReader(frame, tag: binaryTag, label: "result")
        let generation = try reader.integer("generation")
        let token = UInt64(bitPattern: try reader.integer("token"))
        guard let answering = Answering(rawValue: try reader.string("answering")) else { throw EnvelopeError("result.answering is invalid") }
        let outcome = try reader.field("outcome")
        let trace = try reader.trace()
        try reader.end()
        return (answering, DispatchTicket(generation: generation, token: token), outcome, trace)
    }
}
