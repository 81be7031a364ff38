import PaypipeCore

/// An order on its way from the ledger to the signers or the pollers:
/// `{"acceptedAt":ms,"purpose":"submit","order":{…}}`, and for a status check of a pending order
/// `"pending":{…}`, the result of its stored pending outcome (the provider's references, which
/// the status call names). The ledger writes the stored order JSON as is, without parsing it again.
package struct DispatchFrame: Sendable, Equatable {
    package var order: Order
    /// When the ledger accepted the order (for a poll: when the receipt became pending).
    package var acceptedAt: Int64
    package var purpose: DispatchPurpose
    package var pending: [String: JSONValue]?
    /// The order's dispatch count when this copy left the ledger: its lease is granted only to
    /// the current generation, so an older copy still queued somewhere is never sent.
    package var generation: Int64

    package static func encode(
        orderJSON: String, acceptedAt: Int64, purpose: DispatchPurpose = .submit, pending: [String: JSONValue]? = nil, generation: Int64 = 1
    ) -> [UInt8] {
        let pendingField = pending.map { ",\"pending\":" + JSONValue.object($0).serialized } ?? ""
        return Array("{\"acceptedAt\":\(acceptedAt),\"purpose\":\"\(purpose.rawValue)\"\(pendingField),\"generation\":\(generation),\"order\":\(orderJSON)}".utf8)
    }

    package static func decode(_ frame: [UInt8], catalog: OrderCatalog) throws(EnvelopeError) -> DispatchFrame {
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
            generation: object["generation"]?.integerValue ?? 1)
    }
}
