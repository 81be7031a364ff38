import PaypipeCore

/// An order on its way from the ledger to the signers or the pollers: when it was accepted, why
/// it is sent, its generation, the order, and for a status check of a pending order the result
/// of its stored pending outcome (the provider's references, which the status call names). The
/// ledger writes the stored order JSON as is, without parsing it again.
package struct DispatchFrame: Sendable, Equatable {
    package var order: Order
    /// When the ledger accepted the order (for a poll: when the receipt became pending).
    package var acceptedAt: Int64
    package var purpose: DispatchPurpose
    package var pending: [String: JSONValue]?
    /// The order's dispatch count when this copy left the ledger: its lease is granted only to
    /// the current generation, so an older copy still queued somewhere is never sent.
    package var generation: Int64
    /// The ledger's proof that it sent this generation (`DispatchTicket`): a stage's claim or
    /// outcome for the order counts only with it.
    package var token: UInt64 = 0
    /// The W3C `traceparent` of the ledger's span for this dispatch, while tracing is on.
    package var trace: String?

    /// The first byte of a binary dispatch frame; a JSON frame starts with "{".
    static let binaryTag: UInt8 = 0x02

    /// The binary frame (`BinaryFrame.swift`), in this order: tag, acceptedAt, generation,
    /// token, purpose, the order's JSON, the pending result (a presence byte, then JSON), and the
    /// trace when there is one (`appendingTrace`). Up to the
    /// order it is laid out as `SubmitWork.frame`, so a frame either stage cannot read is
    /// answered for its order the same way (`Outcome.unreadableWork`). In JSON, the signer
    /// would build a dictionary of the envelope and another of the order before reading either.
    package static func encode(
        orderJSON: String, acceptedAt: Int64, purpose: DispatchPurpose = .submit, pending: [String: JSONValue]? = nil, generation: Int64 = 1,
        token: UInt64 = 0
    ) -> [UInt8] {
        var writer = BinaryFrameWriter(tag: binaryTag, capacity: 64 + orderJSON.utf8.count)
        writer.integer(acceptedAt)
        writer.integer(generation)
        writer.integer(Int64(bitPattern: token))
        writer.string(purpose.rawValue)
        writer.string(orderJSON)
        writer.byte(pending == nil ? 0 : 1)
        if let pending { writer.field { JSONValue.object(pending).write(into: &$0) } }
        return writer.bytes
    }

    /// A binary dispatch frame with the trace of the span that sends it.
    package static func appendingTrace(_ traceparent: String, to frame: [UInt8]) -> [UInt8] {
        BinaryFrameWriter.appendingTrace(traceparent, to: frame)
    }

    /// Reads the binary frame, or the JSON frame of earlier releases
    /// (`{"acceptedAt":ms,"purpose":"submit","generation":n,"pending":{…},"order":{…}}`), which
    /// carries no token: an outcome for it is refused and the order is dispatched again.
    package static func decode(_ frame: [UInt8], catalog: OrderCatalog) throws(EnvelopeError) -> DispatchFrame {
        frame.first == binaryTag ? try decodeBinary(frame, catalog: catalog) : try decodeJSON(frame, catalog: catalog)
    }

    /// The bytes of a binary frame's order, as the ledger wrote them; nil for a JSON frame or
    /// one too short to hold them.
    package static func orderJSON(in frame: [UInt8]) -> ArraySlice<UInt8>? {
        frame.first == binaryTag ? BinaryFrameReader.order(in: frame, tag: binaryTag) : nil
    }

    /// A binary frame's generation and purpose, read without its order; nil for a JSON frame or
    /// one that does not read.
    package static func header(of frame: [UInt8]) -> (generation: Int64, purpose: DispatchPurpose)? {
        guard frame.first == binaryTag, var reader = try? BinaryFrameReader(frame, tag: binaryTag, label: "dispatch"),
            (try? reader.integer("acceptedAt")) != nil, let generation = try? reader.integer("generation"), (try? reader.integer("token")) != nil,
            let purpose = (try? reader.string("purpose")).flatMap(DispatchPurpose.init(rawValue:))
        else { return nil }
        return (generation, purpose)
    }

    private static func decodeBinary(_ frame: [UInt8], catalog: OrderCatalog) throws(EnvelopeError) -> DispatchFrame {
        var reader = try BinaryFrameReader(frame, tag: binaryTag, label: "dispatch")
        let acceptedAt = try reader.integer("acceptedAt")
        let generation = try reader.integer("generation")
        let token = UInt64(bitPattern: try reader.integer("token"))
        guard let purpose = DispatchPurpose(rawValue: try reader.string("purpose")) else { throw EnvelopeError("dispatch.purpose is invalid") }
        let order: Order
        switch Order.decode(frame: try reader.field("order"), catalog: catalog) {
        case .order(let decoded): order = decoded
        case .rejected(let rejection, _), .dropped(let rejection): throw EnvelopeError("dispatch.order: \(rejection.message)")
        }
        var pending: [String: JSONValue]?
        if try reader.byte("pending") != 0 {
            guard let object = try reader.json("pending").objectValue else { throw EnvelopeError("dispatch.pending is not an object") }
            pending = object
        }
        let trace = try reader.trace()
        try reader.end()
        return DispatchFrame(
            order: order, acceptedAt: acceptedAt, purpose: purpose, pending: pending, generation: generation, token: token, trace: trace)
    }

    private static func decodeJSON(_ frame: [UInt8], catalog: OrderCatalog) throws(EnvelopeError) -> DispatchFrame {
        guard case .object(let object)? = try? JSONValue.parse(frame), let orderObject = object["order"]?.objectValue else {
            throw EnvelopeError("dispatch frame is not an object with an order")
        }
        let order: Order
        do { order = try Order(validating: orderObject, catalog: catalog) } catch { throw EnvelopeError("dispatch.order: \(error.message)") }
        guard let purpose = object["purpose"]?.stringValue.flatMap(DispatchPurpose.init(rawValue:)) else {
            throw EnvelopeError("dispatch.purpose is invalid")
        }
        var pending: [String: JSONValue]?
        if let value = object["pending"], value != .null {
            guard let result = value.objectValue else { throw EnvelopeError("dispatch.pending is not an object") }
            pending = result
        }
        return DispatchFrame(
            order: order, acceptedAt: object["acceptedAt"]?.integerValue ?? 0, purpose: purpose, pending: pending,
            generation: object["generation"]?.integerValue ?? 1, token: 0)
    }
}
