import Logging
import PaypipeCore
import StageWire

/// The info line for each order transition the ledger makes (docs/operations.md, "Logs"): an
/// order dispatched (`order.accepted` for its first dispatch, `order.redelivered`,
/// `order.statusCheck`), an outcome sent upstream (`order.<status>`, `order.review` for one that
/// needs a person), a receipt handed to the pollers (`order.polling`). Read from the effects the
/// ledger performs, so the core stays free of logging; only the fields below are logged, never
/// params or results, which may hold what a customer typed.
enum TransitionLog {
    static func log(_ effect: LedgerCore.Effect, to logger: Logger) {
        guard logger.logLevel <= .info else { return }
        switch effect {
        case .dispatch(let frame), .poll(let frame):
            guard let header = DispatchFrame.header(of: frame), let order = DispatchFrame.orderJSON(in: frame) else { return }
            let event: String
            if case .poll = effect {
                event = "order.polling"
            } else {
                switch header.purpose {
                case .submit: event = header.generation == 1 ? "order.accepted" : "order.redelivered"
                case .statusCheck: event = "order.statusCheck"
                case .expiryCheck: event = "order.expiryCheck"
                }
            }
            var metadata = identity(order)
            metadata["generation"] = "\(header.generation)"
            logger.info("\(event)", metadata: metadata)
        case .emit(let bytes):
            var metadata: Logger.Metadata = [:]
            var status: String?, code: String?
            _ = JSONValue.forEachMember(of: bytes) { key, value in
                if key.spells("status") {
                    status = value.stringValue
                } else if key.spells("error") {
                    code = value["code"]?.stringValue
                } else {
                    take(key, value, into: &metadata)
                }
                return true
            }
            guard metadata["orderId"] != nil, let status else { return }
            if let code { metadata["code"] = "\(code.prefix(64))" }
            if let seq = LedgerLoop.loggedSeq(of: bytes) { metadata["seq"] = "\(seq)" }
            logger.info("\(code == OutcomeErrorCode.needsReview.rawValue ? "order.review" : "order.\(status.prefix(16))")", metadata: metadata)
        case .drop, .refuse:
            return
        }
    }

    /// merchant, orderId, provider and operation, as the order names them.
    static func identity(_ json: some Collection<UInt8>) -> Logger.Metadata { identityAndStatus(json).identity }

    /// `identity`, and the status an outcome names (nil for an order), in one pass over its JSON.
    static func identityAndStatus(_ json: some Collection<UInt8>) -> (identity: Logger.Metadata, status: String?) {
        var metadata: Logger.Metadata = [:]
        var status: String?
        _ = JSONValue.forEachMember(of: json) { key, value in
            if key.spells("status") { status = value.stringValue } else { take(key, value, into: &metadata) }
            return true
        }
        // An order that names no merchant is the default merchant's (docs/protocol.md §1).
        if metadata["merchant"] == nil { metadata["merchant"] = "default" }
        return (metadata, status)
    }

    static func take(_ key: UnsafeBufferPointer<UInt8>, _ value: JSONValue, into metadata: inout Logger.Metadata) {
        for name in ["merchant", "orderId", "provider", "operation"] as [StaticString] where key.spells(name) {
            if let text = value.stringValue { metadata["\(name)"] = "\(text.prefix(128))" }
        }
    }
}
