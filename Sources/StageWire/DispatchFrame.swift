import PaypipeCore

/// An order on its way from the ledger to the signers or the pollers:
/// `{"acceptedAt":ms,"purpose":"submit","order":{…}}`. The ledger writes the stored order JSON
/// as is, without parsing it again.
package struct DispatchFrame: Sendable, Equatable {
    package var order: Order
    /// When the ledger accepted the order (for a poll: when the receipt became pending).
    package var acceptedAt: Int64
    package var purpose: DispatchPurpose
    /// The order's dispatch count when this copy left the ledger: its lease is granted only to
    /// the current generation, so an older copy still queued somewhere is never sent.
    package var generation: Int64

    package static func encode(orderJSON: String, acceptedAt: Int64, purpose: DispatchPurpose = .submit, generation: Int64 = 1) -> [UInt8] {
        Array("{\"acceptedAt\":\(acceptedAt),\"purpose\":\"\(purpose.rawValue)\",\"generation\":\(generation),\"order\":\(orderJSON)}".utf8)
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
        return DispatchFrame(
            order: order, acceptedAt: object["acceptedAt"]?.integerValue ?? 0, purpose: purpose, generation: object["generation"]?.integerValue ?? 1)
    }
}
